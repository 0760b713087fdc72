# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml --tags health (the active node health check) as a user runs it, on this machine
(connection local): all_reduce_perf replays a run measured on 4x H200 (365.04 GB/s at 16 GiB), and
scontrol is the stand-in of tests/standins, which keeps the Slurm nodes in a JSON file."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, VENV_BIN

REPLAY = os.path.join(ROOT, 'tests', 'unit', 'data', 'nccl', 'h200x4_role_node_1g_16g.txt')
STANDINS = os.path.join(ROOT, 'tests', 'standins')
SHORT = 'ocigpu-nccl: busbw 365.04 GB/s at 16 GiB is below the threshold %.2f GB/s'


class Node(object):
    """gpu-a, a 4-GPU H200 node, with its controller ctl; both are this machine."""

    def __init__(self, tmp, state='IDLE', reason='', **extra):
        self.tmp = tmp
        self.state_file = tmp / 'slurm.json'
        self.state_file.write_text(json.dumps(dict(nodes={'gpu-a': dict(state=state, reason=reason, **extra)}, calls=[])))
        self.ran = tmp / 'all_reduce_perf.args'
        self.program = tmp / 'all_reduce_perf'
        self.program.write_text('#!/bin/sh\necho "$@" >> %s\ncat %s\n' % (self.ran, REPLAY))
        os.chmod(str(self.program), 0o755)
        self.metrics = tmp / 'metrics'
        (tmp / 'inventory.yml').write_text(json.dumps(dict(all=dict(
            children=dict(gpu_nodes=dict(hosts={'gpu-a': dict(ocigpu_slurm_name='gpu-a')}),
                          slurm_controller=dict(hosts={'ctl': {}})),
            vars=dict(ansible_connection='local', ansible_become=False, ansible_python_interpreter=sys.executable)))))

    def run(self, *args, fail=False, **extra_vars):
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'),
                   OCIGPU_SCONTROL_STATE=str(self.state_file), PATH=STANDINS + os.pathsep + os.environ['PATH'],
                   ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0', ANSIBLE_LOCALHOST_WARNING='0')
        variables = dict(validate_node_facts=False, nccl_tests_shape='BM.GPU.H200.8', nccl_tests_gpu_count=4,
                         nccl_tests_active_binary=str(self.program), nccl_tests_active_args='-b 1G -e 16G -f 2 -n 50',
                         nccl_tests_metrics_dir=str(self.metrics))
        variables.update(extra_vars)
        cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(self.tmp / 'inventory.yml'),
               os.path.join(COLLECTION_PLAYBOOKS, 'validate.yml'), '-e', json.dumps(variables)] + list(args)
        out = subprocess.run(cmd, cwd=str(self.tmp), env=env, capture_output=True, text=True, timeout=300, check=False)
        print(out.stdout[-5000:], out.stderr[-2000:])
        assert (out.returncode != 0) == fail, out.stdout[-5000:] + out.stderr[-2000:]
        return out.stdout

    @property
    def slurm(self):
        s = json.loads(self.state_file.read_text())
        return dict(s['nodes']['gpu-a'], updates=[c for c in s['calls'] if c[0] == 'update'], calls=s['calls'])

    def metric(self, name):
        for line in (self.metrics / 'nccl-active.prom').read_text().splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        raise AssertionError('%s not in nccl-active.prom' % name)


def test_a_node_below_the_threshold_stays_drained_with_its_figures(tmp_path):
    node = Node(tmp_path)
    out = node.run('--tags', 'health', fail=True, nccl_tests_active_threshold_gbps=400)
    assert node.slurm['state'] == 'IDLE+DRAIN' and node.slurm['reason'] == SHORT % 400
    assert [u[2] for u in node.slurm['updates']] == ['State=DRAIN', 'State=DRAIN']
    assert node.slurm['updates'][0][3] == 'Reason=ocigpu-nccl: active NCCL check running'
    assert node.ran.read_text().split() == '-b 1G -e 16G -f 2 -n 50 -g 4'.split()
    assert node.metric('ocigpu_nccl_active_passed') == 0 and node.metric('ocigpu_nccl_active_busbw_gbps') == 365.04
    assert node.metric('ocigpu_nccl_active_threshold_gbps') == 400
    assert 'gpu-a failed the active NCCL check: busbw 365.04 GB/s at 16 GiB is below the threshold 400.00 GB/s' in out
    # Passing again (a lower threshold), the node this check drained is given back.
    node.run('--tags', 'health', nccl_tests_active_threshold_gbps=300)
    assert (node.slurm['state'], node.slurm['reason']) == ('IDLE', '') and node.metric('ocigpu_nccl_active_passed') == 1


@pytest.mark.parametrize('fraction,passed', [(0.8, True), (0.9, False)])
def test_a_fraction_of_the_shape_gate(tmp_path, fraction, passed):
    node = Node(tmp_path)
    out = node.run('--tags', 'health', fail=not passed, nccl_tests_active_fraction=fraction)
    threshold = round(440 * fraction, 2)
    assert node.metric('ocigpu_nccl_active_threshold_gbps') == threshold
    assert node.metric('ocigpu_nccl_active_passed') == (1 if passed else 0)
    if passed:
        assert 'PASS: all_reduce busbw 365.04 GB/s against 352.00 GB/s' in out
        assert (node.slurm['state'], len(node.slurm['updates'])) == ('IDLE', 2)
    else:
        assert node.slurm['reason'] == SHORT % threshold


@pytest.mark.parametrize('threshold', [400, 300])
def test_a_drain_by_a_person_or_the_passive_check_stays(tmp_path, threshold):
    for reason in ('bad DIMM, ticket 4711', 'ocigpu-health: xid Xid 79'):
        node = Node(tmp_path, 'IDLE+DRAIN', reason)
        node.run('--tags', 'health', fail=threshold == 400, nccl_tests_active_threshold_gbps=threshold)
        assert (node.slurm['state'], node.slurm['reason'], node.slurm['updates']) == ('IDLE+DRAIN', reason, [])
        assert node.metric('ocigpu_nccl_active_passed') == (0 if threshold == 400 else 1)


def test_a_busy_node_is_not_checked_and_one_that_takes_a_job_is_given_back(tmp_path):
    node = Node(tmp_path, 'MIXED')
    out = node.run('--tags', 'health', nccl_tests_active_threshold_gbps=400)
    assert 'gpu-a: not checked: it runs jobs (MIXED)' in out
    assert not node.ran.exists() and not node.metrics.exists() and node.slurm['updates'] == []
    late = tmp_path / 'late'
    late.mkdir()
    node = Node(late, job_at_drain=True)
    out = node.run('--tags', 'health', nccl_tests_active_threshold_gbps=400)
    assert 'gpu-a: not checked: a job started on it before the drain; given back' in out
    assert [u[2] for u in node.slurm['updates']] == ['State=DRAIN', 'State=RESUME'] and node.slurm['state'] == 'MIXED'
    assert not node.ran.exists()


def test_check_mode_and_plain_validate(tmp_path):
    node = Node(tmp_path)
    out = node.run('--tags', 'health', '--check', nccl_tests_active_threshold_gbps=400)
    assert 'would run the active NCCL check (check mode)' in out
    assert node.slurm['updates'] == [] and not node.ran.exists() and not node.metrics.exists()
    listed = node.run('--list-tasks')
    assert 'Run the active check' not in listed and 'Hold the node while the check runs' not in listed
    assert 'Hold the node while the check runs' in node.run('--list-tasks', '--tags', 'health')
