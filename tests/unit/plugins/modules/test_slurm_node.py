# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node: the owner rule against a scontrol stand-in that keeps one node's state in a JSON file."""
from __future__ import annotations

import json
import os
import sys

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import slurm_node
from tests.unit.plugins.modules._helpers import run_module

SCONTROL = r'''#!%s
import json, sys
path = %r
s = json.load(open(path))
args = sys.argv[1:]
s['calls'].append(args)
if args[:2] == ['show', 'node']:
    if args[-1] != s['name']:
        print('Node %%s not found' %% args[-1], file=sys.stderr)
        sys.exit(1)
    reason = (' Reason=%%s [root@2026-11-23T10:00:00]' %% s['reason']) if s['reason'] else ''
    print('NodeName=%%s Arch=x86_64 NodeAddr=10.0.2.7 State=%%s Partitions=gpu%%s' %% (s['name'], s['state'], reason))
elif args[0] == 'update':
    fields = dict(a.split('=', 1) for a in args[1:])
    base = s['state'].split('+')[0]
    if fields['State'] == 'DRAIN':
        s['state'], s['reason'] = base + '+DRAIN', fields['Reason']
    else:
        s['state'], s['reason'] = base, ''
json.dump(s, open(path, 'w'))
'''
NCCL = 'ocigpu-nccl:'


class Slurm(object):
    def __init__(self, tmp, state='IDLE', reason=''):
        self.path = tmp / 'slurm.json'
        self.program = tmp / 'scontrol'
        self.program.write_text(SCONTROL % (sys.executable, str(self.path)))
        os.chmod(str(self.program), 0o755)
        self.path.write_text(json.dumps(dict(name='gpu-1', state=state, reason=reason, calls=[])))

    @property
    def now(self):
        return json.loads(self.path.read_text())

    def updates(self):
        return [c for c in self.now['calls'] if c[0] == 'update']


def call(slurm, capsys, check=False, **args):
    return run_module(slurm_node, dict(dict(name='gpu-1', scontrol=str(slurm.program)), **args), capsys, check=check)


def test_read_returns_state_reason_and_busy(tmp_path, capsys):
    slurm = Slurm(tmp_path, 'MIXED+DRAIN', 'bad DIMM, ticket 4711')
    out = call(slurm, capsys)
    assert out['changed'] is False and out['action'] is None and out['slurm'] is True
    assert out['node'] == dict(name='gpu-1', addr='10.0.2.7', state='MIXED+DRAIN', reason='bad DIMM, ticket 4711',
                               busy=True, drained=True)
    assert call(slurm, capsys, name='gpu-9')['node'] is None


def test_drain_then_drain_again_then_resume(tmp_path, capsys):
    slurm = Slurm(tmp_path)
    out = call(slurm, capsys, state='drained', owner=NCCL, reason='ocigpu-nccl: active NCCL check running')
    assert out['changed'] is True and out['action'] == 'drain' and out['node']['state'] == 'IDLE'
    assert slurm.now['state'] == 'IDLE+DRAIN' and slurm.now['reason'] == 'ocigpu-nccl: active NCCL check running'
    again = call(slurm, capsys, state='drained', owner=NCCL, reason='ocigpu-nccl: active NCCL check running')
    assert again['changed'] is False and len(slurm.updates()) == 1
    figures = 'ocigpu-nccl: all_reduce busbw 343.33 GB/s at 4 GiB is below the threshold 352.00 GB/s'
    assert call(slurm, capsys, state='drained', owner=NCCL, reason=figures)['changed'] is True
    assert slurm.now['reason'] == figures
    out = call(slurm, capsys, state='resumed', owner=NCCL)
    assert out['action'] == 'resume' and slurm.now == dict(slurm.now, state='IDLE', reason='')
    assert call(slurm, capsys, state='resumed', owner=NCCL)['changed'] is False and len(slurm.updates()) == 3


@pytest.mark.parametrize('reason', ['bad DIMM, ticket 4711', 'ocigpu-health: xid Xid 79'])
def test_someone_elses_drain_is_never_changed(tmp_path, capsys, reason):
    slurm = Slurm(tmp_path, 'IDLE+DRAIN', reason)
    out = call(slurm, capsys, state='drained', owner=NCCL, reason='ocigpu-nccl: active NCCL check running')
    assert out['changed'] is False and 'someone else' in out['msg']
    assert call(slurm, capsys, state='resumed', owner=NCCL)['changed'] is False
    assert slurm.updates() == [] and slurm.now['reason'] == reason


def test_check_mode_changes_nothing(tmp_path, capsys):
    slurm = Slurm(tmp_path)
    out = call(slurm, capsys, check=True, state='drained', owner=NCCL, reason='ocigpu-nccl: x')
    assert out['changed'] is True and out['action'] == 'drain' and 'check mode' in out['msg']
    assert slurm.updates() == [] and slurm.now['state'] == 'IDLE'


def test_without_slurm_nothing_is_done(tmp_path, capsys):
    out = run_module(slurm_node, dict(name='gpu-1', state='drained', owner=NCCL, reason='ocigpu-nccl: x',
                                      scontrol='ocigpu-no-such-scontrol'), capsys)
    assert out['changed'] is False and out['slurm'] is False and out['msg'].startswith('Slurm is not installed')


def test_bad_input_is_refused_before_any_call(tmp_path, capsys):
    slurm = Slurm(tmp_path)
    out = call(slurm, capsys, state='drained', owner=NCCL, reason='held for a test')
    assert out['failed'] and 'does not start with its owner' in out['msg']
    out = call(slurm, capsys, state='resumed', owner='  ')
    assert out['failed'] and out['msg'].startswith('owner: empty')
    out = call(slurm, capsys, state='drained', owner=NCCL)
    assert out['failed'] and 'reason' in out['msg']
    assert slurm.now['calls'] == []
