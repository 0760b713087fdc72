# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu-active-sweep (issue 32, point 3): the periodic active checks of idle nodes, through Slurm. The
program runs as installed, with squeue, scontrol, sbatch and scancel stand-ins that keep Slurm's queue in
a JSON file: which nodes it picks (idle, powered up, not drained, due), how many at once, the sbatch line
(the node alone, all its GPUs, the check as the step), and the checks it puts off when a node took a job."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, 'roles', 'node_health', 'files', 'ocigpu-active-sweep')

SLURM = r'''#!/usr/bin/env python3
import json, os, sys
path = %r
tool = os.path.basename(sys.argv[0])
slurm = json.load(open(path))
args = sys.argv[1:]
slurm['calls'].append([tool] + args)
if tool == 'squeue':
    for job_id, job in sorted(slurm['jobs'].items()):
        print('%%s %%s' %% (job_id, job['state']))
elif tool == 'scontrol':
    for name, (state, gres, reason) in sorted(slurm['nodes'].items()):
        print('NodeName=%%s Arch=x86_64 Gres=%%s NodeAddr=%%s Partitions=%%s State=%%s ThreadsPerCore=2%%s' %% (
            name, gres, name, 'gpu,debug' if name.startswith('gpu') else 'od', state,
            (' Reason=%%s [root@2026-11-27T10:00:00]' %% reason) if reason else ''))
elif tool == 'sbatch':
    slurm['next'] += 1
    node = [a for a in args if a.startswith('--nodelist=')][0].split('=', 1)[1]
    slurm['jobs'][str(slurm['next'])] = dict(state='PENDING' if slurm['nodes'][node][0] != 'IDLE' else 'RUNNING', node=node)
    print('%%d;cluster' %% slurm['next'])
elif tool == 'scancel':
    slurm['jobs'].pop(args[0])
json.dump(slurm, open(path, 'w'))
'''


class Slurm(object):
    def __init__(self, tmp):
        self.tmp = tmp
        self.path = tmp / 'slurm.json'
        self.save(dict(nodes={}, jobs={}, calls=[], next=100))
        for tool in ('squeue', 'scontrol', 'sbatch', 'scancel'):
            (tmp / tool).write_text(SLURM % str(self.path))
            os.chmod(str(tmp / tool), 0o755)

    def load(self):
        return json.loads(self.path.read_text())

    def save(self, data):
        self.path.write_text(json.dumps(data))

    def set(self, **changes):
        data = self.load()
        data.update(changes)
        data['calls'] = []
        self.save(data)

    def sweep(self, *extra, **env):
        tmp = self.tmp
        lib = tmp / 'lib'
        if not lib.exists():
            lib.mkdir()
            (lib / 'ocigpu_health.py').write_text(open(os.path.join(ROOT, 'plugins', 'module_utils', '_health.py')).read())
            (lib / 'ocigpu_slurm.py').write_text(open(os.path.join(ROOT, 'plugins', 'module_utils', '_slurm.py')).read())
        argv = [sys.executable, PROGRAM, '--state', str(tmp / 'sweep.json'), '--program', '/usr/local/sbin/ocigpu-healthcheck']
        argv += ['--%s=%s' % (t, tmp / t) for t in ('squeue', 'scontrol', 'sbatch', 'scancel')]
        proc = subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=60, check=False,
                              env=dict(os.environ, OCIGPU_HEALTH_LIB=str(lib), **env))
        return proc.returncode, proc.stdout

    def submitted(self):
        return [c for c in self.load()['calls'] if c[0] == 'sbatch']


@pytest.fixture
def slurm(tmp_path):
    return Slurm(tmp_path)


NODES = {
    'gpu-1': ['IDLE', 'gpu:a100:8(S:0-1)', ''],
    'gpu-2': ['ALLOCATED', 'gpu:a100:8(S:0-1)', ''],
    'gpu-3': ['IDLE+DRAIN', 'gpu:a100:8(S:0-1)', 'ocigpu-health: gpu_count 7 of 8'],
    'gpu-4': ['MIXED', 'gpu:a100:8(S:0-1)', ''],
    'od-1': ['IDLE+CLOUD+POWERED_DOWN', 'gpu:8', ''],
    'od-2': ['IDLE+CLOUD', 'gpu:8', ''],
    'od-3': ['IDLE+CLOUD+POWERING_UP', 'gpu:8', ''],
    'od-4': ['IDLE+RESERVED', '(null)', ''],
    'od-5': ['IDLE+NOT_RESPONDING', '(null)', ''],
}


def test_only_idle_powered_up_nodes_are_checked_each_alone_with_all_its_gpus(slurm):
    slurm.set(nodes=NODES)
    rc, out = slurm.sweep('--at-once', '5')
    assert rc == 0, out
    calls = slurm.submitted()
    assert [[a for a in c if a.startswith('--nodelist=')][0] for c in calls] == ['--nodelist=gpu-1', '--nodelist=od-2']
    gpu1 = calls[0]
    for want in ('--exclusive', '--nodes=1', '--gres=gpu:8', '--job-name=ocigpu-active-check', '--export=NONE',
                 '--time=15', '--nice=10000', '--partition=gpu,debug'):
        assert want in gpu1, gpu1
    assert gpu1[-2:] == ['--wrap', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin '
                                   'exec /usr/local/sbin/ocigpu-healthcheck --active --node gpu-1']
    assert 'sweep: gpu-1 idle, never checked; active check submitted (job 101)' in out
    # A node with no GPU in Slurm (the demo's stand-ins) gets no GPU request.
    slurm.set(nodes={'sim-1': ['IDLE', '(null)', '']}, jobs={})
    slurm.sweep()
    assert not [a for a in slurm.submitted()[0] if a.startswith('--gres')]


def test_a_node_is_checked_again_only_after_the_interval(slurm, tmp_path):
    slurm.set(nodes={'gpu-1': ['IDLE', 'gpu:8', '']})
    slurm.sweep('--interval', '3600')
    assert len(slurm.submitted()) == 1
    slurm.set(jobs={})                            # the check ended
    rc, out = slurm.sweep('--interval', '3600')
    assert slurm.submitted() == [] and 'none due' in out
    state = json.loads((tmp_path / 'sweep.json').read_text())
    state['checked']['gpu-1'] -= 3601
    (tmp_path / 'sweep.json').write_text(json.dumps(state))
    rc, out = slurm.sweep('--interval', '3600')
    assert len(slurm.submitted()) == 1 and 'gpu-1 idle, last checked 1.0 h ago; active check submitted' in out


def test_at_most_at_once_checks_are_queued_longest_unchecked_first(slurm, tmp_path):
    slurm.set(nodes=dict(('gpu-%d' % i, ['IDLE', 'gpu:8', '']) for i in range(1, 6)))
    (tmp_path / 'sweep.json').write_text(json.dumps(dict(checked={'gpu-1': 10, 'gpu-2': 5, 'gpu-3': 20}, jobs={})))
    rc, out = slurm.sweep('--at-once', '2', '--interval', '60')
    # Never checked (gpu-4, gpu-5) before those checked longest ago.
    assert [c[3] for c in slurm.submitted()] == ['--nodelist=gpu-4', '--nodelist=gpu-5']
    assert '3 more node(s) due (gpu-2, gpu-1, gpu-3)' in out
    # While both run, nothing else is submitted; once they ended, the next two go.
    slurm.set()
    slurm.sweep('--at-once', '2', '--interval', '60')
    assert slurm.submitted() == []
    slurm.set(jobs={})
    slurm.sweep('--at-once', '2', '--interval', '60')
    assert [c[3] for c in slurm.submitted()] == ['--nodelist=gpu-2', '--nodelist=gpu-1']


def test_a_check_still_pending_after_the_limit_is_cancelled_and_the_node_is_due_again(slurm, tmp_path):
    slurm.set(nodes={'gpu-1': ['IDLE', 'gpu:8', '']})
    slurm.sweep()
    # A user's job took the node between the sweep's look and the check's start: the check waits.
    data = slurm.load()
    data['jobs']['101']['state'] = 'PENDING'
    data['nodes']['gpu-1'][0] = 'ALLOCATED'
    slurm.save(data)
    rc, out = slurm.sweep('--pending-limit', '300')
    assert [c for c in slurm.load()['calls'] if c[0] == 'scancel'] == []
    state = json.loads((tmp_path / 'sweep.json').read_text())
    state['jobs']['101']['submitted'] -= 301
    (tmp_path / 'sweep.json').write_text(json.dumps(state))
    rc, out = slurm.sweep('--pending-limit', '300')
    assert [c for c in slurm.load()['calls'] if c[0] == 'scancel'] == [['scancel', '101']]
    assert re.search(r'sweep: gpu-1 took a job first; cancel its check \(job 101, pending 30\d s\), put off to a later sweep', out)
    assert 'gpu-1' not in json.loads((tmp_path / 'sweep.json').read_text())['checked']
    # Idle again: checked at once, not after the interval.
    slurm.set(nodes={'gpu-1': ['IDLE', 'gpu:8', '']})
    slurm.sweep()
    assert len(slurm.submitted()) == 1


def test_dry_run_submits_nothing_and_a_slurm_that_does_not_answer_stops_the_sweep(slurm, tmp_path):
    slurm.set(nodes={'gpu-1': ['IDLE', 'gpu:8', '']})
    rc, out = slurm.sweep('--dry-run')
    assert rc == 0 and 'gpu-1 idle, never checked; would submit its active check' in out
    assert slurm.submitted() == [] and not (tmp_path / 'sweep.json').exists()
    (tmp_path / 'squeue').write_text('#!/bin/sh\necho "slurm_load_jobs error: Unable to contact slurm controller" >&2\nexit 1\n')
    rc, out = slurm.sweep()
    assert rc == 1 and 'squeue failed (slurm_load_jobs error: Unable to contact slurm controller); nothing done' in out
