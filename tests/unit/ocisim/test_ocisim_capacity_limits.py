# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity report (CreateComputeCapacityReport) and the Limits service's GetResourceAvailability:
they answer what the capacity model and the limit values hold, through the SDK, the Python API
(capacity.set, set_limit) and the admin endpoint alike, and store nothing."""

from __future__ import annotations

import json
import urllib.request

import oci
import pytest

from oci.core import models as core

GPU4_LIMIT = "gpu-bm-gpu4-8-count"
REPORT = "POST /computeCapacityReports"


@pytest.fixture
def ad(ocisim):
    return next(iter(ocisim.availability_domains))


@pytest.fixture
def compute(ocisim):
    return ocisim.client(oci.core.ComputeClient)


@pytest.fixture
def limits(ocisim):
    return ocisim.client(oci.limits.LimitsClient)


def report(compute, ocisim, ad, *shapes, compartment_id=None):
    asks = [core.CreateCapacityReportShapeAvailabilityDetails(instance_shape=s) if isinstance(s, str) else s
            for s in shapes]
    details = core.CreateComputeCapacityReportDetails(compartment_id=compartment_id or ocisim.tenancy_id,
                                                      availability_domain=ad, shape_availabilities=asks)
    return dict((a.instance_shape, a) for a in compute.create_compute_capacity_report(details).data.shape_availabilities)


def admin(ocisim, path, body):
    req = urllib.request.Request(ocisim.endpoint + "/_admin" + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status


def test_the_report_shows_the_capacity_model(ocisim, compute, ad):
    got = report(compute, ocisim, ad, "BM.GPU4.8", "BM.GPU3.8", "VM.Standard.E5.Flex", "BM.GPU.X9.8")
    assert (got["BM.GPU4.8"].available_count, got["BM.GPU4.8"].availability_status) == (64, "AVAILABLE")
    assert got["BM.GPU3.8"].available_count == 16
    assert (got["VM.Standard.E5.Flex"].available_count, got["VM.Standard.E5.Flex"].availability_status) == (None, "AVAILABLE")
    assert got["BM.GPU.X9.8"].availability_status == "HARDWARE_NOT_SUPPORTED"

    ocisim.capacity.set("BM.GPU4.8", 5)
    ocisim.seed_instances(2, compartments=[ocisim.compartment_id], shape="BM.GPU4.8", availability_domain=ad)
    assert report(compute, ocisim, ad, "BM.GPU4.8")["BM.GPU4.8"].available_count == 3
    assert admin(ocisim, "/capacity", {"shape": "BM.GPU4.8", "hosts": 2}) == 204
    got = report(compute, ocisim, ad, "BM.GPU4.8")["BM.GPU4.8"]
    assert (got.available_count, got.availability_status) == (0, "OUT_OF_HOST_CAPACITY")


def test_the_report_is_a_read(ocisim, compute, ad):
    before = {kind: len(getattr(ocisim.state, kind)) for kind in ("instances", "work_requests", "cluster_networks")}
    report(compute, ocisim, ad, "BM.GPU4.8")
    assert ocisim.calls[REPORT] == 1
    assert {kind: len(getattr(ocisim.state, kind)) for kind in before} == before


@pytest.mark.parametrize("body, status, code", [
    ({"availabilityDomain": "Nope:AP-TOKYO-1-AD-9", "shapeAvailabilities": [{"instanceShape": "BM.GPU4.8"}]},
     400, "InvalidParameter"),
    ({"shapeAvailabilities": []}, 400, "MissingParameter"),
    ({"shapeAvailabilities": [{"instanceShape": "VM.Standard.E5.Flex", "instanceShapeConfig": {"ocpus": 500}}]},
     400, "InvalidParameter"),
])
def test_a_bad_report_request_is_refused(ocisim, ad, body, status, code):
    from tests.ocisim.testing import signed_request
    full = dict({"compartmentId": ocisim.tenancy_id, "availabilityDomain": ad}, **body)
    got_status, _headers, got = signed_request(ocisim, "POST", "/20160918/computeCapacityReports", full)
    assert (got_status, got["code"]) == (status, code), got


def test_resource_availability_counts_the_tenancys_instances(ocisim, limits, ad):
    got = limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id, availability_domain=ad).data
    assert (got.available, got.used) == (512, 0)
    other = ocisim.add_compartment("other")["id"]
    ocisim.seed_instances(2, compartments=[ocisim.compartment_id], shape="BM.GPU4.8", availability_domain=ad)
    ocisim.seed_instances(1, compartments=[other], shape="BM.GPU4.8", availability_domain=ad)
    got = limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id, availability_domain=ad).data
    assert (got.available, got.used) == (512 - 24, 16)
    root = limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.tenancy_id, availability_domain=ad).data
    assert root.used == 24

    ocisim.set_limit(GPU4_LIMIT, 32)
    got = limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id, availability_domain=ad).data
    assert got.available == 8
    assert admin(ocisim, "/limits", {"limit": GPU4_LIMIT, "value": 16}) == 204
    got = limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id, availability_domain=ad).data
    assert got.available == 0


def test_flex_limits_count_ocpus_and_memory(ocisim, limits, ad):
    ocisim.seed_instances(1, compartments=[ocisim.compartment_id], shape="VM.Standard.E5.Flex", availability_domain=ad)
    cores = limits.get_resource_availability("compute", "standard-e5-core-count", ocisim.compartment_id,
                                             availability_domain=ad).data
    assert (cores.used, cores.available) == (2, 998)
    memory = limits.get_resource_availability("compute", "standard-e5-memory-count", ocisim.compartment_id,
                                              availability_domain=ad).data
    assert memory.available == 16000 - memory.used and memory.used > 0


@pytest.mark.parametrize("service, limit, ad_name, status", [
    ("compute", "no-such-count", "ad", 404),
    ("database", GPU4_LIMIT, "ad", 404),
    ("compute", GPU4_LIMIT, None, 400),
    ("compute", GPU4_LIMIT, "Nope:AP-TOKYO-1-AD-9", 400),
])
def test_resource_availability_errors(ocisim, limits, ad, service, limit, ad_name, status):
    kwargs = {"availability_domain": ad if ad_name == "ad" else ad_name} if ad_name else {}
    with pytest.raises(oci.exceptions.ServiceError) as err:
        limits.get_resource_availability(service, limit, ocisim.compartment_id, **kwargs)
    assert err.value.status == status


def test_a_limit_without_a_value_answers_404(ocisim, limits, ad):
    ocisim.set_limit(GPU4_LIMIT, None)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id, availability_domain=ad)
    assert (err.value.status, err.value.code) == (404, "NotAuthorizedOrNotFound")


def test_reset_restores_default_capacity_and_limits(ocisim, compute, limits, ad):
    ocisim.capacity.set("BM.GPU4.8", 1)
    ocisim.set_limit(GPU4_LIMIT, 8)
    ocisim.reset()
    ad = next(iter(ocisim.availability_domains))  # a reset names the availability domains anew
    assert report(compute, ocisim, ad, "BM.GPU4.8")["BM.GPU4.8"].available_count == 64
    assert limits.get_resource_availability("compute", GPU4_LIMIT, ocisim.compartment_id,
                                            availability_domain=ad).data.available == 512


def test_each_api_version_serves_only_its_own_routes(ocisim, ad):
    from tests.ocisim.testing import signed_request
    path = "/services/compute/limits/{0}/resourceAvailability?compartmentId={1}&availabilityDomain={2}".format(
        GPU4_LIMIT, ocisim.compartment_id, ad)
    assert signed_request(ocisim, "GET", "/20190729" + path)[0] == 200
    assert signed_request(ocisim, "GET", "/20160918" + path)[0] == 404
    assert signed_request(ocisim, "GET", "/20190729/shapes?compartmentId=" + ocisim.compartment_id)[0] == 404
    assert signed_request(ocisim, "GET", "/20160918/shapes?compartmentId=" + ocisim.compartment_id)[0] == 200
