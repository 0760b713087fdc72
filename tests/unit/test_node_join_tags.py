# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-node steps of the GPU nodes' roles carry the tag node_join (docs/baking.md).

A baked image is configure.yml run on a builder with --skip-tags node_join; a node that boots from it
runs configure.yml with --tags node_join alone. A task that reads what only the node knows (the join:
the munge key, slurmctld's address, the Slurm name, the MPI keys; its hardware, from the ocigpu_node
facts) but lacks the tag would run on the builder, without those, and never on the node. This test
reads every task the GPU nodes' roles run (following import_tasks and include_tasks, with the tags they
pass on) and each template a task names, and fails on such a task.
"""
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(ROOT, 'roles')

# The roles configure.yml applies on a GPU node (its _ocigpu_role_applies), but slurm_autoscaler.
GPU_ROLES = ('common', 'nvme_scratch', 'shared_home', 'cluster_user', 'rdma_network', 'nvidia_container_toolkit',
             'containerd_rootless', 'slurm', 'enroot', 'pyxis', 'node_health', 'mpi_ssh', 'rdma_exporter', 'firewall')
# What a node knows and a builder does not: the join variables and the node's hardware facts.
JOIN_INPUTS = ('slurm_munge_key_b64', 'slurm_conf_server', 'slurm_node_name', 'mpi_ssh_keys', 'ocigpu_node')
TASK_KEYS = ('block', 'rescue', 'always')
# Tasks that read the node's own inputs and rightly run at neither a join nor a bake, each with why.
NEITHER = {
    ('node_health', 'Run the checks once, as they were just installed or changed'):
        'not on the builder (ocigpu_baking); a joining node\'s pull runs the same checks itself',
    ('node_health', 'Show the results'): 'the results of the run above',
    ('firewall', 'Say why zones are not checked in check mode'): 'check mode only, which a join or a bake never is',
}


def words(text):
    return set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', text))


def derived_inputs(role):
    """The join inputs and the role's private variables made from them (vars/main.yml, transitively),
    but its declaration (__<role>_manages), which every task loops over."""
    path = os.path.join(ROLES, role, 'vars', 'main.yml')
    found = set(JOIN_INPUTS)
    if not os.path.exists(path):
        return found
    defined = yaml.safe_load(open(path)) or {}
    defined.pop('__%s_manages' % role, None)
    text = {name: yaml.safe_dump(value) for name, value in defined.items()}
    grew = True
    while grew:
        grew = False
        for name, body in text.items():
            if name not in found and words(body) & found:
                found.add(name)
                grew = True
    return found


JOINING = ('node_join', 'always')  # the tags that run at a join (--tags node_join)


def tasks_of(role, filename, inherited=(), reachable=True):
    """(file, task, tags) for every task of the file, its blocks and the files it imports or includes."""
    path = os.path.join(ROLES, role, 'tasks', filename)
    for task in yaml.safe_load(open(path)) or []:
        yield from walk(role, filename, task, tuple(inherited), reachable)


def walk(role, filename, task, inherited, reachable):
    """A task's tags are its own and those of the blocks and imports around it; an include passes on its
    apply tags alone, and what it includes runs at a join only when the include itself does (reachable)."""
    tags = task.get('tags') or []
    tags = inherited + tuple([tags] if isinstance(tags, str) else tags)
    if any(key in task for key in TASK_KEYS):
        for key in TASK_KEYS:
            for inner in task.get(key) or []:
                yield from walk(role, filename, inner, tags, reachable)
        return
    for action in ('ansible.builtin.import_tasks', 'ansible.builtin.include_tasks'):
        if action in task:
            spec = task[action]
            target = spec if isinstance(spec, str) else spec.get('file')
            if action.endswith('import_tasks'):
                passed, inner_reachable = tags, reachable
            else:
                passed = () if isinstance(spec, str) else tuple((spec.get('apply') or {}).get('tags') or ())
                inner_reachable = reachable and bool(set(JOINING) & set(tags))
            if '{{' in target:
                # setup-{{ os_family }}.yml: every such file of the role
                pattern = re.compile('^' + re.sub(r'\{\{.*?\}\}', '.*', target) + '$')
                targets = sorted(f for f in os.listdir(os.path.join(ROLES, role, 'tasks')) if pattern.match(f))
            else:
                targets = [target]
            for name in targets:
                yield from tasks_of(role, name, passed, inner_reachable)
            return
    yield filename, task, (tags if reachable else tuple(tag for tag in tags if tag not in JOINING))


def task_text(role, task):
    """The task as text, and the templates it names (a loop over a declaration names them by item.src)."""
    body = dict(task)
    body.pop('name', None)
    text = yaml.safe_dump(body)
    spec = task.get('ansible.builtin.template')
    if isinstance(spec, dict) and spec.get('src'):
        if '{{' not in spec['src']:
            sources = [spec['src']]
        elif 'item.' not in spec['src']:
            sources = []  # a name from a variable (the repository's file): read by hand
        else:
            # {{ item.src }} over the declaration's lists: loop: "{{ __<role>_manages.<key> ... }}"
            declared = yaml.safe_load(open(os.path.join(ROLES, role, 'vars', 'main.yml')))['__%s_manages' % role]
            keys = re.findall(r'__%s_manages\.(\w+)' % role, str(task.get('loop', '')))
            sources = [entry['src'] for key in keys for entry in declared.get(key) or [] if isinstance(entry, dict)]
        # A file named by a variable (NVIDIA's repository file, Debian's or EL's) is not followed.
        sources = [src for src in sources if '{{' not in src]
        for src in sources:
            text += open(os.path.join(ROLES, role, 'templates', src)).read()
    return text


def task_inputs(role):
    """derived_inputs, and the facts and results that the role's tasks make from them (set_fact, register)."""
    found = derived_inputs(role)
    tasks = [(task, words(task_text(role, task))) for filename, task, tags in tasks_of(role, 'main.yml')]
    grew = True
    while grew:
        grew = False
        for task, read in tasks:
            if not read & found:
                continue
            made = set(task.get('ansible.builtin.set_fact') or {}) | ({task['register']} if task.get('register') else set())
            if made - found:
                found |= made
                grew = True
    return found


def bake_tasks(role):
    """(file, task) for every task of the role's tasks/bake.yml (imported for ocigpu_baking alone), which runs
    per-node steps on the builder too, so that a node from the image finds them done where it is like the
    builder (the firewall's zones of the builder's subnet); none where the role has no bake.yml."""
    if not os.path.exists(os.path.join(ROLES, role, 'tasks', 'bake.yml')):
        return []
    return [(filename, task) for filename, task, tags in tasks_of(role, 'bake.yml')]


def baked_too(role):
    """bake_tasks as (file, task name): how many paths from bake.yml reach each."""
    counts = {}
    for filename, task in bake_tasks(role):
        key = (filename, task.get('name'))
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize('role', GPU_ROLES)
def test_tasks_that_read_what_only_the_node_knows_are_tagged_node_join(role):
    inputs = task_inputs(role)
    untagged, joining = [], set()
    allowed = baked_too(role)
    for filename, task, tags in tasks_of(role, 'main.yml'):
        read = words(task_text(role, task)) & inputs
        if set(JOINING) & set(tags):
            joining.add((filename, task.get('name')))
        # always: the builder and the node both run it (the builder without the node's inputs)
        elif read and (role, task.get('name')) not in NEITHER:
            if allowed.get((filename, task.get('name')), 0) > 0:
                allowed[(filename, task.get('name'))] -= 1  # the bake's own run of it (bake.yml)
                continue
            untagged.append('%s: %s (reads %s)' % (filename, task.get('name'), ', '.join(sorted(read))))
    assert untagged == [], 'tasks of %s that a baked image would run on the builder: %s' % (role, untagged)
    # What bake.yml runs on the builder from the node's inputs, a node's join runs again with its own.
    baked_only = sorted('%s: %s' % (filename, task.get('name')) for filename, task in bake_tasks(role)
                        if words(task_text(role, task)) & inputs and (filename, task.get('name')) not in joining)
    assert baked_only == [], 'tasks of %s that the bake runs and a join never does: %s' % (role, baked_only)


def test_the_bake_s_own_per_node_steps_are_seen():
    # The firewall's bake.yml writes the builder's zones; a join writes the node's (enabled.yml, node_join).
    baked = baked_too('firewall')
    assert baked[('zones.yml', 'Work out the trusted networks and the public ports')] == 1
    assert ('apply.yml', 'Start firewalld and enable it at boot') in baked
    assert baked_too('nvme_scratch') == {}


def test_the_test_sees_the_tasks_it_checks():
    # A walk that found nothing would pass everything: the slurm role's munge key and the Slurm name
    # of its slurmd settings are found, under the tags the imports pass on.
    seen = {(filename, task.get('name')): tags for filename, task, tags in tasks_of('slurm', 'main.yml')}
    assert 'node_join' in seen[('munge.yml', "Write the cluster's munge key, readable by munge alone")]
    assert 'node_join' in seen[('config.yml', "Write the controller's configuration and point slurmd at the controller")]
    assert 'node_join' not in seen[('config.yml', 'Create the Slurm folders')]
    assert len(seen) > 30
    assert '__slurm_munge_given_b64' in derived_inputs('slurm')
    # and what the tasks make of the join inputs: the MPI key pairs given (set_fact), the users' key files
    assert '__mpi_ssh_keys' in task_inputs('mpi_ssh')
    # the templates a task writes from the declaration's list are read too
    expect, = [task for filename, task, tags in tasks_of('node_health', 'main.yml') if task.get('name') == 'Write what this node must have']
    assert 'slurm_node_name' in words(task_text('node_health', expect)) | derived_inputs('node_health') and \
        words(task_text('node_health', expect)) & derived_inputs('node_health')
