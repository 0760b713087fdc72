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
    ('BM.GPU.A100-v2.8', 185, 16), ('BM.GPU.GM4.8', 185, 16), ('BM.GPU.H100.8', 440, 16), ('BM.GPU.H200.8', 440, 8),
    ('BM.GPU.B200.8', 440, 8)])
def test_thresholds_and_nics(name, threshold, nics):
    s = shape_facts(name)
    assert s['busbw_gbps']['single_node'] == threshold == s['busbw_gbps']['multi_node']
    assert len(s['rdma_interfaces']) == nics == len(s['hcas'])


def test_gm48_is_the_a100_v2_under_its_other_name():
    """Seed 003's BM.GPU.GM4.8: OCI's API reference calls it "also named BM.GPU.A100-v2.8"."""
    gm4, v2 = shape_facts('BM.GPU.GM4.8'), shape_facts('BM.GPU.A100-v2.8')
    assert gm4.pop('name') == 'BM.GPU.GM4.8' and v2.pop('name') == 'BM.GPU.A100-v2.8'
    assert gm4 == v2
    assert (gm4['gpu_model'], gm4['gpu_count'], gm4['gpu_memory_gb'], gm4['rdma_gbps']) == ('A100', 8, 80, 1600)
    assert _shapes.validate_shape('BM.GPU.GM4.8') is None


@pytest.mark.parametrize('name,model,gpus,gpu_gb,ocpus,memory,nvme,rdma_gbps', [
    ('BM.GPU.A10.4', 'A10', 4, 24, 64, 1024, 2, None),
    ('BM.GPU.L40S.4', 'L40S', 4, 48, 112, 1024, 2, 800),
    ('BM.GPU.GB200.4', 'B200', 4, 192, 144, 960, 4, 1600)])
def test_shapes_from_ocis_page_without_published_rdma_names_are_single_nodes(
        name, model, gpus, gpu_gb, ocpus, memory, nvme, rdma_gbps):
    s = shape_facts(name)
    assert (s['gpu_model'], s['gpu_count'], s['gpu_memory_gb'], s['ocpus'], s['memory_gb'], s['nvme_count'],
            s['rdma_gbps']) == (model, gpus, gpu_gb, ocpus, memory, nvme, rdma_gbps)
    assert s['bare_metal'] and s['cores_per_gpu'] == ocpus // gpus
    # Unknown names stay unknown (node_facts reads them on the node) and the shape joins no cluster network.
    assert s['rdma_interfaces'] == [] and s['hcas'] == [] and s['primary_interface'] is None
    assert s['cluster_kind'] is None and s['busbw_gbps'] == {'single_node': None, 'multi_node': None}


def test_an_amd_gpu_shape_is_refused_by_name():
    assert 'unknown to this collection' in _shapes.validate_shape('BM.GPU.MI300X.8')


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
