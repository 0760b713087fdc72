# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Custom images (ComputeClient): CreateImage from an instance, UpdateImage, DeleteImage and the image's
shape compatibility entries.  GetImage and ListImages are compute.py's (platform and custom images alike).

An image made from an instance is PROVISIONING for durations["image_create"], with a CreateImage work
request, while its instance is CREATING_IMAGE; then AVAILABLE, the instance back in its state.  Image hooks
(Simulator.on_image) run when the image is asked for, and the image waits for them: a hook answers None
(done) or a process (subprocess.Popen: the image stays PROVISIONING until it exits, AVAILABLE on status 0);
a hook that raises, or a process with another status, fails the work request and the image is DELETED."""

from __future__ import annotations

import json
import logging
import math
import os

from . import workrequests
from .catalog import SHAPES_BY_NAME
from .compute import image_fits
from .core import conflict, invalid, missing, not_found, paginate, public
from .resources import base, get_reply, owned, required
from .web import Reply

LOG = logging.getLogger("ocisim")
LAUNCH_MODES = ("NATIVE", "EMULATED", "PARAVIRTUALIZED", "CUSTOM")
IMAGE_FROM = ("RUNNING", "STOPPED")
HOOK_POLL = 1.0   # simulated seconds between two looks at a hook still running


def _custom(ctx, image_id):
    """A custom image of the caller's tenancy: platform images cannot be changed (404, as for any resource
    the caller is not authorised on)."""
    image = owned(ctx, "images", image_id, "image")
    if image["_tenancy"] is None:
        raise not_found("image")
    return image


def _check_name(ctx, name):
    if name and any(i["_tenancy"] is None and i["displayName"] == name for i in ctx.store.images.values()):
        raise invalid("You cannot use a platform image name as a custom image name: {0}".format(name))


def create_image(ctx):
    sim, store, body = ctx.sim, ctx.store, ctx.body
    required(body, "compartmentId")
    if body.get("imageSourceDetails"):
        raise invalid("The simulator makes images from instances only (instanceId); an import from Object Storage "
                      "(imageSourceDetails) is not modelled.")
    if not body.get("instanceId"):
        raise missing("instanceId")
    instance = owned(ctx, "instances", body["instanceId"], "instance")
    if instance["lifecycleState"] not in IMAGE_FROM:
        raise conflict("Instance {0} is {1}; an image is made from a RUNNING or STOPPED instance.".format(
            instance["id"], instance["lifecycleState"]), "IncorrectState")
    source = store.images.get(instance["imageId"]) or {}
    if source and not source.get("createImageAllowed", True):
        raise invalid("Image {0} does not allow images of its instances.".format(source["id"]))
    mode = body.get("launchMode") or source.get("launchMode") or instance["launchMode"]
    if mode not in LAUNCH_MODES:
        raise invalid("launchMode must be one of {0}".format(", ".join(LAUNCH_MODES)))
    _check_name(ctx, body.get("displayName"))
    boot_gb = (instance.get("sourceDetails") or {}).get("bootVolumeSizeInGBs") or 47
    image = base(ctx, body, "image", "image", {
        "baseImageId": instance["imageId"], "createImageAllowed": True, "launchMode": mode,
        "launchOptions": dict(instance.get("launchOptions") or source.get("launchOptions") or {}),
        "lifecycleState": "PROVISIONING", "operatingSystem": source.get("operatingSystem"),
        "operatingSystemVersion": source.get("operatingSystemVersion"),
        "agentFeatures": source.get("agentFeatures"), "listingType": None, "sizeInMBs": int(boot_gb) * 1024,
        # What OCI bills is the image's content, not its boot volume: the base image's size stands for it.
        "billableSizeInGBs": int(math.ceil((source.get("sizeInMBs") or boot_gb * 1024) / 1024.0)),
        "_gpu": bool(source.get("_gpu")), "_instance": instance["id"]})
    store.images[image["id"]] = image
    wr = workrequests.new(store, ctx.tenancy, image["compartmentId"], "CreateImage",
                          [("image", "IN_PROGRESS", image["id"]), ("instance", "RELATED", instance["id"])],
                          sim.durations["image_create"])
    before = instance["lifecycleState"]
    instance["lifecycleState"] = "CREATING_IMAGE"
    waiters, failures = [], []
    for hook in list(getattr(sim, "image_hooks", [])):
        try:
            waiter = hook(public(instance), public(image))
        except Exception as exc:  # pylint: disable=broad-except
            LOG.exception("image hook failed for %s", image["id"])
            failures.append("The image hook failed: {0}".format(exc))
            continue
        if waiter is not None:
            waiters.append(waiter)

    def finish():
        if any(w.poll() is None for w in waiters):
            store.schedule(HOOK_POLL, finish)
            return
        failures.extend("The image hook exited with status {0}.".format(w.returncode) for w in waiters if w.returncode)
        if instance["lifecycleState"] == "CREATING_IMAGE":
            instance["lifecycleState"] = before
        elif not failures:
            failures.append("Instance {0} was {1} while its image was made.".format(
                instance["id"], instance["lifecycleState"]))
        if failures:
            image["lifecycleState"] = "DELETED"
            workrequests.fail(store, wr, " ".join(failures))
        else:
            image["lifecycleState"] = "AVAILABLE"
            workrequests.succeed(store, wr, {image["id"]: "CREATED"})
    store.schedule(sim.durations["image_create"], finish)
    return get_reply(image, headers={"opc-work-request-id": wr["id"]})


def update_image(ctx):
    image = _custom(ctx, ctx.params["imageId"])
    if image["lifecycleState"] == "DELETED":
        raise not_found("image")
    _check_name(ctx, ctx.body.get("displayName"))
    for name in ("displayName", "freeformTags", "definedTags", "operatingSystem", "operatingSystemVersion"):
        if ctx.body.get(name) is not None:
            image[name] = ctx.body[name]
    return get_reply(image)


def delete_image(ctx):
    """DeleteImage: DELETED at once.  As on OCI, an image that instance configurations name can be deleted;
    a launch from it is refused afterwards (compute.validate_launch)."""
    image = _custom(ctx, ctx.params["imageId"])
    if image["lifecycleState"] == "PROVISIONING":
        raise conflict("Image {0} is still being created.".format(image["id"]), "IncorrectState")
    image["lifecycleState"] = "DELETED"
    return Reply(204)


def _compatibility(image, shape):
    entry = {"imageId": image["id"], "shape": shape["shape"], "memoryConstraints": None, "ocpuConstraints": None}
    if shape["isFlexible"]:
        entry["memoryConstraints"] = {"minInGBs": int(shape["memoryOptions"]["minInGBs"]),
                                      "maxInGBs": int(shape["memoryOptions"]["maxInGBs"])}
        entry["ocpuConstraints"] = {"min": int(shape["ocpuOptions"]["min"]), "max": int(shape["ocpuOptions"]["max"])}
    return entry


def list_image_shape_compatibility_entries(ctx):
    image = owned(ctx, "images", ctx.params["imageId"], "image")
    shapes = sorted((s for s in SHAPES_BY_NAME.values() if image_fits(image, s["shape"])), key=lambda s: s["shape"])
    chunk, nxt = paginate([_compatibility(image, s) for s in shapes], ctx.query)
    return Reply(200, chunk, {"opc-next-page": nxt})


def get_image_shape_compatibility_entry(ctx):
    image = owned(ctx, "images", ctx.params["imageId"], "image")
    shape = SHAPES_BY_NAME.get(ctx.params["shapeName"])
    if shape is None or not image_fits(image, shape["shape"]):
        raise not_found("image shape compatibility entry")
    return Reply(200, _compatibility(image, shape))


def command_hook(sim, command, log_path=None):
    """The image hook of --on-instance: the command runs in the background with OCISIM_EVENT=image,
    OCISIM_INSTANCE_ID, OCISIM_IMAGE_ID, OCISIM_DISPLAY_NAME (the image's), OCISIM_ENDPOINT,
    OCISIM_INSTANCE_JSON and OCISIM_IMAGE_JSON; the image waits for it."""
    def hook(instance, image):
        env = dict(os.environ, OCISIM_EVENT="image", OCISIM_INSTANCE_ID=instance["id"], OCISIM_IMAGE_ID=image["id"],
                   OCISIM_DISPLAY_NAME=image["displayName"], OCISIM_ENDPOINT=sim.endpoint or "",
                   OCISIM_INSTANCE_JSON=json.dumps(instance), OCISIM_IMAGE_JSON=json.dumps(image))
        return sim.spawn_hook(command, env, log_path)
    return hook


def register(router):
    router.add("POST", "/images", create_image)
    router.add("PUT", "/images/{imageId}", update_image)
    router.add("DELETE", "/images/{imageId}", delete_image)
    router.add("GET", "/images/{imageId}/shapes", list_image_shape_compatibility_entries)
    router.add("GET", "/images/{imageId}/shapes/{shapeName}", get_image_shape_compatibility_entry)
