# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_oci.ThrottledRetrier on a fake clock: a 429 waits out a pause kept per operation and uses up no attempt."""
from __future__ import annotations

import threading

import pytest
from oci.exceptions import ServiceError

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from tests.unit.plugins.module_utils.test_oci_base import FakeClock, err, flaky


class GatedClock(FakeClock):
    """A fake clock whose sleep blocks until the test opens the gate, so a pause can be seen in progress."""

    def __init__(self):
        super().__init__()
        self.asleep = threading.Event()
        self.gate = threading.Event()

    def sleep(self, s):
        self.asleep.set()
        assert self.gate.wait(10), 'the gate was never opened'
        super().sleep(s)


def named(name, fn):
    fn.__name__ = name
    return fn


def throttled(clock, attempts=8, max_seconds=600, **kwargs):
    return _oci.ThrottledRetrier(_oci.Retrier(attempts=attempts, max_seconds=max_seconds, clock=clock), **kwargs)


def in_thread(fn, results):
    thread = threading.Thread(target=lambda: results.append(fn()), daemon=True)
    thread.start()
    return thread


def test_a_session_rides_out_twelve_429s_with_its_eight_attempts(monkeypatch):
    """Before, the 8th 429 in a row ended the call; now a throttled answer uses up no attempt."""
    clock = FakeClock()
    monkeypatch.setattr(_oci, 'CLOCK', clock)
    session = _oci.OCISession({})
    fn = named('get_work_request', flaky([err(429, 'TooManyRequests')] * 12, result='done'))
    assert session.call(fn, 'wr1') == 'done'
    assert len(fn.calls) == 13
    assert session.retrier.retries == 12 and session.retrier.throttled == 12
    assert 12 <= clock.t <= 600


def test_a_given_retrier_is_the_sessions_and_each_session_has_one_otherwise():
    retrier = _oci.throttled_retrier({'config_profile': 'A', 'region': 'r1'})
    assert _oci.OCISession({'config_profile': 'A'}, retrier=retrier).retrier is retrier
    own = _oci.OCISession({'api_retries': 3, 'api_retry_max_seconds': 50}).retrier
    assert isinstance(own, _oci.ThrottledRetrier) and own.per_operation
    assert (own.retrier.attempts, own.retrier.max_seconds) == (3, 50)


def test_throttling_of_one_operation_does_not_delay_another():
    clock = GatedClock()
    retrier = throttled(clock)
    listed, polled = [], []
    listing = in_thread(lambda: retrier.call(named('list_instances', flaky([err(429)])), 'c1').data, listed)
    assert clock.asleep.wait(10)  # list_instances is in its pause
    polling = in_thread(lambda: retrier.call(named('get_work_request', flaky([])), 'wr1').data, polled)
    polling.join(5)
    try:
        assert polled == ['ok'] and clock.sleeps == [] and listed == []
    finally:
        clock.gate.set()
    listing.join(10)
    assert listed == ['ok'] and len(clock.sleeps) == 1 and retrier.throttled == 1


def test_threads_of_one_operation_share_one_pause_that_grows_once_per_round(monkeypatch):
    """8 threads, two rounds of 8 throttled answers: two pauses slept (3 s, then 9 s at the top of the
    jitter), not one per thread and not grown 8 times per round."""
    monkeypatch.setattr(_oci.random, 'uniform', lambda low, high: high)
    clock = FakeClock()
    retrier = throttled(clock)
    threads, lock, barrier, sent = 8, threading.Lock(), threading.Barrier(8), []

    def list_instances():
        with lock:
            sent.append(clock.t)
            n = len(sent)
        if n <= 2 * threads:
            barrier.wait(10)  # every thread's request of a round is out before any answer comes
            raise err(429, 'TooManyRequests')
        return 'listed'

    results = []
    workers = [in_thread(lambda: retrier.call(list_instances), results) for i in range(threads)]
    for worker in workers:
        worker.join(10)
    assert results == ['listed'] * threads
    assert clock.sleeps == [3.0, 9.0] and retrier.throttled == 16 and retrier.retries == 16
    assert sent == [0.0] * 8 + [3.0] * 8 + [12.0] * 8


def test_pauses_are_jittered():
    clock = FakeClock()
    retrier = throttled(clock)
    retrier.call(named('list_instances', flaky([err(429)] * 12)))
    assert len(clock.sleeps) == 12 and len(set(clock.sleeps)) > 1
    assert all(1.0 - 1e-9 <= s <= 30.0 + 1e-9 for s in clock.sleeps)  # a sleep is the pause's end less the time


def test_a_429_past_the_time_budget_is_raised():
    clock = FakeClock()
    fn = named('list_instances', flaky([err(429, 'TooManyRequests')] * 1000))
    with pytest.raises(ServiceError) as raised:
        throttled(clock).call(fn)  # 600 s, at most 30 s a pause: more than 8 attempts
    assert raised.value.status == 429 and len(fn.calls) > 8 and clock.t <= 600


def test_other_retryable_errors_still_use_up_the_attempts():
    clock = FakeClock()
    retrier = throttled(clock)
    fn = named('get_work_request', flaky([err(503, 'ServiceUnavailable')] * 100))
    with pytest.raises(ServiceError) as raised:
        retrier.call(fn)
    assert raised.value.status == 503 and len(fn.calls) == 8
    assert retrier.retries == 7 and retrier.throttled == 0


def test_without_per_operation_one_pause_holds_every_call():
    """The inventory's discovery keeps one pause for all its calls."""
    clock = GatedClock()
    retrier = throttled(clock, per_operation=False)
    listed, polled = [], []
    listing = in_thread(lambda: retrier.call(named('list_instances', flaky([err(429)]))).data, listed)
    assert clock.asleep.wait(10)
    polling = in_thread(lambda: retrier.call(named('get_work_request', flaky([]))).data, polled)
    polling.join(0.5)
    assert polled == []  # waits behind the pause
    clock.gate.set()
    listing.join(10)
    polling.join(10)
    assert listed == ['ok'] and polled == ['ok'] and len(clock.sleeps) == 1
