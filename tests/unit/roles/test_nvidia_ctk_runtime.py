# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nvidia_container_toolkit tasks/runtime.yml run by ansible-playbook on this machine, with a
stand-in nvidia-ctk: the task that edits the runtime's file reports a change, and notifies the
daemon's restart, only when the file's content changed; a failing nvidia-ctk fails the task. No role
routes a notification through a debug task."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
# The play imports the task file itself (not the role), so the role's handlers, which restart the real
# daemons, are not loaded: the play's own handler of the same name records the restart instead.
PLAY = '''
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.import_tasks: "%(tasks)s"
  handlers:
    - name: Restart containerd
      ansible.builtin.lineinfile:
        path: "%(restarts)s"
        line: restarted
        create: true
'''
# Adds the runtime once, as nvidia-ctk does: a second call leaves the file as it is.
NVIDIA_CTK = '''#!/bin/sh
[ -n "$NVIDIA_CTK_FAIL" ] && { echo "nvidia-ctk: failed" >&2; exit 4; }
for arg in "$@"; do case $arg in --config=*) config=${arg#--config=};; esac; done
grep -q 'runtimes.nvidia' "$config" 2>/dev/null || printf '[plugins.cri.containerd.runtimes.nvidia]\\n' >> "$config"
echo "INFO Wrote updated config to $config"
'''


def run(tmp_path, fail=False):
    """runtime.yml for containerd on a file in tmp_path; (return code, output, restarts recorded)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    ctk = bin_dir / 'nvidia-ctk'
    ctk.write_text(NVIDIA_CTK)
    ctk.chmod(0o755)
    restarts = tmp_path / 'restarts'
    play = tmp_path / 'play.yml'
    play.write_text(PLAY % {'tasks': ROOT / 'roles' / 'nvidia_container_toolkit' / 'tasks' / 'runtime.yml',
                            'restarts': restarts})
    extra = {'__nvidia_container_toolkit_runtime': 'containerd', 'nvidia_container_toolkit_runtime_set_default': False,
             'nvidia_container_toolkit_runtime_config_files': {'containerd': str(tmp_path / 'config.toml')}}
    (tmp_path / 'vars.yml').write_text(yaml.safe_dump(extra))
    env = dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ.get('PATH', '')), ANSIBLE_LOCALHOST_WARNING='False',
               ANSIBLE_HOME=str(tmp_path / 'ansible'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'))
    if fail:
        env['NVIDIA_CTK_FAIL'] = '1'
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', 'ansible_python_interpreter=%s' % sys.executable, '-e', '@%s' % (tmp_path / 'vars.yml'),
                           str(play)], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    count = len(restarts.read_text().splitlines()) if restarts.exists() else 0
    if restarts.exists():
        restarts.unlink()
    return proc.returncode, proc.stdout, count


def test_a_changed_file_restarts_the_runtime_once_and_a_rerun_changes_nothing(tmp_path):
    rc, log, restarts = run(tmp_path)
    assert rc == 0, log
    assert 'runtimes.nvidia' in (tmp_path / 'config.toml').read_text()
    assert restarts == 1, log
    rc, log, restarts = run(tmp_path)
    assert rc == 0, log
    assert restarts == 0 and 'changed=0' in log, log


def test_a_failing_nvidia_ctk_fails_the_task(tmp_path):
    rc, log, restarts = run(tmp_path, fail=True)
    assert rc != 0 and 'nvidia-ctk: failed' in log, log
    assert restarts == 0


def test_no_role_notifies_through_a_debug_task():
    """A handler is notified by the task that changes something, not by a debug task made to report a change."""
    found = []
    for path in sorted((ROOT / 'roles').glob('*/tasks/*.yml')):
        stack = list(yaml.safe_load(path.read_text(encoding='utf-8')) or [])
        while stack:
            task = stack.pop()
            if not isinstance(task, dict):
                continue
            for key in ('block', 'rescue', 'always'):
                stack.extend(task.get(key) or [])
            if 'notify' in task and any(k in task for k in ('ansible.builtin.debug', 'debug')):
                found.append('%s: %s' % (path.relative_to(ROOT), task.get('name')))
    assert not found, 'debug tasks that notify handlers: %s' % found
