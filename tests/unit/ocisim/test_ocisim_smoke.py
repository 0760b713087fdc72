# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fixture works end to end through the SDK: network, launch, VNIC lookup, IMDS."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import oci
import pytest

from tests.ocisim.testing import assert_model


def _network(ocisim):
    vn = oci.core.VirtualNetworkClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint)
    vcn = vn.create_vcn(oci.core.models.CreateVcnDetails(compartment_id=ocisim.compartment_id,
                                                         cidr_block="10.0.0.0/16", display_name="t-vcn",
                                                         dns_label="tvcn")).data
    subnet = vn.create_subnet(oci.core.models.CreateSubnetDetails(
        compartment_id=ocisim.compartment_id, vcn_id=vcn.id, cidr_block="10.0.1.0/24", dns_label="sub")).data
    return vn, vcn, subnet


def test_fixture_attributes(ocisim):
    assert ocisim.endpoint.startswith("http://127.0.0.1:")
    args = ocisim.auth_args()
    assert args["service_endpoint"] == ocisim.endpoint
    assert args["config_profile"] == "DEFAULT"
    cfg = oci.config.from_file(args["config_file"], args["config_profile"])
    oci.config.validate_config(cfg)
    assert cfg["tenancy"] == ocisim.tenancy_id
    assert ocisim.compartment_id.startswith("ocid1.compartment.oc1..")


def test_launch_reaches_running_with_private_ip(ocisim):
    vn, _vcn, subnet = _network(ocisim)
    compute = oci.core.ComputeClient(oci.config.from_file(ocisim.config_file), service_endpoint=ocisim.endpoint)
    image = compute.list_images(ocisim.compartment_id, display_name="Oracle-Linux-9.6-2025.10.23-0").data[0]
    ad = compute.list_shapes(ocisim.compartment_id).data and list(ocisim.availability_domains)[0]
    resp = compute.launch_instance(oci.core.models.LaunchInstanceDetails(
        availability_domain=ad, compartment_id=ocisim.compartment_id, shape="VM.Standard.E5.Flex",
        shape_config=oci.core.models.LaunchInstanceShapeConfigDetails(ocpus=2),
        source_details=oci.core.models.InstanceSourceViaImageDetails(image_id=image.id),
        create_vnic_details=oci.core.models.CreateVnicDetails(subnet_id=subnet.id), display_name="n1"))
    assert resp.data.lifecycle_state == "PROVISIONING"
    assert resp.data.id.startswith("ocid1.instance.oc1.ap-tokyo-1.")
    assert resp.headers["opc-work-request-id"].startswith("ocid1.coreservicesworkrequest.")
    ocisim.clock.advance(ocisim.durations["instance_launch"])
    assert compute.get_instance(resp.data.id).data.lifecycle_state == "RUNNING"
    att = compute.list_vnic_attachments(ocisim.compartment_id, instance_id=resp.data.id).data[0]
    vnic = vn.get_vnic(att.vnic_id).data
    assert vnic.private_ip == "10.0.1.2"
    assert vnic.is_primary
    _key, _status, body = ocisim.captured[-1]
    assert_model(body, "Vnic")

    req = urllib.request.Request(ocisim.endpoint + "/_imds/" + resp.data.id + "/opc/v2/vnics/",
                                 headers={"Authorization": "Bearer Oracle"})
    with urllib.request.urlopen(req, timeout=5) as answer:
        vnics = json.loads(answer.read())
    assert vnics[0]["privateIp"] == "10.0.1.2"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(ocisim.endpoint + "/_imds/" + resp.data.id + "/opc/v2/instance/", timeout=5)
    assert err.value.code == 401
