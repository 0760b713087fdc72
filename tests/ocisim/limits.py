# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Limits (LimitsClient, API version /20190729): GetResourceAvailability of the compute service's
per-availability-domain limits, the names a shape lists in its `quotaNames`, and of File Storage's
(service `filesystem`): `file-system-count` and `mount-target-count`, counted from the live file
systems and mount targets of the availability domain.

What a limit counts follows its name, as OCI's compute limits do: `*core-count` OCPUs,
`*memory-count` GB of memory, `gpu*` GPUs, anything else instances.  `used` is what the live
(not TERMINATED) instances of the tenancy in that availability domain take of it; `available` is
the limit's value less that, never below 0.  Tests set values with Simulator.set_limit() or
POST /_admin/limits; by default a GPU shape's limit admits as many nodes as the default host
capacity (catalog.DEFAULT_CAPACITY), so limits and capacity agree until a test says otherwise."""

from __future__ import annotations

import threading

from . import compute
from .catalog import DEFAULT_CAPACITY, SHAPES
from .core import OciError, invalid, not_found
from .resources import compartment
from .web import Reply

VERSION = "/20190729"
SERVICE = "compute"
# File Storage's limits per availability domain. Two mount targets is OCI's default (its File Storage
# troubleshooting page); the file system count is a stand-in.
FILESYSTEM = "filesystem"
FILESYSTEM_LIMITS = {"file-system-count": ("file_systems", 100), "mount-target-count": ("mount_targets", 2)}
DEFAULT_CORES = 1000
DEFAULT_MEMORY_GB = 16000


def unit(limit_name):
    """What one limit counts: 'ocpus', 'memory_gb', 'gpus' or 'instances'."""
    if limit_name.endswith("core-count"):
        return "ocpus"
    if limit_name.endswith("memory-count"):
        return "memory_gb"
    if limit_name.startswith("gpu"):
        return "gpus"
    return "instances"


def _defaults():
    values = {}
    for shape in SHAPES:
        for name in shape.get("quotaNames") or []:
            kind = unit(name)
            if kind == "gpus":
                value = DEFAULT_CAPACITY.get(shape["shape"], 64) * shape["gpus"]
            elif kind == "ocpus":
                value = DEFAULT_CORES
            elif kind == "memory_gb":
                value = DEFAULT_MEMORY_GB
            else:
                value = DEFAULT_CAPACITY.get(shape["shape"], 64)
            values[name] = max(values.get(name, 0), value)
    values.update((name, default) for name, (_kind, default) in FILESYSTEM_LIMITS.items())
    return values


class Limits:
    """Values of the compute limits per (limit name, availability domain)."""

    def __init__(self, sim):
        self._sim = sim
        self._lock = threading.Lock()
        self.values = {}

    def reset(self):
        with self._lock:
            self.values = {}
            for name, value in _defaults().items():
                for ad in self._sim.availability_domains:
                    self.values[(name, ad)] = value

    def set(self, limit_name, value, availability_domain=None):
        """Set a limit in one AD (or in every AD); value=None makes the limit unknown (404)."""
        ads = [availability_domain] if availability_domain else list(self._sim.availability_domains)
        with self._lock:
            for ad in ads:
                if value is None:
                    self.values.pop((limit_name, ad), None)
                else:
                    self.values[(limit_name, ad)] = int(value)

    def value(self, limit_name, availability_domain):
        with self._lock:
            return self.values.get((limit_name, availability_domain))

    def known(self, limit_name):
        with self._lock:
            return any(name == limit_name for name, _ad in self.values)

    def used(self, tenancy, limit_name, availability_domain, compartment_id=None):
        """Units of the limit taken by live instances of the tenancy (of one compartment if given)."""
        kind = unit(limit_name)
        store = self._sim.store
        total = 0.0
        if limit_name in FILESYSTEM_LIMITS:
            with store.lock:
                return float(sum(1 for r in getattr(store, FILESYSTEM_LIMITS[limit_name][0]).values()
                                 if r["_tenancy"] == tenancy and r["availabilityDomain"] == availability_domain
                                 and r["lifecycleState"] not in ("DELETING", "DELETED")
                                 and (not compartment_id or r["compartmentId"] == compartment_id)))
        with store.lock:
            # A capacity reservation takes its hosts' units whether instances use them or not (OCI counts
            # reserved capacity against the limits); an instance launched into one is not counted again.
            holding = set()
            for res in store.compute_capacity_reservations.values():
                if res["lifecycleState"] not in compute.RESERVATION_HOLDS:
                    continue
                holding.add(res["id"])
                if res["_tenancy"] != tenancy or res["availabilityDomain"] != availability_domain \
                        or (compartment_id and res["compartmentId"] != compartment_id):
                    continue
                for conf in res["instanceReservationConfigs"]:
                    shape = next((s for s in SHAPES if s["shape"] == conf["instanceShape"]), None)
                    if shape is None or limit_name not in (shape.get("quotaNames") or []):
                        continue
                    config = conf.get("instanceShapeConfig") or {}
                    hosts = compute.reservation_held(store, dict(res, instanceReservationConfigs=[conf]),
                                                     conf["instanceShape"])
                    total += hosts * {"ocpus": config.get("ocpus") or shape["ocpus"],
                                      "memory_gb": config.get("memoryInGBs") or shape["memoryInGBs"],
                                      "gpus": shape["gpus"], "instances": 1}[kind]
            for inst in store.instances.values():
                if inst["_tenancy"] != tenancy or inst["availabilityDomain"] != availability_domain \
                        or inst["lifecycleState"] == "TERMINATED" or inst.get("capacityReservationId") in holding:
                    continue
                if compartment_id and inst["compartmentId"] != compartment_id:
                    continue
                shape = next((s for s in SHAPES if s["shape"] == inst["shape"]), None)
                if shape is None or limit_name not in (shape.get("quotaNames") or []):
                    continue
                config = inst.get("shapeConfig") or {}
                total += {"ocpus": config.get("ocpus") or shape["ocpus"],
                          "memory_gb": config.get("memoryInGBs") or shape["memoryInGBs"],
                          "gpus": shape["gpus"], "instances": 1}[kind]
        return total


def get_resource_availability(ctx):
    limits = ctx.sim.limits
    name = ctx.params["limitName"]
    service = ctx.params["serviceName"]
    if service not in (SERVICE, FILESYSTEM) or (service == FILESYSTEM) != (name in FILESYSTEM_LIMITS):
        raise not_found("limit {0} of service {1}".format(name, service))
    comp = compartment(ctx, ctx.query.get("compartmentId"))
    ad = ctx.query.get("availabilityDomain")
    if not limits.known(name):
        raise not_found("limit {0}".format(name))
    if not ad:
        raise invalid("availabilityDomain is required for the AD-scoped limit {0}.".format(name))
    if ad not in ctx.sim.availability_domains:
        raise invalid("Invalid availabilityDomain: {0}".format(ad))
    value = limits.value(name, ad)
    if value is None:
        raise OciError(404, "NotAuthorizedOrNotFound", "The limit {0} has no value in {1}.".format(name, ad))
    used_tenancy = limits.used(ctx.tenancy, name, ad)
    used_here = used_tenancy if comp.get("_root") else limits.used(ctx.tenancy, name, ad, comp["id"])
    available = max(0.0, value - used_tenancy)
    return Reply(200, {"used": int(used_here), "available": int(available), "fractionalUsage": float(used_here),
                       "fractionalAvailability": float(available)})


def register(router):
    router.add("GET", "/services/{serviceName}/limits/{limitName}/resourceAvailability", get_resource_availability,
               version=VERSION)
