# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Work requests (WorkRequestClient, /workRequests)."""

from __future__ import annotations

from .core import API_VERSION, public, rfc3339
from .resources import compartment, get_reply, list_reply, owned
from .web import Reply

ENTITY_URIS = {
    "instance": "/instances/",
    "clusternetwork": "/clusterNetworks/",
    "instancepool": "/instancePools/",
    "instanceconfiguration": "/instanceConfigurations/",
    "computecluster": "/computeClusters/",
    "computecapacityreservation": "/computeCapacityReservations/",
}


def new(store, tenancy, compartment_id, operation, resources, duration):
    """Create a work request that runs for `duration` simulated seconds.

    resources: list of (entity_type, action_type, ocid).  Returns the stored dict; callers finish
    it with succeed() or fail() (typically from a scheduled event)."""
    now = store.now()
    wr = {
        "id": store.ocids.new("coreservicesworkrequest"),
        "operationType": operation,
        "status": "ACCEPTED",
        "compartmentId": compartment_id,
        "resources": [
            {"entityType": etype, "actionType": action, "identifier": ocid,
             "entityUri": "{0}{1}{2}".format(API_VERSION, ENTITY_URIS.get(etype, "/" + etype + "s/"), ocid)}
            for etype, action, ocid in resources
        ],
        "percentComplete": 0.0,
        "timeAccepted": store.stamp(),
        "timeStarted": None,
        "timeFinished": None,
        "timeCreated": None,  # sort key only; not part of the API model
        "_tenancy": tenancy,
        "_start": now,
        "_duration": max(float(duration), 0.0),
        "_errors": [],
        "_logs": [],
    }
    wr["timeCreated"] = wr["timeAccepted"]
    store.work_requests[wr["id"]] = wr
    return wr


def _refresh(store, wr):
    """ACCEPTED -> IN_PROGRESS with percentComplete from the clock until finished."""
    if wr["status"] in ("SUCCEEDED", "FAILED", "CANCELED"):
        return
    now = store.now()
    elapsed = now - wr["_start"]
    if elapsed > 0 or wr["_duration"] == 0:
        wr["status"] = "IN_PROGRESS"
        wr["timeStarted"] = wr["timeStarted"] or rfc3339(wr["_start"])
        if wr["_duration"]:
            wr["percentComplete"] = round(min(99.0, 100.0 * elapsed / wr["_duration"]), 1)


def succeed(store, wr, action_updates=None):
    wr["status"] = "SUCCEEDED"
    wr["percentComplete"] = 100.0
    wr["timeStarted"] = wr["timeStarted"] or rfc3339(wr["_start"])
    wr["timeFinished"] = rfc3339(store.now())
    for res in wr["resources"]:
        if action_updates and res["identifier"] in action_updates:
            res["actionType"] = action_updates[res["identifier"]]
        elif res["actionType"] == "IN_PROGRESS":
            res["actionType"] = "RELATED"


def fail(store, wr, message, code="InternalError"):
    _refresh(store, wr)
    wr["status"] = "FAILED"
    wr["timeStarted"] = wr["timeStarted"] or rfc3339(wr["_start"])
    wr["timeFinished"] = rfc3339(store.now())
    wr["_errors"].append({"code": code, "message": message, "timestamp": rfc3339(store.now())})


def view(wr, summary=False):
    data = public(wr)
    data.pop("timeCreated", None)
    if summary:
        data.pop("resources", None)
    return data


def get_work_request(ctx):
    wr = owned(ctx, "work_requests", ctx.params["workRequestId"], "work request")
    _refresh(ctx.store, wr)
    return get_reply(wr, view)


def list_errors(ctx):
    wr = owned(ctx, "work_requests", ctx.params["workRequestId"], "work request")
    return Reply(200, list(wr["_errors"]))


def list_logs(ctx):
    wr = owned(ctx, "work_requests", ctx.params["workRequestId"], "work request")
    return Reply(200, list(wr["_logs"]))


def list_work_requests(ctx):
    comp = compartment(ctx, ctx.query.get("compartmentId"))
    items = [w for w in ctx.store.work_requests.values() if w["compartmentId"] == comp["id"]]
    resource_id = ctx.query.get("resourceId")
    if resource_id:
        items = [w for w in items if any(r["identifier"] == resource_id for r in w["resources"])]
    for wr in items:
        _refresh(ctx.store, wr)
    return list_reply(ctx, items, view=lambda w: view(w, True))


def register(router):
    router.add("GET", "/workRequests/{workRequestId}", get_work_request)
    router.add("GET", "/workRequests/{workRequestId}/errors", list_errors)
    router.add("GET", "/workRequests/{workRequestId}/logs", list_logs)
    router.add("GET", "/workRequests", list_work_requests)
