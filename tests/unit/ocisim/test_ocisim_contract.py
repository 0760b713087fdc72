# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Contract tests: every route of the simulator driven through the real `oci` SDK clients.

Each answer is deserialised by the SDK into its own model, and the raw JSON is checked against the
model's attribute map (no unknown fields, no missing required fields, right JSON types).  The last
test checks that this module exercised every signed route the simulator serves."""

from __future__ import annotations

import oci
import pytest

from oci.core import models as core
from oci.identity import models as idm

from tests.ocisim.testing import assert_model

EXERCISED = set()
GPU_IMAGE = "Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0"
CPU_IMAGE = "Oracle-Linux-9.6-2025.10.23-0"


class Api:
    """SDK clients bound to the simulator, with a checker for the last answer."""

    def __init__(self, sim):
        self.sim = sim
        cfg = oci.config.from_file(sim.config_file, sim.profile)
        kw = {"service_endpoint": sim.endpoint}
        self.vn = oci.core.VirtualNetworkClient(cfg, **kw)
        self.compute = oci.core.ComputeClient(cfg, **kw)
        self.cm = oci.core.ComputeManagementClient(cfg, **kw)
        self.wr = oci.work_requests.WorkRequestClient(cfg, **kw)
        self.identity = oci.identity.IdentityClient(cfg, **kw)
        self.comp = sim.compartment_id
        self.ad = list(sim.availability_domains)[0]

    def check(self, response, type_name, sdk_class=None):
        """Validate the raw JSON of the last answer and the SDK's deserialised data."""
        route, status, body = self.sim.captured[-1]
        EXERCISED.add(route)
        assert 200 <= status < 300, (route, status, body)
        assert response.headers.get("opc-request-id")
        if type_name is None:
            assert response.data is None
            return response.data
        assert_model(body, type_name)
        if sdk_class is not None:
            data = response.data.items if type_name.endswith("Collection") else response.data
            items = data if isinstance(data, list) else [data]
            assert all(isinstance(i, sdk_class) for i in items), (route, type(items[0]) if items else None)
        return response.data

    def image(self, name):
        return self.compute.list_images(self.comp, display_name=name).data[0]


@pytest.fixture
def api(ocisim):
    return Api(ocisim)


def _vcn_stack(api):
    vcn = api.check(api.vn.create_vcn(core.CreateVcnDetails(
        compartment_id=api.comp, cidr_block="10.20.0.0/16", display_name="c-vcn", dns_label="cvcn")), "Vcn", core.Vcn)
    subnet = api.check(api.vn.create_subnet(core.CreateSubnetDetails(
        compartment_id=api.comp, vcn_id=vcn.id, cidr_block="10.20.1.0/24", display_name="c-sub", dns_label="csub")),
        "Subnet", core.Subnet)
    return vcn, subnet


def test_vcn_subnet_and_gateway_routes(api):
    vn = api.vn
    vcn, subnet = _vcn_stack(api)
    assert vcn.lifecycle_state == "AVAILABLE" and vcn.default_route_table_id and vcn.vcn_domain_name == "cvcn.oraclevcn.com"
    assert subnet.virtual_router_ip == "10.20.1.1"
    assert api.check(vn.get_vcn(vcn.id), "Vcn", core.Vcn).id == vcn.id
    assert [v.id for v in api.check(vn.list_vcns(api.comp), "list[Vcn]", core.Vcn)] == [vcn.id]
    assert api.check(vn.update_vcn(vcn.id, core.UpdateVcnDetails(display_name="c-vcn2")), "Vcn").display_name == "c-vcn2"
    assert api.check(vn.get_subnet(subnet.id), "Subnet", core.Subnet).cidr_block == "10.20.1.0/24"
    assert len(api.check(vn.list_subnets(api.comp, vcn_id=vcn.id), "list[Subnet]", core.Subnet)) == 1
    api.check(vn.update_subnet(subnet.id, core.UpdateSubnetDetails(display_name="c-sub2")), "Subnet")

    igw = api.check(vn.create_internet_gateway(core.CreateInternetGatewayDetails(
        compartment_id=api.comp, vcn_id=vcn.id, is_enabled=True, display_name="igw")),
        "InternetGateway", core.InternetGateway)
    api.check(vn.get_internet_gateway(igw.id), "InternetGateway", core.InternetGateway)
    api.check(vn.list_internet_gateways(api.comp, vcn_id=vcn.id), "list[InternetGateway]", core.InternetGateway)
    api.check(vn.update_internet_gateway(igw.id, core.UpdateInternetGatewayDetails(is_enabled=False)),
              "InternetGateway")
    nat = api.check(vn.create_nat_gateway(core.CreateNatGatewayDetails(compartment_id=api.comp, vcn_id=vcn.id)),
                    "NatGateway", core.NatGateway)
    api.check(vn.get_nat_gateway(nat.id), "NatGateway", core.NatGateway)
    api.check(vn.list_nat_gateways(api.comp, vcn_id=vcn.id), "list[NatGateway]", core.NatGateway)
    api.check(vn.update_nat_gateway(nat.id, core.UpdateNatGatewayDetails(block_traffic=True)), "NatGateway")

    services = api.check(vn.list_services(), "list[Service]", core.Service)
    osn = [s for s in services if s.name.startswith("All ")][0]
    assert osn.name == "All NRT Services In Oracle Services Network"
    api.check(vn.get_service(osn.id), "Service", core.Service)
    sgw = api.check(vn.create_service_gateway(core.CreateServiceGatewayDetails(
        compartment_id=api.comp, vcn_id=vcn.id, services=[core.ServiceIdRequestDetails(service_id=osn.id)])),
        "ServiceGateway", core.ServiceGateway)
    assert sgw.services[0].service_name == osn.name
    api.check(vn.get_service_gateway(sgw.id), "ServiceGateway", core.ServiceGateway)
    api.check(vn.list_service_gateways(api.comp, vcn_id=vcn.id), "list[ServiceGateway]", core.ServiceGateway)
    api.check(vn.update_service_gateway(sgw.id, core.UpdateServiceGatewayDetails(display_name="sgw")),
              "ServiceGateway")

    rt = api.check(vn.create_route_table(core.CreateRouteTableDetails(
        compartment_id=api.comp, vcn_id=vcn.id, display_name="private-rt",
        route_rules=[core.RouteRule(destination="0.0.0.0/0", destination_type="CIDR_BLOCK", network_entity_id=nat.id),
                     core.RouteRule(destination=osn.cidr_block, destination_type="SERVICE_CIDR_BLOCK",
                                    network_entity_id=sgw.id)])), "RouteTable", core.RouteTable)
    api.check(vn.get_route_table(rt.id), "RouteTable", core.RouteTable)
    assert len(api.check(vn.list_route_tables(api.comp, vcn_id=vcn.id), "list[RouteTable]", core.RouteTable)) == 2
    api.check(vn.update_route_table(rt.id, core.UpdateRouteTableDetails(route_rules=[core.RouteRule(
        destination="0.0.0.0/0", network_entity_id=nat.id)])), "RouteTable")
    sl = api.check(vn.create_security_list(core.CreateSecurityListDetails(
        compartment_id=api.comp, vcn_id=vcn.id, display_name="sl",
        egress_security_rules=[core.EgressSecurityRule(destination="0.0.0.0/0", protocol="all")],
        ingress_security_rules=[core.IngressSecurityRule(source="10.20.0.0/16", protocol="all")])),
        "SecurityList", core.SecurityList)
    api.check(vn.get_security_list(sl.id), "SecurityList", core.SecurityList)
    api.check(vn.list_security_lists(api.comp, vcn_id=vcn.id), "list[SecurityList]", core.SecurityList)
    api.check(vn.update_security_list(sl.id, core.UpdateSecurityListDetails(display_name="sl2")), "SecurityList")
    dhcp = api.check(vn.list_dhcp_options(api.comp, vcn_id=vcn.id), "list[DhcpOptions]", core.DhcpOptions)[0]
    api.check(vn.get_dhcp_options(dhcp.id), "DhcpOptions", core.DhcpOptions)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.delete_dhcp_options(dhcp.id)
    assert err.value.status == 409
    EXERCISED.add("DELETE /dhcps/{dhcpId}")

    # Dependencies: a gateway used by a route rule and a VCN with children cannot be deleted.
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.delete_nat_gateway(nat.id)
    assert (err.value.status, err.value.code) == (409, "Conflict")
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.delete_vcn(vcn.id)
    assert (err.value.status, err.value.code) == (409, "Conflict")
    assert subnet.id in err.value.message

    for delete, ocid in ((vn.delete_subnet, subnet.id), (vn.delete_route_table, rt.id),
                         (vn.delete_security_list, sl.id), (vn.delete_internet_gateway, igw.id),
                         (vn.delete_nat_gateway, nat.id), (vn.delete_service_gateway, sgw.id),
                         (vn.delete_vcn, vcn.id)):
        api.check(delete(ocid), None)
    assert vn.get_vcn(vcn.id).data.lifecycle_state == "TERMINATED"


def _launch(api, subnet, name="c-inst", shape="VM.Standard.E5.Flex", image=CPU_IMAGE, **extra):
    details = core.LaunchInstanceDetails(
        availability_domain=api.ad, compartment_id=api.comp, shape=shape, display_name=name,
        shape_config=core.LaunchInstanceShapeConfigDetails(ocpus=4) if shape.endswith("Flex") else None,
        source_details=core.InstanceSourceViaImageDetails(image_id=api.image(image).id, boot_volume_size_in_gbs=100),
        create_vnic_details=core.CreateVnicDetails(subnet_id=subnet.id, assign_public_ip=True, hostname_label=name),
        metadata={"ssh_authorized_keys": "ssh-ed25519 AAAA test"}, **extra)
    return api.compute.launch_instance(details)


def test_image_shape_instance_vnic_routes(api, ocisim):
    compute, vn = api.compute, api.vn
    _vcn, subnet = _vcn_stack(api)
    images = api.check(compute.list_images(api.comp), "list[Image]", core.Image)
    names = {i.display_name for i in images}
    assert {GPU_IMAGE, CPU_IMAGE, "Oracle-Linux-8.10-Gen2-GPU-2025.02.28-0"} <= names
    gpu_only = {i.display_name for i in compute.list_images(api.comp, shape="VM.Standard.E5.Flex").data}
    assert GPU_IMAGE not in gpu_only and CPU_IMAGE in gpu_only
    api.check(compute.get_image(api.image(GPU_IMAGE).id), "Image", core.Image)
    shapes = api.check(compute.list_shapes(api.comp, availability_domain=api.ad), "list[Shape]", core.Shape)
    by_name = {s.shape: s for s in shapes}
    assert {"BM.GPU3.8", "BM.GPU4.8", "BM.GPU.A100-v2.8", "BM.GPU.H100.8", "BM.GPU.H200.8", "VM.GPU.A10.1",
            "VM.Standard.E5.Flex"} <= set(by_name)
    assert by_name["BM.GPU.H100.8"].gpus == 8 and by_name["BM.GPU.H100.8"].local_disks == 16
    assert by_name["VM.Standard.E5.Flex"].is_flexible

    resp = _launch(api, subnet)
    inst = api.check(resp, "Instance", core.Instance)
    assert inst.lifecycle_state == "PROVISIONING"
    assert inst.shape_config.ocpus == 4.0 and inst.shape_config.memory_in_gbs == 48.0
    assert isinstance(inst.source_details, core.InstanceSourceViaImageDetails)
    ocisim.clock.advance(ocisim.durations["instance_launch"])
    assert api.check(compute.get_instance(inst.id), "Instance", core.Instance).lifecycle_state == "RUNNING"
    listed = api.check(compute.list_instances(api.comp, availability_domain=api.ad), "list[Instance]", core.Instance)
    assert [i.id for i in listed] == [inst.id]
    api.check(compute.update_instance(inst.id, core.UpdateInstanceDetails(display_name="renamed")), "Instance")

    atts = api.check(compute.list_vnic_attachments(api.comp, instance_id=inst.id), "list[VnicAttachment]",
                     core.VnicAttachment)
    assert atts[0].lifecycle_state == "ATTACHED" and atts[0].nic_index == 0
    api.check(compute.get_vnic_attachment(atts[0].id), "VnicAttachment", core.VnicAttachment)
    vnic = api.check(vn.get_vnic(atts[0].vnic_id), "Vnic", core.Vnic)
    assert vnic.private_ip == "10.20.1.2" and vnic.public_ip and vnic.hostname_label == "c-inst"
    pips = api.check(vn.list_private_ips(vnic_id=vnic.id), "list[PrivateIp]", core.PrivateIp)
    assert pips[0].ip_address == vnic.private_ip and pips[0].is_primary
    api.check(vn.get_private_ip(pips[0].id), "PrivateIp", core.PrivateIp)
    assert [p.ip_address for p in vn.list_private_ips(subnet_id=subnet.id).data] == ["10.20.1.2"]
    assert api.check(vn.list_ipv6s(vnic_id=vnic.id), "list[Ipv6]", core.Ipv6) == []

    second = api.check(compute.attach_vnic(core.AttachVnicDetails(
        instance_id=inst.id, create_vnic_details=core.CreateVnicDetails(subnet_id=subnet.id), nic_index=1)),
        "VnicAttachment", core.VnicAttachment)
    assert vn.get_vnic(second.vnic_id).data.private_ip == "10.20.1.3"
    api.check(compute.detach_vnic(second.id), None)

    stopped = api.check(compute.instance_action(inst.id, "STOP"), "Instance", core.Instance)
    assert stopped.lifecycle_state == "STOPPING"
    ocisim.wait_idle()
    assert compute.get_instance(inst.id).data.lifecycle_state == "STOPPED"
    with pytest.raises(oci.exceptions.ServiceError) as err:
        compute.instance_action(inst.id, "SOFTRESET")
    assert (err.value.status, err.value.code) == (409, "IncorrectState")
    compute.instance_action(inst.id, "START")
    ocisim.wait_idle()
    assert compute.get_instance(inst.id).data.lifecycle_state == "RUNNING"

    api.check(compute.terminate_instance(inst.id, preserve_boot_volume=False), None)
    assert compute.get_instance(inst.id).data.lifecycle_state == "TERMINATING"
    ocisim.wait_idle()
    assert compute.get_instance(inst.id).data.lifecycle_state == "TERMINATED"
    assert compute.get_vnic_attachment(atts[0].id).data.lifecycle_state == "DETACHED"
    api.check(vn.delete_subnet(subnet.id), None)


def test_compute_cluster_routes(api, ocisim):
    compute = api.compute
    _vcn, subnet = _vcn_stack(api)
    cc = api.check(compute.create_compute_cluster(core.CreateComputeClusterDetails(
        availability_domain=api.ad, compartment_id=api.comp, display_name="cc")), "ComputeCluster", core.ComputeCluster)
    assert cc.lifecycle_state == "ACTIVE"
    api.check(compute.get_compute_cluster(cc.id), "ComputeCluster", core.ComputeCluster)
    coll = api.check(compute.list_compute_clusters(api.comp), "ComputeClusterCollection", core.ComputeClusterSummary)
    assert [c.id for c in coll.items] == [cc.id]
    api.check(compute.update_compute_cluster(cc.id, core.UpdateComputeClusterDetails(display_name="cc2")),
              "ComputeCluster")
    inst = _launch(api, subnet, "gpu-1", "BM.GPU.H100.8", GPU_IMAGE, compute_cluster_id=cc.id).data
    ocisim.wait_idle()
    assert [i.id for i in compute.list_instances(api.comp, compute_cluster_id=cc.id).data] == [inst.id]
    with pytest.raises(oci.exceptions.ServiceError) as err:
        compute.delete_compute_cluster(cc.id)
    assert err.value.status == 409
    compute.terminate_instance(inst.id)
    ocisim.wait_idle()
    api.check(compute.delete_compute_cluster(cc.id), None)
    assert compute.get_compute_cluster(cc.id).data.lifecycle_state == "DELETED"


def _instance_configuration(api, subnet, shape="BM.GPU.H100.8", image=GPU_IMAGE):
    return api.cm.create_instance_configuration(core.CreateInstanceConfigurationDetails(
        compartment_id=api.comp, display_name="ic-" + shape,
        instance_details=core.ComputeInstanceDetails(launch_details=core.InstanceConfigurationLaunchInstanceDetails(
            availability_domain=api.ad, compartment_id=api.comp, shape=shape,
            source_details=core.InstanceConfigurationInstanceSourceViaImageDetails(image_id=api.image(image).id),
            create_vnic_details=core.InstanceConfigurationCreateVnicDetails(subnet_id=subnet.id))),
        freeform_tags={"ocigpu-cluster": "c1"}))


def test_instance_configuration_and_pool_routes(api, ocisim):
    cm = api.cm
    _vcn, subnet = _vcn_stack(api)
    ic = api.check(_instance_configuration(api, subnet, "VM.Standard.E5.Flex", CPU_IMAGE), "InstanceConfiguration",
                   core.InstanceConfiguration)
    assert isinstance(ic.instance_details, core.ComputeInstanceDetails)
    api.check(cm.get_instance_configuration(ic.id), "InstanceConfiguration", core.InstanceConfiguration)
    api.check(cm.list_instance_configurations(api.comp), "list[InstanceConfigurationSummary]",
              core.InstanceConfigurationSummary)
    api.check(cm.update_instance_configuration(ic.id, core.UpdateInstanceConfigurationDetails(display_name="ic2")),
              "InstanceConfiguration")
    launched = api.check(cm.launch_instance_configuration(ic.id, core.ComputeInstanceDetails(
        launch_details=core.InstanceConfigurationLaunchInstanceDetails(display_name="from-ic"))),
        "Instance", core.Instance)
    assert launched.display_name == "from-ic" and launched.instance_configuration_id == ic.id

    pool = api.check(cm.create_instance_pool(core.CreateInstancePoolDetails(
        compartment_id=api.comp, instance_configuration_id=ic.id, size=2, display_name="pool",
        placement_configurations=[core.CreateInstancePoolPlacementConfigurationDetails(
            availability_domain=api.ad, primary_subnet_id=subnet.id)])), "InstancePool", core.InstancePool)
    assert pool.lifecycle_state == "PROVISIONING"
    ocisim.wait_idle()
    pool = api.check(cm.get_instance_pool(pool.id), "InstancePool", core.InstancePool)
    assert pool.lifecycle_state == "RUNNING" and pool.current_size == 2
    api.check(cm.list_instance_pools(api.comp), "list[InstancePoolSummary]", core.InstancePoolSummary)
    members = api.check(cm.list_instance_pool_instances(api.comp, pool.id), "list[InstanceSummary]",
                        core.InstanceSummary)
    assert len(members) == 2 and {m.state for m in members} == {"Running"}
    resized = api.check(cm.update_instance_pool(pool.id, core.UpdateInstancePoolDetails(size=3)), "InstancePool")
    assert resized.lifecycle_state == "SCALING"
    ocisim.wait_idle()
    assert len(cm.list_instance_pool_instances(api.comp, pool.id).data) == 3
    with pytest.raises(oci.exceptions.ServiceError) as err:
        cm.delete_instance_configuration(ic.id)
    assert err.value.status == 409
    api.check(cm.terminate_instance_pool(pool.id), None)
    ocisim.wait_idle()
    assert cm.get_instance_pool(pool.id).data.lifecycle_state == "TERMINATED"
    api.check(cm.delete_instance_configuration(ic.id), None)


def test_cluster_network_routes(api, ocisim):
    cm = api.cm
    _vcn, subnet = _vcn_stack(api)
    ic = _instance_configuration(api, subnet).data
    resp = cm.create_cluster_network(core.CreateClusterNetworkDetails(
        compartment_id=api.comp, display_name="c1", freeform_tags={"ocigpu-cluster": "c1"},
        placement_configuration=core.ClusterNetworkPlacementConfigurationDetails(
            availability_domain=api.ad, primary_subnet_id=subnet.id),
        instance_pools=[core.CreateClusterNetworkInstancePoolDetails(instance_configuration_id=ic.id, size=4)]))
    cn = api.check(resp, "ClusterNetwork", core.ClusterNetwork)
    assert cn.lifecycle_state == "PROVISIONING" and cn.instance_pools[0].size == 4
    wr_id = resp.headers["opc-work-request-id"]
    ocisim.clock.advance(ocisim.durations["cluster_network_create"] / 2)
    wr = api.check(api.wr.get_work_request(wr_id), "WorkRequest", oci.work_requests.models.WorkRequest)
    assert wr.status == "IN_PROGRESS" and 0 < wr.percent_complete < 100
    ocisim.wait_idle()
    cn = api.check(cm.get_cluster_network(cn.id), "ClusterNetwork", core.ClusterNetwork)
    assert cn.lifecycle_state == "RUNNING" and cn.instance_pools[0].lifecycle_state == "RUNNING"
    wr = api.wr.get_work_request(wr_id).data
    assert (wr.status, wr.percent_complete) == ("SUCCEEDED", 100.0)
    assert {(r.entity_type, r.action_type) for r in wr.resources} == {("clusternetwork", "CREATED"),
                                                                      ("instancepool", "CREATED")}
    api.check(api.wr.list_work_request_errors(wr_id), "list[WorkRequestError]")
    api.check(api.wr.list_work_request_logs(wr_id), "list[WorkRequestLogEntry]")
    listed = api.check(api.wr.list_work_requests(api.comp, resource_id=cn.id), "list[WorkRequestSummary]",
                       oci.work_requests.models.WorkRequestSummary)
    assert [w.id for w in listed] == [wr_id]
    api.check(cm.list_cluster_networks(api.comp), "list[ClusterNetworkSummary]", core.ClusterNetworkSummary)
    members = api.check(cm.list_cluster_network_instances(api.comp, cn.id), "list[InstanceSummary]",
                        core.InstanceSummary)
    assert len(members) == 4 and all(m.shape == "BM.GPU.H100.8" for m in members)
    ips = set()
    for member in members:
        att = api.compute.list_vnic_attachments(api.comp, instance_id=member.id).data[0]
        ips.add(api.vn.get_vnic(att.vnic_id).data.private_ip)
    assert len(ips) == 4 and all(ip.startswith("10.20.1.") for ip in ips)
    hosts = api.check(api.compute.list_compute_hosts(api.comp, network_resource_id=cn.hpc_island_id),
                      "ComputeHostCollection", core.ComputeHostSummary).items
    assert sorted(h.instance_id for h in hosts) == sorted(m.id for m in members)
    assert {h.network_block_id for h in hosts} == set(cn.network_block_ids)
    host = api.check(api.compute.get_compute_host(hosts[0].id), "ComputeHost", core.ComputeHost)
    assert host.hpc_island_id == cn.hpc_island_id

    resp = cm.update_cluster_network(cn.id, core.UpdateClusterNetworkDetails(instance_pools=[
        core.UpdateClusterNetworkInstancePoolDetails(id=cn.instance_pools[0].id, size=6)]))
    assert api.check(resp, "ClusterNetwork", core.ClusterNetwork).lifecycle_state == "SCALING"
    ocisim.wait_idle()
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "RUNNING"
    assert len(cm.list_cluster_network_instances(api.comp, cn.id).data) == 6
    assert api.wr.get_work_request(resp.headers["opc-work-request-id"]).data.status == "SUCCEEDED"

    # A chosen node leaves: with isDecrementSize the size drops; without it the pool launches a replacement.
    members = cm.list_cluster_network_instances(api.comp, cn.id).data
    pool_id = cn.instance_pools[0].id
    resp = cm.detach_instance_pool_instance(pool_id, core.DetachInstancePoolInstanceDetails(
        instance_id=members[0].id, is_decrement_size=True, is_auto_terminate=True))
    api.check(resp, None)
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "SCALING"
    with pytest.raises(oci.exceptions.ServiceError) as err:  # one change at a time
        cm.detach_instance_pool_instance(pool_id, core.DetachInstancePoolInstanceDetails(instance_id=members[1].id))
    assert err.value.status == 409
    ocisim.wait_idle()
    assert api.wr.get_work_request(resp.headers["opc-work-request-id"]).data.status == "SUCCEEDED"
    now = cm.get_cluster_network(cn.id).data
    assert now.lifecycle_state == "RUNNING" and now.instance_pools[0].size == 5
    assert ocisim.state.instances[members[0].id]["lifecycleState"] == "TERMINATED"
    after = {m.id for m in cm.list_cluster_network_instances(api.comp, cn.id).data}
    assert after == {m.id for m in members[1:]}
    cm.detach_instance_pool_instance(pool_id, core.DetachInstancePoolInstanceDetails(
        instance_id=members[1].id, is_decrement_size=False, is_auto_terminate=True))
    ocisim.wait_idle()
    replaced = {m.id for m in cm.list_cluster_network_instances(api.comp, cn.id).data}
    assert len(replaced) == 5 and members[1].id not in replaced and len(replaced - after) == 1
    assert cm.get_cluster_network(cn.id).data.instance_pools[0].size == 5
    with pytest.raises(oci.exceptions.ServiceError) as err:  # no longer a member
        cm.detach_instance_pool_instance(pool_id, core.DetachInstancePoolInstanceDetails(instance_id=members[1].id))
    assert err.value.status == 400
    members = cm.list_cluster_network_instances(api.comp, cn.id).data

    resp = cm.terminate_cluster_network(cn.id)
    api.check(resp, None)
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "TERMINATING"
    ocisim.wait_idle()
    assert cm.get_cluster_network(cn.id).data.lifecycle_state == "TERMINATED"
    assert all(ocisim.state.instances[m.id]["lifecycleState"] == "TERMINATED" for m in members)


def test_identity_routes(api, ocisim):
    ident = api.identity
    ads = api.check(ident.list_availability_domains(ocisim.tenancy_id), "list[AvailabilityDomain]",
                    idm.AvailabilityDomain)
    assert [a.name for a in ads] == list(ocisim.availability_domains)
    assert ads[0].name.endswith(":AP-TOKYO-1-AD-1")
    comp = api.check(ident.get_compartment(ocisim.compartment_id), "Compartment", idm.Compartment)
    assert comp.name == "ocigpu-test" and comp.compartment_id == ocisim.tenancy_id
    child = api.check(ident.create_compartment(idm.CreateCompartmentDetails(
        compartment_id=ocisim.compartment_id, name="child", description="child")), "Compartment", idm.Compartment)
    top = api.check(ident.list_compartments(ocisim.tenancy_id), "list[Compartment]", idm.Compartment)
    assert [c.name for c in top] == ["ocigpu-test"]
    tree = ident.list_compartments(ocisim.tenancy_id, compartment_id_in_subtree=True).data
    assert {c.id for c in tree} == {ocisim.compartment_id, child.id}
    api.check(ident.get_tenancy(ocisim.tenancy_id), "Tenancy", idm.Tenancy)
    subs = api.check(ident.list_region_subscriptions(ocisim.tenancy_id), "list[RegionSubscription]",
                     idm.RegionSubscription)
    assert (subs[0].region_name, subs[0].region_key, subs[0].is_home_region) == ("ap-tokyo-1", "NRT", True)
    regions = api.check(ident.list_regions(), "list[Region]", idm.Region)
    assert "ap-osaka-1" in {r.name for r in regions}


def test_capacity_report_and_limits_routes(api, ocisim):
    """The two reads the preflight asks before anything is created: the capacity report (a POST that
    stores nothing) and the Limits service's resource availability (API version /20190729)."""
    details = core.CreateComputeCapacityReportDetails(
        compartment_id=ocisim.tenancy_id, availability_domain=api.ad, shape_availabilities=[
            core.CreateCapacityReportShapeAvailabilityDetails(instance_shape="BM.GPU4.8"),
            core.CreateCapacityReportShapeAvailabilityDetails(
                instance_shape="VM.Standard.E5.Flex",
                instance_shape_config=core.CapacityReportInstanceShapeConfig(ocpus=2, memory_in_gbs=16))])
    report = api.check(api.compute.create_compute_capacity_report(details), "ComputeCapacityReport",
                       core.ComputeCapacityReport)
    gpu, flex = report.shape_availabilities
    assert (gpu.instance_shape, gpu.available_count, gpu.availability_status) == ("BM.GPU4.8", 64, "AVAILABLE")
    assert flex.available_count is None and flex.instance_shape_config.ocpus == 2
    limits = oci.limits.LimitsClient(oci.config.from_file(ocisim.config_file, ocisim.profile),
                                     service_endpoint=ocisim.endpoint)
    available = api.check(limits.get_resource_availability("compute", "gpu-bm-gpu4-8-count", api.comp,
                                                           availability_domain=api.ad),
                          "ResourceAvailability", oci.limits.models.ResourceAvailability)
    assert (available.available, available.used) == (512, 0)


def test_file_storage_routes(api, ocisim):
    """File Storage (API version /20171215): a file system, a mount target in a subnet with its export set,
    an export joining them, each listed, read, updated and deleted in the order OCI requires."""
    fsm = oci.file_storage.models
    fss = oci.file_storage.FileStorageClient(oci.config.from_file(ocisim.config_file, ocisim.profile),
                                             service_endpoint=ocisim.endpoint)
    vcn = api.vn.create_vcn(core.CreateVcnDetails(compartment_id=api.comp, cidr_blocks=["10.9.0.0/16"])).data
    subnet = api.vn.create_subnet(core.CreateSubnetDetails(compartment_id=api.comp, vcn_id=vcn.id,
                                                           cidr_block="10.9.1.0/24")).data
    fs = api.check(fss.create_file_system(fsm.CreateFileSystemDetails(
        compartment_id=api.comp, availability_domain=api.ad, display_name="home")), "FileSystem", fsm.FileSystem)
    api.check(fss.get_file_system(fs.id), "FileSystem", fsm.FileSystem)
    listed = api.check(fss.list_file_systems(api.comp, api.ad, display_name="home"), "list[FileSystemSummary]",
                       fsm.FileSystemSummary)
    assert [f.id for f in listed] == [fs.id]
    api.check(fss.update_file_system(fs.id, fsm.UpdateFileSystemDetails(freeform_tags={"a": "b"})), "FileSystem",
              fsm.FileSystem)
    mt = api.check(fss.create_mount_target(fsm.CreateMountTargetDetails(
        compartment_id=api.comp, availability_domain=api.ad, subnet_id=subnet.id, display_name="home-mt")),
        "MountTarget", fsm.MountTarget)
    api.check(fss.get_mount_target(mt.id), "MountTarget", fsm.MountTarget)
    api.check(fss.list_mount_targets(api.comp, api.ad), "list[MountTargetSummary]", fsm.MountTargetSummary)
    api.check(fss.update_mount_target(mt.id, fsm.UpdateMountTargetDetails(display_name="home-mt")), "MountTarget",
              fsm.MountTarget)
    export_set = api.check(fss.get_export_set(mt.export_set_id), "ExportSet", fsm.ExportSet)
    assert export_set.vcn_id == vcn.id
    ip = api.vn.get_private_ip(mt.private_ip_ids[0]).data.ip_address
    assert ip.startswith("10.9.1.")
    export = api.check(fss.create_export(fsm.CreateExportDetails(
        export_set_id=mt.export_set_id, file_system_id=fs.id, path="/home",
        export_options=[fsm.ClientOptions(source="10.9.0.0/16", identity_squash="NONE")])), "Export", fsm.Export)
    api.check(fss.get_export(export.id), "Export", fsm.Export)
    api.check(fss.list_exports(file_system_id=fs.id), "list[ExportSummary]", fsm.ExportSummary)
    api.check(fss.update_export(export.id, fsm.UpdateExportDetails(
        export_options=[fsm.ClientOptions(source="10.9.1.0/24")])), "Export", fsm.Export)
    # OCI's order: neither the file system nor the mount target goes while the export is there.
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        fss.delete_file_system(fs.id)
    assert refused.value.status == 409
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        api.vn.delete_subnet(subnet.id)
    assert refused.value.status == 409
    api.check(fss.delete_export(export.id), None)
    api.check(fss.delete_mount_target(mt.id), None)
    api.check(fss.delete_file_system(fs.id), None)
    api.vn.delete_subnet(subnet.id)


def test_compute_capacity_reservation_routes(api, ocisim):
    """A compute capacity reservation created, read, listed, resized, launched into (its instances listed)
    and deleted, each answer in the SDK's own model."""
    compute = api.compute
    _vcn, subnet = _vcn_stack(api)
    res = api.check(compute.create_compute_capacity_reservation(core.CreateComputeCapacityReservationDetails(
        compartment_id=api.comp, availability_domain=api.ad, display_name="c-res",
        instance_reservation_configs=[core.InstanceReservationConfigDetails(
            instance_shape="BM.GPU.H100.8", reserved_count=2, fault_domain="FAULT-DOMAIN-1",
            cluster_config=core.ClusterConfigDetails(hpc_island_id="ocid1.computehpcisland.oc1.ap-tokyo-1.aaaa"))])),
        "ComputeCapacityReservation", core.ComputeCapacityReservation)
    assert (res.lifecycle_state, res.reserved_instance_count, res.used_instance_count) == ("CREATING", 2, 0)
    ocisim.wait_idle()
    assert api.check(compute.get_compute_capacity_reservation(res.id), "ComputeCapacityReservation",
                     core.ComputeCapacityReservation).lifecycle_state == "ACTIVE"
    listed = api.check(compute.list_compute_capacity_reservations(api.comp, availability_domain=api.ad),
                       "list[ComputeCapacityReservationSummary]", core.ComputeCapacityReservationSummary)
    assert [r.id for r in listed] == [res.id]
    api.check(compute.update_compute_capacity_reservation(res.id, core.UpdateComputeCapacityReservationDetails(
        instance_reservation_configs=[core.InstanceReservationConfigDetails(instance_shape="BM.GPU.H100.8",
                                                                            reserved_count=3)])), None)
    ocisim.wait_idle()
    inst = _launch(api, subnet, name="c-res-inst", shape="BM.GPU.H100.8", image=GPU_IMAGE,
                   capacity_reservation_id=res.id).data
    assert inst.capacity_reservation_id == res.id
    members = api.check(compute.list_compute_capacity_reservation_instances(res.id),
                        "list[CapacityReservationInstanceSummary]", core.CapacityReservationInstanceSummary)
    assert [m.id for m in members] == [inst.id]
    compute.terminate_instance(inst.id)
    ocisim.wait_idle()
    api.check(compute.delete_compute_capacity_reservation(res.id), None)
    ocisim.wait_idle()
    assert compute.get_compute_capacity_reservation(res.id).data.lifecycle_state == "DELETED"


def test_custom_image_routes(api, ocisim):
    """A custom image made from an instance, read, listed, renamed, its shapes listed, and deleted."""
    compute = api.compute
    _vcn, subnet = _vcn_stack(api)
    inst = _launch(api, subnet, name="c-img-src").data
    ocisim.wait_idle()
    image = api.check(compute.create_image(core.CreateImageDetails(
        compartment_id=api.comp, instance_id=inst.id, display_name="c-img")), "Image", core.Image)
    assert (image.lifecycle_state, image.base_image_id) == ("PROVISIONING", api.image(CPU_IMAGE).id)
    ocisim.wait_idle()
    assert api.check(compute.get_image(image.id), "Image", core.Image).lifecycle_state == "AVAILABLE"
    assert api.check(compute.update_image(image.id, core.UpdateImageDetails(display_name="c-img2")), "Image",
                     core.Image).display_name == "c-img2"
    shapes = api.check(compute.list_image_shape_compatibility_entries(image.id),
                       "list[ImageShapeCompatibilitySummary]", core.ImageShapeCompatibilitySummary)
    assert "VM.Standard.E5.Flex" in [s.shape for s in shapes]
    assert api.check(compute.get_image_shape_compatibility_entry(image.id, "VM.Standard.E5.Flex"),
                     "ImageShapeCompatibilityEntry", core.ImageShapeCompatibilityEntry).image_id == image.id
    api.check(compute.delete_image(image.id), None)
    assert compute.get_image(image.id).data.lifecycle_state == "DELETED"


def test_every_route_was_exercised(ocisim, request):
    """Runs last in this module (pytest keeps file order): the tests above covered every route."""
    here = [i for i in request.session.items if i.module is request.module and i.name != request.node.name]
    expected = [n for n in dir(request.module) if n.startswith("test_") and n != request.node.name]
    if len(here) < len(expected):
        print("\nSKIPPED: route coverage needs the whole module; only {0} of {1} contract tests were selected".format(
            len(here), len(expected)))
        pytest.skip("route coverage needs every contract test of this module selected")
    served = {r.key for r in ocisim.router.routes if r.signed}
    missing = sorted(served - EXERCISED)
    assert not missing, "routes without a contract test: {0}".format(missing)
