# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/strategy/mitogen_linear.py: Mitogen's linear strategy with Mitogen's CPU placement turned
off, a clear error where Mitogen is not installed, and the tasks whose condition is false skipped in
the controller's process. Each check loads the plugin in a child Python (loading it changes Mitogen's
module state for the whole process) or runs ansible-playbook."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLUGIN = os.path.join(ROOT, 'plugins', 'strategy', 'mitogen_linear.py')

LOAD = '''
import importlib.util, sys
spec = importlib.util.spec_from_file_location('mitogen_linear_under_test', sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
'''


def run(code):
    return subprocess.run([sys.executable, '-c', code, PLUGIN], capture_output=True, text=True, check=False)


def test_with_mitogen_the_placement_policy_is_the_one_that_places_nothing():
    pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')
    out = run('import ansible_mitogen.affinity, ansible_mitogen.strategy\n'
              'print(type(ansible_mitogen.affinity.policy).__name__)\n' + LOAD +
              'print(type(ansible_mitogen.affinity.policy).__name__)\n'
              'print(issubclass(mod.StrategyModule, ansible_mitogen.strategy.StrategyMixin))\n'
              'print([c.__module__ for c in mod.StrategyModule.__mro__][3])\n')
    assert out.returncode == 0, out.stderr
    before, after, mixin, base = out.stdout.split()
    assert before == 'LinuxPolicy', 'Mitogen places processes itself on Linux: %s' % before
    assert after == 'Policy'
    assert mixin == 'True'
    assert base == 'ansible.plugins.strategy.linear'


def test_without_mitogen_the_plugin_loads_and_using_it_says_what_to_install():
    # None in sys.modules makes every import of the package fail, as on a controller without it.
    out = run('import sys\nsys.modules["ansible_mitogen"] = None\n' + LOAD +
              'try:\n    mod.StrategyModule(None)\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('AnsibleError '), out.stdout
    assert 'needs the mitogen Python package on the controller (pip install mitogen' in out.stdout


BOOT = '''
import mitogen.ssh
def boot(check, args):
    conn = mitogen.ssh.Connection.__new__(mitogen.ssh.Connection)
    conn.options = mitogen.ssh.Options(max_message_size=1 << 20, hostname='node1', check_host_keys=check, ssh_args=args)
    conn.get_preamble = lambda: b''  # the code sent after the first stage: it needs a live router
    return conn.get_boot_command()
'''


@pytest.mark.parametrize('check, args, strict', [
    # The inventory's own choice is the one ssh reads (ssh keeps the first value).
    ('enforce', ['-o', 'StrictHostKeyChecking=accept-new', '-o', 'HostKeyAlias=ocid1.instance.x'], ['StrictHostKeyChecking=accept-new']),
    ('enforce', ['-oStrictHostKeyChecking=accept-new'], ['-oStrictHostKeyChecking=accept-new']),
    # No choice of the host's own (or one only inside a ProxyCommand's inner ssh): Mitogen's stays.
    ('enforce', ['-o', 'HostKeyAlias=ocid1.instance.x'], ['StrictHostKeyChecking yes']),
    ('enforce', ['-o', 'ProxyCommand=ssh -o StrictHostKeyChecking=accept-new -W %h:%p bastion'], ['StrictHostKeyChecking yes']),
    # host_key_checking off: Mitogen's "no" and /dev/null stay first, as before.
    ('ignore', ['-o', 'StrictHostKeyChecking=accept-new'], ['StrictHostKeyChecking no', 'StrictHostKeyChecking=accept-new']),
])
def test_the_hosts_own_host_key_check_is_the_one_ssh_reads(check, args, strict):
    pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')
    code = ('import json\n' + LOAD + BOOT +
            'print(json.dumps(boot(%r, %r)))\n' % (check, args) +
            'mitogen.ssh.Connection.get_boot_command = mod._mitogen_boot_command\n'
            'print(json.dumps(boot(%r, %r)))\n' % (check, args))
    out = run(code)
    assert out.returncode == 0, out.stderr
    patched, original = (json.loads(line) for line in out.stdout.splitlines())
    options = [patched[i + 1] for i in range(len(patched) - 1) if patched[i] == '-o' and 'StrictHostKeyChecking' in patched[i + 1]
               and not patched[i + 1].startswith('ProxyCommand')]
    options += [a for a in patched if a.startswith('-oStrictHostKeyChecking')]
    assert options == strict, patched
    # Only Mitogen's own option may go; the rest of the command line is Mitogen's, unchanged.
    removed = [a for a in original if a not in patched]
    assert removed in ([], ['StrictHostKeyChecking yes']), (original, patched)
    assert original.index('node1') - patched.index('node1') == (2 if removed else 0)


# The tasks done in the controller (RunHereMixin): the same output as Ansible's own linear strategy, task
# by task, and no worker for a task skipped by its condition or run there. Each condition or argument writes
# the PID of the process that evaluates it (a pipe lookup's parent) to a file named after the task.
PLAYBOOK = """
- hosts: all
  gather_facts: false
  vars:
    flag: false
    pids: "{{ lookup('ansible.builtin.env', 'PIDS') }}"
  tasks:
    - name: plain
      ansible.builtin.command: /bin/true
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/plain') is string and flag | bool
    - name: hidden
      ansible.builtin.command: /bin/true
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/hidden') is string and flag
      no_log: true
    - name: registered
      ansible.builtin.command: /bin/true
      when: [true, "lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/registered') is string and flag"]
      register: skipped_one
    - name: show the registered result
      ansible.builtin.debug:
        var: skipped_one
    - name: true condition
      ansible.builtin.debug:
        msg: ran
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/true') is string and not flag
    - name: connection variable
      ansible.builtin.debug:
        msg: never
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/connection') is string and ansible_connection == 'ssh'
    - name: looped
      ansible.builtin.debug:
        msg: "{{ item }}"
      loop: [1, 2]
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/looped') is string and item > 5
    - name: included
      ansible.builtin.include_tasks: nothing.yml
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/included') is string and flag
    - name: undefined
      ansible.builtin.command: /bin/true
      when: lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/undefined') is string and nowhere_defined
      ignore_errors: true
    - name: fact
      ansible.builtin.set_fact:
        fact_pid: "{{ lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/fact') }}"
        fact_value: "{{ skipped_one.skip_reason }}"
    - name: checked
      ansible.builtin.assert:
        that:
          - lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/checked') is string
          - fact_value == 'Conditional result was False'
    - name: secret fact
      ansible.builtin.set_fact:
        secret_value: "{{ lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/secret') }}s3cr3t"
      no_log: true
    - name: a failure and its rescue
      block:
        - name: failing
          ansible.builtin.fail:
            msg: "failed {{ lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/failing') }}on purpose"
      rescue:
        - name: rescued
          ansible.builtin.debug:
            msg: "{{ ansible_failed_result.msg }} {{ secret_value | length }}"
    - name: command
      ansible.builtin.command: "echo {{ lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/command') }}"
      changed_when: false
    - name: timed
      ansible.builtin.command: "echo {{ lookup('ansible.builtin.pipe', 'echo $PPID > ' ~ pids ~ '/timed') }}"
      changed_when: false
      timeout: 60
"""


def play(tmp_path, strategy, hosts):
    pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    (tmp_path / 'nothing.yml').write_text('- ansible.builtin.debug:\n    msg: included\n')
    (tmp_path / 'ansible.cfg').write_text('[defaults]\n')
    pids = tmp_path / ('pids-%s-%d' % (strategy.rsplit('.', 1)[-1], len(hosts)))
    pids.mkdir()
    bin_dir = os.path.dirname(sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(PIDS=str(pids), ANSIBLE_STRATEGY=strategy, ANSIBLE_NOCOLOR='1', ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'),
               ANSIBLE_DEPRECATION_WARNINGS='0', ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections') + os.pathsep +
               os.environ.get('ANSIBLE_COLLECTIONS_PATH', ''))
    env = {k: v for k, v in env.items() if v}
    proc = subprocess.Popen([os.path.join(bin_dir, 'ansible-playbook'), '-vv', '-i', ','.join(hosts) + ',', '-c', 'local',
                             '-e', 'ansible_python_interpreter=' + sys.executable, str(tmp_path / 'play.yml')],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path))
    out = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, out
    found = {path.name: int(path.read_text()) for path in pids.iterdir()}
    # The task lines and their results, less what names a run's own files and times.
    kept = ('TASK [', 'skipping:', 'ok:', 'changed:', 'fatal:', '...', 'included:', '    "', 'node1 ', 'node2 ', '}')
    lines = [line for line in out.splitlines() if line.startswith(kept) and '"delta": ' not in line]
    # The hosts' results within a task in one order: workers finish in any.
    blocks = []
    for line in lines:
        if line.startswith('TASK [') or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    return proc.pid, found, [line for block in blocks for line in block[:1] + sorted(block[1:])]


def skip_unless_collection_linked():
    if not os.path.isdir(os.path.join(ROOT, '.build', 'collections', 'ansible_collections', 'ocigpu')):
        pytest.skip('the collection is not linked into .build/collections (tests/infra/venv.sh does it)')


ALL = {'plain', 'hidden', 'registered', 'connection', 'true', 'looped', 'included', 'undefined', 'fact', 'checked',
       'secret', 'failing', 'command', 'timed'}


def check_output(ours, theirs, hosts):
    assert ours == theirs
    assert any(line.startswith('skipping: [node1] => {"censored"') for line in ours), ours
    assert any(line.endswith('is string and flag", "skip_reason": "Conditional result was False"}') for line in ours), ours
    assert [line.split() for line in ours if line.startswith(('node1 ', 'node2 '))] == [
        [host, ':', 'ok=9', 'changed=0', 'unreachable=0', 'failed=0', 'skipped=6', 'rescued=1', 'ignored=1'] for host in hosts], ours
    assert 'ok: [node1] => {"censored": "the output has been hidden due to the fact that \'no_log: true\' was specified for ' \
        'this result", "changed": false}' in ours, ours
    assert '    "msg": "failed on purpose 6"' in ours, ours


def test_on_several_hosts_skipped_tasks_and_tasks_on_variables_get_no_worker_and_the_same_result(tmp_path):
    skip_unless_collection_linked()
    hosts = ['node1', 'node2']
    main_pid, here, ours = play(tmp_path, 'ocigpu.cluster.mitogen_linear', hosts)
    linear_pid, there, theirs = play(tmp_path, 'linear', hosts)
    check_output(ours, theirs, hosts)
    # In the controller's process: the three skipped by a false condition, the connection variable's, and
    # ansible-core's actions on variables alone (a debug, an include, set_fact, assert, fail).
    assert {name for name, pid in here.items() if pid == main_pid} == {
        'plain', 'hidden', 'registered', 'connection', 'true', 'included', 'fact', 'checked', 'secret', 'failing'}, here
    # A worker for the rest: a loop (per item), a condition that fails, modules.
    assert set(here) == ALL
    assert main_pid not in (here['looped'], here['undefined'], here['command'], here['timed']), here
    # Ansible's own strategy: a worker for every one.
    assert set(there) == ALL
    assert linear_pid not in there.values(), there


def test_on_a_plays_only_host_every_task_runs_in_the_controllers_process_with_the_same_result(tmp_path):
    skip_unless_collection_linked()
    main_pid, here, ours = play(tmp_path, 'ocigpu.cluster.mitogen_linear', ['node1'])
    linear_pid, there, theirs = play(tmp_path, 'linear', ['node1'])
    check_output(ours, theirs, ['node1'])
    # Modules and loops too, through Mitogen's connection made in this process; a task with a timeout
    # (an alarm signal) still gets a worker.
    assert set(here) == ALL
    assert {name for name, pid in here.items() if pid == main_pid} == ALL - {'timed'}, here
    assert set(there) == ALL
    assert linear_pid not in there.values(), there
