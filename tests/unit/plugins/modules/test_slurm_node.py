# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node: the owner rule against a scontrol stand-in that keeps one node's state in a JSON file."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import slurm_node
from tests.unit.plugins.modules._helpers import run_module

SCONTROL = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'standins', 'scontrol')
NCCL = 'ocigpu-nccl:'


class Slurm(object):
    """One node, gpu-1, in the scontrol stand-in's state file."""

    def __init__(self, tmp, state='IDLE', reason=''):
        self.path = tmp / 'slurm.json'
        self.program = SCONTROL
        self.path.write_text(json.dumps(dict(nodes={'gpu-1': dict(state=state, reason=reason, addr='10.0.2.7')},
                                             calls=[])))

    @property
    def now(self):
        s = json.loads(self.path.read_text())
        return dict(s['nodes']['gpu-1'], calls=s['calls'])

    def updates(self):
        return [c for c in self.now['calls'] if c[0] == 'update']


@pytest.fixture(autouse=True)
def state_file(tmp_path, monkeypatch):
    monkeypatch.setenv('OCIGPU_SCONTROL_STATE', str(tmp_path / 'slurm.json'))


def call(slurm, capsys, check=False, **args):
    return run_module(slurm_node, dict(dict(name='gpu-1', scontrol=str(slurm.program)), **args), capsys, check=check)


def test_read_returns_state_reason_and_busy(tmp_path, capsys):
    slurm = Slurm(tmp_path, 'MIXED+DRAIN', 'bad DIMM, ticket 4711')
    out = call(slurm, capsys)
    assert out['changed'] is False and out['action'] is None and out['slurm'] is True
    assert out['node'] == dict(name='gpu-1', addr='10.0.2.7', state='MIXED+DRAIN', reason='bad DIMM, ticket 4711',
                               gres='', partitions='gpu', busy=True, drained=True)
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
    assert out['action'] == 'resume' and (slurm.now['state'], slurm.now['reason']) == ('IDLE', '')
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
