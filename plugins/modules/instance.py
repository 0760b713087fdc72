#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: instance
short_description: Launch or terminate one OCI instance - a bastion or a single GPU node
version_added: 0.1.0
description:
  - Launches an instance (the bastion, or a GPU node as in the single-node tutorials), waits until it is
    RUNNING and returns its private and public IP.
  - The instance is found by compartment, O(display_name) and the freeform tag C(ocigpu-cluster), so a re-run
    never launches a second one. It also gets the tag C(ocigpu-role) - C(gpu) for GPU shapes, C(bastion) otherwise -
    unless O(freeform_tags) sets it.
  - The image is given by OCID, by exact display name (for example C(Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0)), or as
    the newest image of an operating system and version that runs on the shape.
  - GPU shapes get a 200 GB boot volume unless O(boot_volume_size_gb) says otherwise.
  - Tags are updated in place. Other launch options cannot change on a running instance; a difference fails
    with a message naming them.
  - O(state=absent) terminates the instance and deletes its boot volume.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.PLANNED
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.WAIT
  - ocigpu.cluster.oci.TAGS
  - ocigpu.cluster.oci.LAUNCH
options:
  display_name:
    description: Display name, for example C(<cluster_name>-bastion) or C(<cluster_name>-gpu-1); 1 to 255 characters.
    type: str
    required: true
  hostname_label:
    description: Host name in the subnet's DNS domain. OCI derives one from O(display_name) if unset.
    type: str
  state:
    description: Whether the instance should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Bastion in the public subnet
  ocigpu.cluster.instance:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    display_name: gpu1-bastion
    shape: VM.Standard.E5.Flex
    shape_config: {ocpus: 1, memory_in_gbs: 16}
    image_os: Oracle Linux
    image_os_version: "9"
    subnet_id: "{{ net.network.public_subnet_id }}"
    assign_public_ip: true
    ssh_authorized_keys: ["{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"]
  register: bastion

- name: A single GPU node in the private subnet
  ocigpu.cluster.instance:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    display_name: gpu1-gpu-1
    shape: BM.GPU4.8
    image_name: Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0
    subnet_id: "{{ net.network.private_subnet_id }}"
    ssh_authorized_keys: ["{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"]
    user_data_file: files/cloud-init.yml

- name: Terminate it and delete its boot volume
  ocigpu.cluster.instance:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    display_name: gpu1-gpu-1
    state: absent
"""

RETURN = r"""
instance:
  description: The instance (null when absent). In check mode an instance to be launched has a null id.
  returned: always
  type: dict
  contains:
    id: {description: OCID., type: str, returned: success}
    display_name: {description: Display name., type: str, returned: success}
    shape: {description: Shape., type: str, returned: success}
    lifecycle_state: {description: Lifecycle state (RUNNING after a waited launch)., type: str, returned: success}
    availability_domain: {description: Availability domain., type: str, returned: success}
    fault_domain: {description: Fault domain., type: str, returned: success}
    image_id: {description: Image OCID., type: str, returned: success}
    private_ip: {description: Private IP of the primary VNIC., type: str, returned: success}
    public_ip: {description: Public IP of the primary VNIC (null without one)., type: str, returned: success}
    hostname_label: {description: Host name of the primary VNIC., type: str, returned: success}
    freeform_tags: {description: Freeform tags., type: dict, returned: success}
last_wait:
  description: What the last wait saw when it ended - the same fields a timeout error reports.
  returned: when the module waited
  type: dict
  contains:
    resource_id: {description: OCID waited on., type: str, returned: when waiting on a lifecycle state}
    state: {description: Last lifecycle state., type: str, returned: when waiting on a lifecycle state}
    work_request_id: {description: Work request waited on., type: str, returned: when waiting on a work request}
    work_request_status: {description: Last work request status., type: str, returned: when waiting on a work request}
    percent_complete: {description: Last work request percentage., type: float, returned: when waiting on a work request}
    polls: {description: Number of polls., type: int}
    elapsed: {description: Seconds waited., type: float}
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _shapes
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import ResourceModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    attr, check_display_names, current_with_tags, pick_tagged)

try:
    from oci.core.models import UpdateInstanceDetails
except ImportError:
    pass  # OCIModule reports the missing library

ROLE_TAG = 'ocigpu-role'


class Instance(ResourceModule):
    RESOURCE = 'instance'
    UPDATABLE = ('freeform_tags', 'defined_tags')

    def tags(self):
        tags = super(Instance, self).tags()
        tags.setdefault(ROLE_TAG, 'gpu' if _shapes.is_gpu_shape(self.params['shape']) else 'bastion')
        return tags

    def validate(self):
        if self.params['state'] == 'present':
            check_display_names('display_name', [self.params['display_name']])
            self.spec = _launch.LaunchSpec(self.params, self.check_mode)

    def find(self):
        items = self.session.list_all(self.session.compute.list_instances, self.params['compartment_id'],
                                      display_name=self.params['display_name'])
        res = pick_tagged(items, self.params['display_name'], self.cluster_name, 'display_name')
        if self.params['state'] == 'present':
            self.spec.resolve(self.session, self.params['compartment_id'])
        return res

    def desired(self):
        p = self.params
        # An image chosen as "newest of an OS" or a default AD may differ from what an older launch got:
        # only explicit choices are compared.
        explicit_image = self.spec.image_id if (p['image_id'] or p['image_name']) else None
        return dict(shape=p['shape'], image_id=explicit_image, availability_domain=p['availability_domain'],
                    fault_domain=p['fault_domain'], compute_cluster_id=p['compute_cluster_id'],
                    metadata=self.spec.metadata() or None,
                    freeform_tags=self.tags(), defined_tags=p['defined_tags'] or None)

    def current(self, res):
        have = current_with_tags(res, self.desired())
        have['image_id'] = attr(res.source_details, 'image_id') or res.image_id
        have['compute_cluster_id'] = attr(res, 'compute_cluster_id')
        if self.spec.metadata():
            have['metadata'] = dict((k, (res.metadata or {}).get(k)) for k in self.spec.metadata())
        return have

    def blocked_message(self, blocked):
        return ('%s: the instance %s was launched with other values and OCI cannot change them on it. '
                'Terminate it (state=absent) and run again to launch it anew.' % (', '.join(blocked), self.existing.id))

    def create(self):
        details = self.spec.launch_details(self.params['compartment_id'], self.params['display_name'],
                                           self.tags(), self.params['defined_tags'])
        res = self.session.create(self.session.compute.launch_instance, details).data
        if self.params['wait']:
            res = self.waiter.lifecycle(self.session.compute.get_instance, res.id, ['RUNNING'],
                                        failed_states=('TERMINATING', 'TERMINATED'), what='instance %s' % res.id)
        return res

    def update(self, res, changes):
        return self.session.call(self.session.compute.update_instance, res.id, UpdateInstanceDetails(**changes))

    def delete(self, res):
        self.session.call_response(self.session.compute.terminate_instance, res.id, preserve_boot_volume=False)
        if self.params['wait']:
            self.waiter.gone(self.session.compute.get_instance, res.id, what='instance %s' % res.id)

    def describe(self, res):
        keys = ('id', 'display_name', 'shape', 'lifecycle_state', 'availability_domain', 'fault_domain', 'image_id',
                'freeform_tags')
        out = dict((k, attr(res, k)) for k in keys)
        if res.lifecycle_state in ('RUNNING', 'STARTING', 'STOPPED', 'STOPPING', 'PROVISIONING'):
            out.update(_launch.instance_ips(self.session, self.params['compartment_id'], [res.id])[res.id])
        return out

    def predict(self):
        out = dict(self.desired(), id=None, display_name=self.params['display_name'], lifecycle_state=None,
                   private_ip=None, public_ip=None, hostname_label=self.params['hostname_label'])
        out.pop('metadata')
        return out


def main():
    spec = _launch.launch_argument_spec()
    spec.update(display_name=dict(type='str', required=True), hostname_label=dict(type='str'))
    Instance(spec, mutually_exclusive=_launch.LAUNCH_MUTUALLY_EXCLUSIVE).run()


if __name__ == '__main__':
    main()
