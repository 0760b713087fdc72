# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.shapes import FilterModule
from ansible_collections.ocigpu.cluster.plugins.module_utils import _shapes

shape_facts = FilterModule().filters()['shape_facts']

REQUIRED = ('gpu_model', 'gpu_count', 'gpu_memory_gb', 'nvme_count', 'rdma_interfaces', 'rdma_pci_ids',
            'hcas', 'primary_interface', 'nccl_env', 'nccl_test_args', 'busbw_gbps', 'boot_volume_gb',
            'cores_per_gpu', 'ocpus', 'memory_gb', 'cluster_kind')


def test_gpu48_matches_seed_001():
    s = shape_facts('BM.GPU4.8')
    assert (s['gpu_model'], s['gpu_count'], s['gpu_memory_gb'], s['nvme_count']) == ('A100', 8, 40, 4)
    # Seed 001 cloud-init: 16 interfaces, enp12s0f0 first, enp209s0f1 last, primary enp45s0f0.
    assert len(s['rdma_interfaces']) == 16
    assert s['rdma_interfaces'][0] == 'enp12s0f0' and s['rdma_interfaces'][-1] == 'enp209s0f1'
    assert s['rdma_interfaces'][2:4] == ['enp22s0f0', 'enp22s0f1']
    assert s['primary_interface'] == 'enp45s0f0'
    assert s['rdma_pci_ids'][0] == '0000:0c:00.0' and s['rdma_pci_ids'][-1] == '0000:d1:00.1'
    assert s['busbw_gbps'] == {'single_node': 185, 'multi_node': 185}
    assert s['nccl_env']['NCCL_IB_QPS_PER_CONNECTION'] == '4'
    assert s['nccl_env']['NCCL_IB_GID_INDEX'] == '3'
    assert s['boot_volume_gb'] == 200
    assert s['cores_per_gpu'] == 8
    assert s['cluster_kind'] == 'cluster_network'


def test_gpu38_has_no_nvme_and_no_rdma():
    s = shape_facts('BM.GPU3.8')
    assert s['gpu_model'] == 'V100' and s['nvme_count'] == 0
    assert s['rdma_interfaces'] == [] and s['hcas'] == [] and s['cluster_kind'] is None


@pytest.mark.parametrize('name,threshold,nics', [
    ('BM.GPU.A100-v2.8', 185, 16), ('BM.GPU.H100.8', 440, 16), ('BM.GPU.H200.8', 440, 8),
    ('BM.GPU.B200.8', 440, 8)])
def test_thresholds_and_nics(name, threshold, nics):
    s = shape_facts(name)
    assert s['busbw_gbps']['single_node'] == threshold == s['busbw_gbps']['multi_node']
    assert len(s['rdma_interfaces']) == nics == len(s['hcas'])


@pytest.mark.parametrize('name', sorted(_shapes.SHAPES))
def test_every_shape_is_consistent(name):
    s = shape_facts(name)
    for key in REQUIRED:
        assert key in s, key
    assert s['name'] == name
    assert len(set(s['hcas'])) == len(s['hcas'])
    assert all(re.match(r'^mlx5_\d+$', h) for h in s['hcas'])
    if s['rdma_pci_ids']:
        assert len(s['rdma_pci_ids']) == len(s['rdma_interfaces'])
        assert all(re.match(r'^0000:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$', p) for p in s['rdma_pci_ids'])
    if s['rdma_interfaces']:
        assert s['cluster_kind'] == 'cluster_network' and s['rdma_mtu'] == 4220
        assert s['busbw_gbps']['single_node'] > 0
    if s['gpu_count']:
        assert _shapes.is_gpu_shape(name) and s['boot_volume_gb'] == 200
        assert s['nccl_test_args'].startswith('-b ')
    else:
        assert not _shapes.is_gpu_shape(name) and s['flex']


def test_returned_dict_is_a_copy():
    shape_facts('BM.GPU4.8')['rdma_interfaces'].append('x')
    assert 'x' not in shape_facts('BM.GPU4.8')['rdma_interfaces']


def test_unknown_shape_fails_with_known_list():
    with pytest.raises(AnsibleFilterError, match="unknown shape 'BM.GPU9.8'.*BM.GPU4.8"):
        shape_facts('BM.GPU9.8')


@pytest.mark.parametrize('name,ok', [
    ('BM.GPU4.8', True), ('VM.Standard.E5.Flex', True), ('VM.Standard2.1', True),
    ('BM.GPU9.8', False), ('gpu4', False), ('', False), (None, False)])
def test_validate_shape(name, ok):
    assert (_shapes.validate_shape(name) is None) is ok
