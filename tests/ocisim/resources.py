# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the service modules: ownership checks, listing, common fields."""

from __future__ import annotations

import hashlib
import json

from .core import invalid, missing, not_found, paginate, public
from .web import Reply


def owned(ctx, collection, ocid, what=None):
    """The stored resource if it exists and belongs to the caller's tenancy, else 404."""
    res = getattr(ctx.store, collection).get(ocid)
    if res is None:
        raise not_found(what or collection)
    owner = res.get("_tenancy")
    if owner is not None and ctx.tenancy is not None and owner != ctx.tenancy:
        raise not_found(what or collection)
    return res


def compartment(ctx, compartment_id, name="compartmentId"):
    """Check a compartment OCID given by the caller (query or body)."""
    if not compartment_id:
        raise missing(name)
    comp = ctx.store.compartments.get(compartment_id)
    if comp is None or comp["_tenancy"] != ctx.tenancy or comp["lifecycleState"] != "ACTIVE":
        raise not_found("compartment")
    return comp


def required(body, *names):
    for name in names:
        if body.get(name) in (None, ""):
            raise missing(name)


def base(ctx, body, ocid_kind, display_prefix, extra=None):
    """Fields every created resource has."""
    store = ctx.store
    comp = compartment(ctx, body.get("compartmentId"))
    ocid = store.ocids.new(ocid_kind)
    created = store.stamp()
    res = {
        "id": ocid,
        "compartmentId": comp["id"],
        "displayName": body.get("displayName") or "{0}{1}".format(display_prefix, created[:19].replace(":", "")),
        "freeformTags": dict(body.get("freeformTags") or {}),
        "definedTags": dict(body.get("definedTags") or {}),
        "timeCreated": created,
        "_tenancy": ctx.tenancy,
    }
    if extra:
        res.update(extra)
    return res


MAX_DISPLAY_NAME = 255


def check_display_names(body, where=""):
    """OCI refuses any displayName over 255 characters, at the top of a request body or nested in it
    (createVnicDetails, launchDetails, instancePools), with 400 InvalidParameter."""
    if isinstance(body, list):
        for index, item in enumerate(body):
            check_display_names(item, "{0}[{1}].".format(where[:-1], index))
        return
    if not isinstance(body, dict):
        return
    for key, value in body.items():
        if key == "displayName" and isinstance(value, str) and len(value) > MAX_DISPLAY_NAME:
            raise invalid("{0}displayName size must be between 1 and {1}".format(where, MAX_DISPLAY_NAME))
        if isinstance(value, (dict, list)) and not key.endswith("Tags"):
            check_display_names(value, "{0}{1}.".format(where, key))


def apply_tags_and_name(res, body):
    for name in ("displayName", "freeformTags", "definedTags"):
        if body.get(name) is not None:
            res[name] = body[name]


SORTS = {"TIMECREATED": "timeCreated", "DISPLAYNAME": "displayName", "NAME": "name"}


def list_reply(ctx, items, filters=(), default_sort="TIMECREATED", view=public, default_limit=100, max_limit=1000):
    """Filter, sort and paginate a list of stored resources, answering an opc-next-page header.

    filters: (query parameter, field) pairs compared for equality when the parameter is given.
    displayName and lifecycleState are always honoured."""
    query = ctx.query
    wanted = [("displayName", "displayName"), ("lifecycleState", "lifecycleState")] + list(filters)
    for param, field in wanted:
        value = query.get(param)
        if value not in (None, ""):
            items = [r for r in items if str(r.get(field)) == value]
    sort_by = (query.get("sortBy") or default_sort).upper()
    if sort_by not in SORTS:
        raise invalid("sortBy must be one of {0}".format(", ".join(sorted(SORTS))))
    field = SORTS[sort_by]
    default_order = "DESC" if sort_by == "TIMECREATED" else "ASC"
    order = (query.get("sortOrder") or default_order).upper()
    if order not in ("ASC", "DESC"):
        raise invalid("sortOrder must be ASC or DESC")
    items = sorted(items, key=lambda r: (str(r.get(field) or ""), r["id"]), reverse=(order == "DESC"))
    chunk, nxt = paginate(items, query, default_limit, max_limit)
    return Reply(200, [view(r) for r in chunk], {"opc-next-page": nxt})


def in_compartment(ctx, collection, query_name="compartmentId"):
    comp = compartment(ctx, ctx.query.get(query_name), query_name)
    return [r for r in getattr(ctx.store, collection).values() if r["compartmentId"] == comp["id"]]


def etag(res):
    """A strong etag over the resource's API view: it changes whenever any field changes."""
    digest = hashlib.sha256(json.dumps(public(res), sort_keys=True, default=str).encode("utf-8")).hexdigest()
    return digest[:32]


def get_reply(res, view=public, headers=None):
    hdrs = {"etag": etag(res)}
    hdrs.update(headers or {})
    return Reply(200, view(res), hdrs)
