# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml --tags health (the active node health check) as a user runs it, on this machine
(connection local). Each GPU node of the inventory is this machine under another name, with its own
all_reduce_perf stand-in and metrics folder: the stand-in replays a run measured on 4x H200 (365.04 GB/s
at 16 GiB, the largest size of the check's arguments here) or hangs. scontrol is the stand-in of
tests/standins, which keeps the Slurm nodes in one JSON file (taken under a lock, as the nodes' drains
and resumes go through the controller at once). One playbook run checks several nodes, each in
another Slurm state, so the file stays short to run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, VENV_BIN

REPLAY = os.path.join(ROOT, 'tests', 'unit', 'data', 'nccl', 'h200x4_role_node_1g_16g.txt')
SCONTROL = os.path.join(ROOT, 'tests', 'standins', 'scontrol')
ARGS = '-b 1G -e 16G -f 2 -n 50'
SHORT = 'ocigpu-nccl: all_reduce busbw 365.04 GB/s at 16 GiB is below the threshold %.2f GB/s'
HOLD = 'Reason=ocigpu-nccl: active NCCL check running'
PERSON = 'bad DIMM, ticket 4711'
PASSIVE = 'ocigpu-health: xid Xid 79'


class Cluster(object):
    """GPU nodes of the shape BM.GPU.H200.8 with 4 GPUs (nodes: name -> dict(state, reason, job_at_drain,
    hang, vars)) and their Slurm controller ctl, all of them this machine."""

    def __init__(self, tmp, **nodes):
        self.tmp = tmp
        self.state_file = tmp / 'slurm.json'
        self.state_file.write_text(json.dumps(dict(calls=[], nodes={
            name: dict(state=n.get('state', 'IDLE'), reason=n.get('reason', ''),
                       **({'job_at_drain': True} if n.get('job_at_drain') else {})) for name, n in nodes.items()})))
        bin_dir = tmp / 'bin'
        bin_dir.mkdir()
        (bin_dir / 'scontrol').write_text('#!/bin/sh\nexec flock %s %s "$@"\n' % (tmp / 'slurm.lock', SCONTROL))
        os.chmod(str(bin_dir / 'scontrol'), 0o755)
        hosts = {}
        for name, n in nodes.items():
            (tmp / name).mkdir()
            program = tmp / name / 'all_reduce_perf'
            program.write_text('#!/bin/sh\necho "$@" >> %s\n%s\n' % (
                tmp / name / 'args', 'exec sleep 60' if n.get('hang') else 'cat ' + REPLAY))
            os.chmod(str(program), 0o755)
            hosts[name] = dict(ocigpu_slurm_name=name, nccl_tests_active_binary=str(program),
                               nccl_tests_metrics_dir=str(tmp / name / 'metrics'),
                               nccl_tests_active_settings_file=str(tmp / name / 'active.json'), **n.get('vars', {}))
        (tmp / 'inventory.yml').write_text(json.dumps(dict(all=dict(
            children=dict(gpu_nodes=dict(hosts=hosts), slurm_controller=dict(hosts={'ctl': {}})),
            vars=dict(ansible_connection='local', ansible_become=False, ansible_python_interpreter=sys.executable,
                      validate_node_facts=False, nccl_tests_shape='BM.GPU.H200.8', nccl_tests_gpu_count=4,
                      nccl_tests_active_args=ARGS)))))

    def run(self, *args, fail=False, slurm=True, **extra_vars):
        """ansible-playbook validate.yml with args; asserts it failed or not; its stdout. slurm=False: no
        scontrol on the PATH."""
        path = os.environ['PATH']
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'),
                   OCIGPU_SCONTROL_STATE=str(self.state_file), ANSIBLE_FORKS='10', ANSIBLE_PIPELINING='1',
                   PATH=str(self.tmp / 'bin') + os.pathsep + path if slurm else path,
                   ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0', ANSIBLE_LOCALHOST_WARNING='0')
        cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(self.tmp / 'inventory.yml'),
               os.path.join(COLLECTION_PLAYBOOKS, 'validate.yml')] + list(args)
        if extra_vars:
            cmd += ['-e', json.dumps(extra_vars)]
        out = subprocess.run(cmd, cwd=str(self.tmp), env=env, capture_output=True, text=True, timeout=300, check=False)
        print(out.stdout[-8000:], out.stderr[-2000:])
        assert (out.returncode != 0) == fail, out.stdout[-8000:] + out.stderr[-2000:]
        return out.stdout

    def slurm(self, name):
        """The node in the stand-in's file, with the scontrol updates made for it (their State= and Reason=)."""
        s = json.loads(self.state_file.read_text())
        updates = [c[2:] for c in s['calls'] if c[0] == 'update' and c[1] == 'NodeName=' + name]
        return dict(s['nodes'][name], updates=updates)

    def ran(self, name):
        """The arguments each all_reduce_perf run of the node was given."""
        path = self.tmp / name / 'args'
        return path.read_text().splitlines() if path.exists() else []

    def metrics(self, name):
        """nccl-active.prom of the node as {metric: value}; None when it was not written."""
        path = self.tmp / name / 'metrics' / 'nccl-active.prom'
        if not path.exists():
            return None
        lines = [line.split() for line in path.read_text().splitlines() if not line.startswith('#')]
        return dict((name, float(value)) for name, value in lines)


def test_below_the_threshold_and_the_states_of_slurm_nodes(tmp_path):
    c = Cluster(tmp_path, idle={}, person=dict(state='IDLE+DRAIN', reason=PERSON),
                passive=dict(state='IDLE+DRAIN', reason=PASSIVE), busy=dict(state='MIXED'),
                late=dict(job_at_drain=True))
    out = c.run('--tags', 'health', fail=True, nccl_tests_active_threshold_gbps=400)
    # Below the threshold: held while it ran, then drained with the figures; the play fails naming it.
    idle = c.slurm('idle')
    assert (idle['state'], idle['reason']) == ('IDLE+DRAIN', SHORT % 400)
    assert idle['updates'] == [['State=DRAIN', HOLD], ['State=DRAIN', 'Reason=' + SHORT % 400]]
    assert c.ran('idle') == [ARGS + ' -g 4']
    m = c.metrics('idle')
    assert (m['ocigpu_nccl_active_busbw_gbps'], m['ocigpu_nccl_active_threshold_gbps'], m['ocigpu_nccl_active_passed']) \
        == (365.04, 400, 0)
    assert abs(m['ocigpu_nccl_active_last_run_timestamp_seconds'] - time.time()) < 600
    assert ('idle failed the active NCCL check: all_reduce busbw 365.04 GB/s at 16 GiB is below the threshold '
            '400.00 GB/s (it stays drained in Slurm as idle)') in out
    # What the node's periodic check (ocigpu-healthcheck --active) repeats: this run's settings.
    settings = json.loads((tmp_path / 'idle' / 'active.json').read_text())
    assert settings == dict(binary=str(tmp_path / 'idle' / 'all_reduce_perf'), args=ARGS, gpus=4, threshold_gbps=400,
                            timeout=300, env=settings['env'])
    assert settings['env']['NCCL_IB_HCA'].startswith('=mlx5_')
    # A drain by a person or by the passive check stays as it is; the figures go to the metrics only.
    for name, reason in (('person', PERSON), ('passive', PASSIVE)):
        node = c.slurm(name)
        assert (node['state'], node['reason'], node['updates']) == ('IDLE+DRAIN', reason, [])
        assert c.ran(name) == [ARGS + ' -g 4'] and c.metrics(name)['ocigpu_nccl_active_passed'] == 0
        assert '%s was drained by someone else (%s), left as it is' % (name, reason) in out
    # A busy node is not checked; one that took a job just before the drain is given back.
    assert 'busy: not checked: it runs jobs (MIXED)' in out
    assert c.slurm('busy')['updates'] == [] and c.ran('busy') == [] and c.metrics('busy') is None
    assert not (tmp_path / 'busy' / 'active.json').exists()
    assert 'late: not checked: a job started on it before the drain; given back' in out
    late = c.slurm('late')
    assert (late['state'], late['updates']) == ('MIXED', [['State=DRAIN', HOLD], ['State=RESUME']])
    assert c.ran('late') == [] and c.metrics('late') is None


def test_passing_lifts_only_the_checks_own_drain_and_a_fraction_of_the_shape_gate(tmp_path):
    # "earlier" fell short in an earlier check and stays drained by it; now it passes and is given back.
    # f80 has no threshold of its own: 0.8 of BM.GPU.H200.8's single-node gate (440 GB/s) is 352.
    threshold = dict(vars=dict(nccl_tests_active_threshold_gbps=300))
    c = Cluster(tmp_path, earlier=dict(state='IDLE+DRAIN', reason=SHORT % 400, **threshold),
                person=dict(state='IDLE+DRAIN', reason=PERSON, **threshold),
                f80=dict(vars=dict(nccl_tests_active_fraction=0.8)))
    out = c.run('--tags', 'health')
    earlier = c.slurm('earlier')
    assert (earlier['state'], earlier['reason'], earlier['updates']) == ('IDLE', '', [['State=DRAIN', HOLD], ['State=RESUME']])
    assert 'earlier: PASS: all_reduce busbw 365.04 GB/s against 300.00 GB/s' in out
    assert c.metrics('earlier')['ocigpu_nccl_active_passed'] == 1
    person = c.slurm('person')
    assert (person['state'], person['reason'], person['updates']) == ('IDLE+DRAIN', PERSON, [])
    assert c.ran('person') == [ARGS + ' -g 4'] and c.metrics('person')['ocigpu_nccl_active_passed'] == 1
    assert 'person left drained (%s)' % PERSON in out
    assert 'f80: PASS: all_reduce busbw 365.04 GB/s against 352.00 GB/s' in out
    f80 = c.slurm('f80')
    assert (f80['state'], f80['updates']) == ('IDLE', [['State=DRAIN', HOLD], ['State=RESUME']])
    assert c.metrics('f80')['ocigpu_nccl_active_threshold_gbps'] == 352 and c.metrics('f80')['ocigpu_nccl_active_passed'] == 1


def test_a_larger_fraction_a_hung_run_and_a_shape_without_gate(tmp_path):
    c = Cluster(tmp_path, f90=dict(vars=dict(nccl_tests_active_fraction=0.9)),
                hung=dict(hang=True, vars=dict(nccl_tests_active_timeout=2)),
                nogate=dict(vars=dict(nccl_tests_shape='')))
    out = c.run('--tags', 'health', fail=True)
    # 0.9 of the gate (396 GB/s) is above the node's 365.04.
    assert (c.slurm('f90')['state'], c.slurm('f90')['reason']) == ('IDLE+DRAIN', SHORT % 396)
    assert c.metrics('f90')['ocigpu_nccl_active_threshold_gbps'] == 396 and c.metrics('f90')['ocigpu_nccl_active_passed'] == 0
    # A run that hangs is stopped at nccl_tests_active_timeout and the node stays drained, saying so.
    hung = c.slurm('hung')
    assert (hung['state'], hung['reason']) == ('IDLE+DRAIN', 'ocigpu-nccl: all_reduce did not finish within 2 s')
    assert c.ran('hung') == [ARGS + ' -g 4'] and c.metrics('hung')['ocigpu_nccl_active_passed'] == 0
    assert str(c.metrics('hung')['ocigpu_nccl_active_busbw_gbps']) == 'nan'
    # No gate for the shape and no threshold: said loudly, naming the node, and judged on errors only.
    assert "WARNING: nogate: no single-node gate for shape 'unknown'" in out
    assert 'nogate: PASS: all_reduce busbw 365.04 GB/s against no threshold' in out
    assert c.slurm('nogate')['state'] == 'IDLE' and c.metrics('nogate')['ocigpu_nccl_active_passed'] == 1
    assert str(c.metrics('nogate')['ocigpu_nccl_active_threshold_gbps']) == 'nan'


def test_without_slurm_the_check_runs_and_slurm_is_left_alone(tmp_path):
    # gpu-a's controller has no scontrol (Slurm not installed); gpu-b's controller group is empty.
    c = Cluster(tmp_path, **{'gpu-a': {}, 'gpu-b': dict(vars=dict(nccl_tests_active_controller_group='nowhere'))})
    out = c.run('--tags', 'health', fail=True, slurm=False, nccl_tests_active_threshold_gbps=400)
    assert 'Slurm: Slurm is not installed (no scontrol), nothing done' in out
    assert 'Slurm: Slurm is not installed (no host in the inventory group nowhere), nothing done' in out
    assert json.loads(c.state_file.read_text())['calls'] == []
    for name in ('gpu-a', 'gpu-b'):
        assert c.ran(name) == [ARGS + ' -g 4'] and c.metrics(name)['ocigpu_nccl_active_passed'] == 0
        assert ('%s failed the active NCCL check: all_reduce busbw 365.04 GB/s at 16 GiB is below the threshold '
                '400.00 GB/s"' % name) in out


def test_check_mode_changes_nothing_and_a_plain_validate_leaves_the_check_out(tmp_path):
    c = Cluster(tmp_path, idle={})
    out = c.run('--tags', 'health', '--check', nccl_tests_active_threshold_gbps=400)
    assert 'idle: would run the active NCCL check (check mode)' in out
    assert c.slurm('idle')['updates'] == [] and c.ran('idle') == [] and c.metrics('idle') is None
    listed = c.run('--list-tasks')
    assert 'Run the active check' not in listed and 'Hold the node while the check runs' not in listed
    assert 'Hold the node while the check runs' in c.run('--list-tasks', '--tags', 'health')
