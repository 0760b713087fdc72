# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one waiter: lifecycle states and work requests.

Polls with a monotonic clock and capped exponential backoff (1 s doubling to 30 s, never past
the deadline). What it saw last (lifecycle state, work request status and percent complete)
is kept in `Waiter.last` for results and goes into WaitTimeout / WaitFailed for errors.
Time comes from _oci.CLOCK, so tests drive it with the simulator's clock and never sleep.
"""

from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci

DEAD_STATES = ('TERMINATING', 'TERMINATED', 'DELETING', 'DELETED')
WORK_REQUEST_DONE = ('SUCCEEDED', 'FAILED', 'CANCELED')


class WaitError(Exception):
    def __init__(self, message, **details):
        super(WaitError, self).__init__(message)
        self.message = message
        self.details = details


class WaitTimeout(WaitError):
    """The deadline passed; details hold the last state and percent seen."""


class WaitFailed(WaitError):
    """The resource reached a failure state or its work request FAILED/CANCELED."""


class Waiter(object):
    def __init__(self, session, timeout=1200, initial=1.0, cap=30.0, clock=None):
        self.session = session
        self.timeout = timeout
        self.initial = initial
        self.cap = cap
        self.clock = clock or _oci.CLOCK
        self.last = {}

    def poll(self, fetch, done, what, describe=None):
        """Call fetch() until done(result) is true; return that result.

        describe(result) -> dict of what to report (state, percent_complete, ...).
        """
        clock = self.clock
        start = clock.monotonic()
        deadline = start + self.timeout
        interval = self.initial
        polls = 0
        while True:
            result = fetch()
            polls += 1
            self.last = dict(describe(result) if describe else {}, polls=polls,
                             elapsed=round(clock.monotonic() - start, 1))
            if done(result):
                return result
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise WaitTimeout('timed out after %ss waiting for %s; last seen: %s' % (
                    self.timeout, what, _describe(self.last)), **self.last)
            clock.sleep(min(interval, remaining))
            interval = min(self.cap, interval * 2)

    def lifecycle(self, get_fn, resource_id, states, failed_states=(), what=None):
        """Wait until the resource's lifecycle_state is in states. Returns the resource model.

        A resource that disappears (404), or that reaches failed_states, fails the wait.
        """
        what = what or resource_id
        states = tuple(states)

        def fetch():
            res = self.session.get_or_none(get_fn, resource_id)
            if res is None:
                raise WaitFailed('%s disappeared while waiting for %s' % (what, '/'.join(states)),
                                 resource_id=resource_id, **self.last)
            if res.lifecycle_state in failed_states:
                raise WaitFailed('%s went to %s while waiting for %s' % (what, res.lifecycle_state, '/'.join(states)),
                                 resource_id=resource_id, state=res.lifecycle_state)
            return res
        return self.poll(fetch, lambda r: r.lifecycle_state in states, '%s to be %s' % (what, '/'.join(states)),
                         lambda r: {'resource_id': resource_id, 'state': r.lifecycle_state})

    def gone(self, get_fn, resource_id, what=None, states=('TERMINATED', 'DELETED')):
        """Wait until the resource is 404 or in a final dead state."""
        what = what or resource_id

        def fetch():
            return self.session.get_or_none(get_fn, resource_id)
        return self.poll(fetch, lambda r: r is None or r.lifecycle_state in states,
                         '%s to be deleted' % what,
                         lambda r: {'resource_id': resource_id, 'state': r.lifecycle_state if r else 'GONE'})

    def work_request(self, work_request_id, what=None, client=None):
        """Wait for a work request to end. Returns it on SUCCEEDED; raises WaitFailed otherwise."""
        client = client or self.session.work_requests
        what = what or 'work request %s' % work_request_id
        wr = self.poll(lambda: self.session.call(client.get_work_request, work_request_id),
                       lambda w: w.status in WORK_REQUEST_DONE, what,
                       lambda w: {'work_request_id': work_request_id, 'work_request_status': w.status,
                                  'percent_complete': w.percent_complete})
        if wr.status != 'SUCCEEDED':
            errors = self.work_request_errors(work_request_id, client)
            message = '; '.join(e.get('message') or e.get('code') or '' for e in errors) or wr.status
            raise WaitFailed('%s %s: %s' % (what, wr.status, message), work_request_id=work_request_id,
                             work_request_status=wr.status, percent_complete=wr.percent_complete,
                             errors=errors)
        return wr

    def work_request_errors(self, work_request_id, client=None):
        client = client or self.session.work_requests
        try:
            items = self.session.list_all(client.list_work_request_errors, work_request_id)
        except Exception:  # the failure itself is what matters; errors are extra detail
            return []
        return [{'code': e.code, 'message': e.message} for e in items]


def _describe(last):
    keys = ('state', 'work_request_status', 'percent_complete', 'resource_id', 'work_request_id')
    parts = ['%s=%s' % (k, last[k]) for k in keys if last.get(k) is not None]
    return ', '.join(parts) or 'nothing'
