# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import base64

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import instance, network
from tests.unit.plugins.modules._helpers import live, mutations


@pytest.fixture
def net(run, base):
    return run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']


def bastion_args(base, net, ssh_key, **extra):
    args = dict(base, display_name='c1-bastion', shape='VM.Standard.E5.Flex', shape_config=dict(ocpus=1, memory_in_gbs=16),
                image_os='Oracle Linux', image_os_version='9', subnet_id=net['public_subnet_id'], assign_public_ip=True,
                ssh_authorized_keys=[ssh_key])
    args.update(extra)
    return args


def test_bastion_lifecycle(run, ocisim, base, net, ssh_key):
    args = bastion_args(base, net, ssh_key)
    first = run(instance, args)
    inst = first['instance']
    assert first['changed'] and inst['lifecycle_state'] == 'RUNNING'
    assert inst['private_ip'].startswith('10.0.0.') and inst['public_ip']
    stored = ocisim.state.get(inst['id'])
    assert stored['freeformTags'] == {'ocigpu-cluster': 'c1', 'ocigpu-role': 'bastion'}
    assert stored['metadata']['ssh_authorized_keys'] == ssh_key

    ocisim.calls.reset()
    again = run(instance, args)
    assert not again['changed'] and again['instance']['id'] == inst['id'] and mutations(ocisim) == 0

    tagged = dict(args, freeform_tags={'owner': 'ml-team'})
    predicted = run(instance, tagged, check=True, diff=True)
    assert predicted['changed'] and mutations(ocisim) == 0
    assert predicted['diff']['after']['freeform_tags']['owner'] == 'ml-team'
    assert 'owner' not in ocisim.state.get(inst['id'])['freeformTags']

    assert run(instance, tagged)['changed']
    assert ocisim.state.get(inst['id'])['freeformTags']['owner'] == 'ml-team'
    assert not run(instance, tagged)['changed']

    # A different shape cannot be applied to the running instance.
    blocked = run(instance, dict(tagged, shape='VM.Standard.E4.Flex'), fail=True)
    assert blocked['msg'].startswith('shape:') and 'Terminate it' in blocked['msg']

    gone = run(instance, dict(base, display_name='c1-bastion', state='absent'))
    assert gone['changed'] and ocisim.state.get(inst['id'])['lifecycleState'] == 'TERMINATED'
    assert ocisim.calls.count('DELETE /instances/*') == 1
    ocisim.calls.reset()
    assert not run(instance, dict(base, display_name='c1-bastion', state='absent'))['changed']
    assert mutations(ocisim) == 0


def test_gpu_node_defaults_and_user_data(run, ocisim, base, net, ssh_key, tmp_path):
    cloud_init = tmp_path / 'cloud-init.yml'
    cloud_init.write_text('#cloud-config\ntimezone: Asia/Tokyo\n')
    result = run(instance, dict(base, display_name='c1-gpu-1', shape='BM.GPU4.8',
                                image_name='Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0', subnet_id=net['private_subnet_id'],
                                ssh_authorized_keys=[ssh_key], user_data_file=str(cloud_init)))
    stored = ocisim.state.get(result['instance']['id'])
    assert stored['shape'] == 'BM.GPU4.8' and stored['freeformTags']['ocigpu-role'] == 'gpu'
    assert stored['sourceDetails']['bootVolumeSizeInGBs'] == 200
    assert base64.b64decode(stored['metadata']['user_data']).decode() == cloud_init.read_text()
    assert result['instance']['public_ip'] is None and result['instance']['private_ip'].startswith('10.0.1.')


def test_image_by_os_picks_newest_for_the_shape(run, ocisim, base, net):
    result = run(instance, dict(base, display_name='c1-gpu-1', shape='BM.GPU4.8', image_os='Oracle Linux',
                                image_os_version='9', subnet_id=net['private_subnet_id']))
    image = ocisim.state.get(result['instance']['image_id'])
    assert image['displayName'] == 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'


def test_terminate_deletes_the_boot_volume(run, ocisim, base, net, monkeypatch):
    """Seed step 6: terminating must not keep the boot volume (it is billed). The simulator keeps no
    boot volumes, so the SDK call is observed on its way to it."""
    import oci
    seen = []
    real = oci.core.ComputeClient.terminate_instance

    def spy(self, instance_id, **kwargs):
        seen.append(kwargs.get('preserve_boot_volume'))
        return real(self, instance_id, **kwargs)
    monkeypatch.setattr(oci.core.ComputeClient, 'terminate_instance', spy)
    args = dict(base, display_name='c1-gpu-1', shape='BM.GPU4.8', image_os='Oracle Linux', subnet_id=net['private_subnet_id'])
    run(instance, args)
    run(instance, dict(base, display_name='c1-gpu-1', state='absent'))
    assert seen == [False]
    assert live(ocisim, 'instances') == []


def test_launch_out_of_capacity_fails_and_leaves_nothing(run, ocisim, base, net):
    ocisim.capacity.set('BM.GPU4.8', 0)
    result = run(instance, dict(base, display_name='c1-gpu-1', shape='BM.GPU4.8', image_os='Oracle Linux',
                                subnet_id=net['private_subnet_id']), fail=True)
    assert 'Out of host capacity' in result['msg'] and result['status'] == 500
    assert ocisim.calls['POST /instances'] == 1  # a capacity answer is not retried
    assert live(ocisim, 'instances') == []
