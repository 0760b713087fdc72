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
    """Bare-metal hosts per (availability domain, shape).  Shapes without an entry are unlimited."""

    def __init__(self, sim):
        self._sim = sim
        self._lock = threading.Lock()
        self.limits = {}
        self.reservations = {}   # reservation id -> (ad, shape, count)

    def reset(self):
        with self._lock:
            self.limits = {}
            self.reservations = {}
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

    def used(self, availability_domain, shape):
        store = self._sim.store
        with store.lock:
            count = sum(1 for i in store.instances.values()
                        if i["availabilityDomain"] == availability_domain and i["shape"] == shape
                        and i["lifecycleState"] != "TERMINATED")
        with self._lock:
            count += sum(n for ad, s, n in self.reservations.values() if ad == availability_domain and s == shape)
        return count

    def available(self, availability_domain, shape):
        limit = self.limits.get((availability_domain, shape))
        if limit is None:
            return None
        return max(0, limit - self.used(availability_domain, shape))

    def fits(self, availability_domain, shape, count):
        avail = self.available(availability_domain, shape)
        return avail is None or avail >= count

    def reserve(self, key, availability_domain, shape, count):
        with self._lock:
            self.reservations[key] = (availability_domain, shape, count)

    def release(self, key):
        with self._lock:
            self.reservations.pop(key, None)


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
        "instanceConfigurationId": instance_configuration_id,
        "_tenancy": tenancy, "_compute_cluster": compute_cluster["id"] if compute_cluster else None,
        "_hostname": hostname, "_attachments": [],
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
    if not sim.capacity.fits(ad, shape, 1):
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
    router.add("POST", "/computeClusters", create_compute_cluster)
    router.add("GET", "/computeClusters", list_compute_clusters)
    router.add("GET", "/computeClusters/{computeClusterId}", get_compute_cluster)
    router.add("PUT", "/computeClusters/{computeClusterId}", update_compute_cluster)
    router.add("DELETE", "/computeClusters/{computeClusterId}", delete_compute_cluster)
