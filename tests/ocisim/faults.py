# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault injection and call counting.

A route is named '<METHOD> <template>', the template being the API path without the version
prefix, e.g. 'GET /instances/{instanceId}' or 'GET /vnicAttachments'.  Rules match a route by
fnmatch pattern ('GET /vnic*', '* /clusterNetworks*') and fire for the next N matching requests
(count=None: until cleared)."""

from __future__ import annotations

import collections
import fnmatch
import threading
import time

from .core import OciError

ERRORS = {
    429: ("TooManyRequests", "Too many requests for the tenancy."),
    500: ("InternalError", "Internal server error."),
    502: ("BadGateway", "Bad gateway."),
    503: ("ServiceUnavailable", "The service is currently unavailable."),
    504: ("GatewayTimeout", "Gateway timeout."),
}


class FaultRule:
    def __init__(self, route="*", status=None, latency=0.0, drop=False, count=None, code=None, message=None,
                 after=False):
        if status is None and not latency and not drop:
            raise ValueError("a fault needs status, latency or drop")
        self.after = bool(after)
        self.route = route
        self.status = int(status) if status is not None else None
        self.latency = float(latency or 0.0)
        self.drop = bool(drop)
        self.remaining = None if count is None else int(count)
        self.code = code
        self.message = message
        self.fired = 0

    def matches(self, route_key):
        return fnmatch.fnmatchcase(route_key, self.route)

    def as_dict(self):
        return {"route": self.route, "status": self.status, "latency": self.latency, "drop": self.drop,
                "after": self.after, "remaining": self.remaining, "fired": self.fired}

    def error(self):
        code, message = ERRORS.get(self.status, ("InternalError", "Injected fault."))
        return OciError(self.status, self.code or code, self.message or message)


class Faults:
    """Run-time fault switches, shared by the pytest API and the admin endpoint."""

    def __init__(self):
        self._lock = threading.Lock()
        self.rules = []
        self.rate_limits = {}       # tenancy ('*' = every tenancy) -> (per_second, burst)
        self._buckets = {}          # tenancy -> [tokens, last_refill]
        # Per operation, as OCI throttles: (route pattern, tenancy) -> (per_second, burst); each
        # operation matching the pattern has a bucket of its own, per tenancy.
        self.operation_limits = {}
        self._operation_buckets = {}  # (tenancy, route key) -> [tokens, last_refill]
        self.throttled = collections.Counter()  # route key -> 429s answered by the rate limits
        self.sleep = time.sleep

    def add(self, route="*", status=None, latency=0.0, drop=False, count=None, code=None, message=None,
            after=False):
        """A fault rule.  after=True applies it once the request has been processed (the change is
        made, the answer is lost or replaced), otherwise before anything happens."""
        rule = FaultRule(route, status, latency, drop, count, code, message, after)
        with self._lock:
            self.rules.append(rule)
        return rule

    # Convenience spellings for tests.
    def throttle(self, route="*", count=None):
        return self.add(route, status=429, count=count)

    def error(self, status, route="*", count=None, after=False):
        return self.add(route, status=status, count=count, after=after)

    def latency(self, seconds, route="*", count=None):
        return self.add(route, latency=seconds, count=count)

    def drop(self, route="*", count=None, after=False):
        return self.add(route, drop=True, count=count, after=after)

    def rate_limit(self, per_second, burst=None, tenancy="*", route=None):
        """Allow per_second requests per tenancy (token bucket of size burst); beyond that 429.

        With route (an fnmatch pattern, '*' for all): per operation instead, as OCI limits its API:
        each operation ('<METHOD> <template>') matching the pattern has a bucket of its own, per
        tenancy. per_second=None removes the limit (of that route pattern)."""
        with self._lock:
            if route is not None:
                if per_second is None:
                    self.operation_limits.pop((route, tenancy), None)
                else:
                    self.operation_limits[(route, tenancy)] = (float(per_second), float(burst or per_second))
                self._operation_buckets.clear()
            elif per_second is None:
                self.rate_limits.pop(tenancy, None)
            else:
                self.rate_limits[tenancy] = (float(per_second), float(burst or per_second))
            self._buckets.clear()

    def clear(self):
        with self._lock:
            self.rules = []
            self.rate_limits = {}
            self._buckets = {}
            self.operation_limits = {}
            self._operation_buckets = {}
            self.throttled = collections.Counter()

    def pick(self, route_key):
        """Return the rules firing for this request, consuming their counts."""
        fired = []
        with self._lock:
            for rule in list(self.rules):
                if rule.remaining == 0 or not rule.matches(route_key):
                    continue
                if rule.remaining is not None:
                    rule.remaining -= 1
                rule.fired += 1
                fired.append(rule)
            self.rules = [r for r in self.rules if r.remaining != 0]
        return fired

    def check_rate(self, tenancy, route_key=None):
        """Raise 429 when the tenancy's request rate, or that of the operation route_key, is above its
        limit (real time)."""
        with self._lock:
            now = time.monotonic()
            limit = self.rate_limits.get(tenancy) or self.rate_limits.get("*")
            buckets = [(self._buckets, tenancy, limit)] if limit else []
            if route_key is not None:
                for (pattern, owner), value in sorted(self.operation_limits.items()):
                    if owner in (tenancy, "*") and fnmatch.fnmatchcase(route_key, pattern):
                        buckets.append((self._operation_buckets, (tenancy, route_key), value))
                        break
            for store, key, (per_second, burst) in buckets:
                bucket = store.setdefault(key, [burst, now])
                bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * per_second)
                bucket[1] = now
                if bucket[0] < 1.0:
                    if route_key is not None:
                        self.throttled[route_key] += 1
                    raise OciError(429, "TooManyRequests", "Tenant has been throttled. Too Many Requests")
            for store, key, _limit in buckets:
                store[key][0] -= 1.0


class Calls:
    """Counter of requests received per route ('<METHOD> <template>'), faulted ones included."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = collections.Counter()
        self.log = collections.deque(maxlen=10000)

    def record(self, route_key, status=None):
        with self._lock:
            self._counts[route_key] += 1
            self.log.append((route_key, status))

    def __getitem__(self, route_key):
        with self._lock:
            return self._counts.get(route_key, 0)

    def count(self, pattern="*"):
        """Total calls over the routes matching an fnmatch pattern, e.g. 'GET /vnics/*'."""
        with self._lock:
            return sum(n for key, n in self._counts.items() if fnmatch.fnmatchcase(key, pattern))

    def as_dict(self):
        with self._lock:
            return dict(self._counts)

    def total(self):
        with self._lock:
            return sum(self._counts.values())

    def reset(self):
        with self._lock:
            self._counts.clear()
            self.log.clear()
