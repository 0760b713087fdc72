# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unsigned admin endpoint /_admin/... (process mode): faults, clock, seeding, counters, state.

  GET    /_admin/info                      endpoint, tenancy, compartment, region, config file
  GET    /_admin/calls                     {"GET /instances": 12, ...}
  POST   /_admin/calls/reset
  GET    /_admin/faults                    active rules and rate limits
  POST   /_admin/faults                    {"route": "GET /instances*", "status": 429, "count": 3}
                                           {"route": "*", "latency": 0.5} | {"route": "*", "drop": true, "count": 1}
  POST   /_admin/rate-limit                {"per_second": 10, "burst": 10, "tenancy": "*"}
  DELETE /_admin/faults                    clear every rule and rate limit
  GET    /_admin/clock                     {"now": epoch seconds, "manual": bool}
  POST   /_admin/clock/advance             {"seconds": 60}
  POST   /_admin/durations                 {"instance_launch": 5, ...}
  POST   /_admin/capacity                  {"shape": "BM.GPU.H100.8", "hosts": 4, "availability_domain": null}
  POST   /_admin/capacity_reservation      {"availability_domain": "...AD-1", "shape": "BM.GPU.H100.8", "count": 2,
                                            "compartment_id": null, "display_name": null, "fault_domain": null}
                                           -> the reservation (API view, ACTIVE at once; its hosts leave the AD's
                                           on-demand capacity; 500 InternalError "Out of host capacity." if too few)
  POST   /_admin/topology                  {"local_block_hosts": 2}
  POST   /_admin/limits                    {"limit": "gpu-bm-gpu-h100-8-count", "value": 32, "availability_domain": null}
  POST   /_admin/seed/instances            {"count": 100, "compartments": 5, "shape": "VM.Standard.E5.Flex"}
  POST   /_admin/seed/cluster              {"name": "c1", "size": 16, "shape": "BM.GPU.H100.8"}
  POST   /_admin/compartments              {"name": "x", "parent_id": null}
  POST   /_admin/reset                     fresh state (the API key stays the same)
  GET    /_admin/state/<kind>              stored resources of a kind (API view)
"""

from __future__ import annotations

import json

from .core import KINDS, OciError, public
from .web import Reply


def _body(raw):
    if not raw:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise OciError(400, "InvalidParameter", "admin body must be JSON") from None
    if not isinstance(data, dict):
        raise OciError(400, "InvalidParameter", "admin body must be a JSON object")
    return data


def info(sim):
    return {"endpoint": sim.endpoint, "region": sim.region, "tenancy_id": sim.tenancy_id,
            "user_id": sim.user_id, "compartment_id": sim.compartment_id, "config_file": sim.config_file,
            "profile": sim.profile, "availability_domains": list(sim.availability_domains),
            "clock": {"now": sim.clock.now(), "manual": sim.clock.manual}, "durations": sim.durations}


def handle(sim, method, path, _query, raw):
    body = _body(raw)
    route = (method, path.rstrip("/"))
    try:
        if route == ("GET", "/info"):
            return Reply(200, info(sim))
        if route == ("GET", "/calls"):
            return Reply(200, sim.calls.as_dict())
        if route == ("POST", "/calls/reset"):
            sim.calls.reset()
            return Reply(204)
        if route == ("GET", "/faults"):
            return Reply(200, {"rules": [r.as_dict() for r in sim.faults.rules],
                               "rate_limits": {k: list(v) for k, v in sim.faults.rate_limits.items()},
                               "operation_rate_limits": [dict(route=r, tenancy=t, per_second=v[0], burst=v[1])
                                                         for (r, t), v in sorted(sim.faults.operation_limits.items())],
                               "throttled": dict(sim.faults.throttled)})
        if route == ("POST", "/faults"):
            rule = sim.faults.add(route=body.get("route", "*"), status=body.get("status"),
                                  latency=body.get("latency", 0.0), drop=body.get("drop", False),
                                  count=body.get("count"), code=body.get("code"), message=body.get("message"),
                                  after=body.get("after", False))
            return Reply(200, rule.as_dict())
        if route == ("DELETE", "/faults"):
            sim.faults.clear()
            return Reply(204)
        if route == ("POST", "/rate-limit"):
            sim.faults.rate_limit(body.get("per_second"), body.get("burst"), body.get("tenancy", "*"), body.get("route"))
            return Reply(204)
        if route == ("GET", "/clock"):
            return Reply(200, {"now": sim.clock.now(), "manual": sim.clock.manual})
        if route == ("POST", "/clock/advance"):
            return Reply(200, {"now": sim.clock.advance(float(body.get("seconds", 0)))})
        if route == ("POST", "/durations"):
            sim.set_durations(**body)
            return Reply(200, sim.durations)
        if route == ("POST", "/capacity"):
            sim.capacity.set(body["shape"], body.get("hosts"), body.get("availability_domain"))
            return Reply(204)
        if route == ("POST", "/capacity_reservation"):
            return Reply(200, sim.create_capacity_reservation(
                body["availability_domain"], body["shape"], int(body["count"]), body.get("compartment_id"),
                body.get("display_name"), body.get("fault_domain")))
        if route == ("POST", "/topology"):
            sim.local_block_hosts = max(1, int(body["local_block_hosts"]))
            return Reply(204)
        if route == ("POST", "/limits"):
            sim.set_limit(body["limit"], body.get("value"), body.get("availability_domain"))
            return Reply(204)
        if route == ("POST", "/seed/instances"):
            count = int(body.pop("count"))
            compartments = body.pop("compartments", 1)
            return Reply(200, {"instance_ids": sim.seed_instances(count, compartments, **body)})
        if route == ("POST", "/seed/cluster"):
            name = body.pop("name")
            size = int(body.pop("size"))
            return Reply(200, sim.seed_cluster(name, size, **body))
        if route == ("POST", "/compartments"):
            comp = sim.add_compartment(body["name"], body.get("parent_id"), accessible=body.get("accessible", True))
            return Reply(200, public(comp))
        if route == ("POST", "/reset"):
            sim.reset()
            return Reply(204)
        if method == "GET" and path.startswith("/state/"):
            kind = path[len("/state/"):].strip("/")
            if kind not in KINDS:
                raise OciError(404, "NotFound", "unknown kind {0}; one of {1}".format(kind, ", ".join(KINDS)))
            with sim.store.lock:
                return Reply(200, [public(r) for r in getattr(sim.state, kind).values()])
    except (KeyError, TypeError, ValueError) as err:
        raise OciError(400, "InvalidParameter", "bad admin request: {0}".format(err)) from None
    raise OciError(404, "NotFound", "unknown admin route {0} {1}".format(method, path))
