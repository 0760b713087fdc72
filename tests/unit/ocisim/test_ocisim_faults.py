# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault injection: throttling, server errors, latency, dropped connections, rate limits, and the
call counter that shows the SDK's retries."""

from __future__ import annotations

import time

import oci
import pytest


def _compute(sim, **kwargs):
    return oci.core.ComputeClient(oci.config.from_file(sim.config_file), service_endpoint=sim.endpoint, **kwargs)


def test_429_is_ridden_out_by_default_retry_strategy(ocisim):
    ocisim.seed_instances(3, [ocisim.compartment_id])
    ocisim.faults.throttle("GET /instances", count=2)
    client = _compute(ocisim, retry_strategy=oci.retry.DEFAULT_RETRY_STRATEGY)
    wall = time.monotonic()
    assert len(client.list_instances(ocisim.compartment_id).data) == 3
    assert ocisim.calls["GET /instances"] == 3          # two throttled attempts, then success
    assert len(ocisim.sdk_sleeps) == 2 and all(s > 0 for s in ocisim.sdk_sleeps)  # back-off asked for, not slept
    assert time.monotonic() - wall < 5


def test_429_without_retry_strategy_surfaces(ocisim):
    ocisim.faults.throttle("GET /instances", count=1)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy()).list_instances(ocisim.compartment_id)
    assert (err.value.status, err.value.code) == (429, "TooManyRequests")
    assert ocisim.calls["GET /instances"] == 1
    assert _compute(ocisim).list_instances(ocisim.compartment_id).data == []   # count used up


@pytest.mark.parametrize("status,code", [(500, "InternalError"), (503, "ServiceUnavailable")])
def test_server_errors_by_route_pattern_and_count(ocisim, status, code):
    ids = ocisim.seed_instances(1, [ocisim.compartment_id])
    ocisim.faults.error(status, "GET /instances/*", count=1)
    plain = _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy())
    with pytest.raises(oci.exceptions.ServiceError) as err:
        plain.get_instance(ids[0])
    assert (err.value.status, err.value.code) == (status, code)
    assert plain.get_instance(ids[0]).data.id == ids[0]
    assert plain.list_instances(ocisim.compartment_id).data          # other route untouched
    assert ocisim.calls["GET /instances/{instanceId}"] == 2
    retried = _compute(ocisim, retry_strategy=oci.retry.DEFAULT_RETRY_STRATEGY)
    ocisim.faults.error(status, "GET /instances/*", count=2)
    assert retried.get_instance(ids[0]).data.id == ids[0]
    assert ocisim.calls["GET /instances/{instanceId}"] == 5


def test_dropped_connection_and_latency(ocisim):
    ids = ocisim.seed_instances(1, [ocisim.compartment_id])
    ocisim.faults.drop("GET /instances/*", count=1)
    plain = _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy())
    with pytest.raises(Exception) as err:  # requests' ConnectionError family, as on a real reset
        plain.get_instance(ids[0])
    assert "onnection" in type(err.value).__name__ or "onnection" in str(err.value)
    retried = _compute(ocisim, retry_strategy=oci.retry.DEFAULT_RETRY_STRATEGY)
    ocisim.faults.drop("GET /instances/*", count=1)
    assert retried.get_instance(ids[0]).data.id == ids[0]
    assert ocisim.calls["GET /instances/{instanceId}"] == 3

    ocisim.faults.latency(0.3, "GET /instances/*", count=1)
    start = time.monotonic()
    plain.get_instance(ids[0])
    assert time.monotonic() - start >= 0.3


def test_per_tenancy_rate_limit(ocisim):
    plain = _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy())
    ocisim.faults.rate_limit(per_second=0.001, burst=3)
    for _attempt in range(3):
        plain.list_instances(ocisim.compartment_id)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        plain.list_instances(ocisim.compartment_id)
    assert (err.value.status, err.value.code) == (429, "TooManyRequests")
    # Another tenancy has its own bucket.
    other = ocisim.add_tenancy("other")
    from tests.ocisim import auth  # pylint: disable=import-outside-toplevel
    cfg = dict(ocisim.sdk_config(), tenancy=other["tenancy_id"], user=other["user_id"],
               fingerprint=auth.fingerprint(other["key"]), key_content=auth.private_pem(other["key"]).decode("ascii"))
    theirs = oci.identity.IdentityClient(cfg, service_endpoint=ocisim.endpoint,
                                         retry_strategy=oci.retry.NoneRetryStrategy())
    assert theirs.list_compartments(other["tenancy_id"]).data == []
    ocisim.faults.rate_limit(None)
    plain.list_instances(ocisim.compartment_id)
    assert ocisim.calls.count("GET /instances") == 5


def test_per_operation_rate_limit(ocisim):
    """As OCI throttles: each operation has a bucket of its own; the 429s answered are counted by operation."""
    plain = _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy())
    ocisim.faults.rate_limit(per_second=0.001, burst=2, route="GET /*")
    for _attempt in range(2):
        plain.list_instances(ocisim.compartment_id)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        plain.list_instances(ocisim.compartment_id)
    assert (err.value.status, err.value.code) == (429, "TooManyRequests")
    # Another operation is not held back by the first one's bucket.
    for _attempt in range(2):
        plain.list_vnic_attachments(ocisim.compartment_id)
    with pytest.raises(oci.exceptions.ServiceError):
        plain.list_vnic_attachments(ocisim.compartment_id)
    assert ocisim.faults.throttled == {"GET /instances": 1, "GET /vnicAttachments": 1}
    ocisim.faults.rate_limit(None, route="GET /*")
    plain.list_instances(ocisim.compartment_id)
    assert ocisim.calls.count("GET /instances") == 4


def test_per_operation_rate_limit_through_the_admin_endpoint(ocisim):
    import json  # pylint: disable=import-outside-toplevel
    import urllib.request  # pylint: disable=import-outside-toplevel
    request = urllib.request.Request(ocisim.endpoint + "/_admin/rate-limit", method="POST", data=json.dumps(
        {"per_second": 0.001, "burst": 1, "route": "GET /instances"}).encode())
    urllib.request.urlopen(request).close()
    plain = _compute(ocisim, retry_strategy=oci.retry.NoneRetryStrategy())
    plain.list_instances(ocisim.compartment_id)
    with pytest.raises(oci.exceptions.ServiceError):
        plain.list_instances(ocisim.compartment_id)
    with urllib.request.urlopen(ocisim.endpoint + "/_admin/faults") as answer:
        faults = json.load(answer)
    assert faults["operation_rate_limits"] == [dict(route="GET /instances", tenancy="*", per_second=0.001, burst=1.0)]
    assert faults["throttled"] == {"GET /instances": 1}


def test_call_counter_reset_and_patterns(ocisim):
    client = _compute(ocisim)
    client.list_instances(ocisim.compartment_id)
    client.list_vnic_attachments(ocisim.compartment_id)
    assert ocisim.calls.count("GET /*") == 2 and ocisim.calls.count("GET /vnic*") == 1
    assert ocisim.calls.total() == 2
    ocisim.calls.reset()
    assert ocisim.calls.as_dict() == {}


def test_lost_answer_to_a_create_is_retried_without_duplicate(ocisim):
    """The create succeeds but its answer is lost: the SDK retries with the same opc-retry-token
    and gets the first answer back, so only one VCN exists."""
    vn = oci.core.VirtualNetworkClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint,
                                       retry_strategy=oci.retry.DEFAULT_RETRY_STRATEGY)
    ocisim.faults.drop("POST /vcns", count=1, after=True)
    vcn = vn.create_vcn(oci.core.models.CreateVcnDetails(compartment_id=ocisim.compartment_id,
                                                         cidr_block="10.50.0.0/16")).data
    assert ocisim.calls["POST /vcns"] == 2
    assert [v["id"] for v in ocisim.state.find("vcns")] == [vcn.id]


def test_if_match_mismatch_is_412(ocisim):
    vn = oci.core.VirtualNetworkClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint)
    resp = vn.create_vcn(oci.core.models.CreateVcnDetails(compartment_id=ocisim.compartment_id,
                                                          cidr_block="10.51.0.0/16"))
    etag = vn.get_vcn(resp.data.id).headers["etag"]
    vn.update_vcn(resp.data.id, oci.core.models.UpdateVcnDetails(display_name="a"), if_match=etag)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.update_vcn(resp.data.id, oci.core.models.UpdateVcnDetails(display_name="b"), if_match=etag)
    assert (err.value.status, err.value.code) == (412, "NoEtagMatch")
    assert vn.get_vcn(resp.data.id).data.display_name == "a"


def test_a_simulator_bug_is_a_500_not_a_dropped_connection(ocisim, monkeypatch):
    route = [r for r in ocisim.router.routes if r.key == "GET /vcns"][0]

    def broken(_ctx):
        raise KeyError("boom")
    monkeypatch.setattr(route, "handler", broken)
    vn = oci.core.VirtualNetworkClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint,
                                       retry_strategy=oci.retry.NoneRetryStrategy())
    with pytest.raises(oci.exceptions.ServiceError) as err:
        vn.list_vcns(ocisim.compartment_id)
    assert err.value.status == 500 and "ocisim bug" in err.value.message
