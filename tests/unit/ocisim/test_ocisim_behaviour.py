# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Behaviour: SDK composite operations, authentication, pagination, idempotency, compartments,
capacity, the instance hook and IMDS."""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.error
import urllib.request

import oci
import pytest

from oci.core import models as core

from tests.ocisim import auth
from tests.ocisim.testing import signed_request

GPU_IMAGE = "Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0"


def _clients(sim):
    cfg = oci.config.from_file(sim.config_file, sim.profile)
    kw = {"service_endpoint": sim.endpoint}
    return (oci.core.VirtualNetworkClient(cfg, **kw), oci.core.ComputeClient(cfg, **kw),
            oci.core.ComputeManagementClient(cfg, **kw))


def _subnet(sim):
    _vcn, subnet = sim.seed_network(cidr="10.30.0.0/16", subnet_prefix=24, name="beh")
    return subnet["id"]


def _image_id(compute, sim, name=GPU_IMAGE):
    return compute.list_images(sim.compartment_id, display_name=name).data[0].id


def _gpu_config(sim, cm, compute, subnet_id, shape="BM.GPU.H100.8"):
    ad = list(sim.availability_domains)[0]
    return cm.create_instance_configuration(core.CreateInstanceConfigurationDetails(
        compartment_id=sim.compartment_id, display_name="gpu-ic",
        instance_details=core.ComputeInstanceDetails(launch_details=core.InstanceConfigurationLaunchInstanceDetails(
            availability_domain=ad, compartment_id=sim.compartment_id, shape=shape,
            source_details=core.InstanceConfigurationInstanceSourceViaImageDetails(image_id=_image_id(compute, sim)),
            create_vnic_details=core.InstanceConfigurationCreateVnicDetails(subnet_id=subnet_id))))).data


def _cn_details(sim, ic_id, subnet_id, size):
    return core.CreateClusterNetworkDetails(
        compartment_id=sim.compartment_id, display_name="cn",
        placement_configuration=core.ClusterNetworkPlacementConfigurationDetails(
            availability_domain=list(sim.availability_domains)[0], primary_subnet_id=subnet_id),
        instance_pools=[core.CreateClusterNetworkInstancePoolDetails(instance_configuration_id=ic_id, size=size)])


# ------------------------------------------------------------------ composite operations
def test_sdk_composite_operations_complete(ocisim):
    _vn, compute, cm = _clients(ocisim)
    subnet_id = _subnet(ocisim)
    ic = _gpu_config(ocisim, cm, compute, subnet_id)
    cm_ops = oci.core.ComputeManagementClientCompositeOperations(cm)
    wall = time.monotonic()
    cn = cm_ops.create_cluster_network_and_wait_for_state(
        _cn_details(ocisim, ic.id, subnet_id, 2), wait_for_states=["RUNNING"]).data
    assert cn.lifecycle_state == "RUNNING"
    assert len(cm.list_cluster_network_instances(ocisim.compartment_id, cn.id).data) == 2

    compute_ops = oci.core.ComputeClientCompositeOperations(compute)
    inst = compute_ops.launch_instance_and_wait_for_state(core.LaunchInstanceDetails(
        availability_domain=list(ocisim.availability_domains)[0], compartment_id=ocisim.compartment_id,
        shape="VM.Standard.E5.Flex", display_name="solo",
        source_details=core.InstanceSourceViaImageDetails(image_id=_image_id(compute, ocisim,
                                                                             "Oracle-Linux-9.6-2025.10.23-0")),
        create_vnic_details=core.CreateVnicDetails(subnet_id=subnet_id)), wait_for_states=["RUNNING"]).data
    assert inst.lifecycle_state == "RUNNING"

    cluster = compute_ops.create_compute_cluster_and_wait_for_state(core.CreateComputeClusterDetails(
        availability_domain=list(ocisim.availability_domains)[0], compartment_id=ocisim.compartment_id),
        wait_for_states=["ACTIVE"]).data
    assert cluster.lifecycle_state == "ACTIVE"

    launched = cm_ops.launch_instance_configuration_and_wait_for_work_request(
        ic.id, core.ComputeInstanceDetails()).data
    assert launched.status == "SUCCEEDED"

    done = cm_ops.terminate_cluster_network_and_wait_for_work_request(cn.id).data
    assert done.status == "SUCCEEDED" and done.operation_type == "TerminateClusterNetwork"
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "TERMINATED"
    # The waiters slept on the simulator clock, not on the wall clock.
    assert sum(ocisim.sdk_sleeps) >= ocisim.durations["cluster_network_create"]
    assert time.monotonic() - wall < 15


# ------------------------------------------------------------------ authentication
def test_wrong_key_missing_signature_and_tampered_body_are_rejected(ocisim):
    path = "/20160918/instances?compartmentId=" + ocisim.compartment_id
    status, _h, body = signed_request(ocisim, "GET", path)
    assert status == 200 and body == []
    other = auth.generate_key()
    key_id = "{0}/{1}/{2}".format(ocisim.tenancy_id, ocisim.user_id, auth.fingerprint(ocisim.key))
    status, headers, body = signed_request(ocisim, "GET", path, key=other, key_id=key_id)
    assert (status, body["code"]) == (401, "NotAuthenticated") and headers["opc-request-id"]
    status, _h, body = signed_request(ocisim, "GET", path, key=other)
    assert (status, body["code"]) == (401, "NotAuthenticated")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(ocisim.endpoint + path, timeout=5)
    assert err.value.code == 401 and json.loads(err.value.read())["code"] == "NotAuthenticated"

    # The SDK with a config whose key is not the registered one.
    cfg = dict(ocisim.sdk_config(), key_content=auth.private_pem(other).decode("ascii"))
    with pytest.raises(oci.exceptions.ServiceError) as sdk_err:
        oci.core.ComputeClient(cfg, service_endpoint=ocisim.endpoint).list_instances(ocisim.compartment_id)
    assert (sdk_err.value.status, sdk_err.value.code) == (401, "NotAuthenticated")

    # A body that does not match the signed x-content-sha256.
    status, _h, body = signed_request(ocisim, "POST", "/20160918/vcns",
                                      {"compartmentId": ocisim.compartment_id, "cidrBlock": "10.0.0.0/16"},
                                      headers={"x-content-sha256": "AAAA"})
    assert status == 401


def test_unknown_and_foreign_ocids_are_not_found(ocisim):
    _vn, compute, _cm = _clients(ocisim)
    foreign = ocisim.add_tenancy("other-tenancy")
    foreign_comp = ocisim.add_compartment("theirs", foreign["tenancy_id"])
    ids = ocisim.seed_instances(1, [foreign_comp["id"]])
    for call in (lambda: compute.get_instance(ids[0]),
                 lambda: compute.get_instance("ocid1.instance.oc1.ap-tokyo-1.aaaaaaaanothere"),
                 lambda: compute.list_instances(foreign_comp["id"])):
        with pytest.raises(oci.exceptions.ServiceError) as err:
            call()
        assert (err.value.status, err.value.code) == (404, "NotAuthorizedOrNotFound")
    # The other tenancy's own key sees its instance.
    theirs = dict(ocisim.sdk_config(), tenancy=foreign["tenancy_id"], user=foreign["user_id"],
                  fingerprint=auth.fingerprint(foreign["key"]),
                  key_content=auth.private_pem(foreign["key"]).decode("ascii"))
    client = oci.core.ComputeClient(theirs, service_endpoint=ocisim.endpoint)
    assert client.get_instance(ids[0]).data.id == ids[0]


# ------------------------------------------------------------------ pagination, idempotency
def test_pagination_returns_every_item_once(ocisim):
    _vn, compute, _cm = _clients(ocisim)
    ids = ocisim.seed_instances(253, [ocisim.compartment_id])
    first = compute.list_instances(ocisim.compartment_id, limit=50)
    assert len(first.data) == 50 and first.next_page
    everything = oci.pagination.list_call_get_all_results(compute.list_instances, ocisim.compartment_id, limit=7).data
    got = [i.id for i in everything]
    assert len(got) == len(set(got)) == 253 and set(got) == set(ids)
    assert ocisim.calls["GET /instances"] == 1 + 37
    last = compute.list_instances(ocisim.compartment_id, limit=253)
    assert last.next_page is None and len(last.data) == 253
    default = compute.list_instances(ocisim.compartment_id)
    assert len(default.data) == 100 and default.has_next_page


def test_retry_token_makes_creates_idempotent(ocisim):
    vn, _compute, _cm = _clients(ocisim)
    details = core.CreateVcnDetails(compartment_id=ocisim.compartment_id, cidr_block="10.40.0.0/16")
    one = vn.create_vcn(details, opc_retry_token="token-1").data
    two = vn.create_vcn(details, opc_retry_token="token-1").data
    assert one.id == two.id and len(vn.list_vcns(ocisim.compartment_id).data) == 1
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.create_vcn(core.CreateVcnDetails(compartment_id=ocisim.compartment_id, cidr_block="10.41.0.0/16"),
                      opc_retry_token="token-1")
    assert err.value.status == 409
    assert vn.create_vcn(details, opc_retry_token="token-2").data.id != one.id


# ------------------------------------------------------------------ compartments
def test_compartment_subtree_and_access_level(ocisim):
    ident = oci.identity.IdentityClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint)
    team = ocisim.add_compartment("team", ocisim.tenancy_id)
    ocisim.add_compartment("team-a", team["id"])
    ocisim.add_compartment("paas", ocisim.tenancy_id, accessible=False)
    ocisim.add_compartment("deleted", ocisim.tenancy_id, state="DELETED")
    tree = oci.pagination.list_call_get_all_results(ident.list_compartments, ocisim.tenancy_id,
                                                    compartment_id_in_subtree=True, limit=2).data
    assert sorted(c.name for c in tree) == ["deleted", "ocigpu-test", "paas", "team", "team-a"]
    accessible = ident.list_compartments(ocisim.tenancy_id, compartment_id_in_subtree=True,
                                         access_level="ACCESSIBLE", lifecycle_state="ACTIVE").data
    assert sorted(c.name for c in accessible) == ["ocigpu-test", "team", "team-a"]
    assert [c.name for c in ident.list_compartments(team["id"]).data] == ["team-a"]
    with pytest.raises(oci.exceptions.ServiceError) as err:
        ident.list_compartments(team["id"], compartment_id_in_subtree=True)
    assert err.value.status == 400


# ------------------------------------------------------------------ capacity
def test_cluster_network_beyond_capacity_fails_with_oci_message(ocisim):
    _vn, compute, cm = _clients(ocisim)
    wr_client = oci.work_requests.WorkRequestClient(oci.config.from_file(ocisim.config_file),
                                                    service_endpoint=ocisim.endpoint)
    subnet_id = _subnet(ocisim)
    ocisim.capacity.set("BM.GPU.H100.8", 3)
    ic = _gpu_config(ocisim, cm, compute, subnet_id)
    resp = cm.create_cluster_network(_cn_details(ocisim, ic.id, subnet_id, 4))
    assert resp.data.lifecycle_state == "PROVISIONING"
    ocisim.wait_idle()
    wr = wr_client.get_work_request(resp.headers["opc-work-request-id"]).data
    assert wr.status == "FAILED"
    errors = wr_client.list_work_request_errors(wr.id).data
    assert [e.message for e in errors] == ["Out of host capacity."]
    assert cm.get_cluster_network(resp.data.id).data.lifecycle_state == "TERMINATED"
    assert cm.list_cluster_network_instances(ocisim.compartment_id, resp.data.id).data == []

    # Within capacity it works; growing past it fails the resize and keeps the old size.
    cn = cm.create_cluster_network(_cn_details(ocisim, ic.id, subnet_id, 3)).data
    ocisim.wait_idle()
    resp = cm.update_cluster_network(cn.id, core.UpdateClusterNetworkDetails(instance_pools=[
        core.UpdateClusterNetworkInstancePoolDetails(id=cn.instance_pools[0].id, size=4)]))
    ocisim.wait_idle()
    assert wr_client.get_work_request(resp.headers["opc-work-request-id"]).data.status == "FAILED"
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "RUNNING"
    assert len(cm.list_cluster_network_instances(ocisim.compartment_id, cn.id).data) == 3
    # A single launch beyond capacity is refused at once, as OCI does.
    with pytest.raises(oci.exceptions.ServiceError) as err:
        cm.launch_instance_configuration(ic.id, core.ComputeInstanceDetails())
    assert (err.value.status, err.value.message) == (500, "Out of host capacity.")
    # Shrinking frees hosts (after termination completes).
    cm.update_cluster_network(cn.id, core.UpdateClusterNetworkDetails(instance_pools=[
        core.UpdateClusterNetworkInstancePoolDetails(id=cn.instance_pools[0].id, size=1)]))
    ocisim.wait_idle()
    assert ocisim.capacity.available(list(ocisim.availability_domains)[0], "BM.GPU.H100.8") == 2


# ------------------------------------------------------------------ hook and IMDS
def test_instance_hook_and_imds(ocisim):
    _vn, compute, cm = _clients(ocisim)
    events = []
    ocisim.on_instance(lambda event, inst, vnics: events.append((event, inst["id"], vnics[0]["privateIp"])))
    subnet_id = _subnet(ocisim)
    ic = _gpu_config(ocisim, cm, compute, subnet_id)
    cn = cm.create_cluster_network(_cn_details(ocisim, ic.id, subnet_id, 2)).data
    assert [e[0] for e in events] == ["launch", "launch"]
    ocisim.wait_idle()
    inst_id = events[0][1]

    def imds(path, headers=None):
        req = urllib.request.Request("{0}/_imds/{1}/opc/v2/{2}".format(ocisim.endpoint, inst_id, path),
                                     headers=headers if headers is not None else {"Authorization": "Bearer Oracle"})
        with urllib.request.urlopen(req, timeout=5) as answer:
            return answer.read().decode()

    doc = json.loads(imds("instance/"))
    assert doc["id"] == inst_id and doc["shape"] == "BM.GPU.H100.8" and doc["state"] == "Running"
    assert doc["canonicalRegionName"] == "ap-tokyo-1" and doc["compartmentId"] == ocisim.compartment_id
    assert imds("instance/displayName") == doc["displayName"]
    assert json.loads(imds("vnics/"))[0]["privateIp"] == events[0][2]
    host = json.loads(imds("host/"))
    assert host["rdmaTopologyData"]["customerHPCIslandId"] == cm.get_cluster_network(cn.id).data.hpc_island_id
    with pytest.raises(urllib.error.HTTPError) as err:
        imds("instance/", headers={})
    assert err.value.code == 401
    cm.terminate_cluster_network(cn.id)
    assert sorted(e[0] for e in events) == ["launch", "launch", "terminate", "terminate"]
    ocisim.wait_idle()
    with pytest.raises(urllib.error.HTTPError) as err:
        imds("instance/")
    assert err.value.code == 404


def test_terminate_during_provisioning(ocisim):
    _vn, compute, cm = _clients(ocisim)
    wr_client = oci.work_requests.WorkRequestClient(oci.config.from_file(ocisim.config_file),
                                                    service_endpoint=ocisim.endpoint)
    subnet_id = _subnet(ocisim)
    ic = _gpu_config(ocisim, cm, compute, subnet_id)
    resp = cm.create_cluster_network(_cn_details(ocisim, ic.id, subnet_id, 2))
    ocisim.clock.advance(10)
    members = cm.list_cluster_network_instances(ocisim.compartment_id, resp.data.id).data
    assert {m.state for m in members} == {"Provisioning"}
    term = cm.terminate_cluster_network(resp.data.id)
    ocisim.wait_idle()
    create_wr = wr_client.get_work_request(resp.headers["opc-work-request-id"]).data
    assert create_wr.status == "FAILED"
    assert wr_client.get_work_request(term.headers["opc-work-request-id"]).data.status == "SUCCEEDED"
    assert cm.get_cluster_network(resp.data.id).data.lifecycle_state == "TERMINATED"
    assert {ocisim.state.instances[m.id]["lifecycleState"] for m in members} == {"TERMINATED"}
    # A VCN whose subnet still had those VNICs can now be torn down.
    vcn_id = ocisim.state.subnets[subnet_id]["vcnId"]
    vn = oci.core.VirtualNetworkClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint)
    vn.delete_subnet(subnet_id)
    vn.delete_vcn(vcn_id)
    assert vn.get_vcn(vcn_id).data.lifecycle_state == "TERMINATED"


def test_shape_catalogue_agrees_with_the_collection_shape_table(ocisim):
    """The simulator serves every shape of plugins/module_utils/_shapes.py with the same facts."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils._shapes import SHAPES  # pylint: disable=import-outside-toplevel
    compute = ocisim.client(oci.core.ComputeClient)
    served = {s.shape: s for s in oci.pagination.list_call_get_all_results(compute.list_shapes,
                                                                           ocisim.compartment_id).data}
    for name, facts in SHAPES.items():
        assert name in served, name
        shape = served[name]
        assert shape.gpus == facts["gpu_count"], name
        assert (shape.local_disks or 0) == facts["nvme_count"], name
        if facts.get("ocpus"):
            assert (shape.ocpus, shape.memory_in_gbs) == (facts["ocpus"], facts["memory_gb"]), name
        else:
            assert shape.is_flexible, name


def test_public_ip_follows_the_subnet_by_default(ocisim):
    vn, compute, _cm = _clients(ocisim)
    vcn = vn.create_vcn(core.CreateVcnDetails(compartment_id=ocisim.compartment_id, cidr_block="10.60.0.0/16")).data
    public = vn.create_subnet(core.CreateSubnetDetails(compartment_id=ocisim.compartment_id, vcn_id=vcn.id,
                                                       cidr_block="10.60.0.0/24")).data
    private = vn.create_subnet(core.CreateSubnetDetails(compartment_id=ocisim.compartment_id, vcn_id=vcn.id,
                                                        cidr_block="10.60.1.0/24", prohibit_public_ip_on_vnic=True)).data
    image = _image_id(compute, ocisim, "Oracle-Linux-9.6-2025.10.23-0")

    def launch(subnet_id, assign=None):
        return compute.launch_instance(core.LaunchInstanceDetails(
            availability_domain=list(ocisim.availability_domains)[0], compartment_id=ocisim.compartment_id,
            shape="VM.Standard.E5.Flex", source_details=core.InstanceSourceViaImageDetails(image_id=image),
            create_vnic_details=core.CreateVnicDetails(subnet_id=subnet_id, assign_public_ip=assign))).data

    def vnic_of(inst):
        att = compute.list_vnic_attachments(ocisim.compartment_id, instance_id=inst.id).data[0]
        return vn.get_vnic(att.vnic_id).data

    assert vnic_of(launch(public.id)).public_ip
    assert vnic_of(launch(public.id, False)).public_ip is None
    assert vnic_of(launch(private.id)).public_ip is None
    with pytest.raises(oci.exceptions.ServiceError) as err:
        launch(private.id, True)
    assert err.value.status == 400


def test_public_ips_come_from_the_configured_network(ocisim):
    """--public-ip-cidr: a rehearsal puts the bastion's public IP on one of the machine's own test
    networks. The network's first address is left to its gateway; each VNIC gets its own address."""
    ocisim.store.public_ip_network = ipaddress.ip_network("198.18.124.0/29")
    vn, compute, _cm = _clients(ocisim)
    vcn = vn.create_vcn(core.CreateVcnDetails(compartment_id=ocisim.compartment_id, cidr_block="10.61.0.0/16")).data
    public = vn.create_subnet(core.CreateSubnetDetails(compartment_id=ocisim.compartment_id, vcn_id=vcn.id,
                                                       cidr_block="10.61.0.0/24")).data
    image = _image_id(compute, ocisim, "Oracle-Linux-9.6-2025.10.23-0")

    def launch():
        return compute.launch_instance(core.LaunchInstanceDetails(
            availability_domain=list(ocisim.availability_domains)[0], compartment_id=ocisim.compartment_id,
            shape="VM.Standard.E5.Flex", source_details=core.InstanceSourceViaImageDetails(image_id=image),
            create_vnic_details=core.CreateVnicDetails(subnet_id=public.id, assign_public_ip=True))).data

    addresses = []
    for _attempt in range(5):   # a /29 has six host addresses; the first is the gateway's
        inst = launch()
        att = compute.list_vnic_attachments(ocisim.compartment_id, instance_id=inst.id).data[0]
        addresses.append(vn.get_vnic(att.vnic_id).data.public_ip)
    assert addresses == ["198.18.124.{0}".format(n) for n in range(2, 7)]
    with pytest.raises(oci.exceptions.ServiceError) as err:
        launch()
    assert err.value.status == 400 and "No public IP address is left" in err.value.message

    # A terminated instance gives its address back (found by the autoscaler's soak, whose hundreds of
    # on-demand nodes ran the simulator out of addresses).
    compute.terminate_instance(inst.id)
    ocisim.clock.advance(600)
    assert compute.get_instance(inst.id).data.lifecycle_state == "TERMINATED"
    att = compute.list_vnic_attachments(ocisim.compartment_id, instance_id=launch().id).data[0]
    assert vn.get_vnic(att.vnic_id).data.public_ip == "198.18.124.6"


def test_display_names_over_255_characters_are_refused_as_oci_does(ocisim):
    """OCI answers 400 InvalidParameter for a displayName over 255 characters, also one nested in the body."""
    vn, compute, _cm = _clients(ocisim)
    comp = ocisim.compartment_id
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.create_vcn(core.CreateVcnDetails(compartment_id=comp, cidr_block="10.70.0.0/16", display_name="v" * 256))
    assert (err.value.status, err.value.code) == (400, "InvalidParameter")
    assert "displayName" in err.value.message
    assert not ocisim.state.find("vcns", cidrBlock="10.70.0.0/16")
    vcn = vn.create_vcn(core.CreateVcnDetails(compartment_id=comp, cidr_block="10.70.0.0/16", display_name="v" * 255)).data
    assert len(vcn.display_name) == 255
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.update_vcn(vcn.id, core.UpdateVcnDetails(display_name="w" * 300))
    assert (err.value.status, err.value.code) == (400, "InvalidParameter")
    subnet_id = _subnet(ocisim)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        compute.launch_instance(core.LaunchInstanceDetails(
            availability_domain=list(ocisim.availability_domains)[0], compartment_id=comp, shape="BM.GPU4.8",
            source_details=core.InstanceSourceViaImageDetails(image_id=_image_id(compute, ocisim)),
            create_vnic_details=core.CreateVnicDetails(subnet_id=subnet_id, display_name="n" * 256)))
    assert (err.value.status, err.value.code) == (400, "InvalidParameter")
    assert err.value.message.startswith("createVnicDetails.displayName")
    assert not ocisim.state.find("instances", compartmentId=comp)


def test_a_fault_domain_other_than_1_to_3_is_refused(ocisim):
    _vn, compute, _cm = _clients(ocisim)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        compute.launch_instance(core.LaunchInstanceDetails(
            availability_domain=list(ocisim.availability_domains)[0], compartment_id=ocisim.compartment_id,
            shape="BM.GPU4.8", fault_domain="FAULT-DOMAIN-9",
            source_details=core.InstanceSourceViaImageDetails(image_id=_image_id(compute, ocisim)),
            create_vnic_details=core.CreateVnicDetails(subnet_id=_subnet(ocisim))))
    assert (err.value.status, err.value.code) == (400, "InvalidParameter")
    assert "FAULT-DOMAIN-9" in err.value.message
