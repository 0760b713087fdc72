# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared plumbing of the simulator: clock, errors, OCIDs, the store, pagination."""

from __future__ import annotations

import datetime
import heapq
import ipaddress
import itertools
import random
import threading
import time

API_VERSION = "/20160918"

# Lifecycle durations in simulated seconds.  Tests change them with Simulator.set_durations().
DEFAULT_DURATIONS = {
    "network": 0.0,              # VCN, subnet, gateways, route tables, security lists: PROVISIONING -> AVAILABLE
    "instance_launch": 60.0,     # instance PROVISIONING -> RUNNING
    "instance_stop": 20.0,       # STOPPING -> STOPPED
    "instance_start": 20.0,      # STARTING -> RUNNING
    "instance_terminate": 30.0,  # TERMINATING -> TERMINATED
    "cluster_network_create": 120.0,
    "cluster_network_scale": 90.0,
    "cluster_network_terminate": 60.0,
    "instance_pool_create": 60.0,
    "image_create": 120.0,       # a custom image PROVISIONING -> AVAILABLE (images.py), and its hooks finished
    "capacity_reservation": 10.0,  # a compute capacity reservation CREATING/UPDATING -> ACTIVE, DELETING -> DELETED
    "retry_token_ttl": 24 * 3600.0,
}


class OciError(Exception):
    """An error answered to the client as an OCI error body."""

    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def not_found(what="resource"):
    return OciError(404, "NotAuthorizedOrNotFound",
                    "Authorization failed or requested resource not found ({0}).".format(what))


def invalid(message):
    return OciError(400, "InvalidParameter", message)


def missing(name):
    return OciError(400, "MissingParameter", "Missing required parameter '{0}'.".format(name))


def conflict(message, code="Conflict"):
    return OciError(409, code, message)


class Clock:
    """Simulated time.

    manual=True: time stands still until advance() is called (pytest).  manual=False: real time
    plus whatever advance() added (process mode).  Listeners run after every advance()."""

    def __init__(self, manual=True, start=None):
        self.manual = manual
        self._lock = threading.Lock()
        self._base = start if start is not None else time.time()
        self._offset = 0.0
        self._real_start = time.monotonic()
        self._listeners = []

    def now(self):
        with self._lock:
            if self.manual:
                return self._base + self._offset
            return self._base + (time.monotonic() - self._real_start) + self._offset

    def advance(self, seconds):
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += float(seconds)
        for listener in list(self._listeners):
            listener()
        return self.now()

    def sleep(self, seconds):
        """Drop-in for time.sleep in code under test: advances the simulated clock instead."""
        self.advance(seconds)

    def add_listener(self, func):
        self._listeners.append(func)

    def reset(self, start=None):
        with self._lock:
            self._base = start if start is not None else time.time()
            self._offset = 0.0
            self._real_start = time.monotonic()


def rfc3339(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
        "{0:03d}Z".format(int((ts % 1) * 1000))


_OCID_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


class OcidFactory:
    """OCIDs in the real shape: ocid1.<type>.oc1.<region>.<unique> (regional) or ocid1.<type>.oc1..<unique>."""

    REALM_LEVEL = frozenset(("tenancy", "compartment", "user", "availabilitydomain", "group", "policy"))

    def __init__(self, region, seed=None):
        self.region = region
        self._rand = random.Random(seed)
        self._lock = threading.Lock()

    def unique(self):
        with self._lock:
            bits = self._rand.getrandbits(260)
        chars = []
        for _index in range(52):
            chars.append(_OCID_ALPHABET[bits & 31])
            bits >>= 5
        return "aaaaaaaa" + "".join(chars)

    def new(self, kind):
        if kind in self.REALM_LEVEL:
            return "ocid1.{0}.oc1..{1}".format(kind, self.unique())
        return "ocid1.{0}.oc1.{1}.{2}".format(kind, self.region, self.unique())


def ocid_kind(ocid):
    parts = ocid.split(".") if isinstance(ocid, str) else []
    if len(parts) < 5 or parts[0] != "ocid1":
        return None
    return parts[1]


# Resource collections kept by the store.  Each holds id -> dict with the API's camelCase fields,
# plus private keys starting with "_" (never serialised).
KINDS = (
    "tenancies", "users", "compartments",
    "vcns", "subnets", "internet_gateways", "nat_gateways", "service_gateways", "route_tables",
    "security_lists", "dhcp_options",
    "images", "instances", "vnic_attachments", "vnics", "private_ips",
    "instance_configurations", "instance_pools", "cluster_networks", "compute_clusters",
    "compute_capacity_reservations",
    "file_systems", "mount_targets", "export_sets", "exports",
    "work_requests",
)


class Store:
    """All simulated state.  One re-entrant lock guards it; handlers run under it."""

    def __init__(self, clock, ocids):
        self.lock = threading.RLock()
        self.clock = clock
        self.ocids = ocids
        for kind in KINDS:
            setattr(self, kind, {})
        self.retry_tokens = {}
        self._events = []
        self._seq = itertools.count()
        self._last_stamp = 0.0
        # Public IPs are drawn from this network (a documentation range by default, so nothing is
        # ever reachable there; a rehearsal may name one of the machine's own test networks).
        self.public_ip_network = ipaddress.ip_network("203.0.113.0/24")

    def now(self):
        return self.clock.now()

    def stamp(self):
        """A creation time: the clock, but strictly after the previous creation (by 1 ms), as two
        resources created one after the other never share a timestamp in OCI."""
        with self.lock:
            self._last_stamp = max(self.now(), self._last_stamp + 0.001)
            return rfc3339(self._last_stamp)

    def schedule(self, delay, func):
        """Run func() once the simulated clock reaches now + delay (immediately if delay <= 0)."""
        with self.lock:
            due = self.now() + max(0.0, float(delay))
            heapq.heappush(self._events, (due, next(self._seq), func))
        self.tick()

    def tick(self):
        """Apply every lifecycle transition that is due at the current simulated time."""
        with self.lock:
            now = self.now()
            while self._events and self._events[0][0] <= now:
                _due, _seq, func = heapq.heappop(self._events)
                func()

    def pending_events(self):
        with self.lock:
            return len(self._events)

    def next_event_in(self):
        with self.lock:
            if not self._events:
                return None
            return max(0.0, self._events[0][0] - self.now())

    def tenancy_of(self, compartment_id):
        comp = self.compartments.get(compartment_id)
        if comp is None:
            return None
        return comp["_tenancy"]


def public(resource):
    """The API view of a stored resource: private '_' keys dropped (one level deep is enough:
    nested values are built without private keys)."""
    return {k: v for k, v in resource.items() if not k.startswith("_")}


def paginate(items, query, default_limit=100, max_limit=1000):
    """Return (page_items, next_page_token).  The token is an opaque offset."""
    limit = query.get("limit")
    try:
        limit = int(limit) if limit not in (None, "") else default_limit
    except ValueError:
        raise invalid("limit must be an integer") from None
    if limit < 1:
        raise invalid("limit must be at least 1")
    limit = min(limit, max_limit)
    page = query.get("page")
    start = 0
    if page:
        try:
            start = int(page.rsplit("-", 1)[-1], 16)
        except ValueError:
            raise invalid("Invalid page token") from None
    chunk = items[start:start + limit]
    nxt = None
    if start + limit < len(items):
        nxt = "pg-{0:x}".format(start + limit)
    return chunk, nxt
