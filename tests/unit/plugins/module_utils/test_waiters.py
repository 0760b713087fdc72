# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The waiter's clock and backoff, on a fake clock (its API use is covered by the module tests)."""
from __future__ import annotations

import types

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _waiters
from tests.unit.plugins.module_utils.test_oci_base import FakeClock


class FakeSession(object):
    def __init__(self, states, work_requests=None):
        self.states = list(states)
        self.seen = []

    def get_or_none(self, fn, rid):
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        self.seen.append(state)
        return None if state is None else types.SimpleNamespace(id=rid, lifecycle_state=state)

    def call(self, fn, rid):
        return fn(rid)


def test_backoff_doubles_to_the_cap_and_returns_the_resource():
    clock = FakeClock()
    session = FakeSession(['PROVISIONING'] * 8 + ['RUNNING'])
    w = _waiters.Waiter(session, timeout=1000, cap=30, clock=clock)
    res = w.lifecycle(None, 'ocid1.instance.x', ['RUNNING'])
    assert res.lifecycle_state == 'RUNNING'
    assert clock.sleeps == [1, 2, 4, 8, 16, 30, 30, 30]
    assert w.last['state'] == 'RUNNING' and w.last['polls'] == 9


def test_timeout_names_the_last_state_and_never_sleeps_past_the_deadline():
    clock = FakeClock()
    w = _waiters.Waiter(FakeSession(['PROVISIONING']), timeout=50, clock=clock)
    with pytest.raises(_waiters.WaitTimeout) as err:
        w.lifecycle(None, 'ocid1.instance.x', ['RUNNING'])
    assert clock.t == 50 and 'state=PROVISIONING' in err.value.message
    assert err.value.details['state'] == 'PROVISIONING'


def test_failed_state_and_disappearance_fail_the_wait():
    w = _waiters.Waiter(FakeSession(['PROVISIONING', 'TERMINATED']), clock=FakeClock())
    with pytest.raises(_waiters.WaitFailed, match='went to TERMINATED'):
        w.lifecycle(None, 'i', ['RUNNING'], failed_states=('TERMINATED',))
    w = _waiters.Waiter(FakeSession([None]), clock=FakeClock())
    with pytest.raises(_waiters.WaitFailed, match='disappeared'):
        w.lifecycle(None, 'i', ['RUNNING'])


def test_gone_accepts_404_and_dead_states():
    assert _waiters.Waiter(FakeSession(['TERMINATING', None]), clock=FakeClock()).gone(None, 'i') is None
    assert _waiters.Waiter(FakeSession(['TERMINATING', 'TERMINATED']), clock=FakeClock()).gone(None, 'i').lifecycle_state == 'TERMINATED'


def test_work_request_failure_carries_errors_and_percent():
    clock = FakeClock()
    statuses = iter([('IN_PROGRESS', 10.0), ('IN_PROGRESS', 50.0), ('FAILED', 50.0)])

    class WR(object):
        def get_work_request(self, wr_id):
            status, pct = next(statuses)
            return types.SimpleNamespace(status=status, percent_complete=pct)

        def list_work_request_errors(self, wr_id):
            raise AssertionError('listed through the session')

    session = types.SimpleNamespace(
        work_requests=WR(), call=lambda fn, *a: fn(*a),
        list_all=lambda fn, *a: [types.SimpleNamespace(code='InternalError', message='Out of host capacity.')])
    w = _waiters.Waiter(session, clock=clock)
    with pytest.raises(_waiters.WaitFailed) as err:
        w.work_request('ocid1.wr.x')
    assert 'Out of host capacity.' in err.value.message
    assert err.value.details['percent_complete'] == 50.0 and err.value.details['work_request_status'] == 'FAILED'
    assert clock.sleeps == [1, 2]
