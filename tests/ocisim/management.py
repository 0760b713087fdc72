# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute management (ComputeManagementClient): instance configurations, instance pools and
cluster networks."""

from __future__ import annotations

import copy
import string

from . import compute, workrequests
from .compute import OUT_OF_CAPACITY
from .core import conflict, invalid, public, rfc3339
from .resources import apply_tags_and_name, base, compartment, get_reply, in_compartment, list_reply, owned, required
from .web import Reply

POOL_SUMMARY = ("id", "compartmentId", "displayName", "instanceConfigurationId", "poolType", "lifecycleState",
                "availabilityDomains", "size", "timeCreated", "definedTags", "freeformTags", "currentSize")
CN_SUMMARY = ("id", "compartmentId", "definedTags", "displayName", "freeformTags", "instancePools",
              "lifecycleState", "timeCreated", "timeUpdated")
CLUSTER_SHAPE_PREFIXES = ("BM.GPU", "BM.HPC", "BM.Optimized")


# ---------------------------------------------------------------- instance configurations
def create_instance_configuration(ctx):
    body = ctx.body
    source = body.get("source") or "NONE"
    if source == "INSTANCE":
        required(body, "instanceId")
        inst = owned(ctx, "instances", body["instanceId"], "instance")
        vnic = _primary_vnic(ctx.store, inst)
        details = {"instanceType": "compute", "launchDetails": {
            "availabilityDomain": inst["availabilityDomain"], "compartmentId": inst["compartmentId"],
            "shape": inst["shape"], "metadata": inst["metadata"],
            "sourceDetails": {"sourceType": "image", "imageId": inst["imageId"]},
            "createVnicDetails": {"subnetId": vnic["subnetId"] if vnic else None,
                                  "assignPublicIp": bool(vnic and vnic["publicIp"])}}}
    else:
        required(body, "instanceDetails")
        details = copy.deepcopy(body["instanceDetails"])
        if details.get("instanceType") != "compute":
            raise invalid("Only instanceType 'compute' is supported.")
        launch = details.get("launchDetails") or {}
        if launch.get("shape") and launch["shape"] not in compute.SHAPES_BY_NAME:
            raise invalid("Invalid shape: {0}".format(launch["shape"]))
        image_id = (launch.get("sourceDetails") or {}).get("imageId")
        if image_id:
            owned(ctx, "images", image_id, "image")
    config = base(ctx, body, "instanceconfiguration", "instanceconfiguration",
                  {"instanceDetails": details, "deferredFields": None})
    ctx.store.instance_configurations[config["id"]] = config
    return get_reply(config)


def _primary_vnic(store, instance):
    for att_id in instance["_attachments"]:
        att = store.vnic_attachments.get(att_id)
        if att and att["nicIndex"] == 0:
            return store.vnics.get(att["vnicId"])
    return None


def get_instance_configuration(ctx):
    return get_reply(owned(ctx, "instance_configurations", ctx.params["instanceConfigurationId"],
                           "instance configuration"))


def list_instance_configurations(ctx):
    keys = ("compartmentId", "displayName", "id", "timeCreated", "definedTags", "freeformTags")
    return list_reply(ctx, in_compartment(ctx, "instance_configurations"),
                      view=lambda r: {k: r[k] for k in keys})


def update_instance_configuration(ctx):
    config = owned(ctx, "instance_configurations", ctx.params["instanceConfigurationId"], "instance configuration")
    apply_tags_and_name(config, ctx.body)
    return get_reply(config)


def delete_instance_configuration(ctx):
    config = owned(ctx, "instance_configurations", ctx.params["instanceConfigurationId"], "instance configuration")
    users = [p["id"] for p in ctx.store.instance_pools.values()
             if p["instanceConfigurationId"] == config["id"] and p["lifecycleState"] != "TERMINATED"]
    if users:
        raise conflict("Instance configuration {0} is used by instance pool {1}.".format(config["id"], users[0]))
    del ctx.store.instance_configurations[config["id"]]
    return Reply(204)


def _launch_details(config, override=None):
    details = copy.deepcopy((config["instanceDetails"] or {}).get("launchDetails") or {})
    details.setdefault("compartmentId", config["compartmentId"])
    if override:
        for key, value in override.items():
            if value is not None:
                details[key] = value
    return details


def launch_instance_configuration(ctx):
    sim = ctx.sim
    config = owned(ctx, "instance_configurations", ctx.params["instanceConfigurationId"], "instance configuration")
    body = ctx.body
    details = _launch_details(config, (body.get("launchDetails") or {}) if body.get("instanceType") in
                              (None, "compute") else None)
    shape, image, subnet, ad, cluster = compute.validate_launch(ctx, details)
    reservation = compute.launch_reservation(ctx, details, ad, shape)
    if not compute.hosts_fit(sim, reservation, ad, shape, 1, details.get("faultDomain")):
        raise compute.out_of_capacity()
    instance = compute.build_instance(sim, ctx.tenancy, details, image, subnet, ad,
                                      instance_configuration_id=config["id"], compute_cluster=cluster)
    wr = workrequests.new(ctx.store, ctx.tenancy, instance["compartmentId"], "LaunchInstanceConfiguration",
                          [("instance", "IN_PROGRESS", instance["id"]),
                           ("instanceconfiguration", "RELATED", config["id"])], sim.durations["instance_launch"])
    sim.call_hook("launch", instance)

    def done():
        compute.mark_running(sim, instance)
        workrequests.succeed(ctx.store, wr, {instance["id"]: "CREATED"})
    ctx.store.schedule(sim.durations["instance_launch"], done)
    return get_reply(instance, compute.instance_view, {"opc-work-request-id": wr["id"]})


# ---------------------------------------------------------------- instance pools (shared logic)
def _format_name(formatter, pool, count, default):
    if not formatter:
        return default
    return string.Template(formatter).safe_substitute(launchCount=count, instancePoolName=pool["displayName"])


def _pool_placements(ctx, placements):
    out = []
    for place in placements:
        required(place, "availabilityDomain")
        if place["availabilityDomain"] not in ctx.sim.availability_domains:
            raise invalid("Invalid availability domain: {0}".format(place["availabilityDomain"]))
        subnet_id = place.get("primarySubnetId") or (place.get("primaryVnicSubnets") or {}).get("subnetId")
        if not subnet_id:
            raise invalid("placementConfigurations[].primarySubnetId is required.")
        owned(ctx, "subnets", subnet_id, "subnet")
        out.append({"availabilityDomain": place["availabilityDomain"], "primarySubnetId": subnet_id,
                    "faultDomains": place.get("faultDomains"), "computeClusterId": place.get("computeClusterId"),
                    "primaryVnicSubnets": {"subnetId": subnet_id, "isAssignIpv6Ip": False, "ipv6AddressIpv6SubnetCidrPairDetails": None},
                    "secondaryVnicSubnets": place.get("secondaryVnicSubnets")})
    return out


def _new_pool(ctx, body, config, placements, size, display_name, tenancy, now):
    store = ctx.store
    pool = {
        "id": store.ocids.new("instancepool"), "compartmentId": body.get("compartmentId") or config["compartmentId"],
        "displayName": display_name, "freeformTags": dict(body.get("freeformTags") or {}),
        "definedTags": dict(body.get("definedTags") or {}), "instanceConfigurationId": config["id"],
        "poolType": "STANDARD", "lifecycleState": "PROVISIONING", "placementConfigurations": placements, "size": size,
        "currentSize": 0, "timeCreated": ctx.store.stamp() if now is None else rfc3339(now), "loadBalancers": [],
        "instanceDisplayNameFormatter": body.get("instanceDisplayNameFormatter"),
        "instanceHostnameFormatter": body.get("instanceHostnameFormatter"), "lifecycleManagement": None,
        "_tenancy": tenancy, "_members": [], "_launch_count": 0, "_cluster_network": None,
    }
    store.instance_pools[pool["id"]] = pool
    return pool


def pool_view(pool):
    return public(pool)


def pool_summary(pool):
    data = {k: pool.get(k) for k in POOL_SUMMARY}
    data["availabilityDomains"] = sorted({p["availabilityDomain"] for p in pool["placementConfigurations"]})
    return data


def grow_pool(sim, pool, count, state="PROVISIONING", now=None):
    """Launch `count` more instances into the pool from its instance configuration."""
    store = sim.store
    config = store.instance_configurations[pool["instanceConfigurationId"]]
    created = []
    for _count in range(count):
        place = pool["placementConfigurations"][len(pool["_members"]) % len(pool["placementConfigurations"])]
        details = _launch_details(config, {"compartmentId": pool["compartmentId"],
                                           "availabilityDomain": place["availabilityDomain"]})
        details.setdefault("createVnicDetails", {})
        details["createVnicDetails"] = dict(details["createVnicDetails"], subnetId=place["primarySubnetId"])
        image = store.images[(details.get("sourceDetails") or {}).get("imageId") or details.get("imageId")]
        subnet = store.subnets[place["primarySubnetId"]]
        pool["_launch_count"] += 1
        suffix = store.ocids.unique()[-5:]
        default_name = "inst-{0}-{1}".format(suffix, pool["displayName"])
        name = _format_name(pool["instanceDisplayNameFormatter"], pool, pool["_launch_count"], default_name)
        host = _format_name(pool["instanceHostnameFormatter"], pool, pool["_launch_count"], "inst-" + suffix)
        details["createVnicDetails"]["hostnameLabel"] = host
        cluster = store.compute_clusters.get(place.get("computeClusterId") or details.get("computeClusterId") or "")
        instance = compute.build_instance(sim, pool["_tenancy"], details, image, subnet, place["availabilityDomain"],
                                          state=state, instance_configuration_id=config["id"], compute_cluster=cluster,
                                          display_name=name, hostname=host, now=now)
        instance["freeformTags"].update(pool["freeformTags"])
        instance["_pool"] = pool["id"]
        pool["_members"].append(instance["id"])
        created.append(instance)
        if state != "RUNNING":
            sim.call_hook("launch", instance)
    return created


def shrink_pool(sim, pool, count, delay):
    """Terminate the `count` newest live instances of the pool."""
    store = sim.store
    live = [store.instances[i] for i in pool["_members"] if store.instances[i]["lifecycleState"] not in compute.DEAD]
    for instance in live[len(live) - count:] if count else []:
        compute.start_termination(sim, instance, delay)
        pool["_members"].remove(instance["id"])


def live_members(store, pool):
    return [store.instances[i] for i in pool["_members"]
            if i in store.instances and store.instances[i]["lifecycleState"] != "TERMINATED"]


def _pool_running(sim, pool):
    for inst_id in pool["_members"]:
        compute.mark_running(sim, sim.store.instances[inst_id])
    pool["lifecycleState"] = "RUNNING"
    pool["currentSize"] = len(live_members(sim.store, pool))


def _check_public_ip(ctx, config, placements):
    wants = ((_launch_details(config).get("createVnicDetails") or {}).get("assignPublicIp"))
    for place in placements:
        if wants and ctx.store.subnets[place["primarySubnetId"]]["prohibitPublicIpOnVnic"]:
            raise invalid("Instance configuration {0} asks for a public IP but subnet {1} prohibits it.".format(
                config["id"], place["primarySubnetId"]))


def _pool_config(ctx, config_id):
    config = owned(ctx, "instance_configurations", config_id, "instance configuration")
    details = _launch_details(config)
    shape = details.get("shape")
    image_id = (details.get("sourceDetails") or {}).get("imageId") or details.get("imageId")
    if not shape or not image_id:
        raise invalid("Instance configuration {0} must define shape and sourceDetails.imageId.".format(config["id"]))
    return config, shape


def _pool_reservation(ctx, config, compartment_id, placements):
    """The capacity reservation the instance configuration's launch details name, checked against every
    placement (400 for another availability domain or a shape it does not hold); None without one."""
    details = dict(_launch_details(config), compartmentId=compartment_id)
    reservation = None
    for place in placements:
        reservation = compute.launch_reservation(ctx, dict(details, faultDomain=None), place["availabilityDomain"],
                                                 details.get("shape"))
    return reservation


def _config_fits(sim, config, availability_domain, count):
    """Whether `count` more instances of the configuration find hosts (its reservation's, or on demand)."""
    details = _launch_details(config)
    return compute.hosts_fit(sim, compute.stored_reservation(sim.store, details), availability_domain,
                             details.get("shape"), count)


def create_instance_pool(ctx):
    sim = ctx.sim
    body = ctx.body
    required(body, "compartmentId", "instanceConfigurationId", "placementConfigurations", "size")
    compartment(ctx, body["compartmentId"])
    config = _pool_config(ctx, body["instanceConfigurationId"])[0]
    placements = _pool_placements(ctx, body["placementConfigurations"])
    _check_public_ip(ctx, config, placements)
    _pool_reservation(ctx, config, body["compartmentId"], placements)
    size = int(body["size"])
    pool = _new_pool(ctx, body, config, placements, size, body.get("displayName") or "instancepool", ctx.tenancy,
                     None)
    if _config_fits(sim, config, placements[0]["availabilityDomain"], size):
        grow_pool(sim, pool, size)

    def done():
        if pool["lifecycleState"] == "PROVISIONING":
            _pool_running(sim, pool)
    ctx.store.schedule(sim.durations["instance_pool_create"], done)
    return get_reply(pool, pool_view)


def get_instance_pool(ctx):
    return get_reply(owned(ctx, "instance_pools", ctx.params["instancePoolId"], "instance pool"), pool_view)


def list_instance_pools(ctx):
    return list_reply(ctx, in_compartment(ctx, "instance_pools"), view=pool_summary)


def _resize_pool(ctx, pool, new_size, duration, on_done=None):
    """Resize one pool: SCALING now, RUNNING after duration.  Returns False if capacity is lacking."""
    sim = ctx.sim
    store = ctx.store
    current = len(live_members(store, pool))
    if new_size == current:
        return True
    config = store.instance_configurations[pool["instanceConfigurationId"]]
    ad = pool["placementConfigurations"][0]["availabilityDomain"]
    if new_size > current and not _config_fits(sim, config, ad, new_size - current):
        return False
    pool["lifecycleState"] = "SCALING"
    pool["size"] = new_size
    if new_size > current:
        grow_pool(sim, pool, new_size - current)
    else:
        shrink_pool(sim, pool, current - new_size, sim.durations["instance_terminate"])

    def done():
        if pool["lifecycleState"] == "SCALING":
            _pool_running(sim, pool)
        if on_done:
            on_done()
    store.schedule(duration, done)
    return True


def update_instance_pool(ctx):
    pool = owned(ctx, "instance_pools", ctx.params["instancePoolId"], "instance pool")
    if pool["_cluster_network"]:
        raise invalid("Instance pool {0} belongs to a cluster network; update the cluster network.".format(pool["id"]))
    if pool["lifecycleState"] != "RUNNING":
        raise conflict("Instance pool {0} is {1}.".format(pool["id"], pool["lifecycleState"]), "IncorrectState")
    body = ctx.body
    apply_tags_and_name(pool, body)
    if body.get("instanceConfigurationId"):
        _pool_config(ctx, body["instanceConfigurationId"])
        pool["instanceConfigurationId"] = body["instanceConfigurationId"]
    if body.get("size") is not None:
        if not _resize_pool(ctx, pool, int(body["size"]), ctx.sim.durations["instance_pool_create"]):
            raise compute.out_of_capacity()
    return get_reply(pool, pool_view)


def _terminate_pool(sim, pool, duration):
    pool["lifecycleState"] = "TERMINATING"
    for instance in live_members(sim.store, pool):
        compute.start_termination(sim, instance, sim.durations["instance_terminate"])

    def done():
        pool["lifecycleState"] = "TERMINATED"
        pool["currentSize"] = 0
    sim.store.schedule(duration, done)


def terminate_instance_pool(ctx):
    pool = owned(ctx, "instance_pools", ctx.params["instancePoolId"], "instance pool")
    if pool["_cluster_network"]:
        raise conflict("Instance pool {0} belongs to a cluster network.".format(pool["id"]))
    if pool["lifecycleState"] not in ("TERMINATING", "TERMINATED"):
        _terminate_pool(ctx.sim, pool, ctx.sim.durations["instance_terminate"])
    return Reply(204)


def instance_summary(sim, instance):
    state = instance["lifecycleState"]
    return {
        "id": instance["id"], "availabilityDomain": instance["availabilityDomain"],
        "compartmentId": instance["compartmentId"], "displayName": instance["displayName"],
        "faultDomain": instance["faultDomain"], "instanceConfigurationId": instance["instanceConfigurationId"],
        "region": sim.region, "shape": instance["shape"], "state": state.capitalize(),
        "timeCreated": instance["timeCreated"], "loadBalancerBackends": [],
    }


def list_instance_pool_instances(ctx):
    compartment(ctx, ctx.query.get("compartmentId"))
    pool = owned(ctx, "instance_pools", ctx.params["instancePoolId"], "instance pool")
    items = live_members(ctx.store, pool)
    return list_reply(ctx, items, view=lambda i: instance_summary(ctx.sim, i))


# ---------------------------------------------------------------- cluster networks
def cn_view(ctx_or_sim, cn):
    store = ctx_or_sim.store
    data = public(cn)
    data["instancePools"] = [pool_view(store.instance_pools[p]) for p in cn["_pools"]]
    return data


def cn_summary(ctx_or_sim, cn):
    store = ctx_or_sim.store
    data = {k: cn.get(k) for k in CN_SUMMARY}
    data["instancePools"] = [pool_summary(store.instance_pools[p]) for p in cn["_pools"]]
    return data


def create_cluster_network(ctx):
    sim = ctx.sim
    store = ctx.store
    body = ctx.body
    required(body, "compartmentId", "instancePools", "placementConfiguration")
    compartment(ctx, body["compartmentId"])
    place = body["placementConfiguration"]
    required(place, "availabilityDomain")
    pools_in = body["instancePools"]
    if not pools_in:
        raise invalid("instancePools must contain at least one pool.")
    placements = _pool_placements(ctx, [{"availabilityDomain": place["availabilityDomain"],
                                         "primarySubnetId": place.get("primarySubnetId"),
                                         "primaryVnicSubnets": place.get("primaryVnicSubnets"),
                                         "secondaryVnicSubnets": place.get("secondaryVnicSubnets")}])
    configs = []
    needed = {}
    for item in pools_in:
        required(item, "instanceConfigurationId", "size")
        config, shape = _pool_config(ctx, item["instanceConfigurationId"])
        if not shape.startswith(CLUSTER_SHAPE_PREFIXES):
            raise invalid("Shape {0} is not supported in a cluster network.".format(shape))
        if int(item["size"]) < 1:
            raise invalid("instancePools[].size must be at least 1.")
        _check_public_ip(ctx, config, placements)
        reservation = _pool_reservation(ctx, config, body["compartmentId"], placements)
        configs.append((item, config))
        key = (reservation["id"] if reservation else None, shape)
        needed[key] = needed.get(key, 0) + int(item["size"])
    ad = place["availabilityDomain"]
    fits = all(compute.hosts_fit(sim, store.compute_capacity_reservations.get(rid or ""), ad, shape, n)
               for (rid, shape), n in needed.items())
    now = store.now()
    cluster_conf = body.get("clusterConfiguration") or {}
    cn = base(ctx, body, "clusternetwork", "clusternetwork", {
        "hpcIslandId": cluster_conf.get("hpcIslandId") or store.ocids.new("computehpcisland"),
        "networkBlockIds": cluster_conf.get("networkBlockIds") or [store.ocids.new("computenetworkblock")],
        "placementConfiguration": {"availabilityDomain": ad,
                                   "placementConstraint": place.get("placementConstraint"),
                                   "primarySubnetId": placements[0]["primarySubnetId"],
                                   "primaryVnicSubnets": placements[0]["primaryVnicSubnets"],
                                   "secondaryVnicSubnets": place.get("secondaryVnicSubnets")},
        "lifecycleState": "PROVISIONING", "timeUpdated": rfc3339(now), "_pools": []})
    for index, (item, config) in enumerate(configs):
        name = item.get("displayName") or "{0}-pool{1}".format(cn["displayName"], index + 1)
        pool = _new_pool(ctx, dict(item, compartmentId=cn["compartmentId"]), config, placements, int(item["size"]),
                         name, ctx.tenancy, None)
        pool["_cluster_network"] = cn["id"]
        cn["_pools"].append(pool["id"])
    store.cluster_networks[cn["id"]] = cn
    resources = [("clusternetwork", "IN_PROGRESS", cn["id"])] + \
        [("instancepool", "IN_PROGRESS", p) for p in cn["_pools"]]
    duration = sim.durations["cluster_network_create"]
    wr = workrequests.new(store, ctx.tenancy, cn["compartmentId"], "CreateClusterNetwork", resources, duration)
    if fits:
        for pool_id in cn["_pools"]:
            pool = store.instance_pools[pool_id]
            grow_pool(sim, pool, pool["size"])

    def done():
        if cn["lifecycleState"] != "PROVISIONING":
            workrequests.fail(store, wr, "The cluster network was terminated while it was being created.")
            return
        if fits:
            for pool_id in cn["_pools"]:
                _pool_running(sim, store.instance_pools[pool_id])
            cn["lifecycleState"] = "RUNNING"
            cn["timeUpdated"] = rfc3339(store.now())
            workrequests.succeed(store, wr, {r[2]: "CREATED" for r in resources})
        else:
            workrequests.fail(store, wr, OUT_OF_CAPACITY)
            for pool_id in cn["_pools"]:
                store.instance_pools[pool_id]["lifecycleState"] = "TERMINATED"
            cn["lifecycleState"] = "TERMINATED"
            cn["timeUpdated"] = rfc3339(store.now())
    store.schedule(duration, done)
    return get_reply(cn, lambda r: cn_view(ctx, r), {"opc-work-request-id": wr["id"]})


def get_cluster_network(ctx):
    cn = owned(ctx, "cluster_networks", ctx.params["clusterNetworkId"], "cluster network")
    return get_reply(cn, lambda r: cn_view(ctx, r))


def list_cluster_networks(ctx):
    return list_reply(ctx, in_compartment(ctx, "cluster_networks"), view=lambda r: cn_summary(ctx, r))


def list_cluster_network_instances(ctx):
    compartment(ctx, ctx.query.get("compartmentId"))
    cn = owned(ctx, "cluster_networks", ctx.params["clusterNetworkId"], "cluster network")
    items = []
    for pool_id in cn["_pools"]:
        items += live_members(ctx.store, ctx.store.instance_pools[pool_id])
    return list_reply(ctx, items, view=lambda i: instance_summary(ctx.sim, i))


def update_cluster_network(ctx):
    sim = ctx.sim
    store = ctx.store
    cn = owned(ctx, "cluster_networks", ctx.params["clusterNetworkId"], "cluster network")
    body = ctx.body
    if cn["lifecycleState"] != "RUNNING":
        raise conflict("Cluster network {0} is {1}.".format(cn["id"], cn["lifecycleState"]), "IncorrectState")
    apply_tags_and_name(cn, body)
    changes = []
    for item in body.get("instancePools") or []:
        required(item, "id")
        if item["id"] not in cn["_pools"]:
            raise invalid("Instance pool {0} is not part of cluster network {1}.".format(item["id"], cn["id"]))
        pool = store.instance_pools[item["id"]]
        apply_tags_and_name(pool, item)
        if item.get("instanceConfigurationId"):
            _pool_config(ctx, item["instanceConfigurationId"])
            pool["instanceConfigurationId"] = item["instanceConfigurationId"]
        if item.get("size") is not None and int(item["size"]) != len(live_members(store, pool)):
            if int(item["size"]) < 0:
                raise invalid("size must not be negative.")
            changes.append((pool, int(item["size"])))
    cn["timeUpdated"] = rfc3339(store.now())
    headers = {}
    if changes:
        duration = sim.durations["cluster_network_scale"]
        resources = [("clusternetwork", "IN_PROGRESS", cn["id"])] + [("instancepool", "IN_PROGRESS", p["id"])
                                                                     for p, _size in changes]
        wr = workrequests.new(store, ctx.tenancy, cn["compartmentId"], "UpdateClusterNetwork", resources, duration)
        headers["opc-work-request-id"] = wr["id"]
        cn["lifecycleState"] = "SCALING"
        failed = [p for p, size in changes if not _resize_pool(ctx, p, size, duration)]
        for pool in failed:
            pool["lifecycleState"] = "SCALING"

        def done():
            for pool in failed:
                pool["lifecycleState"] = "RUNNING"
            cn["lifecycleState"] = "RUNNING"
            cn["timeUpdated"] = rfc3339(store.now())
            if failed:
                workrequests.fail(store, wr, OUT_OF_CAPACITY)
            else:
                workrequests.succeed(store, wr, {r[2]: "UPDATED" for r in resources})
        store.schedule(duration, done)
    return get_reply(cn, lambda r: cn_view(ctx, r), headers)


def terminate_cluster_network(ctx):
    sim = ctx.sim
    store = ctx.store
    cn = owned(ctx, "cluster_networks", ctx.params["clusterNetworkId"], "cluster network")
    if cn["lifecycleState"] in ("TERMINATING", "TERMINATED"):
        return Reply(204)
    duration = sim.durations["cluster_network_terminate"]
    resources = [("clusternetwork", "IN_PROGRESS", cn["id"])] + [("instancepool", "IN_PROGRESS", p)
                                                                 for p in cn["_pools"]]
    wr = workrequests.new(store, ctx.tenancy, cn["compartmentId"], "TerminateClusterNetwork", resources, duration)
    cn["lifecycleState"] = "TERMINATING"
    for pool_id in cn["_pools"]:
        _terminate_pool(sim, store.instance_pools[pool_id], duration)

    def done():
        cn["lifecycleState"] = "TERMINATED"
        cn["timeUpdated"] = rfc3339(store.now())
        workrequests.succeed(store, wr, {r[2]: "DELETED" for r in resources})
    store.schedule(duration, done)
    return Reply(204, headers={"opc-work-request-id": wr["id"]})


def detach_instance_pool_instance(ctx):
    """DetachInstancePoolInstance: one chosen instance leaves its pool (and so its cluster network).

    isDecrementSize lowers the pool's size; without it the pool launches a replacement from its
    instance configuration. isAutoTerminate terminates the instance; without it, it keeps running
    outside the pool. The pool and its cluster network are SCALING until the work request ends."""
    sim = ctx.sim
    store = ctx.store
    pool = owned(ctx, "instance_pools", ctx.params["instancePoolId"], "instance pool")
    body = ctx.body
    required(body, "instanceId")
    cn = store.cluster_networks.get(pool["_cluster_network"] or "")
    for holder, kind in ((pool, "Instance pool"), (cn, "Cluster network")):
        if holder is not None and holder["lifecycleState"] != "RUNNING":
            raise conflict("{0} {1} is {2}.".format(kind, holder["id"], holder["lifecycleState"]), "IncorrectState")
    live = [i["id"] for i in live_members(store, pool) if i["lifecycleState"] not in compute.DEAD]
    if body["instanceId"] not in live:
        raise invalid("Instance {0} is not a member of instance pool {1}.".format(body["instanceId"], pool["id"]))
    decrement = bool(body.get("isDecrementSize", True))
    terminate = bool(body.get("isAutoTerminate", False))
    instance = store.instances[body["instanceId"]]
    if not decrement:
        config = store.instance_configurations[pool["instanceConfigurationId"]]
        ad = pool["placementConfigurations"][0]["availabilityDomain"]
        if not _config_fits(sim, config, ad, 1):
            raise compute.out_of_capacity()
    duration = sim.durations["cluster_network_scale"]
    resources = [("instancepool", "IN_PROGRESS", pool["id"]), ("instance", "IN_PROGRESS", instance["id"])]
    wr = workrequests.new(store, ctx.tenancy, pool["compartmentId"], "DetachInstancePoolInstance", resources, duration)
    pool["_members"].remove(instance["id"])
    instance["_pool"] = None
    if terminate:
        compute.start_termination(sim, instance, sim.durations["instance_terminate"])
    pool["lifecycleState"] = "SCALING"
    if cn is not None:
        cn["lifecycleState"] = "SCALING"
    if decrement:
        pool["size"] = max(0, pool["size"] - 1)
    else:
        grow_pool(sim, pool, 1)

    def done():
        if pool["lifecycleState"] == "SCALING":
            _pool_running(sim, pool)
        if cn is not None and cn["lifecycleState"] == "SCALING":
            cn["lifecycleState"] = "RUNNING"
            cn["timeUpdated"] = rfc3339(store.now())
        workrequests.succeed(store, wr, {pool["id"]: "UPDATED", instance["id"]: "DELETED" if terminate else "UPDATED"})
    store.schedule(duration, done)
    return Reply(202, headers={"opc-work-request-id": wr["id"]})


def register(router):
    router.add("POST", "/instanceConfigurations", create_instance_configuration)
    router.add("GET", "/instanceConfigurations", list_instance_configurations)
    router.add("GET", "/instanceConfigurations/{instanceConfigurationId}", get_instance_configuration)
    router.add("PUT", "/instanceConfigurations/{instanceConfigurationId}", update_instance_configuration)
    router.add("DELETE", "/instanceConfigurations/{instanceConfigurationId}", delete_instance_configuration)
    router.add("POST", "/instanceConfigurations/{instanceConfigurationId}/actions/launch",
               launch_instance_configuration)
    router.add("POST", "/instancePools", create_instance_pool)
    router.add("GET", "/instancePools", list_instance_pools)
    router.add("GET", "/instancePools/{instancePoolId}", get_instance_pool)
    router.add("PUT", "/instancePools/{instancePoolId}", update_instance_pool)
    router.add("DELETE", "/instancePools/{instancePoolId}", terminate_instance_pool)
    router.add("GET", "/instancePools/{instancePoolId}/instances", list_instance_pool_instances)
    router.add("POST", "/instancePools/{instancePoolId}/actions/detachInstance", detach_instance_pool_instance)
    router.add("POST", "/clusterNetworks", create_cluster_network)
    router.add("GET", "/clusterNetworks", list_cluster_networks)
    router.add("GET", "/clusterNetworks/{clusterNetworkId}", get_cluster_network)
    router.add("PUT", "/clusterNetworks/{clusterNetworkId}", update_cluster_network)
    router.add("DELETE", "/clusterNetworks/{clusterNetworkId}", terminate_cluster_network)
    router.add("GET", "/clusterNetworks/{clusterNetworkId}/instances", list_cluster_network_instances)
