# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seeding speed and consistency, and the simulator as a process with its admin endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import oci

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_seeding_2000_instances_in_30_compartments_under_5s(ocisim):
    start = time.perf_counter()
    ids = ocisim.seed_instances(2000, compartments=30)
    elapsed = time.perf_counter() - start
    print("\nocisim: seeded 2000 instances in 30 compartments in {0:.2f} s".format(elapsed))
    assert elapsed < 5.0
    state = ocisim.state
    assert len(ids) == len(set(ids)) == 2000
    comps = {state.instances[i]["compartmentId"] for i in ids}
    assert len(comps) == 30
    running = [i for i in ids if state.instances[i]["lifecycleState"] == "RUNNING"]
    assert len(running) == 2000
    # Every instance has an ATTACHED primary VNIC with a unique private IP in its subnet.
    ips = {state.vnics[a["vnicId"]]["privateIp"] for a in state.vnic_attachments.values()
           if a["lifecycleState"] == "ATTACHED"}
    assert len(ips) == 2000
    # Visible through the API in one of the compartments.
    compute = ocisim.client(oci.core.ComputeClient)
    some = next(iter(comps))
    listed = oci.pagination.list_call_get_all_results(compute.list_instances, some).data
    assert len(listed) == sum(1 for i in ids if state.instances[i]["compartmentId"] == some)


def test_seeding_512_gpu_nodes_in_32_cluster_networks(ocisim):
    start = time.perf_counter()
    clusters = [ocisim.seed_cluster("gpu{0:02d}".format(n), 16, shape="BM.GPU.H100.8",
                                    freeform_tags={"ocigpu-cluster": "gpu{0:02d}".format(n)}) for n in range(32)]
    elapsed = time.perf_counter() - start
    print("\nocisim: seeded 32 cluster networks x 16 BM.GPU.H100.8 in {0:.2f} s".format(elapsed))
    assert elapsed < 5.0
    cm = ocisim.client(oci.core.ComputeManagementClient)
    members = cm.list_cluster_network_instances(ocisim.compartment_id, clusters[5]["id"]).data
    assert len(members) == 16 and {m.state for m in members} == {"Running"}
    assert {m.id for m in members} == set(clusters[5]["instanceIds"])
    cn = cm.get_cluster_network(clusters[5]["id"]).data
    assert cn.lifecycle_state == "RUNNING" and cn.instance_pools[0].current_size == 16
    assert sum(len(c["instanceIds"]) for c in clusters) == 512


def test_seed_network_and_private_subnet(ocisim):
    vcn, public = ocisim.seed_network(cidr="10.70.0.0/16", subnet_prefix=24, name="bench")
    private = ocisim.seed_subnet(vcn["id"], "10.70.1.0/24", "bench-private", prohibit_public_ip=True)
    ids = ocisim.seed_instances(3, [ocisim.compartment_id], subnet_id=private["id"], assign_public_ip=False)
    vn = ocisim.client(oci.core.VirtualNetworkClient)
    assert {s.id for s in vn.list_subnets(ocisim.compartment_id, vcn_id=vcn["id"]).data} == {public["id"], private["id"]}
    ips = sorted(p.ip_address for p in vn.list_private_ips(subnet_id=private["id"]).data)
    assert ips == ["10.70.1.2", "10.70.1.3", "10.70.1.4"] and len(ids) == 3
    assert vn.get_subnet(private["id"]).data.prohibit_public_ip_on_vnic


def _admin(endpoint, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(endpoint + "/_admin" + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as answer:
        raw = answer.read()
    return json.loads(raw) if raw else None


def test_process_mode_with_admin_endpoint(tmp_path):
    config = tmp_path / "config"
    env_file = tmp_path / "env"
    events = tmp_path / "events"
    hook = 'echo "$OCISIM_EVENT $OCISIM_INSTANCE_ID $OCISIM_PRIVATE_IP $OCISIM_SHAPE" >> ' + str(events)
    proc = subprocess.Popen([sys.executable, "-m", "tests.ocisim", "--port", "0", "--write-config", str(config),
                             "--write-env", str(env_file), "--seed-cluster", "demo:2", "--duration",
                             "instance_launch=0.5", "--on-instance", hook],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        endpoint = info["endpoint"]
        assert endpoint.startswith("http://127.0.0.1:")
        assert "OCIGPU_SERVICE_ENDPOINT=" + endpoint in env_file.read_text()
        cfg = oci.config.from_file(str(config))
        cm = oci.core.ComputeManagementClient(cfg, service_endpoint=endpoint)
        networks = cm.list_cluster_networks(info["compartment_id"]).data
        assert [n.display_name for n in networks] == ["demo"]

        _admin(endpoint, "POST", "/faults", {"route": "GET /clusterNetworks", "status": 429, "count": 1})
        client = oci.core.ComputeManagementClient(cfg, service_endpoint=endpoint,
                                                  retry_strategy=oci.retry.NoneRetryStrategy())
        try:
            client.list_cluster_networks(info["compartment_id"])
            raise AssertionError("the injected 429 did not happen")
        except oci.exceptions.ServiceError as err:
            assert err.status == 429
        assert _admin(endpoint, "GET", "/calls")["GET /clusterNetworks"] == 2
        seeded = _admin(endpoint, "POST", "/seed/instances", {"count": 5, "compartments": 2})
        assert len(seeded["instance_ids"]) == 5
        before = _admin(endpoint, "GET", "/clock")["now"]
        after = _admin(endpoint, "POST", "/clock/advance", {"seconds": 3600})["now"]
        assert after - before >= 3600
        states = _admin(endpoint, "GET", "/state/cluster_networks")
        assert states[0]["lifecycleState"] == "RUNNING"
        _admin(endpoint, "DELETE", "/faults")

        # The --on-instance command runs for launches and terminations.
        config_id = _admin(endpoint, "GET", "/state/instance_configurations")[0]["id"]
        launched = cm.launch_instance_configuration(config_id, oci.core.models.ComputeInstanceDetails()).data
        compute = oci.core.ComputeClient(cfg, service_endpoint=endpoint)
        compute.terminate_instance(launched.id)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(events.read_text().splitlines() if events.exists() else []) < 2:
            time.sleep(0.1)
        lines = sorted(events.read_text().splitlines())
        vnic_att = compute.list_vnic_attachments(info["compartment_id"], instance_id=launched.id).data[0]
        ip = oci.core.VirtualNetworkClient(cfg, service_endpoint=endpoint).get_vnic(vnic_att.vnic_id).data.private_ip
        assert lines == sorted(["launch {0} {1} BM.GPU.H100.8".format(launched.id, ip),
                                "terminate {0} {1} BM.GPU.H100.8".format(launched.id, ip)])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
