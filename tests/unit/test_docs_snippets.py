# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snippets of README.md and docs/quickstart.md work as shown: a YAML snippet of cluster settings, and
an inline `key: value`, passes the cluster settings' check (plugins/action/cluster_settings.py); an
`ansible-playbook` line names a playbook of the collection, known keys after -e and the playbook's tags
after --tags; a `make` line names a target of the Makefile."""

from __future__ import annotations

import functools
import pathlib
import re
import shlex

import pytest
import yaml

from ansible_collections.ocigpu.cluster.plugins.action import cluster_settings as action

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ['README.md', 'docs/quickstart.md']
SETTINGS, COLLECTION_VARS = action.load_schema()
ROLES = action.role_options()
# Tags Ansible itself knows.
SPECIAL_TAGS = {'all', 'always', 'never', 'tagged', 'untagged'}
FENCE = re.compile(r'^```([a-z]*)\n(.*?)^```', re.M | re.S)
INLINE = re.compile(r'(?<!`)`([^`\n]+)`(?!`)')


def settings_problems(data):
    return action.check(data, SETTINGS, COLLECTION_VARS, ROLES)


def _tags(node, found):
    """Every tag named anywhere in a playbook's or task file's data."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == 'tags':
                found.update([value] if isinstance(value, str) else value or [])
            else:
                _tags(value, found)
    elif isinstance(node, list):
        for item in node:
            _tags(item, found)
    return found


@functools.lru_cache(maxsize=None)
def playbook_tags(name):
    """The tags a playbook knows: its own and its imports', the roles configure runs (each role's tag is
    its name) and the tags in the roles' tasks."""
    found = set(SPECIAL_TAGS)
    todo = [ROOT / 'playbooks' / ('%s.yml' % name)]
    while todo:
        plays = yaml.safe_load(todo.pop().read_text()) or []
        _tags(plays, found)
        for play in plays:
            if 'ansible.builtin.import_playbook' in play:
                todo.append(ROOT / 'playbooks' / play['ansible.builtin.import_playbook'])
            found.update(((play.get('vars') or {}).get('_ocigpu_role_applies') or {}).keys())
    if name in ('site', 'configure', 'validate'):
        for path in (ROOT / 'roles').glob('*/tasks/*.yml'):
            _tags(yaml.safe_load(path.read_text()) or [], found)
    return found


@functools.lru_cache(maxsize=None)
def make_targets():
    return set(re.findall(r'^([a-zA-Z0-9_.-]+):', (ROOT / 'Makefile').read_text(), re.M))


def extra_vars(value):
    """The keys of one -e value (None for a file, @...)."""
    if value.startswith('@'):
        return None
    if value[:1] in '{[':
        return yaml.safe_load(value)
    return dict(part.split('=', 1) for part in shlex.split(value) if '=' in part)


def command_problems(line):
    """The problems of one shell command line (ansible-playbook and make; other commands are not read)."""
    if line.split(' ', 1)[0] not in ('ansible-playbook', 'make'):
        return []
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        return ['%s: %s' % (line, exc)]
    if not words:
        return []
    if words[0] == 'make':
        return ['make %s: no such target in the Makefile' % w for w in words[1:] if not w.startswith('-') and '=' not in w
                and w not in make_targets()]
    if words[0] != 'ansible-playbook':
        return []
    problems, playbook, tags = [], None, []
    for n, word in enumerate(words[1:], 1):
        if word.startswith('ocigpu.cluster.') or re.match(r'^(.*/)?playbooks/[a-z_]+\.yml$', word):
            playbook = re.sub(r'^ocigpu\.cluster\.|^(.*/)?playbooks/|\.yml$', '', word)
        elif words[n - 1] in ('-e', '--extra-vars'):
            data = extra_vars(word)
            if data is not None:
                problems += ['%s: %s' % (line, p) for p in settings_problems(data)]
        elif words[n - 1] in ('-t', '--tags', '--skip-tags'):
            tags += word.split(',')
    if playbook is None or not (ROOT / 'playbooks' / ('%s.yml' % playbook)).is_file():
        return problems + ['%s: names no playbook of the collection' % line]
    known = playbook_tags(playbook)
    problems += ['%s: %s has no tag %s' % (line, playbook, t) for t in tags if t not in known]
    return problems


def shell_problems(text):
    lines = text.replace('\\\n', ' ').splitlines()
    return [p for line in lines for p in command_problems(line.strip())]


def yaml_problems(text):
    """A snippet that holds a cluster setting is checked whole (an inventory source or a task list is not)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return ['a YAML snippet does not parse: %s' % str(exc).splitlines()[0]]
    if not isinstance(data, dict) or 'plugin' in data or not set(data) & set(SETTINGS):
        return []
    return settings_problems(data)


def problems_of(markdown):
    """Every problem of a page's snippets, fenced and inline."""
    problems = []
    for lang, body in FENCE.findall(markdown):
        if lang in ('yaml', 'yml'):
            problems += yaml_problems(body)
        elif lang in ('', 'sh', 'bash', 'shell', 'console'):
            problems += shell_problems(body)
    outside = FENCE.sub('', markdown)
    for span in INLINE.findall(outside):
        if span.startswith(('ansible-playbook ', 'make ')):
            problems += command_problems(span)
        elif re.match(r'^[a-z][a-z0-9_]*: \S', span):
            try:
                data = yaml.safe_load(span)
            except yaml.YAMLError:
                continue
            # An unknown key with no near known one is another file's (galaxy.yml, an inventory source).
            problems += [p for p in settings_problems(data) if not p.endswith(': unknown key')] if isinstance(data, dict) else []
    return problems


@pytest.mark.parametrize('page', DOCS)
def test_the_snippets_work_as_shown(page):
    assert problems_of((ROOT / page).read_text(encoding='utf-8')) == []


def test_the_pages_have_snippets_of_each_kind():
    text = ''.join((ROOT / page).read_text(encoding='utf-8') for page in DOCS)
    langs = [lang for lang, body in FENCE.findall(text)]
    assert 'yaml' in langs and '' in langs
    assert 'ansible-playbook ocigpu.cluster.' in text and 'make demo' in text


BROKEN = """
Describe the cluster:

```yaml
cluster_name: demo
gpu_node_cont: 16
gpu_cluster_mode: rdma
```

Use `auth_type: instance_principal` on an OCI host, `oci_auth_type: instance_principal` too, `gpu_drain: false`,
`gpu_drain: sometimes` and, in galaxy.yml, `requires_ansible: ">=2.16"`.

```
ansible-playbook ocigpu.cluster.sitee -e @cluster.yml
ansible-playbook ocigpu.cluster.configure -i cluster.gpu_nodes.yml -e @cluster.yml --tags slurmm
ansible-playbook ocigpu.cluster.provision -e gpu_node_cont=2 \\
  -e '{"gpu_remove_nodes": ["a"]}'
make demoo
```

Then `ansible-playbook ocigpu.cluster.validate --tags health` and `make demo`.

```yaml
plugin: ocigpu.cluster.gpu_nodes
compartments: [ocid1.compartment.oc1..aaaa]
```
"""


def test_a_broken_snippet_fails():
    found = problems_of(BROKEN)
    assert found == [
        'gpu_cluster_mode: \'rdma\' is not one of \'auto\', \'single\', \'cluster_network\'',
        'gpu_node_cont: unknown key; did you mean gpu_node_count?',
        'ansible-playbook ocigpu.cluster.sitee -e @cluster.yml: names no playbook of the collection',
        'ansible-playbook ocigpu.cluster.configure -i cluster.gpu_nodes.yml -e @cluster.yml --tags slurmm: configure has no tag slurmm',
        'ansible-playbook ocigpu.cluster.provision -e gpu_node_cont=2    -e \'{"gpu_remove_nodes": ["a"]}\': '
        'gpu_node_cont: unknown key; did you mean gpu_node_count?',
        'make demoo: no such target in the Makefile',
        "auth_type: unknown key; did you mean oci_auth_type? (auth_type is the modules' option name)",
        "gpu_drain: 'sometimes' is not a bool",
    ], found
