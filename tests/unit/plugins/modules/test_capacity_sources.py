# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node templates per capacity source (instance_configuration's capacity_reservation_id) and the
static cluster network's failover across sources (cluster_network's capacity_sources)."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import cluster_info, cluster_network, instance_configuration, network
from tests.unit.plugins.modules._helpers import live, mutations

IMAGE = 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'
SHAPE = 'BM.GPU4.8'
RESERVATION = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaaaaaareservation'


@pytest.fixture
def ocisim(ocisim):
    """The simulator's region with two availability domains for these tests (its own has one)."""
    count = ocisim._ad_count  # pylint: disable=protected-access
    ocisim._ad_count = 2  # pylint: disable=protected-access
    ocisim.reset(drop_command_hook=True)
    yield ocisim
    ocisim._ad_count = count  # pylint: disable=protected-access
    ocisim.reset(drop_command_hook=True)


@pytest.fixture
def ads(ocisim):
    return sorted(ocisim.availability_domains)


@pytest.fixture
def net(run, base):
    return run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']


@pytest.fixture
def config_args(base, net, ads, ssh_key):
    return dict(base, display_name='c1-gpu-template', shape=SHAPE, image_name=IMAGE, subnet_id=net['private_subnet_id'],
                availability_domain=ads[0], ssh_authorized_keys=[ssh_key])


@pytest.fixture
def sources(run, config_args, ads):
    """ad-1 (the first template's name) and ad-2 (its own template), as provision.yml makes them."""
    first = run(instance_configuration, config_args)['instance_configuration']
    second = run(instance_configuration, dict(config_args, display_name='c1-gpu-template-ad-2',
                                              availability_domain=ads[1]))['instance_configuration']
    return [dict(name='ad-1', kind='on-demand', availability_domain=ads[0], instance_configuration_id=first['id']),
            dict(name='ad-2', kind='on-demand', availability_domain=ads[1], instance_configuration_id=second['id'])]


@pytest.fixture
def cn_args(base, net, sources):
    return dict(base, node_count=2, subnet_id=net['private_subnet_id'], capacity_sources=sources)


def gpu_instances(sim, ad=None):
    return [i for i in live(sim, 'instances') if i['shape'] == SHAPE and ad in (None, i['availabilityDomain'])]


def test_a_template_carries_its_capacity_reservation_and_a_new_one_makes_a_new_template(run, ocisim, config_args):
    args = dict(config_args, capacity_reservation_id=RESERVATION)
    first = run(instance_configuration, args)
    cfg = first['instance_configuration']
    assert first['changed'] and cfg['capacity_reservation_id'] == RESERVATION
    assert ocisim.state.get(cfg['id'])['instanceDetails']['launchDetails']['capacityReservationId'] == RESERVATION
    ocisim.calls.reset()
    again = run(instance_configuration, args)
    assert not again['changed'] and again['instance_configuration']['id'] == cfg['id'] and mutations(ocisim) == 0

    other = RESERVATION.replace('aaaaaaaareservation', 'aaaaaaaaother')
    moved = run(instance_configuration, dict(args, capacity_reservation_id=other))
    assert moved['changed'] and moved['replaced_id'] == cfg['id']
    assert moved['instance_configuration']['capacity_reservation_id'] == other
    on_demand = run(instance_configuration, config_args)
    assert on_demand['changed'] and on_demand['instance_configuration']['capacity_reservation_id'] is None


def test_a_reservation_of_another_kind_of_ocid_is_refused_before_any_call(run, ocisim, config_args):
    ocisim.calls.reset()
    result = run(instance_configuration, dict(config_args, capacity_reservation_id='ocid1.vcn.oc1.ap-tokyo-1.aaaaaaaavcn'),
                 fail=True)
    assert result['msg'].startswith('capacity_reservation_id: ') and 'capacity reservation' in result['msg']
    assert ocisim.calls.total() == 0


def test_the_templates_of_two_sources_are_told_apart_by_name(run, ocisim, base, config_args, sources):
    """<cluster>-gpu-template-<hash> and <cluster>-gpu-template-ad-2-<hash>: neither is the other's older version."""
    ocisim.calls.reset()
    assert not run(instance_configuration, config_args)['changed'] and mutations(ocisim) == 0
    assert run(instance_configuration, dict(config_args, state='absent'))['changed']
    left = live(ocisim, 'instance_configurations')
    assert [c['id'] for c in left] == [sources[1]['instance_configuration_id']]
    info = run(cluster_info, base)['instance_configurations']
    assert len(info) == 1 and info[0]['display_name'].startswith('c1-gpu-template-ad-2-')
    # With the AD and reservation of its launch details (configure.yml reads a source's AD there).
    assert info[0]['availability_domain'] == sources[1]['availability_domain'] and info[0]['capacity_reservation_id'] is None


def test_a_stock_out_in_the_first_source_makes_it_in_the_next(run, ocisim, base, cn_args, ads):
    ocisim.capacity.set(SHAPE, 0, ads[0])
    first = run(cluster_network, cn_args)
    cn = first['cluster_network']
    assert first['changed'] and cn['lifecycle_state'] == 'RUNNING' and cn['availability_domain'] == ads[1]
    assert first['capacity_source'] == 'ad-2'
    assert [(t['name'], t['reason']) for t in first['capacity_tried']] == [('ad-1', 'ad-1 out of host capacity')]
    assert 'Out of host capacity' in first['capacity_tried'][0]['message']
    assert cn['instance_configuration_id'] == cn_args['capacity_sources'][1]['instance_configuration_id']
    assert cn['freeform_tags']['ocigpu-capacity-source'] == 'ad-2'
    assert [c['id'] for c in live(ocisim, 'cluster_networks')] == [cn['id']]
    assert len(gpu_instances(ocisim, ads[1])) == 2 and gpu_instances(ocisim, ads[0]) == []

    # A re-run adopts it where it is: nothing made, nothing tried.
    ocisim.calls.reset()
    again = run(cluster_network, cn_args)
    assert not again['changed'] and again['cluster_network']['id'] == cn['id'] and mutations(ocisim) == 0
    assert again['capacity_source'] == 'ad-2' and again['capacity_tried'] == []

    # A resize stays in its availability domain, even with hosts back in the first source.
    ocisim.capacity.set(SHAPE, None, ads[0])
    bigger = run(cluster_network, dict(cn_args, node_count=3))
    assert bigger['changed'] and bigger['cluster_network']['id'] == cn['id'] and len(gpu_instances(ocisim, ads[1])) == 3
    assert ocisim.calls['POST /clusterNetworks'] == 0 and gpu_instances(ocisim, ads[0]) == []


def test_a_stock_out_answered_by_the_create_call_tries_the_next_source(run, ocisim, cn_args, ads):
    ocisim.faults.add('POST /clusterNetworks', status=500, code='InternalError', message='Out of host capacity.', count=1)
    result = run(cluster_network, cn_args)
    assert result['capacity_source'] == 'ad-2' and result['cluster_network']['availability_domain'] == ads[1]
    assert [t['name'] for t in result['capacity_tried']] == ['ad-1']
    assert ocisim.calls['POST /clusterNetworks'] == 2


def test_no_source_with_hosts_fails_with_each_reason_and_leaves_nothing(run, ocisim, base, cn_args):
    ocisim.capacity.set(SHAPE, 1)
    result = run(cluster_network, cn_args, fail=True)
    assert 'none of the capacity sources has hosts for 2 node(s)' in result['msg']
    assert 'ad-1: ad-1 out of host capacity' in result['msg'] and 'ad-2: ad-2 out of host capacity' in result['msg']
    assert [t['name'] for t in result['capacity_tried']] == ['ad-1', 'ad-2'] and result['work_request_id']
    assert live(ocisim, 'cluster_networks') == [] and gpu_instances(ocisim) == []
    assert run(cluster_info, base)['billable'] == 0


def test_any_other_failure_stops_at_the_first_source(run, ocisim, cn_args):
    ocisim.faults.add('POST /clusterNetworks', status=400, code='InvalidParameter', message='Bad placement.', count=1)
    result = run(cluster_network, cn_args, fail=True)
    assert 'Bad placement.' in result['msg'] and ocisim.calls['POST /clusterNetworks'] == 1
    assert live(ocisim, 'cluster_networks') == []


def test_check_mode_predicts_the_first_source(run, ocisim, cn_args, ads):
    ocisim.calls.reset()
    result = run(cluster_network, cn_args, check=True)
    assert result['changed'] and result['capacity_source'] == 'ad-1'
    assert result['cluster_network']['availability_domain'] == ads[0] and mutations(ocisim) == 0


@pytest.mark.parametrize('bad, says', [
    (dict(name='AD 1'), 'capacity_sources[1]: name'),
    (dict(kind='spot'), 'capacity_sources[1]: kind'),
    (dict(availability_domain=None), 'capacity_sources[1]: availability_domain: required'),
    (dict(instance_configuration_id='ocid1.vcn.oc1.ap-tokyo-1.aaaaaaaavcn'), 'capacity_sources[1].instance_configuration_id'),
    (dict(zone='a'), 'capacity_sources[1]: unknown key(s) zone'),
])
def test_a_bad_source_is_refused_before_any_change(run, ocisim, cn_args, bad, says):
    sources = [dict(cn_args['capacity_sources'][0], **bad)] + cn_args['capacity_sources'][1:]
    ocisim.calls.reset()
    result = run(cluster_network, dict(cn_args, capacity_sources=sources), fail=True)
    assert result['msg'].startswith(says), result['msg']
    assert mutations(ocisim) == 0
