# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Custom images through the real SDK: made from an instance (a CreateImage work request, PROVISIONING until
made and until the image hooks have finished), listed, read, renamed, deleted, launched from, and the
instance hook's image event (a command whose exit status decides the image)."""

from __future__ import annotations

import json
import sys
import time

import oci
import pytest

from oci.core import models as core

from tests.ocisim.testing import assert_model, signed_request

GPU_IMAGE = "Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0"
VM_IMAGE = "Oracle-Linux-9.6-2025.10.23-0"


@pytest.fixture
def compute(ocisim):
    return ocisim.client(oci.core.ComputeClient)


@pytest.fixture
def subnet_id(ocisim):
    _vcn, subnet = ocisim.seed_network(cidr="10.40.0.0/16", subnet_prefix=24, name="img")
    return subnet["id"]


def image_id(compute, ocisim, name):
    return compute.list_images(ocisim.compartment_id, display_name=name).data[0].id


def launch(compute, ocisim, subnet_id, image, shape="VM.Standard.E5.Flex", name="builder"):
    inst = compute.launch_instance(core.LaunchInstanceDetails(
        availability_domain=next(iter(ocisim.availability_domains)), compartment_id=ocisim.compartment_id,
        shape=shape, display_name=name, source_details=core.InstanceSourceViaImageDetails(image_id=image),
        create_vnic_details=core.CreateVnicDetails(subnet_id=subnet_id))).data
    ocisim.wait_idle()
    return inst


def create(compute, ocisim, instance_id, **kwargs):
    kwargs.setdefault("compartment_id", ocisim.compartment_id)
    return compute.create_image(core.CreateImageDetails(instance_id=instance_id, **kwargs))


def test_an_image_of_an_instance_is_made_through_a_work_request(ocisim, compute, subnet_id):
    base = image_id(compute, ocisim, GPU_IMAGE)
    builder = launch(compute, ocisim, subnet_id, base, shape="BM.GPU.H100.8")
    answer = create(compute, ocisim, builder.id, display_name="baked-1", freeform_tags={"ocigpu-cluster": "c1"},
                    launch_mode="NATIVE")
    image = answer.data
    assert (image.lifecycle_state, image.display_name, image.base_image_id) == ("PROVISIONING", "baked-1", base)
    assert (image.operating_system, image.operating_system_version) == ("Oracle Linux", "9")
    assert image.freeform_tags == {"ocigpu-cluster": "c1"} and image.compartment_id == ocisim.compartment_id
    assert image.size_in_mbs == 47 * 1024 and image.billable_size_in_gbs > 0 and image.launch_mode == "NATIVE"
    assert compute.get_instance(builder.id).data.lifecycle_state == "CREATING_IMAGE"
    wr_client = ocisim.client(oci.work_requests.WorkRequestClient)
    wr_id = answer.headers["opc-work-request-id"]
    ocisim.clock.advance(ocisim.durations["image_create"] / 2)
    wr = wr_client.get_work_request(wr_id).data
    assert (wr.operation_type, wr.status) == ("CreateImage", "IN_PROGRESS")
    assert [(r.entity_type, r.identifier) for r in wr.resources][0] == ("image", image.id)
    ocisim.wait_idle()
    wr = wr_client.get_work_request(wr_id).data
    assert (wr.status, wr.resources[0].action_type) == ("SUCCEEDED", "CREATED")
    assert compute.get_image(image.id).data.lifecycle_state == "AVAILABLE"
    assert compute.get_instance(builder.id).data.lifecycle_state == "RUNNING"
    # The raw answer fits the SDK's model.
    _status, _headers, raw = signed_request(ocisim, "GET", "/20160918/images/" + image.id)
    assert_model(raw, "Image")
    # A custom image of a GPU image fits the GPU shapes only, as its base does.
    shapes = [e.shape for e in compute.list_image_shape_compatibility_entries(image.id).data]
    assert "BM.GPU.H100.8" in shapes and "VM.Standard.E5.Flex" not in shapes
    assert compute.get_image_shape_compatibility_entry(image.id, "BM.GPU.H100.8").data.image_id == image.id


def test_an_image_is_made_of_a_stopped_instance_and_never_of_one_in_another_state(ocisim, compute, subnet_id):
    builder = launch(compute, ocisim, subnet_id, image_id(compute, ocisim, VM_IMAGE))
    compute.instance_action(builder.id, "STOP")
    ocisim.wait_idle()
    image = create(compute, ocisim, builder.id).data
    with pytest.raises(oci.exceptions.ServiceError) as err:   # the instance is CREATING_IMAGE
        create(compute, ocisim, builder.id)
    assert (err.value.status, err.value.code) == (409, "IncorrectState")
    ocisim.wait_idle()
    assert compute.get_image(image.id).data.lifecycle_state == "AVAILABLE"
    assert compute.get_instance(builder.id).data.lifecycle_state == "STOPPED"
    compute.terminate_instance(builder.id)
    with pytest.raises(oci.exceptions.ServiceError) as err:
        create(compute, ocisim, builder.id)
    assert (err.value.status, err.value.code) == (409, "IncorrectState")
    with pytest.raises(oci.exceptions.ServiceError) as err:
        create(compute, ocisim, "ocid1.instance.oc1.ap-tokyo-1.aaaaaaaanope")
    assert (err.value.status, err.value.code) == (404, "NotAuthorizedOrNotFound")
    with pytest.raises(oci.exceptions.ServiceError) as err:
        create(compute, ocisim, None, image_source_details=core.ImageSourceViaObjectStorageUriDetails(
            source_uri="https://objectstorage.example/x"))
    assert err.value.status == 400


def test_custom_images_are_listed_read_renamed_and_deleted(ocisim, compute, subnet_id):
    builder = launch(compute, ocisim, subnet_id, image_id(compute, ocisim, VM_IMAGE))
    first = create(compute, ocisim, builder.id, display_name="baked-a").data
    ocisim.wait_idle()
    other = ocisim.add_compartment("elsewhere")["id"]
    second = create(compute, ocisim, builder.id, display_name="baked-b", compartment_id=other).data
    ocisim.wait_idle()
    listed = [i.id for i in compute.list_images(ocisim.compartment_id).data]
    assert first.id in listed and second.id not in listed     # the compartment's custom images only
    assert [i.id for i in compute.list_images(other, display_name="baked-b").data] == [second.id]
    mine = compute.list_images(ocisim.compartment_id, operating_system="Oracle Linux", operating_system_version="9",
                               shape="VM.Standard.E5.Flex", lifecycle_state="AVAILABLE",
                               sort_by="DISPLAYNAME", sort_order="ASC").data
    assert first.id in [i.id for i in mine] and [i.display_name for i in mine] == sorted(i.display_name for i in mine)

    renamed = compute.update_image(first.id, core.UpdateImageDetails(display_name="baked-a2",
                                                                     freeform_tags={"k": "v"})).data
    assert (renamed.display_name, renamed.freeform_tags) == ("baked-a2", {"k": "v"})
    with pytest.raises(oci.exceptions.ServiceError) as err:
        compute.update_image(first.id, core.UpdateImageDetails(display_name=VM_IMAGE))
    assert err.value.status == 400
    with pytest.raises(oci.exceptions.ServiceError) as err:   # a platform image is not the caller's to change
        compute.update_image(image_id(compute, ocisim, VM_IMAGE), core.UpdateImageDetails(display_name="x"))
    assert err.value.status == 404

    assert compute.delete_image(first.id).status == 204
    assert compute.get_image(first.id).data.lifecycle_state == "DELETED"
    assert [i.id for i in compute.list_images(ocisim.compartment_id, display_name="baked-a2",
                                              lifecycle_state="AVAILABLE").data] == []


def test_instances_launch_from_a_custom_image_until_it_is_deleted(ocisim, compute, subnet_id):
    builder = launch(compute, ocisim, subnet_id, image_id(compute, ocisim, GPU_IMAGE), shape="BM.GPU.H100.8")
    image = create(compute, ocisim, builder.id, display_name="baked").data
    with pytest.raises(oci.exceptions.ServiceError) as err:   # not made yet
        launch(compute, ocisim, subnet_id, image.id, shape="BM.GPU.H100.8", name="early")
    assert (err.value.status, err.value.code) == (409, "IncorrectState")
    ocisim.wait_idle()
    node = launch(compute, ocisim, subnet_id, image.id, shape="BM.GPU.H100.8", name="node-1")
    assert compute.get_instance(node.id).data.image_id == image.id
    with pytest.raises(oci.exceptions.ServiceError) as err:   # a GPU image's image needs a GPU shape
        launch(compute, ocisim, subnet_id, image.id, name="vm")
    assert err.value.status == 400

    cm = ocisim.client(oci.core.ComputeManagementClient)
    config = cm.create_instance_configuration(core.CreateInstanceConfigurationDetails(
        compartment_id=ocisim.compartment_id, display_name="from-baked",
        instance_details=core.ComputeInstanceDetails(launch_details=core.InstanceConfigurationLaunchInstanceDetails(
            availability_domain=next(iter(ocisim.availability_domains)), compartment_id=ocisim.compartment_id,
            shape="BM.GPU.H100.8",
            source_details=core.InstanceConfigurationInstanceSourceViaImageDetails(image_id=image.id),
            create_vnic_details=core.InstanceConfigurationCreateVnicDetails(subnet_id=subnet_id))))).data
    launched = cm.launch_instance_configuration(config.id, core.ComputeInstanceDetails()).data
    ocisim.wait_idle()
    assert compute.get_instance(launched.id).data.image_id == image.id
    # As on OCI, an image that an instance configuration names can be deleted; its launches fail then.
    assert compute.delete_image(image.id).status == 204
    with pytest.raises(oci.exceptions.ServiceError) as err:
        cm.launch_instance_configuration(config.id, core.ComputeInstanceDetails())
    assert err.value.status == 404


def write_hook(tmp_path, status):
    """A hook command that records its OCISIM_* variables (the file appears whole: wait_for may read it at
    once), and for the image event waits for a go file and then exits with `status`."""
    script = tmp_path / "hook.py"
    script.write_text(
        "import json, os, sys, time\n"
        "env = {k: v for k, v in os.environ.items() if k.startswith('OCISIM_') and not k.endswith('_JSON')}\n"
        "path = os.path.join(sys.argv[1], env['OCISIM_EVENT'] + '.json')\n"
        "with open(path + '.tmp', 'w') as f:\n"
        "    json.dump(env, f)\n"
        "os.replace(path + '.tmp', path)\n"
        "if env['OCISIM_EVENT'] == 'image':\n"
        "    while not os.path.exists(os.path.join(sys.argv[1], 'go')):\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(" + str(status) + ")\n")
    return "{0} {1} {2}".format(sys.executable, script, tmp_path)


def wait_for(path):
    # Up to 30 s: the hook is a process of its own, slow to start on a busy machine.
    for _index in range(600):
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise AssertionError("{0} never appeared".format(path))


def test_the_hook_gets_the_image_event_and_the_image_waits_for_it(ocisim, compute, subnet_id, tmp_path):
    ocisim.on_instance_command(write_hook(tmp_path, 0))
    base = image_id(compute, ocisim, VM_IMAGE)
    builder = launch(compute, ocisim, subnet_id, base)
    launched = wait_for(tmp_path / "launch.json")
    assert (launched["OCISIM_INSTANCE_ID"], launched["OCISIM_IMAGE_ID"]) == (builder.id, base)
    image = create(compute, ocisim, builder.id, display_name="baked-hook").data
    event = wait_for(tmp_path / "image.json")
    assert {k: event[k] for k in ("OCISIM_EVENT", "OCISIM_INSTANCE_ID", "OCISIM_IMAGE_ID", "OCISIM_DISPLAY_NAME")} \
        == {"OCISIM_EVENT": "image", "OCISIM_INSTANCE_ID": builder.id, "OCISIM_IMAGE_ID": image.id,
            "OCISIM_DISPLAY_NAME": "baked-hook"}
    ocisim.clock.advance(ocisim.durations["image_create"] + 30)
    assert compute.get_image(image.id).data.lifecycle_state == "PROVISIONING"   # the hook still runs
    (tmp_path / "go").write_text("")
    ocisim.hook_processes[-1].wait(timeout=20)
    ocisim.clock.advance(1)
    assert compute.get_image(image.id).data.lifecycle_state == "AVAILABLE"


def test_a_failing_hook_fails_the_work_request(ocisim, compute, subnet_id, tmp_path):
    ocisim.on_instance_command(write_hook(tmp_path, 3))
    builder = launch(compute, ocisim, subnet_id, image_id(compute, ocisim, VM_IMAGE))
    answer = create(compute, ocisim, builder.id, display_name="baked-bad")
    (tmp_path / "go").write_text("")
    ocisim.hook_processes[-1].wait(timeout=20)
    ocisim.wait_idle()
    wr_client = ocisim.client(oci.work_requests.WorkRequestClient)
    wr_id = answer.headers["opc-work-request-id"]
    assert wr_client.get_work_request(wr_id).data.status == "FAILED"
    errors = wr_client.list_work_request_errors(wr_id).data
    assert "exited with status 3" in errors[0].message
    assert compute.get_image(answer.data.id).data.lifecycle_state == "DELETED"
    assert compute.get_instance(builder.id).data.lifecycle_state == "RUNNING"


def test_a_python_image_hook_that_raises_fails_the_image(ocisim, compute, subnet_id):
    seen = []

    def hook(instance, image):
        seen.append((instance["id"], image["lifecycleState"]))
        raise RuntimeError("no room")
    ocisim.on_image(hook)
    builder = launch(compute, ocisim, subnet_id, image_id(compute, ocisim, VM_IMAGE))
    image = create(compute, ocisim, builder.id).data
    ocisim.wait_idle()
    assert seen == [(builder.id, "PROVISIONING")]
    assert compute.get_image(image.id).data.lifecycle_state == "DELETED"
