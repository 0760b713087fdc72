# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: shape_facts
short_description: The per-shape facts of an OCI compute shape
version_added: 0.1.0
description:
  - Returns the facts this collection keeps for one OCI shape, from the single shape table in
    C(plugins/module_utils/_shapes.py) - GPU model and count, NVMe disk count, RDMA interface
    names and PCI ids, mlx5 devices for C(NCCL_IB_HCA), the NCCL environment, NCCL test
    arguments and bus bandwidth thresholds.
  - Fails for a shape the table does not know.
options:
  _input:
    description: The shape name, for example C(BM.GPU4.8).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Show the RDMA interfaces of a BM.GPU4.8 node
  ansible.builtin.debug:
    msg: "{{ ('BM.GPU4.8' | ocigpu.cluster.shape_facts).rdma_interfaces }}"

- name: NCCL_IB_HCA for the node's shape
  ansible.builtin.set_fact:
    nccl_ib_hca: "{{ (shape | ocigpu.cluster.shape_facts).hcas | join(',') }}"
"""

RETURN = r"""
_value:
  description: The shape's facts.
  type: dict
  contains:
    name: {description: The shape name., type: str}
    gpu_model: {description: GPU model (V100, A100, H100, ...) or null for CPU shapes., type: str}
    gpu_count: {description: GPUs per instance., type: int}
    gpu_memory_gb: {description: Memory per GPU in GB., type: int}
    nvme_count: {description: Local NVMe disks., type: int}
    rdma_interfaces: {description: RoCE network interface names in order., type: list, elements: str}
    rdma_pci_ids: {description: PCI addresses of the RoCE ports, where published., type: list, elements: str}
    hcas: {description: mlx5 devices for NCCL_IB_HCA in NCCL order., type: list, elements: str}
    front_hca: {description: mlx5 device of the front-end NIC, where known., type: str}
    primary_interface: {description: Expected name of the primary (VCN) interface., type: str}
    rdma_mtu: {description: MTU of the RoCE ports., type: int}
    primary_mtu: {description: MTU of the primary interface., type: int}
    nccl_env: {description: NCCL environment variables., type: dict}
    nccl_test_args: {description: all_reduce_perf size arguments., type: str}
    busbw_gbps: {description: Minimum all_reduce bus bandwidth (keys single_node and multi_node) in GB/s., type: dict}
    boot_volume_gb: {description: Default boot volume size in GB., type: int}
    cores_per_gpu: {description: Physical cores (OCPUs) per GPU., type: int}
    ocpus: {description: OCPUs of the shape (null for Flex shapes)., type: int}
    memory_gb: {description: Memory in GB (null for Flex shapes)., type: int}
    flex: {description: Whether the shape takes a shape_config., type: bool}
    bare_metal: {description: Whether the shape is bare metal., type: bool}
    cluster_kind: {description: C(cluster_network) for RDMA shapes, else null., type: str}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.module_utils._shapes import get_shape


def shape_facts(name):
    try:
        return get_shape(name)
    except KeyError as exc:
        raise AnsibleFilterError(exc.args[0])


class FilterModule(object):
    def filters(self):
        return {'shape_facts': shape_facts}
