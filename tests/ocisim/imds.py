# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Instance metadata service v2, one per simulated instance:
{endpoint}/_imds/<instance-ocid>/opc/v2/{instance,vnics,host}/... with `Authorization: Bearer Oracle`."""

from __future__ import annotations

import calendar
import json
import time

from . import compute
from .catalog import region_key
from .core import OciError
from .web import Reply


def _epoch_ms(stamp):
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) * 1000


def instance_document(sim, instance):
    ad = instance["availabilityDomain"]
    shape_config = instance["shapeConfig"]
    comp = sim.store.compartments.get(instance["compartmentId"]) or {}
    return {
        "agentConfig": {"allPluginsDisabled": False, "managementDisabled": False, "monitoringDisabled": False},
        "availabilityDomain": ad,
        "canonicalRegionName": sim.region,
        "compartmentId": instance["compartmentId"],
        "definedTags": instance["definedTags"],
        "displayName": instance["displayName"],
        "faultDomain": instance["faultDomain"],
        "freeformTags": instance["freeformTags"],
        "hostname": instance["_hostname"],
        "id": instance["id"],
        "image": instance["imageId"],
        "metadata": instance["metadata"],
        "ociAdName": "{0}-ad-{1}".format(region_key(sim.region).lower(), ad.rsplit("-", 1)[-1]),
        "region": region_key(sim.region).lower(),
        "regionInfo": {"realmDomainComponent": "oraclecloud.com", "realmKey": "oc1",
                       "regionIdentifier": sim.region, "regionKey": region_key(sim.region)},
        "shape": instance["shape"],
        "shapeConfig": {"maxVnicAttachments": shape_config["maxVnicAttachments"],
                        "memoryInGBs": shape_config["memoryInGBs"],
                        "networkingBandwidthInGbps": shape_config["networkingBandwidthInGbps"],
                        "ocpus": shape_config["ocpus"]},
        "state": instance["lifecycleState"].capitalize(),
        "tenantId": comp.get("_tenancy"),
        "timeCreated": _epoch_ms(instance["timeCreated"]),
    }


def vnics_document(sim, instance):
    store = sim.store
    out = []
    for att_id in instance["_attachments"]:
        att = store.vnic_attachments.get(att_id)
        if not att or att["lifecycleState"] not in ("ATTACHING", "ATTACHED"):
            continue
        vnic = store.vnics[att["vnicId"]]
        subnet = store.subnets[vnic["subnetId"]]
        out.append({"vnicId": vnic["id"], "privateIp": vnic["privateIp"], "vlanTag": att["vlanTag"],
                    "macAddr": vnic["macAddress"].lower(), "virtualRouterIp": subnet["virtualRouterIp"],
                    "subnetCidrBlock": subnet["cidrBlock"], "nicIndex": att["nicIndex"]})
    return out


def host_document(sim, instance):
    """GPU hosts expose their RDMA topology (the same identifiers as GET /computeHosts)."""
    host = compute.host_of(sim, instance)
    return {"id": host["id"], "networkBlockId": host["networkBlockId"], "localBlockId": host["localBlockId"],
            "buildingId": "building-" + host["hpcIslandId"][-6:], "rackId": "rack-" + instance["id"][-8:],
            "rdmaTopologyData": {"customerHPCIslandId": host["hpcIslandId"],
                                 "customerNetworkBlock": host["networkBlockId"],
                                 "customerLocalBlock": host["localBlockId"],
                                 "customerHostId": host["id"]}}


def handle(sim, method, path, headers):
    """Answer /_imds/<ocid>/opc/v2/... (already stripped of the /_imds prefix by the caller)."""
    parts = [p for p in path.split("/") if p]
    if method != "GET":
        raise OciError(405, "MethodNotAllowed", "Only GET is supported.")
    if len(parts) < 3 or parts[1] != "opc":
        raise OciError(404, "NotFound", "Not found")
    if parts[2] != "v2":
        raise OciError(404, "NotFound", "Legacy IMDS endpoints are disabled on this instance.")
    if headers.get("authorization") != "Bearer Oracle":
        raise OciError(401, "Unauthorized", "Authorization: Bearer Oracle header required")
    with sim.store.lock:
        sim.store.tick()
        instance = sim.store.instances.get(parts[0])
        if instance is None or instance["lifecycleState"] == "TERMINATED":
            raise OciError(404, "NotFound", "No such instance")
        section = parts[3] if len(parts) > 3 else ""
        if section == "instance":
            doc = instance_document(sim, instance)
        elif section == "vnics":
            doc = vnics_document(sim, instance)
        elif section == "host":
            if not instance["shape"].startswith("BM.GPU"):
                raise OciError(404, "NotFound", "Not found")
            doc = host_document(sim, instance)
        else:
            raise OciError(404, "NotFound", "Not found")
        for key in parts[4:]:
            if isinstance(doc, dict) and key in doc:
                doc = doc[key]
            elif isinstance(doc, list) and key.isdigit() and int(key) < len(doc):
                doc = doc[int(key)]
            else:
                raise OciError(404, "NotFound", "Not found")
    if isinstance(doc, (dict, list)):
        return Reply(200, raw=json.dumps(doc, indent=2))
    return Reply(200, raw=str(doc), content_type="text/plain")
