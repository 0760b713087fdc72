# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The service's shared listings (controller/ocigpu_control/cloud.py): one listing for all the threads that
need one, never an older one than a thread asked for, and waits that share them."""

from __future__ import annotations

import threading
import types

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitFailed, WaitTimeout
from ocigpu_control.cloud import Listings


class Session(object):
    """list_all over a list of cluster networks the test changes; each listing can be held by the test."""

    def __init__(self):
        self.networks = []
        self.created = []  # what GetClusterNetwork answers (a create a listing does not show yet)
        self.calls = 0
        self.hold = None  # a threading.Event the listing waits for
        self.listing = threading.Event()
        self.read = []  # the cluster networks read on their own (GetClusterNetwork)
        self.compute_management = types.SimpleNamespace(list_cluster_networks=self._list, get_cluster_network=self._read)

    def _read(self, ocid):
        self.read.append(ocid)
        return next((c for c in self.created if c.id == ocid), None)

    def get_or_none(self, fn, *args):
        return fn(*args)

    def _list(self, compartment_id, **kwargs):
        return list(self.networks)

    def list_all(self, fn, *args, **kwargs):
        self.calls += 1
        self.listing.set()
        if self.hold is not None:
            assert self.hold.wait(10)
        assert kwargs.get('limit') == 1000  # OCI's largest page
        return fn(*args, **kwargs)


def cn(ocid, state):
    return types.SimpleNamespace(id=ocid, lifecycle_state=state, freeform_tags={})


def test_threads_that_ask_while_one_lists_share_its_listing():
    session = Session()
    listings = Listings(session, 'ocid1.compartment.oc1..c')
    session.hold = threading.Event()
    mark = listings.mark()
    answers = []
    first = threading.Thread(target=lambda: answers.append(listings.get('cluster_networks', mark)))
    first.start()
    assert session.listing.wait(10)
    # 20 more threads ask for a listing started after the same mark while the first one runs.
    others = [threading.Thread(target=lambda: answers.append(listings.get('cluster_networks', mark))) for n in range(20)]
    for t in others:
        t.start()
    session.networks = [cn('a', 'RUNNING')]
    session.hold.set()
    for t in [first] + others:
        t.join(10)
    assert session.calls == 1 and len(answers) == 21
    assert listings.made == {'cluster_networks': 1}


def test_a_listing_started_before_the_mark_is_not_taken():
    session = Session()
    listings = Listings(session, 'ocid1.compartment.oc1..c')
    assert listings.get('cluster_networks') == []
    session.networks = [cn('a', 'PROVISIONING')]
    mark = listings.mark()  # e.g. a create answered now: an older listing cannot show it
    assert [c.id for c in listings.get('cluster_networks', mark)] == ['a'] and session.calls == 2
    # A later caller with the same mark takes the kept one.
    assert [c.id for c in listings.get('cluster_networks', mark)] == ['a'] and session.calls == 2


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(_oci.CLOCK, 'monotonic', lambda: now[0])
    monkeypatch.setattr(_oci.CLOCK, 'sleep', lambda s: now.__setitem__(0, now[0] + s))
    return now


def test_a_wait_looks_after_one_second_then_every_two_until_its_state(clock):
    session = Session()
    listings = Listings(session, 'ocid1.compartment.oc1..c')
    session.networks = [cn('a', 'PROVISIONING')]
    seen = []

    def running(found):
        seen.append(clock[0])
        if clock[0] >= 12:
            session.networks = [cn('a', 'RUNNING')]
        return found is not None and found.lifecycle_state == 'RUNNING'
    found = listings.wait_for('a', running, 'cluster network a', timeout=60)
    assert found.lifecycle_state == 'RUNNING'
    # Looks after 0 and 1 s, then every 2 s; the look after the change sees it.
    assert seen == [0.0, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0] and session.calls == len(seen)


def test_a_wait_fails_on_a_failed_state_and_times_out(clock):
    session = Session()
    listings = Listings(session, 'ocid1.compartment.oc1..c')
    session.networks = [cn('a', 'TERMINATED')]
    with pytest.raises(WaitFailed) as failed:
        listings.wait_for('a', lambda c: False, 'cluster network a', timeout=60, failed=('TERMINATED',))
    assert failed.value.details['state'] == 'TERMINATED'
    session.networks = []
    with pytest.raises(WaitFailed):  # not listed, and not found on its own
        listings.wait_for('a', lambda c: False, 'cluster network a', timeout=60, failed=('GONE',))
    assert session.read == ['a']
    # Not listed yet (a list may lag a create) but there: read on its own, and waited for.
    session.created = [cn('a', 'RUNNING')]
    assert listings.wait_for('a', lambda c: c is not None and c.lifecycle_state == 'RUNNING', 'cluster network a',
                             timeout=60, failed=('GONE',)).lifecycle_state == 'RUNNING'
    assert session.read == ['a', 'a']
    session.networks = [cn('a', 'PROVISIONING')]
    with pytest.raises(WaitTimeout):
        listings.wait_for('a', lambda c: False, 'cluster network a', timeout=30)
    assert clock[0] == pytest.approx(30.0)
