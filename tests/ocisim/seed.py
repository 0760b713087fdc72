# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fast set-up of large tenancies directly in the store (no HTTP, no lifecycle delays).

Seeded resources are exactly what the API would have created: instances with VNIC attachments,
VNICs and private IPs, cluster networks with their instance pools, instance configurations and a
SUCCEEDED work request.  Seeding ignores the capacity model."""

from __future__ import annotations

import ipaddress

from . import compute, management, network, workrequests
from .catalog import GPU_SHAPES
from .core import rfc3339


def _image_for(sim, shape):
    gpu = shape in GPU_SHAPES
    for image in sim.store.images.values():
        if image["displayName"] == (sim.default_gpu_image if gpu else sim.default_image):
            return image
    raise KeyError("no default image")


def seed_network(sim, compartment_id, cidr="10.0.0.0/16", subnet_prefix=None, name="seed", tenancy=None):
    """A VCN with one regional subnet covering it (or the first /subnet_prefix slice of it)."""
    store = sim.store
    tenancy = tenancy or store.compartments[compartment_id]["_tenancy"]
    with store.lock:
        net = ipaddress.ip_network(cidr)
        subnet_net = next(net.subnets(new_prefix=subnet_prefix)) if subnet_prefix else net
        ctx = sim.internal_context(tenancy, {"compartmentId": compartment_id, "cidrBlock": str(net),
                                             "displayName": name + "-vcn",
                                             "dnsLabel": "".join(c for c in name if c.isalnum())[:15] or "seed"})
        vcn = store.vcns[network.create_vcn(ctx).body["id"]]
        vcn["lifecycleState"] = "AVAILABLE"
        subnet = seed_subnet(sim, vcn["id"], str(subnet_net), name + "-subnet", dns_label="sub")
        return vcn, subnet


def seed_subnet(sim, vcn_id, cidr, name="subnet", prohibit_public_ip=False, dns_label=None):
    store = sim.store
    with store.lock:
        vcn = store.vcns[vcn_id]
        ctx = sim.internal_context(vcn["_tenancy"], {
            "compartmentId": vcn["compartmentId"], "cidrBlock": cidr, "vcnId": vcn_id, "displayName": name,
            "dnsLabel": dns_label, "prohibitPublicIpOnVnic": bool(prohibit_public_ip)})
        subnet = store.subnets[network.create_subnet(ctx).body["id"]]
        subnet["lifecycleState"] = "AVAILABLE"
        return subnet


def seed_instances(sim, count, compartments=1, shape="VM.Standard.E5.Flex", state="RUNNING", name_prefix="node",
                   freeform_tags=None, assign_public_ip=False, availability_domain=None, subnet_id=None,
                   image_id=None, parent_compartment_id=None):
    """Create `count` instances spread round-robin over `compartments` (a number of new compartments
    named seed-NN under the tenancy, or a list of existing compartment OCIDs).  Returns instance ids."""
    store = sim.store
    with store.lock:
        if isinstance(compartments, int):
            parent = parent_compartment_id or sim.tenancy_id
            comp_ids = [sim.add_compartment("seed-{0:02d}".format(i), parent)["id"] for i in range(compartments)]
        else:
            comp_ids = list(compartments)
        subnets = {}
        if subnet_id:
            subnets = {c: store.subnets[subnet_id] for c in comp_ids}
        else:
            for index, comp_id in enumerate(comp_ids):
                _vcn, subnet = seed_network(sim, comp_id, "10.{0}.0.0/16".format(index % 250),
                                            name="seed{0:02d}".format(index),
                                            tenancy=store.compartments[comp_id]["_tenancy"])
                subnets[comp_id] = subnet
        image = store.images[image_id] if image_id else _image_for(sim, shape)
        ads = list(sim.availability_domains)
        ids = []
        now = store.now()
        for i in range(count):
            comp_id = comp_ids[i % len(comp_ids)]
            ad = availability_domain or ads[i % len(ads)]
            details = {"compartmentId": comp_id, "shape": shape, "displayName": "{0}-{1}".format(name_prefix, i + 1),
                       "freeformTags": dict(freeform_tags or {}),
                       "shapeConfig": {"ocpus": 2} if compute.SHAPES_BY_NAME[shape]["isFlexible"] else None,
                       "createVnicDetails": {"assignPublicIp": assign_public_ip,
                                             "hostnameLabel": "{0}-{1}".format(name_prefix, i + 1)}}
            inst = compute.build_instance(sim, store.compartments[comp_id]["_tenancy"], details, image,
                                          subnets[comp_id], ad, state=state, now=now)
            ids.append(inst["id"])
        return ids


def seed_cluster(sim, name, size, shape="BM.GPU.H100.8", compartment_id=None, subnet_id=None, pools=1,
                 state="RUNNING", availability_domain=None, image_id=None, freeform_tags=None):
    """A cluster network as OCI leaves it after a successful create: instance configuration, `pools`
    instance pools sharing `size` instances, instances with VNICs, and a SUCCEEDED work request.
    Returns the cluster network (API view) with an extra key 'instanceIds'."""
    store = sim.store
    with store.lock:
        compartment_id = compartment_id or sim.compartment_id
        tenancy = store.compartments[compartment_id]["_tenancy"]
        if subnet_id is None:
            index = len(store.vcns)
            _vcn, subnet = seed_network(sim, compartment_id, "10.{0}.0.0/16".format(index % 250), name=name,
                                        tenancy=tenancy)
            subnet_id = subnet["id"]
        ad = availability_domain or next(iter(sim.availability_domains))
        image = store.images[image_id] if image_id else _image_for(sim, shape)
        now = store.now()
        tags = dict(freeform_tags or {})
        config = {
            "id": store.ocids.new("instanceconfiguration"), "compartmentId": compartment_id,
            "displayName": name + "-config", "freeformTags": dict(tags), "definedTags": {},
            "timeCreated": rfc3339(now), "deferredFields": None, "_tenancy": tenancy,
            "instanceDetails": {"instanceType": "compute", "launchDetails": {
                "availabilityDomain": ad, "compartmentId": compartment_id, "shape": shape,
                "sourceDetails": {"sourceType": "image", "imageId": image["id"]},
                "createVnicDetails": {"subnetId": subnet_id, "assignPublicIp": False},
                "freeformTags": dict(tags)}},
        }
        store.instance_configurations[config["id"]] = config
        cn = {
            "id": store.ocids.new("clusternetwork"), "compartmentId": compartment_id, "displayName": name,
            "freeformTags": dict(tags), "definedTags": {}, "timeCreated": rfc3339(now), "timeUpdated": rfc3339(now),
            "hpcIslandId": store.ocids.new("computehpcisland"),
            "networkBlockIds": [store.ocids.new("computenetworkblock")],
            "placementConfiguration": {"availabilityDomain": ad, "placementConstraint": None,
                                       "primarySubnetId": subnet_id,
                                       "primaryVnicSubnets": {"subnetId": subnet_id, "isAssignIpv6Ip": False,
                                                              "ipv6AddressIpv6SubnetCidrPairDetails": None},
                                       "secondaryVnicSubnets": None},
            "lifecycleState": state, "_tenancy": tenancy, "_pools": [],
        }
        store.cluster_networks[cn["id"]] = cn
        placements = [{"availabilityDomain": ad, "primarySubnetId": subnet_id, "faultDomains": None,
                       "computeClusterId": None,
                       "primaryVnicSubnets": {"subnetId": subnet_id, "isAssignIpv6Ip": False,
                                              "ipv6AddressIpv6SubnetCidrPairDetails": None},
                       "secondaryVnicSubnets": None}]
        ctx = sim.internal_context(tenancy)
        instance_ids = []
        for p in range(pools):
            pool_size = size // pools + (1 if p < size % pools else 0)
            pool = management._new_pool(ctx, {"compartmentId": compartment_id, "freeformTags": tags}, config,  # pylint: disable=protected-access
                                        placements, pool_size, "{0}-pool{1}".format(name, p + 1), tenancy, now)
            pool["_cluster_network"] = cn["id"]
            pool["lifecycleState"] = state
            cn["_pools"].append(pool["id"])
            created = management.grow_pool(sim, pool, pool_size, state="RUNNING" if state == "RUNNING" else "PROVISIONING",
                                           now=now)
            pool["currentSize"] = len(created)
            instance_ids += [i["id"] for i in created]
        wr = workrequests.new(store, tenancy, compartment_id, "CreateClusterNetwork",
                              [("clusternetwork", "CREATED", cn["id"])], 0)
        workrequests.succeed(store, wr)
        view = management.cn_view(sim, cn)
        view["instanceIds"] = instance_ids
        return view
