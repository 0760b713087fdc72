# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's pull on a current baked image runs configure.yml's per-node steps and validate.yml's active
check in one ansible-playbook (``--tags node_join,health``): the tasks it lists must be those of the two
runs it replaces (configure.yml ``--tags node_join``, validate.yml ``--tags health``), so that neither
playbook gains a task of the other's tag unnoticed."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location('ocigpu_pull_tasks', str(ROOT / 'roles' / 'slurm_autoscaler' / 'files' / 'ocigpu_pull.py'))
ocigpu_pull = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ocigpu_pull)


def listed(tmp_path, argv):
    """The plays and tasks ansible-playbook --list-tasks prints for argv (the pull's command), each play's
    and task's tags as a set (their order is a set's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_DEPRECATION_WARNINGS='0', ANSIBLE_CONFIG=str(tmp_path / 'ansible.cfg'))
    argv = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')] + argv[1:] + ['--list-tasks']
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=str(tmp_path), env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = []
    for line in proc.stdout.splitlines():
        if not line.strip() or line.startswith('playbook:'):
            continue
        m = re.match(r'^(.*)\tTAGS: \[(.*)\]$', line)
        lines.append((m.group(1).strip(), frozenset(t for t in m.group(2).split(',') if t)) if m else (line.strip(), None))
    return lines


def test_the_run_of_both_lists_the_tasks_of_the_two_runs_it_replaces(tmp_path):
    (tmp_path / 'inventory.ini').write_text('[gpu_nodes]\ngpu-1 ansible_connection=local\n')
    (tmp_path / 'ansible.cfg').write_text('[defaults]\n')
    settings = dict(skip_tags=['nvme_scratch'], active_check={})
    both = ocigpu_pull.configure_command('/venv', str(tmp_path), 'gpu-1', settings, [], join_only=True,
                                         check_strategy='linear')
    configure = ocigpu_pull.configure_command('/venv', str(tmp_path), 'gpu-1', settings, [], join_only=True)
    check = ocigpu_pull.active_check_command('/venv', str(tmp_path), settings, [])
    assert both[1:3] == ['ocigpu.cluster.configure', 'ocigpu.cluster.validate']
    separate = listed(tmp_path, configure) + listed(tmp_path, check)
    together = listed(tmp_path, both)
    assert together == separate
    # what the lists hold: the per-node steps of the roles and the active check's all_reduce
    names = [name for name, _tags in together]
    assert len([n for n in names if 'ocigpu.cluster.' in n]) > 20
    assert any('Check the GPU nodes with a short NCCL all_reduce' in n for n in names)
