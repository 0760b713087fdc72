# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""instance_configuration + cluster_network (seed 001: 2x BM.GPU4.8), cluster_info, and faults."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ansible_collections.ocigpu.cluster.plugins.modules import cluster_info, cluster_network, instance_configuration, network
from tests.unit.plugins.modules._helpers import live, mutations

IMAGE = 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'


@pytest.fixture
def net(run, base):
    return run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']


@pytest.fixture
def config_args(base, net, ad, ssh_key):
    return dict(base, shape='BM.GPU4.8', image_name=IMAGE, subnet_id=net['private_subnet_id'], availability_domain=ad,
                ssh_authorized_keys=[ssh_key], user_data='#cloud-config\ntimezone: Asia/Tokyo\n')


@pytest.fixture
def config(run, config_args):
    return run(instance_configuration, config_args)['instance_configuration']


@pytest.fixture
def cn_args(base, net, ad, config):
    return dict(base, instance_configuration_id=config['id'], node_count=2, availability_domain=ad,
                subnet_id=net['private_subnet_id'])


def gpu_instances(sim):
    return [i for i in live(sim, 'instances') if i['shape'] == 'BM.GPU4.8']


def test_instance_configuration_lifecycle(run, ocisim, base, config_args):
    first = run(instance_configuration, config_args)
    cfg = first['instance_configuration']
    assert first['changed'] and cfg['shape'] == 'BM.GPU4.8' and cfg['boot_volume_size_in_gbs'] == 200
    assert cfg['display_name'].startswith('c1-gpu-config-')
    stored = ocisim.state.get(cfg['id'])['instanceDetails']['launchDetails']
    assert stored['freeformTags'] == {'ocigpu-cluster': 'c1', 'ocigpu-role': 'gpu'}
    ocisim.calls.reset()
    again = run(instance_configuration, config_args)
    assert not again['changed'] and again['instance_configuration']['id'] == cfg['id'] and mutations(ocisim) == 0

    changed = dict(config_args, boot_volume_size_gb=500)
    predicted = run(instance_configuration, changed, check=True, diff=True)
    assert predicted['changed'] and predicted['replaced_id'] == cfg['id'] and mutations(ocisim) == 0
    assert predicted['diff']['after']['boot_volume_size_in_gbs'] == 500

    replaced = run(instance_configuration, changed)
    assert replaced['changed'] and replaced['replaced_id'] == cfg['id']
    assert replaced['instance_configuration']['id'] != cfg['id']
    assert replaced['instance_configuration']['boot_volume_size_in_gbs'] == 500
    assert not run(instance_configuration, changed)['changed']

    assert run(instance_configuration, dict(base, state='absent'))['changed']
    assert live(ocisim, 'instance_configurations') == []
    ocisim.calls.reset()
    assert not run(instance_configuration, dict(base, state='absent'))['changed'] and mutations(ocisim) == 0


def test_cluster_network_lifecycle(run, ocisim, base, cn_args, config_args, net):
    first = run(cluster_network, cn_args)
    cn = first['cluster_network']
    assert first['changed'] and cn['lifecycle_state'] == 'RUNNING' and first['work_request_id']
    assert len(cn['nodes']) == 2 and all(n['private_ip'].startswith('10.0.1.') for n in cn['nodes'])
    assert first['last_wait']['state'] == 'RUNNING' and first['last_wait']['polls'] >= 1
    assert len(gpu_instances(ocisim)) == 2

    ocisim.calls.reset()
    again = run(cluster_network, cn_args)
    assert not again['changed'] and again['cluster_network']['id'] == cn['id'] and mutations(ocisim) == 0
    assert [n['id'] for n in again['cluster_network']['nodes']] == [n['id'] for n in cn['nodes']]

    bigger = dict(cn_args, node_count=3)
    predicted = run(cluster_network, bigger, check=True, diff=True)
    assert predicted['changed'] and predicted['cluster_network']['node_count'] == 3 and mutations(ocisim) == 0
    assert predicted['diff']['before']['node_count'] == 2 and len(gpu_instances(ocisim)) == 2

    resized = run(cluster_network, bigger)
    assert resized['changed'] and len(resized['cluster_network']['nodes']) == 3 and len(gpu_instances(ocisim)) == 3
    assert not run(cluster_network, bigger)['changed']

    blocked = run(cluster_network, dict(bigger, subnet_id=net['public_subnet_id']), fail=True)
    assert blocked['msg'].startswith('subnet_id: cannot change')

    info = run(cluster_info, dict(base))
    assert info['billable'] == 4 and len(info['nodes']) == 3 and info['vcn']['id'] == net['vcn_id']

    gone = run(cluster_network, dict(base, state='absent'))
    assert gone['changed'] and gpu_instances(ocisim) == []
    assert ocisim.state.get(cn['id'])['lifecycleState'] == 'TERMINATED'
    ocisim.calls.reset()
    assert not run(cluster_network, dict(base, state='absent'))['changed'] and mutations(ocisim) == 0
    assert run(cluster_info, dict(base))['billable'] == 0


def test_capacity_failure_leaves_nothing(run, ocisim, base, cn_args):
    ocisim.capacity.set('BM.GPU4.8', 1)
    result = run(cluster_network, cn_args, fail=True)
    assert 'Out of host capacity.' in result['msg'] and result['work_request_id']
    assert result['work_request_status'] == 'FAILED'
    assert live(ocisim, 'cluster_networks') == []
    assert gpu_instances(ocisim) == []
    assert run(cluster_info, dict(base))['billable'] == 0


def test_500_after_create_reached_the_server_does_not_duplicate(run, ocisim, base, cn_args):
    # The first POST is carried out, then answered 500; the retry repeats the opc-retry-token.
    ocisim.faults.error(500, 'POST /clusterNetworks', count=1, after=True)
    result = run(cluster_network, cn_args)
    assert result['changed'] and len(result['cluster_network']['nodes']) == 2
    assert ocisim.calls['POST /clusterNetworks'] == 2
    assert len(live(ocisim, 'cluster_networks')) == 1 and len(gpu_instances(ocisim)) == 2


def test_429_storm_is_ridden_out(run, ocisim, base, cn_args):
    ocisim.faults.throttle('GET *', count=6)
    ocisim.faults.throttle('POST /clusterNetworks', count=3)
    result = run(cluster_network, cn_args)
    assert result['changed'] and len(result['cluster_network']['nodes']) == 2
    assert ocisim.calls['POST /clusterNetworks'] == 4 and len(live(ocisim, 'cluster_networks')) == 1


def killed_after_the_post(run, ocisim, monkeypatch, args):
    """Run the module so that it dies at its first wait on a work request, as a killed run would."""
    class Interrupted(Exception):
        pass

    def die(*_args, **_kwargs):
        raise Interrupted()
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _waiters
    monkeypatch.setattr(_waiters.Waiter, 'work_request', die)
    with pytest.raises(Interrupted):
        run(cluster_network, args)
    monkeypatch.undo()
    monkeypatch.setattr(_oci.CLOCK, 'sleep', ocisim.clock.sleep)
    monkeypatch.setattr(_oci.CLOCK, 'monotonic', ocisim.clock.now)


def test_interrupted_create_is_adopted_with_exact_node_count(run, ocisim, base, cn_args, monkeypatch):
    # The run dies right after its POST (as if the controller was killed): the waiter never gets going.
    killed_after_the_post(run, ocisim, monkeypatch, cn_args)
    assert [c['lifecycleState'] for c in live(ocisim, 'cluster_networks')] == ['PROVISIONING']

    adopted = run(cluster_network, cn_args)
    assert not adopted['changed'] and adopted['cluster_network']['lifecycle_state'] == 'RUNNING'
    assert ocisim.calls['POST /clusterNetworks'] == 1
    assert len(adopted['cluster_network']['nodes']) == 2 and len(gpu_instances(ocisim)) == 2
    assert len(live(ocisim, 'cluster_networks')) == 1


def test_wait_timeout_reports_last_state_and_percent(run, ocisim, base, cn_args):
    ocisim.set_durations(cluster_network_create=5000)
    result = run(cluster_network, dict(cn_args, wait_timeout=120), fail=True)
    assert 'timed out after 120s' in result['msg']
    assert result['work_request_status'] in ('ACCEPTED', 'IN_PROGRESS') and 'percent_complete' in result
    assert 'percent_complete=' in result['msg']
    # Nothing is cleaned up on a timeout: the next run adopts and keeps waiting.
    assert len(live(ocisim, 'cluster_networks')) == 1


def test_check_mode_predicts_a_whole_provisioning_run(run, ocisim, base, ad, ssh_key):
    net = run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']), check=True)['network']
    assert net['private_subnet_id'] is None
    cfg = run(instance_configuration, dict(base, shape='BM.GPU4.8', image_name=IMAGE, subnet_id=None,
                                           availability_domain=ad, ssh_authorized_keys=[ssh_key]), check=True)
    assert cfg['changed'] and cfg['instance_configuration']['id'] is None
    cn = run(cluster_network, dict(base, instance_configuration_id=None, node_count=2, availability_domain=ad,
                                   subnet_id=None), check=True)
    assert cn['changed'] and cn['cluster_network']['node_count'] == 2
    assert mutations(ocisim) == 0
    # Outside check mode the same null ids are an error.
    assert run(cluster_network, dict(base, instance_configuration_id=None, node_count=2, availability_domain=ad,
                                     subnet_id=None), fail=True)['msg'].startswith('instance_configuration_id:')


def test_eleven_429s_in_a_row_do_not_open_a_circuit_breaker(run, ocisim, base, cn_args):
    """More consecutive throttles than the SDK circuit breaker's threshold (10): our retries ride them out."""
    ocisim.calls.reset()
    ocisim.faults.throttle('*', count=11)
    result = run(cluster_network, dict(cn_args, api_retries=12))
    assert result['changed'] and len(result['cluster_network']['nodes']) == 2
    # The module's first call (reading the instance configuration) took all 11 throttles and its 12th attempt.
    assert ocisim.calls.count('GET /instanceConfigurations/*') == 12, ocisim.calls.as_dict()
    assert ocisim.calls['POST /clusterNetworks'] == 1 and len(live(ocisim, 'cluster_networks')) == 1


def test_shrink_names_the_nodes_that_go_and_replace_keeps_the_size(run, ocisim, cn_args):
    """Issue 16: a smaller node_count never lets OCI choose; the named nodes leave (DetachInstancePoolInstance
    with a size decrement and termination), a replaced node's pool launches a new one; re-runs change nothing."""
    cn = run(cluster_network, dict(cn_args, node_count=4))['cluster_network']
    names = [n['display_name'] for n in cn['nodes']]
    ocisim.calls.reset()
    refused = run(cluster_network, dict(cn_args, node_count=2), fail=True)
    assert 'would take 2 of the 4 nodes' in refused['msg'] and 'remove_nodes' in refused['msg']
    assert all(n in refused['msg'] for n in names) and mutations(ocisim) == 0
    refused = run(cluster_network, dict(cn_args, node_count=2, remove_nodes=[names[0]]), fail=True)
    assert 'would take 1 of the 3 nodes' in refused['msg'] and mutations(ocisim) == 0
    refused = run(cluster_network, dict(cn_args, node_count=3, remove_nodes=[names[0]], replace_nodes=[names[0]]),
                  fail=True)
    assert refused['msg'] == 'remove_nodes and replace_nodes both name %s' % names[0] and mutations(ocisim) == 0

    going = [names[1], cn['nodes'][3]['private_ip']]  # by display name and by private IP
    predicted = run(cluster_network, dict(cn_args, node_count=2, remove_nodes=going), check=True)
    assert predicted['changed'] and predicted['removed_nodes'] == [names[1], names[3]] and mutations(ocisim) == 0
    assert len(gpu_instances(ocisim)) == 4

    shrunk = run(cluster_network, dict(cn_args, node_count=2, remove_nodes=going))
    assert shrunk['changed'] and shrunk['removed_nodes'] == [names[1], names[3]]
    assert [n['display_name'] for n in shrunk['cluster_network']['nodes']] == [names[0], names[2]]
    assert shrunk['cluster_network']['node_count'] == 2
    assert ocisim.calls['POST /instancePools/{instancePoolId}/actions/detachInstance'] == 2
    assert ocisim.calls['PUT /clusterNetworks/{clusterNetworkId}'] == 0
    ocisim.wait_idle()
    assert sorted(i['displayName'] for i in gpu_instances(ocisim)) == [names[0], names[2]]

    ocisim.calls.reset()
    again = run(cluster_network, dict(cn_args, node_count=2, remove_nodes=going))
    assert not again['changed'] and again['removed_nodes'] == [] and mutations(ocisim) == 0

    old = cn['nodes'][0]
    predicted = run(cluster_network, dict(cn_args, node_count=2, replace_nodes=[old['id']]), check=True)
    assert predicted['replacements'] == [dict(old_id=old['id'], new_id=None, display_name=names[0],
                                              slurm_name=old['hostname_label'])] and mutations(ocisim) == 0
    replaced = run(cluster_network, dict(cn_args, node_count=2, replace_nodes=[old['id']]))
    assert replaced['changed'] and replaced['replaced_nodes'] == [names[0]]
    nodes = dict((n['display_name'], n) for n in replaced['cluster_network']['nodes'])
    # The new instance carries on the old display name, and the old host name as its Slurm name.
    new = nodes[names[0]]
    assert sorted(nodes) == [names[0], names[2]] and new['id'] != old['id'] and new['slurm_name'] == old['hostname_label']
    assert new['hostname_label'] != old['hostname_label'] and nodes[names[2]]['slurm_name'] is None
    assert replaced['replacements'] == [dict(old_id=old['id'], new_id=new['id'], display_name=names[0],
                                             slurm_name=old['hostname_label'])]
    ocisim.wait_idle()
    assert len(gpu_instances(ocisim)) == 2
    tags = [i['freeformTags'] for i in gpu_instances(ocisim) if i['id'] == new['id']][0]
    assert tags['ocigpu-slurm-name'] == old['hostname_label'] and tags['ocigpu-cluster'] == 'c1'

    # The same list again - by the old OCID (gone) or by the display name (now the replacement) - changes nothing.
    ocisim.calls.reset()
    assert not run(cluster_network, dict(cn_args, node_count=2, replace_nodes=[old['id']]))['changed']
    by_name = run(cluster_network, dict(cn_args, node_count=2, replace_nodes=[names[0]]))
    assert not by_name['changed'] and by_name['replacements'] == [] and mutations(ocisim) == 0
    assert any('is the replacement made for that name' in str(w) and 'it is kept' in str(w) for w in by_name['warnings'])

    # Named by its OCID, the replacement is replaced too, and hands the same Slurm name on.
    again = run(cluster_network, dict(cn_args, node_count=2, replace_nodes=[new['id']]))
    assert again['changed'] and again['replacements'][0]['slurm_name'] == old['hostname_label']
    third = dict((n['display_name'], n) for n in again['cluster_network']['nodes'])[names[0]]
    assert third['id'] not in (old['id'], new['id']) and third['slurm_name'] == old['hostname_label']


def test_an_interrupted_removal_is_finished_by_a_re_run(run, ocisim, cn_args, monkeypatch):
    """Killed right after the detach was sent: the re-run waits for the scaling cluster network and sends
    nothing more; the named node is gone and the size is what was asked."""
    cn = run(cluster_network, dict(cn_args, node_count=3))['cluster_network']
    gone = cn['nodes'][1]['display_name']
    killed_after_the_post(run, ocisim, monkeypatch, dict(cn_args, node_count=2, remove_nodes=[gone]))
    assert ocisim.state.get(cn['id'])['lifecycleState'] == 'SCALING'
    ocisim.calls.reset()
    finished = run(cluster_network, dict(cn_args, node_count=2, remove_nodes=[gone]))
    assert not finished['changed'] and finished['removed_nodes'] == []
    assert finished['cluster_network']['node_count'] == 2 and finished['cluster_network']['lifecycle_state'] == 'RUNNING'
    assert gone not in [n['display_name'] for n in finished['cluster_network']['nodes']]
    assert mutations(ocisim) == 0


def test_placement_is_asked_at_create_and_fixed_afterwards(run, ocisim, cn_args):
    """Issue 33: the placement constraint and the island and network blocks reach OCI's create; an
    existing cluster network with another placement is refused before any change."""
    island = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaisland01'
    block = 'ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock01'
    args = dict(cn_args, placement_constraint='SINGLE_BLOCK', hpc_island_id=island, network_block_ids=[block])
    cn = run(cluster_network, args)['cluster_network']
    stored = ocisim.state.get(cn['id'])
    assert (stored['hpcIslandId'], stored['networkBlockIds'], stored['placementConfiguration']['placementConstraint']) == (
        island, [block], 'SINGLE_BLOCK')
    ocisim.calls.reset()
    assert not run(cluster_network, args)['changed'] and mutations(ocisim) == 0
    assert not run(cluster_network, cn_args)['changed']      # not asked: whatever it has
    refused = run(cluster_network, dict(args, placement_constraint='SINGLE_TIER'), fail=True)
    assert refused['msg'].startswith('placement_constraint: cannot change it of an existing cluster_network')
    assert mutations(ocisim) == 0
    bad = run(cluster_network, dict(cn_args, network_block_ids=[block]), fail=True)
    assert bad['msg'] == 'network_block_ids: needs hpc_island_id (the island the blocks belong to)'
