# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static nodes of a cluster network replaced by the self-healing loop through the cluster network's
pool (controller/ocigpu_control/static.py), against the simulator and a model of slurmctld: the
replacement and the way back to service, the address kept in nodes.conf, a service stopped in the
middle, a capacity error, a failed pull and the limits shared with the on-demand nodes."""
from __future__ import annotations

import time

import pytest

from ocigpu_control import scaler as _autoscale
from ocigpu_control import static as _autoscale_static
from ocigpu_control import service
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    SHAPE, config, gpu_instances, live, sim)
from tests.unit.controller.test_autoscale_faults import logged
# The service's clock: monotonic (from 1000.0), not the wall clock that slurmd's start time is in.
from tests.unit.controller.test_autoscale_heal import Clock
from tests.unit.controller.test_autoscale_service import make, run_all
from tests.unit.controller.test_pull import ocigpu_pull, pull_config, tls  # noqa: F401 pylint: disable=unused-import

SICK = 'ocigpu-health: gpu_count 7 of 8'
DETACH = 'POST /instancePools/*/actions/detachInstance'


def static_cluster(sim, config, tmp_path):  # pylint: disable=redefined-outer-name
    """A running cluster network of two static nodes, st-1 and st-2, and the slurm role's nodes.conf."""
    scaler = _autoscale.Autoscaler(config)
    res = scaler.ops.create('as-static', dict(node_count=2, instance_configuration_id=config['instance_configuration_id'],
                                              availability_domain=config['availability_domain'],
                                              subnet_id=config['subnet_id'], freeform_tags={'ocigpu-cluster': 'as'}))
    nodes = scaler.ops.nodes(res.id)
    addresses = dict(('st-%d' % (i + 1), n['private_ip']) for i, n in enumerate(nodes))
    conf = tmp_path / 'nodes.conf'
    conf.write_text('# managed\n' + ''.join('NodeName=%s NodeAddr=%s CPUs=128 RealMemory=1000 State=UNKNOWN\n' % kv
                                            for kv in sorted(addresses.items()))
                    + 'NodeName=gpu-[1-8] CPUs=128 State=CLOUD\n')
    return res.id, addresses, str(conf)


def healing(sim, config, tmp_path, **limits):  # pylint: disable=redefined-outer-name
    cn_id, addresses, nodes_conf = static_cluster(sim, config, tmp_path)
    fake = FakeSlurm(config['node_names'])
    clock = Clock()
    fake.add_static(addresses, started=time.time() - 3600)
    conf, svc = make(config, fake, heal=dict(dict(enabled=True), **limits),
                     static=dict(cluster_network_id=cn_id, nodes='st-[1-2]', nodes_conf=nodes_conf))
    svc.healer.clock = clock
    return fake, conf, svc, clock, addresses


def instance_named(sim, name):  # pylint: disable=redefined-outer-name
    return [i for i in gpu_instances(sim) if i['freeformTags'].get('ocigpu-slurm-name') == name]


def ip_of(conf, instance_id):
    """The instance's private address, as the cluster network lists it."""
    nodes = _autoscale.Autoscaler(conf).ops.nodes(conf['static']['cluster_network_id'])
    return dict((n['id'], n['private_ip']) for n in nodes)[instance_id]


def test_a_sick_static_node_is_replaced_through_the_pool_and_back_in_service_under_its_name(sim, tmp_path, config):
    fake, conf, svc, clock, addresses = healing(sim, config, tmp_path)
    before = dict((i['id'], i) for i in gpu_instances(sim))
    old, = [i for i in before if ip_of(conf, i) == addresses['st-1']]
    fake.drain_by_checks('st-1', SICK)
    svc.heal()
    assert fake.nodes['st-1']['reason'] == 'ocigpu-heal: replacing (%s)' % SICK
    assert 'DRAIN' in fake.nodes['st-1']['state']
    run_all(svc)
    # One new instance in the pool, under st-1's Slurm name, display name and pull tags; the old one is gone.
    new, = instance_named(sim, 'st-1')
    new_ip = ip_of(conf, new['id'])
    assert new['id'] not in before and old not in [i['id'] for i in gpu_instances(sim)]
    # Not ocigpu-slurm-node: the inventory keeps it in gpu_nodes.
    assert 'ocigpu-slurm-node' not in new['freeformTags'] and new['displayName'] == before[old]['displayName']
    assert len(gpu_instances(sim)) == 2 and sim.calls.count(DETACH) == 1
    # Its address in slurmctld now, and in nodes.conf for the next reconfigure (one, within the delay).
    lines = open(conf['static']['nodes_conf']).read().splitlines()
    assert 'NodeName=st-1 NodeAddr=%s CPUs=128 RealMemory=1000 State=UNKNOWN' % new_ip in lines
    assert 'NodeName=st-2 NodeAddr=%s CPUs=128 RealMemory=1000 State=UNKNOWN' % addresses['st-2'] in lines
    assert fake.nodes['st-1']['addr'] == new_ip != addresses['st-1']
    assert fake.reconfigured == 1
    logged(conf, 'replace st-1: instance %s replaced by %s at %s' % (old, new['id'], new_ip))

    # Until the new slurmd registers (after its pull and checks), the node stays drained: before slurmctld
    # finds the old slurmd gone, and after.
    clock.now += 5
    svc.heal()
    assert 'DRAIN' in fake.nodes['st-1']['state']
    clock.now += 25
    fake.lose('st-1')
    svc.heal()
    assert 'DRAIN' in fake.nodes['st-1']['state']
    clock.now += 90
    fake.register_static('st-1', time.time())
    svc.heal()
    assert fake.nodes['st-1']['state'] == {'IDLE'} and fake.nodes['st-1']['reason'] == ''
    line, = logged(conf, 'heal st-1: back in service after')
    assert 'after 120s' in line
    assert svc.healer._read()['counts'] == dict(replaced=1, powered_up=1, healed=1, failed=0, left=0)


def test_a_replacement_cut_short_by_a_stopped_service_is_finished_once(sim, tmp_path, config, monkeypatch):
    fake, conf, svc, _clock, addresses = healing(sim, config, tmp_path)
    scaler = _autoscale.Autoscaler(conf)
    real = _autoscale_static._launch.label_instance

    class Stopped(BaseException):
        pass

    def stopped(*_args, **_kwargs):
        raise Stopped()
    monkeypatch.setattr(_autoscale_static._launch, 'label_instance', stopped)
    with pytest.raises(Stopped):  # the service stops after the detach, before the new instance is labelled
        _autoscale_static.replace(scaler, 'st-1', addresses['st-1'])
    assert sim.calls.count(DETACH) == 1 and instance_named(sim, 'st-1') == []
    monkeypatch.setattr(_autoscale_static._launch, 'label_instance', real)
    found = _autoscale_static.replace(_autoscale.Autoscaler(conf), 'st-1', addresses['st-1'])
    assert sim.calls.count(DETACH) == 1 and len(gpu_instances(sim)) == 2
    new, = instance_named(sim, 'st-1')
    assert found['id'] == new['id'] and found['private_ip'] == ip_of(conf, new['id'])
    assert scaler.state.read()[_autoscale_static.STATE_KEY] == {}


def test_no_host_for_the_new_instance_leaves_the_old_node_drained_and_says_so(sim, tmp_path, config):
    fake, conf, svc, _clock, _addresses = healing(sim, config, tmp_path)
    sim.capacity.set(SHAPE, 2)
    fake.drain_by_checks('st-1', SICK)
    svc.heal()
    run_all(svc)
    assert len(gpu_instances(sim)) == 2 and instance_named(sim, 'st-1') == []
    assert 'DRAIN' in fake.nodes['st-1']['state']
    assert fake.nodes['st-1']['reason'].startswith('ocigpu-heal: no host for a new instance (')
    logged(conf, 'heal st-1: no host for a new instance')
    svc.heal()
    assert svc.healer._read()['nodes']['st-1']['step'] == 'left'


def test_a_failed_pull_counts_and_the_second_failure_is_left_for_a_person(sim, tmp_path, config):
    fake, conf, svc, clock, _addresses = healing(sim, config, tmp_path, max_failures=2)
    fake.drain_by_checks('st-1', SICK)
    svc.heal()
    run_all(svc)
    first, = instance_named(sim, 'st-1')
    # The new instance's pull fails: the pull server hands the service a request.
    service.submit(conf, service.PULL_FAILED, 'st-1', source='pull server', instance_id=first['id'], message='roles failed')
    run_all(svc)
    assert fake.nodes['st-1']['reason'].startswith('ocigpu-autoscaler: the pull on %s failed: roles failed' % first['id'])
    clock.now += 10
    svc.heal()   # the failure is counted
    clock.now += 10
    svc.heal()   # and the node is replaced again
    run_all(svc)
    second, = instance_named(sim, 'st-1')
    assert second['id'] != first['id'] and sim.calls.count(DETACH) == 2
    service.submit(conf, service.PULL_FAILED, 'st-1', source='pull server', instance_id=second['id'], message='again')
    run_all(svc)
    clock.now += 10
    svc.heal()
    assert svc.healer._read()['nodes']['st-1']['step'] == 'left'
    assert fake.nodes['st-1']['reason'].startswith('ocigpu-heal: left for a person after 2 failed replacements in a row')
    clock.now += 10
    svc.heal()
    assert sim.calls.count(DETACH) == 2


def test_static_nodes_share_the_limits_with_the_on_demand_ones(sim, tmp_path, config):
    fake, conf, svc, _clock, _addresses = healing(sim, config, tmp_path)
    # Both static nodes sick at once, and no on-demand node up: a fault of the whole cluster.
    fake.drain_by_checks('st-1', SICK)
    fake.drain_by_checks('st-2', SICK)
    svc.heal()
    assert not svc.waiting() and svc.healer._read()['paused']
    logged(conf, 'heal: 2 of 2 powered-up on-demand nodes are drained by the checks at once')


def test_nodes_conf_is_rewritten_in_place_and_a_node_without_its_own_line_is_refused(tmp_path):
    path = tmp_path / 'nodes.conf'
    path.write_text('# managed\nNodeName=st-1 NodeAddr=10.0.0.5 CPUs=2\nNodeName=st-10 CPUs=2\nNodeName=gpu-[1-2] State=CLOUD\n')
    assert _autoscale_static.set_node_address(str(path), 'st-1', '10.0.0.9')
    assert not _autoscale_static.set_node_address(str(path), 'st-1', '10.0.0.9')
    assert _autoscale_static.set_node_address(str(path), 'st-10', '10.0.0.10')
    assert path.read_text() == ('# managed\nNodeName=st-1 NodeAddr=10.0.0.9 CPUs=2\nNodeName=st-10 NodeAddr=10.0.0.10 CPUs=2\n'
                                'NodeName=gpu-[1-2] State=CLOUD\n')
    with pytest.raises(InputError, match='0 lines for NodeName=gpu-1, not 1'):
        _autoscale_static.set_node_address(str(path), 'gpu-1', '10.0.0.11')


def test_the_static_section_is_checked(config):
    with pytest.raises(InputError, match='config: static.cluster_network_id missing'):
        _autoscale.check_config(dict(config, static=dict(nodes='st-1')))
    with pytest.raises(InputError, match=r'static.nodes: gpu-2 are on-demand nodes too'):
        _autoscale.check_config(dict(config, static=dict(nodes='gpu-2', cluster_network_id='ocid1.clusternetwork.x')))


def test_the_new_instance_pulls_under_its_static_name_and_only_it_may_join_as_that_node(sim, tmp_path, pull_config, tls):
    from ocigpu_control import pull_server as _pull  # pylint: disable=import-outside-toplevel
    cn_id, addresses, nodes_conf = static_cluster(sim, pull_config, tmp_path)
    conf = dict(pull_config, static=dict(cluster_network_id=cn_id, nodes='st-[1-2]', nodes_conf=nodes_conf))
    found = _autoscale_static.replace(_autoscale.Autoscaler(conf), 'st-1', addresses['st-1'])
    tags = sim.state.get(found['id'])['freeformTags']
    # What the new instance's pull reads from the metadata service: its static name and the server.
    assert ocigpu_pull.read_tags(dict(freeformTags=tags)) == ('st-1', '10.0.0.2:8740', tls.sha256)
    # A static node that provision.yml replaced carries its name only: it is configured by push, not by pull.
    assert ocigpu_pull.read_tags(dict(freeformTags={'ocigpu-slurm-name': 'st-1'})) is None
    enroller = _pull.Enroller(conf)
    assert enroller.join(found['id'], 'st-1', found['private_ip'])['name'] == 'st-1'
    with pytest.raises(_pull.JoinRefused, match="carries Slurm name 'st-1', not 'st-2'"):
        enroller.join(found['id'], 'st-2', found['private_ip'])
    # Without the static section the inventory's tag names no node that may join.
    with pytest.raises(_pull.JoinRefused, match='not among this cluster'):
        _pull.Enroller(pull_config).join(found['id'], 'st-1', found['private_ip'])
