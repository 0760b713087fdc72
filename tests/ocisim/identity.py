# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Identity (IdentityClient): availability domains, compartments, tenancies, region subscriptions."""

from __future__ import annotations

from .catalog import REGIONS, region_key
from .core import OciError, invalid, not_found
from .resources import compartment, get_reply, list_reply, owned, required
from .web import Reply

COMPARTMENT_FIELDS = ("id", "compartmentId", "name", "description", "timeCreated", "lifecycleState",
                      "inactiveStatus", "isAccessible", "freeformTags", "definedTags")


def compartment_view(comp):
    return {k: comp.get(k) for k in COMPARTMENT_FIELDS}


def list_availability_domains(ctx):
    comp = compartment(ctx, ctx.query.get("compartmentId"))
    return Reply(200, [{"name": name, "id": ad_id, "compartmentId": comp["_tenancy"]}
                       for name, ad_id in ctx.sim.availability_domains.items()])


def get_compartment(ctx):
    comp = owned(ctx, "compartments", ctx.params["compartmentId"], "compartment")
    return get_reply(comp, compartment_view)


def _children(store, parent_id):
    return [c for c in store.compartments.values() if c.get("compartmentId") == parent_id and not c.get("_root")]


def list_compartments(ctx):
    store = ctx.store
    parent = compartment(ctx, ctx.query.get("compartmentId"))
    subtree = ctx.q_bool("compartmentIdInSubtree")
    access = (ctx.query.get("accessLevel") or "ANY").upper()
    if access not in ("ANY", "ACCESSIBLE"):
        raise invalid("accessLevel must be ANY or ACCESSIBLE")
    if subtree:
        if not parent.get("_root"):
            raise invalid("compartmentIdInSubtree can only be set to true when performing ListCompartments "
                          "on the tenancy (root compartment).")
        items, queue = [], [parent["id"]]
        while queue:
            kids = _children(store, queue.pop(0))
            if access == "ACCESSIBLE":
                kids = [k for k in kids if k["isAccessible"]]
            items += kids
            queue += [k["id"] for k in kids]
    else:
        items = _children(store, parent["id"])
        if access == "ACCESSIBLE":
            items = [k for k in items if k["isAccessible"]]
    if ctx.query.get("name"):
        items = [c for c in items if c["name"] == ctx.query["name"]]
    return list_reply(ctx, items, default_sort="NAME", view=compartment_view)


def create_compartment(ctx):
    body = ctx.body
    required(body, "compartmentId", "name", "description")
    parent = compartment(ctx, body["compartmentId"])
    for sibling in _children(ctx.store, parent["id"]):
        if sibling["name"] == body["name"] and sibling["lifecycleState"] == "ACTIVE":
            raise OciError(409, "CompartmentAlreadyExists",
                                "A compartment named {0} already exists in this parent.".format(body["name"]))
    comp = ctx.sim.add_compartment(body["name"], parent["id"], description=body["description"],
                                   freeform_tags=body.get("freeformTags"), defined_tags=body.get("definedTags"),
                                   tenancy=ctx.tenancy)
    return get_reply(comp, compartment_view)


def get_tenancy(ctx):
    tenancy = ctx.store.tenancies.get(ctx.params["tenancyId"])
    if tenancy is None or tenancy["id"] != ctx.tenancy:
        raise not_found("tenancy")
    return get_reply(tenancy)


def list_region_subscriptions(ctx):
    if ctx.params["tenancyId"] != ctx.tenancy:
        raise not_found("tenancy")
    home = ctx.sim.region
    regions = [home] + [r for r in ctx.sim.subscribed_regions if r != home]
    return Reply(200, [{"regionKey": region_key(r), "regionName": r, "status": "READY", "isHomeRegion": r == home}
                       for r in regions])


def list_regions(_ctx):
    return Reply(200, [{"key": key, "name": name} for name, (key, _n) in sorted(REGIONS.items())])


def register(router):
    router.add("GET", "/availabilityDomains", list_availability_domains)
    router.add("GET", "/compartments", list_compartments)
    router.add("POST", "/compartments", create_compartment)
    router.add("GET", "/compartments/{compartmentId}", get_compartment)
    router.add("GET", "/tenancies/{tenancyId}", get_tenancy)
    router.add("GET", "/tenancies/{tenancyId}/regionSubscriptions", list_region_subscriptions)
    router.add("GET", "/regions", list_regions)
