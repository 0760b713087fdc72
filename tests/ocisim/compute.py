# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute (ComputeClient): images, shapes, instances and their actions, VNIC attachments,
compute clusters, and the host-capacity model."""

from __future__ import annotations

import threading

from . import network, workrequests
from .catalog import DEFAULT_CAPACITY, SHAPES_BY_NAME
from .core import OciError, conflict, invalid, missing, not_found, paginate, public, rfc3339
from .resources import (apply_tags_and_name, base, compartment, get_reply, in_compartment, list_reply, owned,
                        required)
from .web import Reply

DEAD = ("TERMINATING", "TERMINATED")
OUT_OF_CAPACITY = "Out of host capacity."


def out_of_capacity():
    """What OCI answers to a launch that finds no host: HTTP 500 InternalError."""
    return OciError(500, "InternalError", OUT_OF_CAPACITY)


class Capacity:
    """Bare-metal hosts per (availability domain, shape).  Shapes without an entry are unlimited.

    A compute capacity reservation holds its reservedCount hosts in its availability domain whether
    instances use them or not; an instance launched into a reservation takes one of those hosts and
    is not counted a second time.  used() is therefore the on-demand instances plus the hosts that the
    live reservations hold, and available() what is left for on-demand launches (and new reservations)."""

    def __init__(self, sim):
        self._sim = sim
        self._lock = threading.Lock()
        self.limits = {}

    def reset(self):
        with self._lock:
            self.limits = {}
            for ad in self._sim.availability_domains:
                for shape, hosts in DEFAULT_CAPACITY.items():
                    self.limits[(ad, shape)] = hosts

    def set(self, shape, hosts, availability_domain=None):
        """Set the host count of a shape in one AD (or in every AD); hosts=None removes the limit."""
        ads = [availability_domain] if availability_domain else list(self._sim.availability_domains)
        with self._lock:
            for ad in ads:
                if hosts is None:
                    self.limits.pop((ad, shape), None)
                else:
                    self.limits[(ad, shape)] = int(hosts)

    def reserved(self, availability_domain, shape):
        """Hosts of the shape that live capacity reservations hold in the availability domain."""
        store = self._sim.store
        with store.lock:
            return sum(reservation_held(store, r, shape) for r in store.compute_capacity_reservations.values()
                       if r["availabilityDomain"] == availability_domain and r["lifecycleState"] in RESERVATION_HOLDS)

    def used(self, availability_domain, shape):
        store = self._sim.store
        with store.lock:
            holding = {r["id"] for r in store.compute_capacity_reservations.values()
                       if r["lifecycleState"] in RESERVATION_HOLDS}
            count = sum(1 for i in store.instances.values()
                        if i["availabilityDomain"] == availability_domain and i["shape"] == shape
                        and i["lifecycleState"] != "TERMINATED" and i.get("capacityReservationId") not in holding)
            return count + self.reserved(availability_domain, shape)

    def available(self, availability_domain, shape):
        limit = self.limits.get((availability_domain, shape))
        if limit is None:
            return None
        return max(0, limit - self.used(availability_domain, shape))

    def fits(self, availability_domain, shape, count):
        avail = self.available(availability_domain, shape)
        return avail is None or avail >= count


# ---------------------------------------------------------------- images and shapes
def image_fits(image, shape):
    if image.get("_gpu") and not SHAPES_BY_NAME.get(shape, {}).get("gpus"):
        return False
    return True


def list_images(ctx):
    comp = compartment(ctx, ctx.query.get("compartmentId"))
    # The platform images and the compartment's custom images (images.py).
    items = [i for i in ctx.store.images.values()
             if i["_tenancy"] is None or (i["_tenancy"] == ctx.tenancy and i["compartmentId"] == comp["id"])]
    for param, field in (("operatingSystem", "operatingSystem"), ("operatingSystemVersion", "operatingSystemVersion")):
        if ctx.query.get(param):
            items = [i for i in items if i[field] == ctx.query[param]]
    if ctx.query.get("shape"):
        items = [i for i in items if image_fits(i, ctx.query["shape"])]
    return list_reply(ctx, items)


def get_image(ctx):
    return get_reply(owned(ctx, "images", ctx.params["imageId"], "image"))


def list_shapes(ctx):
    compartment(ctx, ctx.query.get("compartmentId"))
    ad = ctx.query.get("availabilityDomain")
    if ad and ad not in ctx.sim.availability_domains:
        raise invalid("Invalid availabilityDomain: {0}".format(ad))
    shapes = list(SHAPES_BY_NAME.values())
    if ctx.query.get("imageId"):
        image = owned(ctx, "images", ctx.query["imageId"], "image")
        shapes = [s for s in shapes if image_fits(image, s["shape"])]
    shapes = sorted(shapes, key=lambda s: s["shape"])
    chunk, nxt = paginate(shapes, ctx.query)
    return Reply(200, [{k: v for k, v in s.items() if v is not None} for s in chunk], {"opc-next-page": nxt})


def create_compute_capacity_report(ctx):
    """CreateComputeCapacityReport: a POST that changes nothing.  Each asked shape gets the hosts the
    capacity model has left in the availability domain (Capacity.available); a shape without a
    capacity entry is AVAILABLE with no count, an unknown shape HARDWARE_NOT_SUPPORTED."""
    body = ctx.body
    required(body, "compartmentId", "availabilityDomain")
    compartment(ctx, body["compartmentId"])
    ad = body["availabilityDomain"]
    if ad not in ctx.sim.availability_domains:
        raise invalid("Invalid availability domain: {0}".format(ad))
    wanted = body.get("shapeAvailabilities")
    if not wanted or not isinstance(wanted, list):
        raise missing("shapeAvailabilities")
    report = []
    for item in wanted:
        required(item, "instanceShape")
        shape = item["instanceShape"]
        config = item.get("instanceShapeConfig") or None
        entry = {"instanceShape": shape, "faultDomain": item.get("faultDomain"), "instanceShapeConfig": config}
        if shape not in SHAPES_BY_NAME:
            entry.update(availabilityStatus="HARDWARE_NOT_SUPPORTED", availableCount=0)
        else:
            if config:
                shape_config(shape, {"ocpus": config.get("ocpus"), "memoryInGBs": config.get("memoryInGBs")})
            hosts = ctx.sim.capacity.available(ad, shape)
            entry.update(availabilityStatus="OUT_OF_HOST_CAPACITY" if hosts == 0 else "AVAILABLE",
                         availableCount=hosts)
        report.append({k: v for k, v in entry.items() if v is not None})
    return Reply(200, {"compartmentId": body["compartmentId"], "availabilityDomain": ad,
                       "shapeAvailabilities": report, "timeCreated": ctx.store.stamp()})


# ---------------------------------------------------------------- instances
FAULT_DOMAINS = ("FAULT-DOMAIN-1", "FAULT-DOMAIN-2", "FAULT-DOMAIN-3")


def shape_config(shape_name, requested):
    shape = SHAPES_BY_NAME[shape_name]
    ocpus = shape["ocpus"]
    memory = shape["memoryInGBs"]
    if shape["isFlexible"]:
        requested = requested or {}
        ocpus = float(requested.get("ocpus") or 1.0)
        opts = shape["ocpuOptions"]
        if not opts["min"] <= ocpus <= opts["max"]:
            raise invalid("ocpus must be between {0} and {1} for {2}".format(opts["min"], opts["max"], shape_name))
        memory = float(requested.get("memoryInGBs") or ocpus * shape["memoryOptions"]["defaultPerOcpuInGBs"])
    elif requested and (requested.get("ocpus") or requested.get("memoryInGBs")):
        raise invalid("shapeConfig is only allowed for flexible shapes, not {0}".format(shape_name))
    return {
        "ocpus": ocpus, "memoryInGBs": memory, "vcpus": int(ocpus * 2),
        "processorDescription": shape["processorDescription"],
        "networkingBandwidthInGbps": shape["networkingBandwidthInGbps"], "maxVnicAttachments": shape["maxVnicAttachments"],
        "gpus": shape["gpus"], "gpuDescription": shape["gpuDescription"], "localDisks": shape["localDisks"],
        "localDisksTotalSizeInGBs": shape["localDisksTotalSizeInGBs"],
        "localDiskDescription": shape["localDiskDescription"], "baselineOcpuUtilization": None,
    }


def validate_launch(ctx, details, compartment_id=None):
    """Check LaunchInstanceDetails-like dict; return (shape, image, subnet, ad, compute cluster)."""
    details = dict(details)
    if compartment_id:
        details.setdefault("compartmentId", compartment_id)
    required(details, "availabilityDomain", "compartmentId", "shape")
    compartment(ctx, details["compartmentId"])
    ad = details["availabilityDomain"]
    if ad not in ctx.sim.availability_domains:
        raise invalid("Invalid availability domain: {0}".format(ad))
    shape = details["shape"]
    if shape not in SHAPES_BY_NAME:
        raise invalid("Invalid shape: {0}".format(shape))
    fault_domain = details.get("faultDomain")
    if fault_domain and fault_domain not in FAULT_DOMAINS:
        raise invalid("Invalid fault domain: {0}".format(fault_domain))
    source = details.get("sourceDetails") or {}
    image_id = source.get("imageId") or details.get("imageId")
    if not image_id:
        raise OciError(400, "MissingParameter", "Missing required parameter 'sourceDetails'.")
    image = owned(ctx, "images", image_id, "image")
    if image["lifecycleState"] != "AVAILABLE":  # a custom image still being made, or deleted (images.py)
        raise (not_found("image") if image["lifecycleState"] == "DELETED" else
               conflict("Image {0} is {1}.".format(image_id, image["lifecycleState"]), "IncorrectState"))
    if not image_fits(image, shape):
        raise invalid("Shape {0} is not valid for image {1}.".format(shape, image_id))
    vnic = details.get("createVnicDetails") or {}
    subnet_id = vnic.get("subnetId") or details.get("subnetId")
    if not subnet_id:
        raise OciError(400, "MissingParameter", "Missing required parameter 'createVnicDetails.subnetId'.")
    subnet = owned(ctx, "subnets", subnet_id, "subnet")
    if subnet["lifecycleState"] != "AVAILABLE":
        raise conflict("Subnet {0} is not available.".format(subnet_id), "IncorrectState")
    if vnic.get("assignPublicIp") and subnet["prohibitPublicIpOnVnic"]:
        raise invalid("Subnet {0} prohibits public IPs on VNICs; assignPublicIp must be false.".format(subnet_id))
    if subnet["availabilityDomain"] and subnet["availabilityDomain"] != ad:
        raise invalid("Subnet {0} is in another availability domain.".format(subnet_id))
    cluster = None
    if details.get("computeClusterId"):
        cluster = owned(ctx, "compute_clusters", details["computeClusterId"], "compute cluster")
        if cluster["lifecycleState"] != "ACTIVE":
            raise conflict("Compute cluster {0} is not active.".format(cluster["id"]), "IncorrectState")
        if cluster["availabilityDomain"] != ad:
            raise invalid("The compute cluster is in availability domain {0}.".format(cluster["availabilityDomain"]))
        if not shape.startswith("BM.GPU"):
            raise invalid("Shape {0} cannot be placed in a compute cluster.".format(shape))
    shape_config(shape, details.get("shapeConfig"))
    return shape, image, subnet, ad, cluster


def build_instance(sim, tenancy, details, image, subnet, ad, state="PROVISIONING", instance_configuration_id=None,
                   compute_cluster=None, display_name=None, hostname=None, fault_domain=None, now=None):
    """Create the instance, its primary VNIC attachment, VNIC and private IP in the store."""
    store = sim.store
    now_str = rfc3339(now) if now is not None else store.stamp()
    inst_id = store.ocids.new("instance")
    display = display_name or details.get("displayName") or "instance-" + now_str[:19].replace("-", "").replace(":", "")
    vnic_details = details.get("createVnicDetails") or {}
    hostname = hostname or vnic_details.get("hostnameLabel") or details.get("hostnameLabel") or \
        "".join(c for c in display.lower() if c.isalnum() or c == "-")[:63]
    source = details.get("sourceDetails") or {}
    count = len(store.instances)
    reservation_id = details.get("capacityReservationId") or None
    reservation_fd = None
    if reservation_id and reservation_id in store.compute_capacity_reservations:
        conf = reservation_config_for(store, store.compute_capacity_reservations[reservation_id], details["shape"],
                                      fault_domain or details.get("faultDomain"))
        if conf is not None:
            reservation_fd = conf.get("faultDomain")
            fault_domain = fault_domain or reservation_fd
    instance = {
        "id": inst_id, "availabilityDomain": ad, "compartmentId": details["compartmentId"],
        "displayName": display, "faultDomain": fault_domain or details.get("faultDomain") or
        "FAULT-DOMAIN-{0}".format(count % 3 + 1),
        "freeformTags": dict(details.get("freeformTags") or {}), "definedTags": dict(details.get("definedTags") or {}),
        "imageId": image["id"], "launchMode": "NATIVE" if details["shape"].startswith("BM.") else "PARAVIRTUALIZED",
        "launchOptions": {"bootVolumeType": "PARAVIRTUALIZED", "firmware": "UEFI_64", "networkType": "VFIO",
                          "remoteDataVolumeType": "PARAVIRTUALIZED", "isPvEncryptionInTransitEnabled": False,
                          "isConsistentVolumeNamingEnabled": True},
        "instanceOptions": {"areLegacyImdsEndpointsDisabled": True},
        "availabilityConfig": {"isLiveMigrationPreferred": None, "recoveryAction": "RESTORE_INSTANCE"},
        "lifecycleState": state, "metadata": dict(details.get("metadata") or {}),
        "extendedMetadata": dict(details.get("extendedMetadata") or {}), "region": sim.region,
        "shape": details["shape"], "shapeConfig": shape_config(details["shape"], details.get("shapeConfig")),
        "sourceDetails": {"sourceType": "image", "imageId": image["id"],
                          "bootVolumeSizeInGBs": source.get("bootVolumeSizeInGBs") or 47,
                          "bootVolumeVpusPerGB": source.get("bootVolumeVpusPerGB") or 10},
        "systemTags": {}, "timeCreated": now_str,
        "agentConfig": {"isMonitoringDisabled": False, "isManagementDisabled": False,
                        "areAllPluginsDisabled": False, "pluginsConfig": None},
        "instanceConfigurationId": instance_configuration_id, "capacityReservationId": reservation_id,
        "_tenancy": tenancy, "_compute_cluster": compute_cluster["id"] if compute_cluster else None,
        "_hostname": hostname, "_attachments": [], "_reservation_fd": reservation_fd,
    }
    store.instances[inst_id] = instance
    vnic_state = "AVAILABLE"
    # OCI's default: a public IP when the subnet allows one.
    assign_public = vnic_details.get("assignPublicIp")
    if assign_public is None:
        assign_public = not subnet["prohibitPublicIpOnVnic"]
    vnic = network.create_vnic(store, tenancy, subnet, instance, 0, assign_public, hostname,
                               vnic_details.get("displayName") or display, vnic_details.get("privateIp"),
                               vnic_state, now_str)
    attach = {
        "id": store.ocids.new("vnicattachment"), "availabilityDomain": ad, "compartmentId": instance["compartmentId"],
        "displayName": "vnicattachment" + now_str[:10], "instanceId": inst_id,
        "lifecycleState": "ATTACHED" if state == "RUNNING" else "ATTACHING", "nicIndex": 0,
        "subnetId": subnet["id"], "vlanId": None, "timeCreated": now_str, "vlanTag": 0, "vnicId": vnic["id"],
        "_tenancy": tenancy,
    }
    store.vnic_attachments[attach["id"]] = attach
    instance["_attachments"].append(attach["id"])
    return instance


def mark_running(sim, instance):
    if instance["lifecycleState"] in ("PROVISIONING", "STARTING"):
        instance["lifecycleState"] = "RUNNING"
        for att_id in instance["_attachments"]:
            att = sim.store.vnic_attachments.get(att_id)
            if att and att["lifecycleState"] == "ATTACHING":
                att["lifecycleState"] = "ATTACHED"


def start_termination(sim, instance, delay):
    """TERMINATING now, TERMINATED after delay seconds (VNICs detached and removed)."""
    store = sim.store
    if instance["lifecycleState"] in DEAD:
        return
    instance["lifecycleState"] = "TERMINATING"
    for att_id in instance["_attachments"]:
        att = store.vnic_attachments.get(att_id)
        if att:
            att["lifecycleState"] = "DETACHING"
    sim.call_hook("terminate", instance)

    def done():
        instance["lifecycleState"] = "TERMINATED"
        for att_id in instance["_attachments"]:
            att = store.vnic_attachments.get(att_id)
            if att:
                att["lifecycleState"] = "DETACHED"
                vnic = store.vnics.get(att["vnicId"])
                if vnic:
                    network.delete_vnic(store, vnic)
    store.schedule(delay, done)


def instance_view(instance):
    return public(instance)


def launch_instance(ctx):
    sim = ctx.sim
    details = ctx.body
    shape, image, subnet, ad, cluster = validate_launch(ctx, details)
    reservation = launch_reservation(ctx, details, ad, shape)
    if not hosts_fit(sim, reservation, ad, shape, 1, details.get("faultDomain")):
        raise out_of_capacity()
    instance = build_instance(sim, ctx.tenancy, details, image, subnet, ad, compute_cluster=cluster)
    wr = workrequests.new(ctx.store, ctx.tenancy, instance["compartmentId"], "LaunchInstance",
                          [("instance", "IN_PROGRESS", instance["id"])], sim.durations["instance_launch"])
    sim.call_hook("launch", instance)

    def done():
        if instance["lifecycleState"] == "PROVISIONING":
            mark_running(sim, instance)
            workrequests.succeed(ctx.store, wr, {instance["id"]: "CREATED"})
        else:
            workrequests.fail(ctx.store, wr, "The instance was terminated during launch.")
    ctx.store.schedule(sim.durations["instance_launch"], done)
    return get_reply(instance, instance_view, {"opc-work-request-id": wr["id"]})


def get_instance(ctx):
    return get_reply(owned(ctx, "instances", ctx.params["instanceId"], "instance"), instance_view)


def list_instances(ctx):
    items = in_compartment(ctx, "instances")
    if ctx.query.get("computeClusterId"):
        items = [i for i in items if i["_compute_cluster"] == ctx.query["computeClusterId"]]
    return list_reply(ctx, items, filters=[("availabilityDomain", "availabilityDomain"),
                                           ("capacityReservationId", "capacityReservationId")],
                      view=instance_view)


def update_instance(ctx):
    instance = owned(ctx, "instances", ctx.params["instanceId"], "instance")
    if instance["lifecycleState"] in DEAD:
        raise conflict("Instance {0} is {1}.".format(instance["id"], instance["lifecycleState"]), "IncorrectState")
    apply_tags_and_name(instance, ctx.body)
    for name in ("metadata", "extendedMetadata", "agentConfig"):
        if ctx.body.get(name) is not None:
            instance[name] = ctx.body[name]
    if ctx.body.get("shapeConfig"):
        instance["shapeConfig"] = shape_config(instance["shape"], ctx.body["shapeConfig"])
    return get_reply(instance, instance_view)


ACTIONS = {
    # action -> (states it is allowed from, transient state, final state)
    "STOP": (("RUNNING",), "STOPPING", "STOPPED"),
    "SOFTSTOP": (("RUNNING",), "STOPPING", "STOPPED"),
    "START": (("STOPPED",), "STARTING", "RUNNING"),
    "RESET": (("RUNNING",), "STOPPING", "RUNNING"),
    "SOFTRESET": (("RUNNING",), "STOPPING", "RUNNING"),
}


def instance_action(ctx):
    sim = ctx.sim
    instance = owned(ctx, "instances", ctx.params["instanceId"], "instance")
    action = (ctx.query.get("action") or "").upper()
    if action not in ACTIONS:
        raise invalid("Unsupported action: {0}".format(action))
    allowed, transient, final = ACTIONS[action]
    if instance["lifecycleState"] == final and action in ("STOP", "SOFTSTOP", "START"):
        return get_reply(instance, instance_view)
    if instance["lifecycleState"] not in allowed:
        raise conflict("Instance {0} is {1}; {2} is not allowed.".format(
            instance["id"], instance["lifecycleState"], action), "IncorrectState")
    instance["lifecycleState"] = transient
    delay = sim.durations["instance_stop"] if transient == "STOPPING" else sim.durations["instance_start"]
    if action in ("RESET", "SOFTRESET"):
        delay = sim.durations["instance_stop"] + sim.durations["instance_start"]

    def done():
        if instance["lifecycleState"] == transient:
            instance["lifecycleState"] = final
    ctx.store.schedule(delay, done)
    return get_reply(instance, instance_view)


def terminate_instance(ctx):
    instance = owned(ctx, "instances", ctx.params["instanceId"], "instance")
    if instance["lifecycleState"] == "TERMINATED":
        raise not_found("instance")
    start_termination(ctx.sim, instance, ctx.sim.durations["instance_terminate"])
    return Reply(204)


# ---------------------------------------------------------------- VNIC attachments
def list_vnic_attachments(ctx):
    items = in_compartment(ctx, "vnic_attachments")
    return list_reply(ctx, items, filters=[("instanceId", "instanceId"), ("availabilityDomain", "availabilityDomain"),
                                           ("vnicId", "vnicId")])


def get_vnic_attachment(ctx):
    return get_reply(owned(ctx, "vnic_attachments", ctx.params["vnicAttachmentId"], "vnic attachment"))


def attach_vnic(ctx):
    body = ctx.body
    required(body, "instanceId", "createVnicDetails")
    instance = owned(ctx, "instances", body["instanceId"], "instance")
    if instance["lifecycleState"] != "RUNNING":
        raise conflict("Instance {0} is not running.".format(instance["id"]), "IncorrectState")
    details = body["createVnicDetails"]
    subnet = owned(ctx, "subnets", details.get("subnetId"), "subnet")
    store = ctx.store
    nic_index = body.get("nicIndex") or 0
    vnic = network.create_vnic(store, ctx.tenancy, subnet, instance, len(instance["_attachments"]),
                               details.get("assignPublicIp", False), details.get("hostnameLabel"),
                               details.get("displayName") or "vnic", details.get("privateIp"))
    vnic["isPrimary"] = False
    now_str = store.stamp()
    att = {"id": store.ocids.new("vnicattachment"), "availabilityDomain": instance["availabilityDomain"],
           "compartmentId": instance["compartmentId"], "displayName": body.get("displayName"),
           "instanceId": instance["id"], "lifecycleState": "ATTACHED", "nicIndex": nic_index,
           "subnetId": subnet["id"], "vlanId": None, "timeCreated": now_str, "vlanTag": 0,
           "vnicId": vnic["id"], "_tenancy": ctx.tenancy}
    store.vnic_attachments[att["id"]] = att
    instance["_attachments"].append(att["id"])
    return get_reply(att)


def detach_vnic(ctx):
    att = owned(ctx, "vnic_attachments", ctx.params["vnicAttachmentId"], "vnic attachment")
    vnic = ctx.store.vnics.get(att["vnicId"])
    if vnic and vnic["isPrimary"]:
        raise invalid("The primary VNIC cannot be detached.")
    att["lifecycleState"] = "DETACHED"
    if vnic:
        network.delete_vnic(ctx.store, vnic)
    return Reply(204)


# ---------------------------------------------------------------- compute capacity reservations
# A reservation holds hosts in one availability domain: instanceReservationConfigs, one per (instanceShape,
# faultDomain), each with its reservedCount and the usedCount of the live instances launched into it
# (LaunchInstance, or an instance configuration's launchDetails, with capacityReservationId).
#
# What OCI answers to a launch into a reservation whose hosts are all in use is not public: OCI's
# "Capacity Reservations" page (docs.oracle.com/iaas/Content/Compute/Tasks/reserve-capacity.htm) says only
# that a terminated instance's capacity returns to the reservation; oracle/terraform-provider-oci issue
# #2313 (and its pull request #2314) tells of an instance update refused because "the current capacity
# reservation does not have sufficient capacity for the new shape" without quoting OCI's text; oracle/
# karpenter-provider-oci pull request #34 handles reservation launch failures apart from on-demand ones,
# quoting none (searched November 2026).  So a full reservation answers as OCI's general stock-out does:
# 500 InternalError "Out of host capacity." to a launch or an instance pool's resize, the failed work
# request with that message for a cluster network, an instance pool RUNNING with no instances, as an
# availability domain without hosts does.
# A reservation is ACTIVE about ten seconds after its create (a walk-through of the Console in Japanese,
# qiita.com/ayamakkk/items/557fee7fd83a4d30c0f6: durations["capacity_reservation"]), and only the
# compartment that holds it launches into it (qiita.com/araidon/items/190bde5accd72da5abc7).
RESERVATION_HOLDS = ("CREATING", "ACTIVE", "UPDATING", "MOVING", "DELETING")
RESERVATION_SUMMARY = ("id", "compartmentId", "displayName", "definedTags", "freeformTags", "lifecycleState",
                       "availabilityDomain", "reservedInstanceCount", "usedInstanceCount", "isDefaultReservation",
                       "timeCreated")


def reservation_members(store, reservation):
    """The live (not TERMINATED) instances launched into the reservation."""
    return [i for i in store.instances.values()
            if i.get("capacityReservationId") == reservation["id"] and i["lifecycleState"] != "TERMINATED"]


def _config_used(members, conf):
    return sum(1 for i in members
               if i["shape"] == conf["instanceShape"] and i.get("_reservation_fd") == conf.get("faultDomain"))


def reservation_held(store, reservation, shape):
    """Hosts of the shape the reservation holds (its reserved count, never less than what is in use)."""
    members = reservation_members(store, reservation)
    return sum(max(c["reservedCount"], _config_used(members, c))
               for c in reservation["instanceReservationConfigs"] if c["instanceShape"] == shape)


def _fd_matches(conf, fault_domain):
    return not fault_domain or conf.get("faultDomain") in (None, fault_domain)


def reservation_config_for(store, reservation, shape, fault_domain=None):
    """The capacity configuration a new instance of the shape takes: the first that accepts its fault
    domain and has a host free, else the first that accepts it (None when none does)."""
    members = reservation_members(store, reservation)
    fitting = [c for c in reservation["instanceReservationConfigs"]
               if c["instanceShape"] == shape and _fd_matches(c, fault_domain)]
    for conf in fitting:
        if conf["reservedCount"] > _config_used(members, conf):
            return conf
    return fitting[0] if fitting else None


def reservation_room(store, reservation, shape, fault_domain=None):
    """Hosts of the shape still free in an ACTIVE (or UPDATING) reservation; 0 in any other state."""
    if reservation["lifecycleState"] not in ("ACTIVE", "UPDATING"):
        return 0
    members = reservation_members(store, reservation)
    return sum(max(0, c["reservedCount"] - _config_used(members, c)) for c in reservation["instanceReservationConfigs"]
               if c["instanceShape"] == shape and _fd_matches(c, fault_domain))


def hosts_fit(sim, reservation, availability_domain, shape, count, fault_domain=None):
    """Whether `count` new instances find hosts: in the reservation when one is given, else on demand."""
    if reservation is not None:
        return reservation_room(sim.store, reservation, shape, fault_domain) >= count
    return sim.capacity.fits(availability_domain, shape, count)


def stored_reservation(store, details):
    """The reservation that launch details name (None when they name none or an unknown one)."""
    return store.compute_capacity_reservations.get(details.get("capacityReservationId") or "")


def launch_reservation(ctx, details, availability_domain, shape):
    """The reservation that launch details name, checked against the launch: 404 unknown, 409 not ACTIVE,
    400 InvalidParameter for another compartment, another availability domain, a shape (or a fault domain)
    it holds no capacity for.  None when the details name no reservation (or the empty string)."""
    reservation_id = details.get("capacityReservationId")
    if not reservation_id:
        return None
    res = owned(ctx, "compute_capacity_reservations", reservation_id, "capacity reservation")
    if res["lifecycleState"] == "DELETED":
        raise not_found("capacity reservation")
    if res["lifecycleState"] not in ("ACTIVE", "UPDATING"):
        raise conflict("Capacity reservation {0} is {1}.".format(res["id"], res["lifecycleState"]), "IncorrectState")
    compartment_id = details.get("compartmentId")
    if compartment_id and res["compartmentId"] != compartment_id:
        raise invalid("Capacity reservation {0} is in compartment {1}, not in the instance's compartment {2}.".format(
            res["id"], res["compartmentId"], compartment_id))
    if res["availabilityDomain"] != availability_domain:
        raise invalid("Capacity reservation {0} is in availability domain {1}, not in {2}.".format(
            res["id"], res["availabilityDomain"], availability_domain))
    shapes = sorted({c["instanceShape"] for c in res["instanceReservationConfigs"]})
    if shape not in shapes:
        raise invalid("Capacity reservation {0} holds no capacity for shape {1} (it holds: {2}).".format(
            res["id"], shape, ", ".join(shapes) or "none"))
    fault_domain = details.get("faultDomain")
    if not any(c["instanceShape"] == shape and _fd_matches(c, fault_domain) for c in res["instanceReservationConfigs"]):
        raise invalid("Capacity reservation {0} holds no {1} capacity in fault domain {2}.".format(
            res["id"], shape, fault_domain))
    return res


def _reservation_configs(items):
    """instanceReservationConfigs of a create or update body, checked, as stored (usedCount filled by the view)."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise invalid("instanceReservationConfigs must be a list.")
    configs, seen = [], set()
    for index, item in enumerate(items):
        where = "instanceReservationConfigs[{0}]".format(index)
        if not isinstance(item, dict):
            raise invalid("{0} must be an object.".format(where))
        if not item.get("instanceShape"):
            raise missing(where + ".instanceShape")
        shape = item["instanceShape"]
        if shape not in SHAPES_BY_NAME:
            raise invalid("Invalid shape: {0}".format(shape))
        count = item.get("reservedCount")
        if count is None:
            raise missing(where + ".reservedCount")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise invalid("{0}.reservedCount must be a whole number, 0 or more.".format(where))
        fault_domain = item.get("faultDomain") or None
        if fault_domain and fault_domain not in FAULT_DOMAINS:
            raise invalid("Invalid fault domain: {0}".format(fault_domain))
        if (shape, fault_domain) in seen:
            raise invalid("{0}: another capacity configuration already reserves {1} in {2}.".format(
                where, shape, fault_domain or "every fault domain"))
        seen.add((shape, fault_domain))
        conf = {"instanceShape": shape, "reservedCount": count, "usedCount": 0}
        if fault_domain:
            conf["faultDomain"] = fault_domain
        cluster = item.get("clusterConfig")
        if cluster:
            if not isinstance(cluster, dict) or not cluster.get("hpcIslandId"):
                raise missing(where + ".clusterConfig.hpcIslandId")
            blocks = cluster.get("networkBlockIds")
            if blocks is not None and (not isinstance(blocks, list) or not all(isinstance(b, str) for b in blocks)):
                raise invalid("{0}.clusterConfig.networkBlockIds must be a list of OCIDs.".format(where))
            conf["clusterConfig"] = {"hpcIslandId": cluster["hpcIslandId"], "networkBlockIds": list(blocks or [])}
        shape_conf = item.get("instanceShapeConfig")
        if shape_conf:
            conf["instanceShapeConfig"] = {k: v for k, v in shape_conf.items()
                                           if k in ("ocpus", "memoryInGBs") and v is not None}
        configs.append(conf)
    return configs


def _reserved_by_shape(configs, members=()):
    totals = {}
    for conf in configs:
        held = max(conf["reservedCount"], _config_used(members, conf))
        totals[conf["instanceShape"]] = totals.get(conf["instanceShape"], 0) + held
    return totals


def refresh_reservation(store, reservation):
    """usedCount per configuration and the two totals, from the instances launched into the reservation."""
    members = reservation_members(store, reservation)
    for conf in reservation["instanceReservationConfigs"]:
        conf["usedCount"] = _config_used(members, conf)
    reservation["reservedInstanceCount"] = sum(c["reservedCount"] for c in reservation["instanceReservationConfigs"])
    reservation["usedInstanceCount"] = sum(c["usedCount"] for c in reservation["instanceReservationConfigs"])
    return reservation


def _reservation_view(store):
    return lambda r: public(refresh_reservation(store, r))


def _reservation_summary(store):
    return lambda r: {k: refresh_reservation(store, r).get(k) for k in RESERVATION_SUMMARY}


def new_reservation(ctx, body, state="CREATING"):
    """CreateComputeCapacityReservation's work: check, hold the hosts (500 "Out of host capacity." when the
    availability domain has too few on demand), store the reservation in `state`."""
    sim = ctx.sim
    store = ctx.store
    required(body, "compartmentId", "availabilityDomain")
    compartment(ctx, body["compartmentId"])
    ad = body["availabilityDomain"]
    if ad not in sim.availability_domains:
        raise invalid("Invalid availability domain: {0}".format(ad))
    configs = _reservation_configs(body.get("instanceReservationConfigs"))
    for shape, hosts in sorted(_reserved_by_shape(configs).items()):
        if hosts and not sim.capacity.fits(ad, shape, hosts):
            raise out_of_capacity()
    res = base(ctx, body, "capacityreservation", "capacityreservation", {
        "availabilityDomain": ad, "isDefaultReservation": bool(body.get("isDefaultReservation", False)),
        "instanceReservationConfigs": configs, "lifecycleState": state, "reservedInstanceCount": 0,
        "usedInstanceCount": 0})
    res["timeUpdated"] = res["timeCreated"]
    store.compute_capacity_reservations[res["id"]] = refresh_reservation(store, res)
    return res


def _settle(sim, res, transient, final, wr, action):
    def done():
        if res["lifecycleState"] == transient:
            res["lifecycleState"] = final
            res["timeUpdated"] = rfc3339(sim.store.now())
        workrequests.succeed(sim.store, wr, {res["id"]: action})
    sim.store.schedule(sim.durations["capacity_reservation"], done)


def create_compute_capacity_reservation(ctx):
    res = new_reservation(ctx, ctx.body)
    wr = workrequests.new(ctx.store, ctx.tenancy, res["compartmentId"], "CreateComputeCapacityReservation",
                          [("computecapacityreservation", "IN_PROGRESS", res["id"])],
                          ctx.sim.durations["capacity_reservation"])
    _settle(ctx.sim, res, "CREATING", "ACTIVE", wr, "CREATED")
    return get_reply(res, _reservation_view(ctx.store), {"opc-work-request-id": wr["id"]})


def get_compute_capacity_reservation(ctx):
    res = owned(ctx, "compute_capacity_reservations", ctx.params["capacityReservationId"], "capacity reservation")
    return get_reply(refresh_reservation(ctx.store, res), _reservation_view(ctx.store))


def list_compute_capacity_reservations(ctx):
    return list_reply(ctx, in_compartment(ctx, "compute_capacity_reservations"),
                      filters=[("availabilityDomain", "availabilityDomain")], view=_reservation_summary(ctx.store))


def update_compute_capacity_reservation(ctx):
    """UpdateComputeCapacityReservation: name, tags, isDefaultReservation and, when given, the whole list of
    capacity configurations (one left out is removed).  A configuration may not drop below what its
    instances use (400), and more hosts than the availability domain has free answer 500 "Out of host
    capacity."  UPDATING for a while, then ACTIVE; 202 with a work request."""
    sim = ctx.sim
    store = ctx.store
    res = owned(ctx, "compute_capacity_reservations", ctx.params["capacityReservationId"], "capacity reservation")
    if res["lifecycleState"] != "ACTIVE":
        raise conflict("Capacity reservation {0} is {1}.".format(res["id"], res["lifecycleState"]), "IncorrectState")
    body = ctx.body
    if body.get("instanceReservationConfigs") is not None:
        configs = _reservation_configs(body["instanceReservationConfigs"])
        members = reservation_members(store, res)
        for inst in members:
            if not any(c["instanceShape"] == inst["shape"] and c.get("faultDomain") == inst.get("_reservation_fd")
                       for c in configs):
                raise invalid("Instance {0} uses the capacity configuration {1}{2} of capacity reservation {3}; "
                              "it cannot be removed.".format(inst["id"], inst["shape"],
                                                             " in " + inst["_reservation_fd"] if inst.get("_reservation_fd")
                                                             else "", res["id"]))
        for conf in configs:
            used = _config_used(members, conf)
            if conf["reservedCount"] < used:
                raise invalid("reservedCount {0} of {1} is less than the {2} instance(s) using it.".format(
                    conf["reservedCount"], conf["instanceShape"], used))
        before = _reserved_by_shape(res["instanceReservationConfigs"], members)
        for shape, hosts in sorted(_reserved_by_shape(configs, members).items()):
            more = hosts - before.get(shape, 0)
            if more > 0 and not sim.capacity.fits(res["availabilityDomain"], shape, more):
                raise out_of_capacity()
        res["instanceReservationConfigs"] = configs
    apply_tags_and_name(res, body)
    if body.get("isDefaultReservation") is not None:
        res["isDefaultReservation"] = bool(body["isDefaultReservation"])
    res["lifecycleState"] = "UPDATING"
    res["timeUpdated"] = rfc3339(store.now())
    refresh_reservation(store, res)
    wr = workrequests.new(store, ctx.tenancy, res["compartmentId"], "UpdateComputeCapacityReservation",
                          [("computecapacityreservation", "IN_PROGRESS", res["id"])], sim.durations["capacity_reservation"])
    _settle(sim, res, "UPDATING", "ACTIVE", wr, "UPDATED")
    return Reply(202, headers={"opc-work-request-id": wr["id"]})


def delete_compute_capacity_reservation(ctx):
    """DeleteComputeCapacityReservation: refused (409 Conflict) while instances are launched into it;
    DELETING (its hosts still held) then DELETED; 202 with a work request."""
    sim = ctx.sim
    store = ctx.store
    res = owned(ctx, "compute_capacity_reservations", ctx.params["capacityReservationId"], "capacity reservation")
    if res["lifecycleState"] == "DELETED":
        raise not_found("capacity reservation")
    if res["lifecycleState"] == "DELETING":
        return Reply(202)
    members = reservation_members(store, res)
    if members:
        raise conflict("Capacity reservation {0} is used by {1} instance(s); terminate them first.".format(
            res["id"], len(members)))
    if res["lifecycleState"] not in ("ACTIVE",):
        raise conflict("Capacity reservation {0} is {1}.".format(res["id"], res["lifecycleState"]), "IncorrectState")
    res["lifecycleState"] = "DELETING"
    res["timeUpdated"] = rfc3339(store.now())
    wr = workrequests.new(store, ctx.tenancy, res["compartmentId"], "DeleteComputeCapacityReservation",
                          [("computecapacityreservation", "IN_PROGRESS", res["id"])], sim.durations["capacity_reservation"])
    _settle(sim, res, "DELETING", "DELETED", wr, "DELETED")
    return Reply(202, headers={"opc-work-request-id": wr["id"]})


def list_compute_capacity_reservation_instances(ctx):
    res = owned(ctx, "compute_capacity_reservations", ctx.params["capacityReservationId"], "capacity reservation")
    items = reservation_members(ctx.store, res)
    if ctx.query.get("compartmentId"):
        compartment(ctx, ctx.query["compartmentId"])
        items = [i for i in items if i["compartmentId"] == ctx.query["compartmentId"]]

    def view(inst):
        config = inst["shapeConfig"] or {}
        return {"id": inst["id"], "availabilityDomain": inst["availabilityDomain"],
                "compartmentId": inst["compartmentId"], "faultDomain": inst["faultDomain"], "shape": inst["shape"],
                "shapeConfig": {"ocpus": config.get("ocpus"), "memoryInGBs": config.get("memoryInGBs")}}
    return list_reply(ctx, items, filters=[("availabilityDomain", "availabilityDomain")], view=view)


# ---------------------------------------------------------------- compute hosts (GPU topology)
def host_of(sim, instance):
    """The bare-metal host under a BM instance, created on first use and stable afterwards.  Hosts of
    one cluster network (or compute cluster) share its HPC island and network block, and fill its
    local blocks in the order they are first seen, sim.local_block_hosts to a block; a host outside
    such a group is a block of its own."""
    store = sim.store
    host = instance.get("_host")
    if host is not None:
        return host
    group = None
    pool = store.instance_pools.get(instance.get("_pool") or "")
    if pool and pool["_cluster_network"]:
        group = store.cluster_networks.get(pool["_cluster_network"])
    elif instance.get("_compute_cluster"):
        group = store.compute_clusters.get(instance["_compute_cluster"])
    if group is not None and "_topology" not in group:
        group["_topology"] = (group.get("hpcIslandId") or store.ocids.new("computehpcisland"),
                              (group.get("networkBlockIds") or [store.ocids.new("computenetworkblock")])[0])
        group["_local_blocks"] = []   # [local block OCID, hosts in it], the last one filling
    if group is None:
        island, block = store.ocids.new("computehpcisland"), store.ocids.new("computenetworkblock")
        local = store.ocids.new("computelocalblock")
    else:
        island, block = group["_topology"]
        blocks = group["_local_blocks"]
        if not blocks or blocks[-1][1] >= sim.local_block_hosts:
            blocks.append([store.ocids.new("computelocalblock"), 0])
        blocks[-1][1] += 1
        local = blocks[-1][0]
    host = {"id": store.ocids.new("computehost"), "hpcIslandId": island, "networkBlockId": block,
            "localBlockId": local, "timeCreated": instance["timeCreated"]}
    instance["_host"] = host
    return host


def host_view(sim, instance):
    host = host_of(sim, instance)
    alive = instance["lifecycleState"] != "TERMINATED"
    return {"availabilityDomain": instance["availabilityDomain"], "compartmentId": instance["compartmentId"],
            "id": host["id"], "faultDomain": instance["faultDomain"], "hpcIslandId": host["hpcIslandId"],
            "networkBlockId": host["networkBlockId"], "localBlockId": host["localBlockId"],
            "gpuMemoryFabricId": None, "instanceId": instance["id"] if alive else None, "shape": instance["shape"],
            "health": "HEALTHY", "lifecycleState": "OCCUPIED" if alive else "AVAILABLE",
            "hasImpactedComponents": False, "timeCreated": host["timeCreated"], "timeUpdated": host["timeCreated"],
            "displayName": "host-" + host["id"][-8:], "freeformTags": {}, "definedTags": {}}


def _hosts(ctx):
    """The compute hosts filed in the compartment: beside their instances, or all in the tenancy's root
    compartment with sim.compute_hosts_in_root (as OCI's reference describes a host's compartment)."""
    comp = compartment(ctx, ctx.query.get("compartmentId"))
    in_root = ctx.sim.compute_hosts_in_root
    return [host_view(ctx.sim, i) for i in ctx.store.instances.values()
            if i["shape"].startswith("BM.") and i["_tenancy"] == ctx.tenancy
            and (comp["id"] == ctx.tenancy if in_root else i["compartmentId"] == comp["id"])]


def list_compute_hosts(ctx):
    items = _hosts(ctx)
    query = ctx.query
    if query.get("networkResourceId"):
        rid = query["networkResourceId"]
        items = [h for h in items if rid in (h["hpcIslandId"], h["networkBlockId"], h["localBlockId"])]
    for param, field in (("computeHostLifecycleState", "lifecycleState"), ("computeHostHealth", "health")):
        if query.get(param):
            items = [h for h in items if h[field] == query[param]]
    reply = list_reply(ctx, items, filters=[("availabilityDomain", "availabilityDomain")])
    reply.body = {"items": reply.body}
    return reply


def get_compute_host(ctx):
    for instance in ctx.store.instances.values():
        host = instance.get("_host")
        if host and host["id"] == ctx.params["computeHostId"] and instance["_tenancy"] == ctx.tenancy:
            view = host_view(ctx.sim, instance)
            view.pop("hasImpactedComponents")
            return get_reply(view)
    raise not_found("compute host")


# ---------------------------------------------------------------- compute clusters
def create_compute_cluster(ctx):
    body = ctx.body
    required(body, "availabilityDomain", "compartmentId")
    if body["availabilityDomain"] not in ctx.sim.availability_domains:
        raise invalid("Invalid availability domain: {0}".format(body["availabilityDomain"]))
    cluster = base(ctx, body, "computecluster", "computecluster", {
        "availabilityDomain": body["availabilityDomain"], "lifecycleState": "ACTIVE",
        "placementConstraintDetails": body.get("placementConstraintDetails"), "timeUpdated": None})
    ctx.store.compute_clusters[cluster["id"]] = cluster
    return get_reply(cluster)


def get_compute_cluster(ctx):
    return get_reply(owned(ctx, "compute_clusters", ctx.params["computeClusterId"], "compute cluster"))


def update_compute_cluster(ctx):
    cluster = owned(ctx, "compute_clusters", ctx.params["computeClusterId"], "compute cluster")
    apply_tags_and_name(cluster, ctx.body)
    cluster["timeUpdated"] = rfc3339(ctx.store.now())
    return get_reply(cluster)


def delete_compute_cluster(ctx):
    cluster = owned(ctx, "compute_clusters", ctx.params["computeClusterId"], "compute cluster")
    if cluster["lifecycleState"] == "DELETED":
        return Reply(204)
    members = [i["id"] for i in ctx.store.instances.values()
               if i["_compute_cluster"] == cluster["id"] and i["lifecycleState"] != "TERMINATED"]
    if members:
        raise conflict("Compute cluster {0} still has {1} instance(s); terminate them first.".format(
            cluster["id"], len(members)))
    cluster["lifecycleState"] = "DELETED"
    return Reply(204)


def list_compute_clusters(ctx):
    keys = ("availabilityDomain", "compartmentId", "displayName", "id", "lifecycleState", "timeCreated",
            "definedTags", "freeformTags")
    reply = list_reply(ctx, in_compartment(ctx, "compute_clusters"),
                       filters=[("availabilityDomain", "availabilityDomain")], view=lambda r: {k: r[k] for k in keys})
    reply.body = {"items": reply.body}
    return reply


def register(router):
    router.add("GET", "/images", list_images)
    router.add("GET", "/images/{imageId}", get_image)
    router.add("GET", "/shapes", list_shapes)
    router.add("POST", "/computeCapacityReports", create_compute_capacity_report)
    router.add("POST", "/instances", launch_instance)
    router.add("GET", "/instances", list_instances)
    router.add("GET", "/instances/{instanceId}", get_instance)
    router.add("PUT", "/instances/{instanceId}", update_instance)
    router.add("POST", "/instances/{instanceId}", instance_action)
    router.add("DELETE", "/instances/{instanceId}", terminate_instance)
    router.add("GET", "/vnicAttachments", list_vnic_attachments)
    router.add("POST", "/vnicAttachments", attach_vnic)
    router.add("GET", "/vnicAttachments/{vnicAttachmentId}", get_vnic_attachment)
    router.add("DELETE", "/vnicAttachments/{vnicAttachmentId}", detach_vnic)
    router.add("GET", "/computeHosts", list_compute_hosts)
    router.add("GET", "/computeHosts/{computeHostId}", get_compute_host)
    router.add("POST", "/computeCapacityReservations", create_compute_capacity_reservation)
    router.add("GET", "/computeCapacityReservations", list_compute_capacity_reservations)
    router.add("GET", "/computeCapacityReservations/{capacityReservationId}", get_compute_capacity_reservation)
    router.add("PUT", "/computeCapacityReservations/{capacityReservationId}", update_compute_capacity_reservation)
    router.add("DELETE", "/computeCapacityReservations/{capacityReservationId}", delete_compute_capacity_reservation)
    router.add("GET", "/computeCapacityReservations/{capacityReservationId}/instances",
               list_compute_capacity_reservation_instances)
    router.add("POST", "/computeClusters", create_compute_cluster)
    router.add("GET", "/computeClusters", list_compute_clusters)
    router.add("GET", "/computeClusters/{computeClusterId}", get_compute_cluster)
    router.add("PUT", "/computeClusters/{computeClusterId}", update_compute_cluster)
    router.add("DELETE", "/computeClusters/{computeClusterId}", delete_compute_cluster)
