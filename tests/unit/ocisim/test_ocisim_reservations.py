# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compute capacity reservations in the simulator, through the real `oci` SDK: their lifecycle, launches
that consume them (LaunchInstance, instance configurations used by instance pools and cluster networks),
a full reservation answered as OCI's stock-out, reservations of another shape or availability domain
refused, and reserved hosts counted in the availability domain's capacity (and its capacity report)."""

from __future__ import annotations

import json
import urllib.request

import oci
import pytest

from oci.core import models as core

from tests.ocisim import OciError, Simulator
from tests.ocisim.testing import signed_request

SHAPE = "BM.GPU.H100.8"
OUT = "Out of host capacity."


@pytest.fixture(scope="module")
def _server():
    sim = Simulator(manual_clock=True, availability_domains=3)
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture
def sim(_server):
    _server.reset(drop_command_hook=True)
    yield _server
    _server.faults.clear()


class Env:
    """SDK clients on a three-AD simulator, a regional subnet and the GPU image."""

    def __init__(self, sim):
        self.sim = sim
        self.compute = sim.client(oci.core.ComputeClient)
        self.cm = sim.client(oci.core.ComputeManagementClient)
        self.wr = sim.client(oci.work_requests.WorkRequestClient)
        self.comp = sim.compartment_id
        self.ads = list(sim.availability_domains)
        self.ad = self.ads[0]
        self.subnet = sim.seed_network(cidr="10.40.0.0/16")[1]
        self.image = sim.state.find("images", displayName=sim.default_gpu_image)[0]["id"]

    def reserve(self, count=2, shape=SHAPE, ad=None, name="r1", fault_domain=None, compartment_id=None):
        details = core.CreateComputeCapacityReservationDetails(
            compartment_id=compartment_id or self.comp, availability_domain=ad or self.ad, display_name=name,
            instance_reservation_configs=[core.InstanceReservationConfigDetails(
                instance_shape=shape, reserved_count=count, fault_domain=fault_domain)])
        res = self.compute.create_compute_capacity_reservation(details).data
        self.sim.clock.advance(self.sim.durations["capacity_reservation"])
        return res

    def launch_details(self, reservation_id=None, shape=SHAPE, ad=None, name="n1", **extra):
        return core.LaunchInstanceDetails(
            availability_domain=ad or self.ad, compartment_id=self.comp, shape=shape, display_name=name,
            source_details=core.InstanceSourceViaImageDetails(image_id=self.image),
            create_vnic_details=core.CreateVnicDetails(subnet_id=self.subnet["id"]),
            capacity_reservation_id=reservation_id, **extra)

    def launch(self, reservation_id=None, **kwargs):
        return self.compute.launch_instance(self.launch_details(reservation_id, **kwargs)).data

    def refused(self, call, *args, **kwargs):
        with pytest.raises(oci.exceptions.ServiceError) as err:
            call(*args, **kwargs)
        return err.value

    def get(self, reservation_id):
        return self.compute.get_compute_capacity_reservation(reservation_id).data

    def template(self, reservation_id, ad=None, shape=SHAPE):
        launch = core.InstanceConfigurationLaunchInstanceDetails(
            availability_domain=ad or self.ad, compartment_id=self.comp, shape=shape,
            capacity_reservation_id=reservation_id,
            source_details=core.InstanceConfigurationInstanceSourceViaImageDetails(image_id=self.image),
            create_vnic_details=core.InstanceConfigurationCreateVnicDetails(subnet_id=self.subnet["id"]))
        return self.cm.create_instance_configuration(core.CreateInstanceConfigurationDetails(
            compartment_id=self.comp, display_name="tmpl",
            instance_details=core.ComputeInstanceDetails(launch_details=launch))).data

    def cluster_network(self, config_id, size, ad=None):
        return self.cm.create_cluster_network(core.CreateClusterNetworkDetails(
            compartment_id=self.comp, display_name="cn",
            placement_configuration=core.ClusterNetworkPlacementConfigurationDetails(
                availability_domain=ad or self.ad, primary_subnet_id=self.subnet["id"]),
            instance_pools=[core.CreateClusterNetworkInstancePoolDetails(instance_configuration_id=config_id,
                                                                         size=size)]))

    def report(self, ad=None, shape=SHAPE):
        details = core.CreateComputeCapacityReportDetails(
            compartment_id=self.comp, availability_domain=ad or self.ad,
            shape_availabilities=[core.CreateCapacityReportShapeAvailabilityDetails(instance_shape=shape)])
        return self.compute.create_compute_capacity_report(details).data.shape_availabilities[0].available_count


@pytest.fixture
def env(sim):
    return Env(sim)


def test_create_get_list_update_delete(env, sim):
    details = core.CreateComputeCapacityReservationDetails(
        compartment_id=env.comp, availability_domain=env.ad, display_name="r1", freeform_tags={"k": "v"},
        instance_reservation_configs=[
            core.InstanceReservationConfigDetails(instance_shape=SHAPE, reserved_count=2,
                                                  cluster_config=core.ClusterConfigDetails(
                                                      hpc_island_id="ocid1.computehpcisland.oc1.ap-tokyo-1.aaaa",
                                                      network_block_ids=["ocid1.computenetworkblock.oc1.ap-tokyo-1.bb"])),
            core.InstanceReservationConfigDetails(instance_shape=SHAPE, reserved_count=1, fault_domain="FAULT-DOMAIN-2")])
    resp = env.compute.create_compute_capacity_reservation(details)
    res = resp.data
    assert resp.headers.get("opc-work-request-id")
    assert res.id.startswith("ocid1.capacityreservation.oc1.")
    assert (res.lifecycle_state, res.reserved_instance_count, res.used_instance_count) == ("CREATING", 3, 0)
    assert (res.availability_domain, res.compartment_id, res.is_default_reservation) == (env.ad, env.comp, False)
    first, second = res.instance_reservation_configs
    assert (first.instance_shape, first.reserved_count, first.used_count, first.fault_domain) == (SHAPE, 2, 0, None)
    assert first.cluster_config.network_block_ids == ["ocid1.computenetworkblock.oc1.ap-tokyo-1.bb"]
    assert second.fault_domain == "FAULT-DOMAIN-2"
    sim.clock.advance(sim.durations["capacity_reservation"])
    assert env.get(res.id).lifecycle_state == "ACTIVE"

    other = env.reserve(1, ad=env.ads[1], name="r2")
    listed = env.compute.list_compute_capacity_reservations(env.comp).data
    assert {r.id for r in listed} == {res.id, other.id}
    assert [r.id for r in env.compute.list_compute_capacity_reservations(env.comp, availability_domain=env.ad).data] \
        == [res.id]
    assert [r.id for r in env.compute.list_compute_capacity_reservations(env.comp, display_name="r2").data] == [other.id]
    assert env.compute.list_compute_capacity_reservations(env.comp, lifecycle_state="CREATING").data == []
    assert listed[0].reserved_instance_count is not None

    env.compute.update_compute_capacity_reservation(res.id, core.UpdateComputeCapacityReservationDetails(
        display_name="r1b", instance_reservation_configs=[
            core.InstanceReservationConfigDetails(instance_shape=SHAPE, reserved_count=4)]))
    updated = env.get(res.id)
    assert (updated.lifecycle_state, updated.display_name, updated.reserved_instance_count) == ("UPDATING", "r1b", 4)
    sim.clock.advance(sim.durations["capacity_reservation"])
    assert env.get(res.id).lifecycle_state == "ACTIVE"

    resp = env.compute.delete_compute_capacity_reservation(res.id)
    assert resp.status == 202 and resp.headers.get("opc-work-request-id")
    assert env.get(res.id).lifecycle_state == "DELETING"
    sim.clock.advance(sim.durations["capacity_reservation"])
    assert env.get(res.id).lifecycle_state == "DELETED"
    assert env.wr.get_work_request(resp.headers["opc-work-request-id"]).data.status == "SUCCEEDED"
    err = env.refused(env.compute.delete_compute_capacity_reservation, res.id)
    assert err.status == 404


def test_bad_creates_are_refused(env):
    for configs, code in (([{"instanceShape": "BM.GPU.X9.8", "reservedCount": 1}], "InvalidParameter"),
                          ([{"instanceShape": SHAPE}], "MissingParameter"),
                          ([{"instanceShape": SHAPE, "reservedCount": -1}], "InvalidParameter"),
                          ([{"instanceShape": SHAPE, "reservedCount": 1, "faultDomain": "FAULT-DOMAIN-9"}],
                           "InvalidParameter"),
                          ([{"instanceShape": SHAPE, "reservedCount": 1}] * 2, "InvalidParameter")):
        status, _headers, body = signed_request(env.sim, "POST", "/20160918/computeCapacityReservations", {
            "compartmentId": env.comp, "availabilityDomain": env.ad, "instanceReservationConfigs": configs})
        assert (status, body["code"]) == (400, code), configs
    assert env.sim.state.compute_capacity_reservations == {}


def test_a_launch_consumes_the_reservation_and_a_terminate_frees_it(env, sim):
    res = env.reserve(2)
    inst = env.launch(res.id)
    assert inst.capacity_reservation_id == res.id
    got = env.get(res.id)
    assert (got.used_instance_count, got.instance_reservation_configs[0].used_count) == (1, 1)
    members = env.compute.list_compute_capacity_reservation_instances(res.id).data
    assert [(m.id, m.shape, m.availability_domain) for m in members] == [(inst.id, SHAPE, env.ad)]
    assert [i.id for i in env.compute.list_instances(env.comp, capacity_reservation_id=res.id).data] == [inst.id]
    # OCI's answer while instances use it: the reservation stays.
    err = env.refused(env.compute.delete_compute_capacity_reservation, res.id)
    assert (err.status, err.code) == (409, "Conflict")
    # Its hosts are not lowered below what is in use.
    err = env.refused(env.compute.update_compute_capacity_reservation, res.id,
                      core.UpdateComputeCapacityReservationDetails(instance_reservation_configs=[]))
    assert (err.status, err.code) == (400, "InvalidParameter")

    env.compute.terminate_instance(inst.id)
    assert env.get(res.id).used_instance_count == 1     # TERMINATING still holds its host
    sim.wait_idle()
    assert env.get(res.id).used_instance_count == 0
    assert env.compute.list_compute_capacity_reservation_instances(res.id).data == []
    env.compute.delete_compute_capacity_reservation(res.id)


def test_a_full_reservation_answers_out_of_host_capacity(env, sim):
    res = env.reserve(1)
    env.launch(res.id, name="n1")
    err = env.refused(env.launch, res.id, name="n2")
    assert (err.status, err.code, err.message) == (500, "InternalError", OUT)
    # The availability domain still has on-demand hosts: only the reservation is full.
    assert env.launch(None, name="n3").capacity_reservation_id is None
    assert env.get(res.id).used_instance_count == 1


def test_a_reservation_of_another_shape_ad_compartment_or_state_is_refused(env, sim):
    res = env.reserve(2, fault_domain="FAULT-DOMAIN-1")
    err = env.refused(env.launch, res.id, shape="BM.GPU4.8")
    assert (err.status, err.code) == (400, "InvalidParameter")
    assert "shape BM.GPU4.8" in err.message and SHAPE in err.message
    err = env.refused(env.launch, res.id, ad=env.ads[1])
    assert (err.status, err.code) == (400, "InvalidParameter")
    assert env.ads[1] in err.message and env.ad in err.message
    err = env.refused(env.launch, res.id, fault_domain="FAULT-DOMAIN-2")
    assert (err.status, err.code) == (400, "InvalidParameter")
    assert env.launch(res.id).fault_domain == "FAULT-DOMAIN-1"   # the configuration's fault domain

    other = sim.add_compartment("other")["id"]
    elsewhere = env.reserve(1, compartment_id=other)
    err = env.refused(env.launch, elsewhere.id)
    assert (err.status, err.code) == (400, "InvalidParameter")
    creating = env.compute.create_compute_capacity_reservation(core.CreateComputeCapacityReservationDetails(
        compartment_id=env.comp, availability_domain=env.ad, instance_reservation_configs=[
            core.InstanceReservationConfigDetails(instance_shape=SHAPE, reserved_count=1)])).data
    err = env.refused(env.launch, creating.id)
    assert (err.status, err.code) == (409, "IncorrectState")
    err = env.refused(env.launch, "ocid1.capacityreservation.oc1.ap-tokyo-1.aaaaaaaanothere")
    assert err.status == 404
    assert sim.state.find("instances", shape="BM.GPU4.8") == []


def test_reserved_hosts_count_against_the_availability_domain(env, sim):
    sim.capacity.set(SHAPE, 4, env.ad)
    assert env.report() == 4
    res = env.reserve(3)
    assert sim.capacity.used(env.ad, SHAPE) == 3
    assert env.report() == 1                           # reserved, not used: not on demand
    env.launch(res.id, name="r-a")
    assert env.report() == 1                           # a reserved host in use is not counted twice
    env.launch(None, name="od-a")
    assert env.report() == 0
    err = env.refused(env.launch, None, name="od-b")
    assert (err.status, err.message) == (500, OUT)
    env.launch(res.id, name="r-b")                      # the reservation still has its hosts
    # A reservation, or a resize of one, beyond the AD's free hosts: the stock-out.
    err = env.refused(env.reserve, 1, name="r2")
    assert (err.status, err.code, err.message) == (500, "InternalError", OUT)
    err = env.refused(env.compute.update_compute_capacity_reservation, res.id,
                      core.UpdateComputeCapacityReservationDetails(instance_reservation_configs=[
                          core.InstanceReservationConfigDetails(instance_shape=SHAPE, reserved_count=4)]))
    assert (err.status, err.message) == (500, OUT)
    assert env.report(ad=env.ads[1]) == 64             # other ADs are untouched


def test_a_cluster_network_consumes_the_reservation_or_fails_when_it_is_short(env, sim):
    res = env.reserve(2)
    config = env.template(res.id)
    resp = env.cluster_network(config.id, 2)
    sim.wait_idle()
    assert env.cm.get_cluster_network(resp.data.id).data.lifecycle_state == "RUNNING"
    got = env.get(res.id)
    assert got.used_instance_count == 2
    members = {m.id for m in env.compute.list_compute_capacity_reservation_instances(res.id).data}
    assert members == {i["id"] for i in sim.state.find("instances", capacityReservationId=res.id)}
    assert len(members) == 2

    # A reservation with too few hosts: the work request fails as an AD stock-out does.
    short = env.reserve(1, name="short")
    sim.capacity.set(SHAPE, None)                      # the AD itself has room: only the reservation is short
    resp = env.cluster_network(env.template(short.id).id, 2)
    sim.wait_idle()
    wr = env.wr.get_work_request(resp.headers["opc-work-request-id"]).data
    assert wr.status == "FAILED"
    errors = env.wr.list_work_request_errors(wr.id).data
    assert [e.message for e in errors] == [OUT]
    assert env.cm.get_cluster_network(resp.data.id).data.lifecycle_state == "TERMINATED"
    assert env.get(short.id).used_instance_count == 0

    # Terminating the cluster network gives the hosts back to the reservation.
    env.cm.terminate_cluster_network(env.cm.list_cluster_networks(env.comp, lifecycle_state="RUNNING").data[0].id)
    sim.wait_idle()
    assert env.get(res.id).used_instance_count == 0


def test_a_cluster_network_in_another_ad_than_its_reservation_is_refused(env):
    res = env.reserve(2)
    err = env.refused(env.cluster_network, env.template(res.id, ad=env.ads[1]).id, 1, ad=env.ads[1])
    assert (err.status, err.code) == (400, "InvalidParameter")
    err = env.refused(env.cluster_network, env.template(res.id, shape="BM.GPU4.8").id, 1)
    assert (err.status, err.code) == (400, "InvalidParameter")
    assert env.sim.state.cluster_networks == {}


def test_instance_pools_and_configuration_launches_use_the_reservation(env, sim):
    res = env.reserve(3)
    config = env.template(res.id)
    pool = env.cm.create_instance_pool(core.CreateInstancePoolDetails(
        compartment_id=env.comp, instance_configuration_id=config.id, size=2,
        placement_configurations=[core.CreateInstancePoolPlacementConfigurationDetails(
            availability_domain=env.ad, primary_subnet_id=env.subnet["id"])])).data
    sim.wait_idle()
    assert env.cm.get_instance_pool(pool.id).data.current_size == 2
    assert env.get(res.id).used_instance_count == 2
    inst = env.cm.launch_instance_configuration(config.id, core.ComputeInstanceDetails()).data
    assert inst.capacity_reservation_id == res.id
    err = env.refused(env.cm.launch_instance_configuration, config.id, core.ComputeInstanceDetails())
    assert (err.status, err.message) == (500, OUT)
    err = env.refused(env.cm.update_instance_pool, pool.id, core.UpdateInstancePoolDetails(size=3))
    assert (err.status, err.message) == (500, OUT)
    assert env.get(res.id).used_instance_count == 3


def test_the_admin_endpoint_makes_an_active_reservation(env, sim):
    body = {"availability_domain": env.ads[2], "shape": SHAPE, "count": 2, "display_name": "demo-r1"}
    req = urllib.request.Request(sim.endpoint + "/_admin/capacity_reservation", data=json.dumps(body).encode(),
                                 method="POST", headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        made = json.loads(resp.read())
    assert (made["lifecycleState"], made["displayName"], made["compartmentId"]) == ("ACTIVE", "demo-r1", env.comp)
    assert made["instanceReservationConfigs"] == [{"instanceShape": SHAPE, "reservedCount": 2, "usedCount": 0}]
    assert (made["reservedInstanceCount"], made["usedInstanceCount"]) == (2, 0)
    assert env.launch(made["id"], ad=env.ads[2]).capacity_reservation_id == made["id"]
    assert env.report(ad=env.ads[2]) == 62
    with pytest.raises(OciError) as err:
        sim.create_capacity_reservation(env.ads[2], SHAPE, 100)
    assert (err.value.status, err.value.message) == (500, OUT)


def test_reserved_hosts_count_against_the_service_limits(env, sim):
    limits = sim.client(oci.limits.LimitsClient)

    def gpus(comp=None):
        got = limits.get_resource_availability("compute", "gpu-bm-gpu-h100-8-count", comp or env.comp,
                                               availability_domain=env.ad).data
        return got.used, got.available

    before = gpus()
    res = env.reserve(2)
    assert gpus() == (before[0] + 16, before[1] - 16)    # 2 hosts x 8 GPUs, none in use yet
    env.launch(res.id)
    assert gpus() == (before[0] + 16, before[1] - 16)    # an instance in the reservation is not counted again
    env.launch(None, name="od")
    assert gpus() == (before[0] + 24, before[1] - 24)
