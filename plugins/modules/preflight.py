#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Check a whole GPU cluster plan against OCI before anything is created
version_added: 0.2.0
description:
  - Takes the plan - the cluster vars that decide what M(ocigpu.cluster.instance),
    M(ocigpu.cluster.instance_configuration) and M(ocigpu.cluster.cluster_network) would create - and checks all
    of it with read-only calls, so that a mistake in any part is found before the first resource exists.
  - The plan itself is checked against the collection's shape table - the bastion takes a CPU VM shape, GPU nodes a
    GPU shape (an RDMA one when they form a cluster network) - and against OCI's fixed limits - a boot volume of 50
    to 32768 GB, user data within 32,000 bytes after base64. Every SSH key must parse as an OpenSSH public key;
    a private key given by mistake is named as one and its text is never repeated.
  - OCI is asked, with GET calls, whether the compartment and availability domain exist, whether the shapes are
    offered there and the Flex sizes within the shape's limits, whether the GPU image exists, is AVAILABLE, runs on
    the GPU shape and fits the boot volume, and whether the bastion's operating system has an image for its shape.
  - Capacity is asked from OCI's own read-only APIs for what the plan would add (nodes the cluster already has,
    found by the C(ocigpu-cluster) tag, are not counted twice) - the Compute capacity report
    (CreateComputeCapacityReport, a POST that creates nothing) for the hosts free in the availability domain,
    and the Limits service's GetResourceAvailability for each service limit the shape names (its C(quotaNames)).
    With O(autoscaling=true) the limits must admit O(gpu_node_count) plus O(autoscaling_max_nodes) nodes; a
    capacity report below that peak is a warning, since on-demand nodes are made later.
  - Every problem is listed at once - the task fails with one message naming them all and returns them as
    C(problems). A read that OCI refuses for want of permission or support (no capacity report, a limit without
    resource availability) is a warning and listed in C(skipped), never a problem.
  - The module never changes anything and runs the same in check mode.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.READ_ONLY
  - ocigpu.cluster.oci.ATTRIBUTES
options:
  cluster_name:
    description: Name of the cluster (the C(ocigpu-cluster) tag); the bastion and nodes it already has are found by it.
    type: str
    required: true
  compartment_id:
    description: OCID of the compartment the cluster goes into (C(ocid1.compartment...) or the tenancy's); any other is refused before any call to OCI.
    type: str
    required: true
  availability_domain:
    description:
      - Availability domain of the cluster. Defaults to the existing bastion's, else the first one of the region -
        what the provisioning modules choose.
    type: str
  bastion_shape:
    description: Shape of the bastion (the Slurm controller), a CPU VM shape of the shape table, e.g. C(VM.Standard.E5.Flex).
    type: str
    required: true
  bastion_ocpus:
    description: OCPUs of a Flex bastion shape (required for one; ignored for a fixed shape).
    type: float
  bastion_memory_gb:
    description: Memory of a Flex bastion shape in GB (OCI's default per OCPU when unset; ignored for a fixed shape).
    type: float
  bastion_image_os:
    description: Operating system of the bastion's image, e.g. C(Oracle Linux).
    type: str
    required: true
  bastion_image_os_version:
    description: Version of O(bastion_image_os), e.g. C(9).
    type: str
  gpu_shape:
    description: Shape of the GPU nodes, a GPU shape of the shape table, e.g. C(BM.GPU4.8).
    type: str
    required: true
  gpu_image_name:
    description: Exact display name of the GPU nodes' image, e.g. C(Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0).
    type: str
    required: true
  gpu_node_count:
    description: Number of static GPU nodes (0 allowed with O(autoscaling=true)).
    type: int
    default: 1
  gpu_cluster_mode:
    description:
      - How the GPU nodes are built, as in the cluster vars - V(auto) (one node alone, more on an RDMA cluster
        network), V(single) or V(cluster_network). A cluster network needs an RDMA shape.
    type: str
    choices: [auto, single, cluster_network]
    default: auto
  gpu_placement_constraint:
    description:
      - OCI's placement constraint for the cluster network's hosts (the cluster_network module's O(ocigpu.cluster.cluster_network#module:placement_constraint));
        empty leaves OCI's default (one HPC island). Refused with a single instance.
    type: str
    choices: ['', SINGLE_TIER, SINGLE_BLOCK, PACKED_DISTRIBUTION_MULTI_BLOCK]
    default: ''
    version_added: 0.4.0
  gpu_hpc_island_id:
    description: Only this HPC island for the cluster network's nodes; empty for any. Refused with a single instance.
    type: str
    default: ''
    version_added: 0.4.0
  gpu_network_block_ids:
    description: With O(gpu_hpc_island_id), only these network blocks of it.
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  gpu_boot_volume_gb:
    description: Boot volume of a GPU node in GB (50 to 32768). Defaults to the shape table's size (200 GB for GPU shapes).
    type: int
  gpu_user_data:
    description: cloud-init user data of the GPU nodes as text (the node template's, with autoscaling).
    type: str
  gpu_user_data_file:
    description: File with the GPU nodes' cloud-init user data.
    type: path
  ssh_authorized_keys:
    description:
      - OpenSSH public keys, one per entry (the text, e.g. from C(lookup('file', ...))). Marked C(no_log), since a
        private key pasted here by mistake must not reach a log.
    type: list
    elements: str
    default: []
  ssh_public_key_file:
    description: File holding one OpenSSH public key (the cluster var of that name).
    type: path
  autoscaling:
    description: Whether Slurm creates on-demand GPU nodes (docs/autoscaling.md); they then form cluster networks.
    type: bool
    default: false
  autoscaling_max_nodes:
    description: Most on-demand GPU nodes at once, counted against the service limits with O(autoscaling=true).
    type: int
    default: 8
  shared_home:
    description:
      - C(fss) - the plan has a shared file system on OCI File Storage (M(ocigpu.cluster.file_storage)); a new file system
        and a new mount target must fit File Storage's service limits C(file-system-count) and C(mount-target-count) in
        the availability domain (OCI's default is two mount targets per availability domain). Parts the cluster has
        already are not counted.
    type: str
    default: ""
    choices: ["", fss]
    version_added: 0.4.0
attributes:
  check_mode:
    details: The module only reads (its one POST, the capacity report, creates nothing) and runs the same in check mode.
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Check the whole plan before anything is created
  ocigpu.cluster.preflight:
    cluster_name: "{{ cluster_name }}"
    compartment_id: "{{ compartment_id }}"
    availability_domain: "{{ availability_domain | default(omit) }}"
    bastion_shape: "{{ bastion_shape }}"
    bastion_ocpus: "{{ bastion_ocpus }}"
    bastion_memory_gb: "{{ bastion_memory_gb }}"
    bastion_image_os: "{{ bastion_image_os }}"
    bastion_image_os_version: "{{ bastion_image_os_version }}"
    gpu_shape: "{{ gpu_shape }}"
    gpu_image_name: "{{ gpu_image_name }}"
    gpu_node_count: "{{ gpu_node_count }}"
    gpu_cluster_mode: "{{ gpu_cluster_mode }}"
    gpu_boot_volume_gb: "{{ gpu_boot_volume_gb }}"
    gpu_user_data_file: "{{ gpu_user_data_file or omit }}"
    ssh_public_key_file: "{{ ssh_public_key_file | default(omit) }}"
    ssh_authorized_keys: "{{ ssh_authorized_keys | default([]) }}"
    autoscaling: "{{ autoscaling }}"
    autoscaling_max_nodes: "{{ autoscaling_max_nodes }}"
  register: preflight

- name: Show what OCI reported
  ansible.builtin.debug:
    var: preflight.checks.capacity
"""

RETURN = r"""
problems:
  description: Every problem found, each starting with the plan variable it is about; empty when the plan passes.
  returned: always
  type: list
  elements: str
  sample:
    - "gpu_boot_volume_gb: 10 GB; OCI boot volumes are 50 to 32768 GB (32 TB)"
    - "ssh_public_key_file (/home/me/.ssh/id_ed25519): this is a PRIVATE key, which must not leave your machine; ..."
skipped:
  description: Checks OCI could not answer (no permission for the capacity report, a limit without resource availability).
  returned: always
  type: list
  elements: str
checks:
  description: What the checks found.
  returned: always
  type: dict
  contains:
    availability_domain: {description: The availability domain checked (null when the plan's is wrong)., type: str}
    ssh_keys: {description: Number of SSH public keys that passed., type: int}
    bastion:
      description: C(shape), C(exists) (the cluster has it already) and C(image) (the image it would get).
      type: dict
    gpu:
      description:
        - C(shape), C(kind) (single or cluster_network), C(nodes) (planned), C(existing), C(new) and C(new_at_peak)
          (with on-demand nodes), C(boot_volume_gb), C(user_data_bytes) (after base64), C(image) and C(placement)
          (where OCI will put the nodes, in words).
      type: dict
    capacity:
      description: OCI's capacity report per shape that would get new instances.
      type: list
      elements: dict
      contains:
        shape: {description: Shape., type: str}
        availability_domain: {description: Availability domain., type: str}
        new: {description: New instances the plan adds now., type: int}
        new_at_peak: {description: New instances at the peak (with on-demand nodes)., type: int}
        available_count: {description: Instances OCI reports it can create (null when it gives no count)., type: int}
        availability_status:
          description: C(AVAILABLE), C(OUT_OF_HOST_CAPACITY) or C(HARDWARE_NOT_SUPPORTED).
          type: str
    limits:
      description: The Limits service's resource availability per service limit of those shapes.
      type: list
      elements: dict
      contains:
        shape: {description: Shape., type: str}
        limit: {description: Limit name (a C(quotaNames) entry of the shape)., type: str}
        unit:
          description: What it counts - C(gpus), C(ocpus), C(memory_gb) or C(instances).
          type: str
        needed: {description: Units the plan adds at its peak., type: float}
        available: {description: Units OCI reports available., type: int}
        used: {description: Units used in the compartment., type: int}
        effective_quota:
          description: The compartment quota's value when one applies.
          type: float
    shared_home:
      version_added: 0.4.0
      description: With O(shared_home=fss), per File Storage limit - C(limit), C(exists) (the cluster has the part), C(available), C(used).
      type: list
      elements: dict
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _preflight
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule


class Preflight(OCIModule):
    # Refused before any call: a compartment that is no compartment's OCID. The plan's other options,
    # placement OCIDs included, are listed together by _preflight.Preflight.
    EARLY_CHECKS = ('compartment_id',)

    def execute(self):
        result, warnings = _preflight.Preflight(self.session, self.params).run()
        for warning in warnings:
            self.module.warn(warning)
        problems = result['problems']
        if problems:
            self.fail('preflight: %d problem%s in the cluster plan, found before anything was created: %s' % (
                len(problems), '' if len(problems) == 1 else 's',
                ' '.join('(%d) %s' % (n, text) for n, text in enumerate(problems, 1))), **result)
        return result


def main():
    Preflight(_preflight.plan_argument_spec(), wait=False, tags=False).run()


if __name__ == '__main__':
    main()
