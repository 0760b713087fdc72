# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The one table of OCI compute shapes this collection knows.

Every role, module and plugin that needs a per-shape fact (GPU model, NVMe count, RDMA NIC
names, mlx5 devices for NCCL_IB_HCA, NCCL settings, bus bandwidth thresholds) reads it from
here, through get_shape() or the ocigpu.cluster.shape_facts filter, instead of keeping its own
copy. Values come from the OCI tutorials the project started from (BM.GPU4.8 interface names,
primary NIC, NVMe count) and from Oracle's HPC stack (HCA order, nccl.conf, thresholds).

Network interface names are what the shape's Oracle images name them. node_facts reads the
real names on the node; these are the expected values and the fallback.

A fact no public material gives is left at the _BASE default (None, 0 or an empty list), never
guessed: node_facts reads it on the node, and a shape without RDMA interface and HCA names does
not join a cluster network here (cluster_kind None) until they are known.
"""

from __future__ import annotations

import copy
import re

# NCCL settings shared by every RDMA shape on OCI's RoCE v2 cluster network.
_NCCL_ROCE = {
    'NCCL_IB_GID_INDEX': '3',
    'NCCL_IB_TC': '41',
    'NCCL_IB_SL': '0',
    'NCCL_IGNORE_CPU_AFFINITY': '1',
}

_NCCL_A100 = dict(_NCCL_ROCE, NCCL_IB_QPS_PER_CONNECTION='4')

_NCCL_HOPPER = dict(
    _NCCL_ROCE,
    NCCL_IB_QPS_PER_CONNECTION='1',
    NCCL_IB_SPLIT_DATA_ON_QPS='0',
    NCCL_IB_TIMEOUT='22',
    NCCL_CUMEM_ENABLE='0',
)


def _pci_of(netdev):
    """PCI address of a predictable netdev name like enp12s0f1 (bus 12 -> 0c)."""
    m = re.match(r'^enp(\d+)s(\d+)f(\d+)$', netdev)
    return '0000:%02x:%02x.%d' % (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _ports(buses):
    return ['enp%ds0f%d' % (bus, fn) for bus in buses for fn in (0, 1)]


_GPU4_RDMA = _ports((12, 22, 72, 76, 138, 148, 195, 209))
_A100V2_RDMA = _ports((12, 22, 71, 75, 137, 147, 195, 209))

_BASE = {
    'gpu_model': None,
    'gpu_count': 0,
    'gpu_memory_gb': 0,
    'nvme_count': 0,
    'rdma_interfaces': [],
    'rdma_pci_ids': [],
    'hcas': [],
    'front_hca': None,
    'primary_interface': None,
    'rdma_mtu': None,
    # RDMA bandwidth of the node in Gb/s (OCI's shape specifications); rdma_port_gbps is each port's share.
    'rdma_gbps': None,
    'rdma_port_gbps': None,
    'primary_mtu': 9000,
    'nccl_env': {},
    'nccl_test_args': None,
    'busbw_gbps': {'single_node': None, 'multi_node': None},
    'boot_volume_gb': 50,
    'cores_per_gpu': None,
    'ocpus': None,
    'memory_gb': None,
    'flex': False,
    'bare_metal': False,
    'cluster_kind': None,
}


def _shape(**fields):
    unknown = set(fields) - set(_BASE)
    if unknown:
        raise KeyError('unknown shape fields: %s' % ', '.join(sorted(unknown)))
    shape = copy.deepcopy(_BASE)
    shape.update(copy.deepcopy(fields))
    if shape['gpu_count'] and shape['ocpus']:
        shape['cores_per_gpu'] = shape['ocpus'] // shape['gpu_count']
    if shape['rdma_gbps'] and shape['hcas']:
        shape['rdma_port_gbps'] = shape['rdma_gbps'] // len(shape['hcas'])
    if shape['gpu_count']:
        # The seeds advise 200 GB boot volumes on GPU nodes (drivers, CUDA, container images).
        shape['boot_volume_gb'] = 200
    return shape


# The RDMA fabric of the 8-GPU Hopper and Blackwell shapes (8 RoCE ports; BM.GPU.H100.8 has 16).
_HOPPER8 = dict(
    bare_metal=True, rdma_interfaces=['rdma%d' % i for i in range(8)],
    hcas=['mlx5_0', 'mlx5_3', 'mlx5_4', 'mlx5_5', 'mlx5_6', 'mlx5_9', 'mlx5_10', 'mlx5_11'],
    primary_interface='eth0', rdma_mtu=4220, rdma_gbps=3200, nccl_env=dict(_NCCL_HOPPER, NCCL_SOCKET_IFNAME='eth0'),
    nccl_test_args='-b 1G -e 16G -f 2 -n 50', busbw_gbps={'single_node': 440, 'multi_node': 440},
    cluster_kind='cluster_network',
)
_H100_FABRIC = dict(_HOPPER8)
_H100_FABRIC.update(rdma_interfaces=['rdma%d' % i for i in range(16)],
                    hcas=['mlx5_0', 'mlx5_1', 'mlx5_3', 'mlx5_4', 'mlx5_5', 'mlx5_6', 'mlx5_7', 'mlx5_8',
                          'mlx5_9', 'mlx5_10', 'mlx5_12', 'mlx5_13', 'mlx5_14', 'mlx5_15', 'mlx5_16', 'mlx5_17'])

# 8x A100 80 GB on AMD Milan: BM.GPU.A100-v2.8 and its other name BM.GPU.GM4.8.
_A100V2 = dict(
    gpu_model='A100', gpu_count=8, gpu_memory_gb=80, nvme_count=4, ocpus=128, memory_gb=2048,
    bare_metal=True,
    rdma_interfaces=_A100V2_RDMA,
    rdma_pci_ids=[_pci_of(n) for n in _A100V2_RDMA],
    hcas=['mlx5_5', 'mlx5_6', 'mlx5_7', 'mlx5_8', 'mlx5_1', 'mlx5_2', 'mlx5_3', 'mlx5_4',
          'mlx5_14', 'mlx5_15', 'mlx5_16', 'mlx5_17', 'mlx5_9', 'mlx5_10', 'mlx5_11', 'mlx5_12'],
    front_hca='mlx5_0', primary_interface='ens300f0', rdma_mtu=4220, rdma_gbps=1600,
    nccl_env=dict(_NCCL_A100), nccl_test_args='-b 1G -e 10G -f 2 -n 50',
    busbw_gbps={'single_node': 185, 'multi_node': 185},
    cluster_kind='cluster_network',
)

SHAPES = {
    # Seed 000: 8x V100, no local NVMe, no cluster network. No published NCCL threshold
    # (the seed measured 135 GB/s busbw on one node).
    'BM.GPU3.8': _shape(
        gpu_model='V100', gpu_count=8, gpu_memory_gb=16, ocpus=52, memory_gb=768,
        bare_metal=True, nccl_test_args='-b 1G -e 10G -f 2 -n 50',
    ),
    # Seeds 000/001/002: 8x A100 40 GB, 4 NVMe, 16 RoCE ports named as in seed 001's cloud-init.
    'BM.GPU4.8': _shape(
        gpu_model='A100', gpu_count=8, gpu_memory_gb=40, nvme_count=4, ocpus=64, memory_gb=2048,
        bare_metal=True,
        rdma_interfaces=_GPU4_RDMA,
        rdma_pci_ids=[_pci_of(n) for n in _GPU4_RDMA],
        hcas=['mlx5_0', 'mlx5_2', 'mlx5_6', 'mlx5_8', 'mlx5_10', 'mlx5_12', 'mlx5_14', 'mlx5_16',
              'mlx5_1', 'mlx5_3', 'mlx5_7', 'mlx5_9', 'mlx5_11', 'mlx5_13', 'mlx5_15', 'mlx5_17'],
        front_hca='mlx5_4', primary_interface='enp45s0f0', rdma_mtu=4220, rdma_gbps=1600,
        nccl_env=dict(_NCCL_A100), nccl_test_args='-b 1G -e 10G -f 2 -n 50',
        busbw_gbps={'single_node': 185, 'multi_node': 185},
        cluster_kind='cluster_network',
    ),
    'BM.GPU.A100-v2.8': _shape(**_A100V2),
    # Seed 003's shape. OCI's API reference names it as the same shape: "BM.GPU.GM4.8 (also named
    # BM.GPU.A100-v2.8)" (AmdMilanBmGpuLaunchInstancePlatformConfig, docs.oracle.com/iaas/api/#/en/iaas/
    # latest/datatypes/AmdMilanBmGpuLaunchInstancePlatformConfig); seed 003 gives it 8x A100 80 GB and
    # 16 x 100 Gbps RoCE ports, as above.
    'BM.GPU.GM4.8': _shape(**_A100V2),
    # Hopper and Blackwell images name the RoCE ports rdma0..rdmaN and the front NIC eth0.
    # PCI ids are not published for them: node_facts reads them from sysfs.
    'BM.GPU.H100.8': _shape(gpu_model='H100', gpu_count=8, gpu_memory_gb=80, nvme_count=16, ocpus=112,
                            memory_gb=2048, **_H100_FABRIC),
    'BM.GPU.H200.8': _shape(gpu_model='H200', gpu_count=8, gpu_memory_gb=141, nvme_count=8, ocpus=112,
                            memory_gb=3072, **_HOPPER8),
    'BM.GPU.B200.8': _shape(gpu_model='B200', gpu_count=8, gpu_memory_gb=180, nvme_count=8, ocpus=128,
                            memory_gb=4096, **_HOPPER8),
    # OCPUs, memory, GPUs and local NVMe drives of the three shapes below: the GPU table of OCI's
    # "Compute Shapes" page (docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm#bm-gpu),
    # as a public copy of that table gives them; not checked against a tenancy's ListShapes.
    # BM.GPU.A10.4: 4x A10 24 GB, 64 OCPUs, 1024 GB, 2 NVMe drives, 2 x 50 Gbps and no RDMA.
    # Its front interface name is not published (node_facts reads it).
    'BM.GPU.A10.4': _shape(
        gpu_model='A10', gpu_count=4, gpu_memory_gb=24, nvme_count=2, ocpus=64, memory_gb=1024,
        bare_metal=True, nccl_test_args='-b 1G -e 4G -f 2 -n 50',
    ),
    # BM.GPU.L40S.4: 4x L40S 48 GB, 112 OCPUs, 1024 GB, 2 NVMe drives, 800 Gbps RDMA. Its RDMA
    # interface and HCA names and an NCCL threshold are not published, so it is not offered for a
    # cluster network here (cluster_kind None): a single node, like BM.GPU3.8.
    'BM.GPU.L40S.4': _shape(
        gpu_model='L40S', gpu_count=4, gpu_memory_gb=48, nvme_count=2, ocpus=112, memory_gb=1024,
        bare_metal=True, rdma_gbps=800, nccl_test_args='-b 1G -e 4G -f 2 -n 50',
    ),
    # BM.GPU.GB200.4: 4x B200 192 GB with Arm (aarch64) Grace CPUs, 144 OCPUs, 960 GB, 4 NVMe drives,
    # 4 x 400 Gbps RDMA. RDMA names and a threshold are not published: a single node here, as above. The roles
    # pick aarch64 builds where they download, but no aarch64 node has run them here.
    'BM.GPU.GB200.4': _shape(
        gpu_model='B200', gpu_count=4, gpu_memory_gb=192, nvme_count=4, ocpus=144, memory_gb=960,
        bare_metal=True, rdma_gbps=1600, nccl_test_args='-b 1G -e 16G -f 2 -n 50',
    ),
    # Not in the table, on purpose: BM.GPU.MI300X.8 (OCI's page lists it: 8x AMD MI300X). Its GPUs are AMD's,
    # and the roles install NVIDIA's driver stack, container toolkit and NCCL. A GPU shape not in the table
    # is refused by name (validate_shape).
    # Virtual machine GPU shapes: no RDMA, no cluster network.
    'VM.GPU.A10.1': _shape(
        gpu_model='A10', gpu_count=1, gpu_memory_gb=24, ocpus=15, memory_gb=240,
        nccl_test_args='-b 1G -e 4G -f 2 -n 50',
    ),
    'VM.GPU.A10.2': _shape(
        gpu_model='A10', gpu_count=2, gpu_memory_gb=24, ocpus=30, memory_gb=480,
        nccl_test_args='-b 1G -e 4G -f 2 -n 50',
    ),
    # CPU shapes for the bastion (seeds: VM.Standard.E5.Flex, VM.Optimized3.Flex).
    'VM.Standard.E5.Flex': _shape(flex=True),
    'VM.Standard.E4.Flex': _shape(flex=True),
    'VM.Standard3.Flex': _shape(flex=True),
    'VM.Optimized3.Flex': _shape(flex=True),
}

SHAPE_NAME_RE = re.compile(r'^(BM|VM)\.[A-Za-z0-9]+(\.[A-Za-z0-9-]+)+$')


def known_shapes():
    return sorted(SHAPES)


def is_gpu_shape(name):
    """True for GPU shapes (by the table, or by OCI's naming for shapes not in it)."""
    shape = SHAPES.get(name)
    if shape is not None:
        return shape['gpu_count'] > 0
    return bool(name) and '.GPU' in name


def is_flex_shape(name):
    shape = SHAPES.get(name)
    if shape is not None:
        return shape['flex']
    return bool(name) and name.endswith('.Flex')


def validate_shape(name):
    """Return an error text for a shape name this collection cannot use, or None.

    GPU shapes must be in the table (their per-shape facts drive node configuration); other
    well-formed OCI shape names (CPU shapes for bastions) are accepted as they are.
    """
    if not isinstance(name, str) or not SHAPE_NAME_RE.match(name):
        return "'%s' is not an OCI shape name (for example BM.GPU4.8 or VM.Standard.E5.Flex)" % (name,)
    if is_gpu_shape(name) and name not in SHAPES:
        return "GPU shape '%s' is unknown to this collection; known GPU shapes: %s" % (
            name, ', '.join(n for n in known_shapes() if SHAPES[n]['gpu_count']))
    return None


def get_shape(name):
    """The facts of one shape as a new dict (callers may change it). KeyError if unknown."""
    if name not in SHAPES:
        raise KeyError("unknown shape '%s'; known shapes: %s" % (name, ', '.join(known_shapes())))
    shape = copy.deepcopy(SHAPES[name])
    shape['name'] = name
    return shape
