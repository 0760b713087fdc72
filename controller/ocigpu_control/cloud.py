# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the service reads of OCI, shared by all its threads, so that its calls grow with the nodes and
not with the nodes times the jobs.

The service carries out each job's resume in a thread of its own (one cluster network per job). Each
needs the same few compartment-wide facts: which cluster networks exist and in what state, which
instances carry which tags, which VNIC and address each instance has, which host each sits on. Read
by every thread for itself, a burst of 300 jobs over 1,000 nodes made 300 listings of 1,000 instances
each (most of OCI's 429s, and 1.6 GiB of answers held at once). Here each listing is made once for all
the threads that need it:

- ``Listings.get(kind, after)`` answers the last listing of that kind when it was started after the
  mark ``after`` (``mark()``, taken when a thread must see what OCI shows from then on: a cluster
  network RUNNING, a create answered); otherwise it starts one, and every thread that asks while it
  runs waits for that one instead of starting its own. At most one listing of each kind runs at a time,
  and one kept is replaced by the next, so memory holds one answer per kind.
- ``Listings.wait_for(cluster_network_id, ...)``: the waits of all the threads on their cluster
  networks (RUNNING after a create, TERMINATED after a termination) share the listings of the
  compartment's cluster networks (each wait looks after 1 s, then every 2 s, and takes any listing
  newer than its last look, so a wait made no call when another made one meanwhile), in place of one
  GetWorkRequest and one GetClusterNetwork poller per thread: about one listing every second or two
  however many wait, and a cluster network seen RUNNING within 2 s.
- ``SharedOps``: the ClusterOps (module_utils/_cluster.py) of the autoscaler, whose create and
  termination wait through ``wait_for``; the work request is read only when a cluster network failed,
  for OCI's reason (``Out of host capacity.``).

Listings ask for OCI's largest page (1,000 items). Kinds: ``cluster_networks``, ``instances``,
``vnic_attachments`` (of the compartment), ``('private_ips', subnet id)`` and ``compute_hosts`` (the
compartment's, and the tenancy's root compartment's where OCI files them).
"""

from __future__ import annotations

import threading

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import ClusterOps
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitFailed, WaitTimeout

PAGE = 1000  # OCI's largest page for these lists
DEAD = ('TERMINATING', 'TERMINATED')
REFUSED = (401, 403, 404)  # a policy that does not allow a listing (NotAuthorizedOrNotFound)


class Listings(object):
    """Compartment-wide listings, one at a time of each kind, shared by the threads that need them."""

    def __init__(self, session, compartment_id, poll_seconds=(1.0, 2.0)):
        self.session = session
        self.compartment_id = compartment_id
        self.poll_seconds = poll_seconds  # a wait looks after 1 s, then every 2 s
        self.made = {}  # kind -> listings made, for the benchmark and tests
        self._lock = threading.Lock()
        self._serial = 0  # listings started, of every kind
        self._kept = {}  # kind -> (serial, items)
        self._running = {}  # kind -> (serial, threading.Event)

    @staticmethod
    def now():
        return _oci.CLOCK.monotonic()

    def mark(self):
        """A mark for get(): the listings started from now on are after it."""
        with self._lock:
            return self._serial

    def get(self, kind, after=None):
        """The items of the last listing of `kind` started after the mark `after` (now when None)."""
        return self._get(kind, self.mark() if after is None else after)[1]

    def _get(self, kind, after):
        """(serial, items) of a listing of `kind` started after the mark `after`."""
        while True:
            with self._lock:
                kept = self._kept.get(kind)
                if kept is not None and kept[0] > after:
                    return kept
                running = self._running.get(kind)
                if running is None:
                    self._serial += 1
                    serial, done = self._serial, threading.Event()
                    self._running[kind] = (serial, done)
            if running is not None:
                # Someone lists already: wait for theirs, then look again (it may have started too early).
                running[1].wait()
                continue
            try:
                items = self._list(kind)
                with self._lock:
                    # One listing of a kind runs at a time: this one is the newest.
                    self._kept[kind] = (serial, items)
                    self.made[str(kind)] = self.made.get(str(kind), 0) + 1
                return serial, items
            finally:
                with self._lock:
                    self._running.pop(kind, None)
                done.set()

    def _list(self, kind):
        s = self.session
        if kind == 'cluster_networks':
            return s.list_all(s.compute_management.list_cluster_networks, self.compartment_id, limit=PAGE)
        if kind == 'instances':
            return dict((i.id, i) for i in s.list_all(s.compute.list_instances, self.compartment_id, limit=PAGE))
        if kind == 'vnic_attachments':
            found = {}
            for att in s.list_all(s.compute.list_vnic_attachments, self.compartment_id, limit=PAGE):
                if att.lifecycle_state == 'ATTACHED':
                    found.setdefault(att.instance_id, []).append(att)
            return found
        if isinstance(kind, tuple) and kind[0] == 'private_ips':
            return dict((p.vnic_id, p) for p in s.list_all(s.network.list_private_ips, subnet_id=kind[1], limit=PAGE)
                        if p.is_primary)
        if kind == 'compute_hosts':
            # Beside the instances first; OCI's reference files hosts in the root compartment as well.
            hosts = list(s.list_all(s.compute.list_compute_hosts, self.compartment_id, limit=PAGE))
            tenancy = s.config.get('tenancy')
            if tenancy and tenancy != self.compartment_id:
                hosts += s.list_all(s.compute.list_compute_hosts, tenancy, limit=PAGE)
            return hosts
        raise ValueError('no listing of %r' % (kind,))

    def private_ip(self, attachment, after=None):
        """The primary private IP of an attachment's VNIC from the listing of its subnet; None when that
        listing does not show it, or when the policy does not let the controller list private IPs (the
        caller then reads the VNIC on its own, as it did before these listings)."""
        try:
            return self.get(('private_ips', attachment.subnet_id), after).get(attachment.vnic_id)
        except _oci.ServiceError as exc:
            if exc.status not in REFUSED:
                raise
            return None

    def wait_for(self, cluster_network_id, done, what, timeout, failed=(), after=None):
        """Look at the cluster network in a shared listing (started after the mark `after`, then each newer
        than the last one seen) every poll_seconds until done(cn) (cn None when it is not listed); WaitFailed
        when its state is in `failed` ('GONE': not listed), WaitTimeout after `timeout`."""
        start = self.now()
        seen = self.mark() if after is None else after
        pause, cap = self.poll_seconds
        while True:
            seen, items = self._get('cluster_networks', seen)
            cn = next((c for c in items if c.id == cluster_network_id), None)
            if cn is None and 'GONE' in failed:
                # Not listed (yet: a list may lag a create): read on its own, the one call that tells.
                cn = self.session.get_or_none(self.session.compute_management.get_cluster_network, cluster_network_id)
            state = cn.lifecycle_state if cn is not None else 'GONE'
            if done(cn):
                return cn
            if state in failed:
                raise WaitFailed('%s went to %s' % (what, state), resource_id=cluster_network_id, state=state)
            if self.now() - start >= timeout:
                raise WaitTimeout('timed out after %ss waiting for %s; last seen: state=%s' % (timeout, what, state),
                                  resource_id=cluster_network_id, state=state)
            _oci.CLOCK.sleep(min(pause, max(0.0, timeout - (self.now() - start))))
            pause = min(cap, pause * 2)


class SharedOps(ClusterOps):
    """ClusterOps whose create and terminate wait on the shared listing of cluster networks."""

    def __init__(self, listings, timeout, **kwargs):
        super(SharedOps, self).__init__(**kwargs)
        self.listings = listings
        self.timeout = timeout

    def _wait_created(self, response, res):
        """RUNNING, or WaitFailed with the failed work request's errors (OCI's reason) in its details."""
        self.work_request_id = response.headers.get('opc-work-request-id') or self.work_request_id
        what = 'cluster network %s' % res.id
        try:
            return self.listings.wait_for(res.id, lambda cn: cn is not None and cn.lifecycle_state == 'RUNNING',
                                          what + ' to be RUNNING', self.timeout, failed=DEAD + ('GONE',),
                                          after=self.listings.mark())  # the listings started once it exists
        except WaitFailed:
            if self.work_request_id:
                # Ended: its work request says why (one read; raises WaitFailed with OCI's errors).
                self.waiter.work_request(self.work_request_id, what='create of %s (work request %s)' % (
                    what, self.work_request_id))
            raise

    def wait_gone(self, cluster_network_id):
        self.listings.wait_for(cluster_network_id, lambda cn: cn is None or cn.lifecycle_state == 'TERMINATED',
                               'cluster network %s to be terminated' % cluster_network_id, self.timeout)
