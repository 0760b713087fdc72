# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capacity failover of the autoscaler (docs/autoscaling.md, "Capacity failover") against the simulator with
three availability domains: a stock-out in either form (the create's answer, its failed work request)
moves the job's cluster network to the next source within the same resume, the source cools down and
is tried again after it, a job no source can serve waits for capacity and is never held for it."""
from __future__ import annotations

import re
import threading
import time
import types

import oci
import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _hostlist, _oci
from ocigpu_control import scaler as _autoscale
from ocigpu_control import service
from ocigpu_control.settings import setup_logging
from ocigpu_control.view import NodesView
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    SHAPE, autoscaler_config, config, gpu_instances, live, sim)
from tests.unit.controller.test_autoscale_faults import logged, nothing_billable
from tests.unit.controller.test_autoscale_service import make, run_all

RESERVATION_FULL = 'The capacity reservation ocid1.capacityreservation.oc1..r1 has no more available capacity.'


@pytest.fixture
def sim3(sim, monkeypatch):  # pylint: disable=redefined-outer-name
    """The simulator with three availability domains, its clock the cooldowns' clock."""
    before = sim._ad_count  # pylint: disable=protected-access
    sim._ad_count = 3  # pylint: disable=protected-access
    sim.reset(drop_command_hook=True)
    monkeypatch.setattr(_autoscale, 'epoch_seconds', sim.clock.now)
    yield sim
    sim._ad_count = before  # pylint: disable=protected-access
    sim.reset(drop_command_hook=True)


def ads(sim):  # pylint: disable=redefined-outer-name
    return sorted(sim.availability_domains)


def template(sim, ad, like, reservation=None):  # pylint: disable=redefined-outer-name
    """A node template as `like` (an instance configuration id) in another AD (and a capacity reservation)."""
    cm = sim.client(oci.core.ComputeManagementClient)
    launch = cm.get_instance_configuration(like).data.instance_details.launch_details
    M = oci.core.models
    details = M.CreateInstanceConfigurationDetails(
        compartment_id=sim.compartment_id, display_name='gpu-template-%s' % ad[-4:],
        instance_details=M.ComputeInstanceDetails(launch_details=M.InstanceConfigurationLaunchInstanceDetails(
            compartment_id=sim.compartment_id, availability_domain=ad, shape=SHAPE, capacity_reservation_id=reservation,
            source_details=launch.source_details, create_vnic_details=launch.create_vnic_details)))
    return cm.create_instance_configuration(details).data.id


@pytest.fixture
def config3(sim3, tmp_path):
    """Three on-demand sources ad-1, ad-2, ad-3; the first may be renamed by a test."""
    base = autoscaler_config(sim3, 'as', 'gpu-[1-8]', str(tmp_path / 'state'), str(tmp_path / 'log' / 'autoscaler.log'))
    sources = [dict(name='ad-%d' % (i + 1), kind='on-demand', availability_domain=ad, capacity_reservation_id=None,
                    instance_configuration_id=base['instance_configuration_id'] if i == 0 else
                    template(sim3, ad, base['instance_configuration_id'])) for i, ad in enumerate(ads(sim3))]
    setup_logging(base['log_file'])
    return _autoscale.check_config(dict(base, capacity_sources=sources))


def source_of(cn):
    return cn['freeformTags'].get(_autoscale.SOURCE_TAG)


STOCK_OUT_LINE = re.compile(r'resume gpu-\[1-2\]: ad-1: ad-1 out of host capacity \(Out of host capacity\.\); '
                            r'cooling until \d\d:\d\d:\d\d; next: ad-2 \((\d+)s after the stock-out\)$')


def test_a_failed_work_request_moves_the_cluster_network_to_the_next_source(sim3, config3):
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    scaler = _autoscale.Autoscaler(config3)
    mapping = scaler.resume('gpu-[1-2]')
    assert [m['capacity_source'] for m in mapping] == ['ad-2', 'ad-2']
    running, = live(sim3, 'cluster_networks')
    assert source_of(running) == 'ad-2' and running['placementConfiguration']['availabilityDomain'] == ads(sim3)[1]
    assert sim3.calls['POST /clusterNetworks'] == 2 and len(gpu_instances(sim3)) == 2
    line, = logged(config3, 'ad-1: ad-1 out of host capacity')
    assert int(STOCK_OUT_LINE.search(line).group(1)) < 60, line
    assert scaler.capacity_notes == ['ad-1 out of host capacity, running in ad-2']
    cooling = scaler.state.read()['cooling']
    # Cooling for 600 s from the stock-out (ad-2's create took simulated minutes since).
    assert list(cooling) == ['ad-1'] and sim3.clock.now() < cooling['ad-1'] <= sim3.clock.now() + 600
    assert scaler.state.read()['stock_outs'] == {'ad-1': 1}


def test_a_stock_out_answered_by_the_create_is_not_retried_and_the_next_source_is_tried(sim3, config3):
    config3['capacity_sources'][0].update(name='r1', kind='reservation',
                                          capacity_reservation_id='ocid1.capacityreservation.oc1..r1')
    sim3.faults.add('POST /clusterNetworks', status=500, code='InternalError', message=RESERVATION_FULL, count=1)
    scaler = _autoscale.Autoscaler(config3)
    mapping = scaler.resume('gpu-[1-2]')
    assert [m['capacity_source'] for m in mapping] == ['ad-2', 'ad-2']
    assert sim3.calls['POST /clusterNetworks'] == 2 and scaler.session.retrier.retries == 0
    assert scaler.capacity_notes == ['reservation r1 full, running in ad-2']
    logged(config3, 'resume gpu-[1-2]: r1: reservation r1 full (%s); cooling until ' % RESERVATION_FULL)
    assert [source_of(c) for c in live(sim3, 'cluster_networks')] == ['ad-2']


@pytest.mark.parametrize('message, retried', [
    ('Out of host capacity.', False), (RESERVATION_FULL, False), ('Internal server error.', True)])
def test_a_stock_out_is_not_retried_as_a_5xx(message, retried):
    assert _oci.is_retryable(_oci.ServiceError(500, 'InternalError', {}, message)) is retried


def test_a_cooling_source_is_skipped_and_tried_again_after_its_cooldown(sim3, config3):
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    _autoscale.Autoscaler(config3).resume('gpu-[1-2]')
    sim3.capacity.set(SHAPE, None, ads(sim3)[0])  # hosts are back, but ad-1 cools
    posts = sim3.calls['POST /clusterNetworks']
    assert [m['capacity_source'] for m in _autoscale.Autoscaler(config3).resume('gpu-3')] == ['ad-2']
    assert sim3.calls['POST /clusterNetworks'] == posts + 1
    sim3.clock.advance(601)
    scaler = _autoscale.Autoscaler(config3)
    assert [m['capacity_source'] for m in scaler.resume('gpu-4')] == ['ad-1']
    assert scaler.capacity_notes == []


def test_no_source_left_fails_the_resume_as_a_capacity_wait(sim3, config3):
    sim3.capacity.set(SHAPE, 0)
    with pytest.raises(_autoscale.ResumeFailed) as err:
        _autoscale.Autoscaler(config3).resume('gpu-[1-2]')
    assert err.value.message == ('waiting for capacity: ad-1 out of host capacity, ad-2 out of host capacity, '
                                 'ad-3 out of host capacity')
    # Until ad-1's cooldown ends: 600 s from its stock-out, less the simulated minutes of ad-2's and ad-3's creates.
    assert err.value.details['capacity'] and 1 <= err.value.details['retry_after'] < 600
    nothing_billable(sim3)
    posts = sim3.calls['POST /clusterNetworks']
    with pytest.raises(_autoscale.ResumeFailed) as err:
        _autoscale.Autoscaler(config3).resume('gpu-[1-2]')
    assert re.match(r'waiting for capacity: ad-1 cooling until \d\d:\d\d:\d\d, ad-2 cooling until \d\d:\d\d:\d\d, '
                    r'ad-3 cooling until \d\d:\d\d:\d\d$', err.value.message), err.value.message
    assert sim3.calls['POST /clusterNetworks'] == posts


def test_a_job_no_source_can_serve_waits_and_is_never_held_for_it(sim3, config3):
    fake = FakeSlurm(config3['node_names'])
    conf, svc = make(config3, fake)
    sim3.capacity.set(SHAPE, 0)
    for _attempt in range(7):
        fake.allocate(4, ['gpu-1', 'gpu-2'])
        service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=4, nodes='gpu-[1-2]')])
        run_all(svc)
        job = fake.jobs[4]
        assert job['state'] == 'PENDING' and not job['held']
        assert job['comment'].startswith('ocigpu-autoscaler: waiting for capacity: ad-1 ')
        assert 1 <= job['start_after'] <= 600
    assert job['comment'].count('cooling until') == 3
    state = svc.state.read()
    assert state['attempts'] == {} and state['capacity_waits'] == ['4']
    nothing_billable(sim3)

    # Hosts come back in ad-3 (ad-1 and ad-2 still cool): the job runs there and its comment says so.
    sim3.capacity.set(SHAPE, None)
    sim3.clock.advance(601)
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    sim3.capacity.set(SHAPE, 0, ads(sim3)[1])
    fake.allocate(4, ['gpu-1', 'gpu-2'])
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=4, nodes='gpu-[1-2]')])
    run_all(svc)
    assert fake.nodes['gpu-1']['addr'] and fake.nodes['gpu-2']['addr']
    assert fake.jobs[4]['comment'] == ('ocigpu-autoscaler: ad-1 out of host capacity, ad-2 out of host capacity, '
                                       'running in ad-3')
    assert svc.state.read()['capacity_waits'] == []


def test_an_error_that_is_not_capacity_still_holds_the_job_after_the_limit(sim3, config3):
    fake = FakeSlurm(config3['node_names'])
    conf, svc = make(config3, fake)
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    sim3.faults.add('POST /clusterNetworks', status=400, code='InvalidParameter', message='Bad placement.', count=5)
    for attempt in range(1, 6):
        fake.allocate(6, ['gpu-1'])
        service.submit(conf, 'resume', 'gpu-1', [dict(job_id=6, nodes='gpu-1')])
        run_all(svc)
        assert fake.jobs[6]['held'] == (attempt == 5)
    assert fake.jobs[6]['comment'].startswith('ocigpu-autoscaler: held after 5 failed resumes: ')
    logged(config3, 'job 6 held (attempt 5 of 5)')
    nothing_billable(sim3)


class SlowFirstResume(object):
    """A scaler whose resume of gpu-1 fails after a while, as one whose cluster network a resume-fail of its
    nodes terminated while it was being created; any other resume succeeds. It records resumes at work at once."""

    lock = threading.Lock()
    at_work = []
    overlaps = []

    def __init__(self, config):
        self.config = config

    def resume(self, hostlist):
        with self.lock:
            if self.at_work:
                self.overlaps.append((list(self.at_work), hostlist))
            self.at_work.append(hostlist)
        try:
            if hostlist == 'gpu-1':
                time.sleep(1.0)
                raise _autoscale.ResumeFailed('cluster network as-gpu-1 for gpu-1 failed: create of cluster network x '
                                              'went to TERMINATED', outcome='no cluster network of gpu-1 is left')
            return [dict(name=n, id='ocid1.instance.' + n, private_ip='10.0.0.%d' % i, hostname=n,
                         cluster_network_id='ocid1.clusternetwork.x', capacity_source='ad-1')
                    for i, n in enumerate(_hostlist.expand_hostlist(hostlist), 2)]
        finally:
            with self.lock:
                self.at_work.remove(hostlist)


def test_a_job_is_never_resumed_twice_at_once(config):  # pylint: disable=redefined-outer-name
    """Slurm gave up on a job's resume (ResumeTimeout: its nodes resume-failed, the job requeued on other
    nodes) while the service still carried it out: the job's new resume waits for the old one to end,
    whose failure then touches neither the job (no attempt counted, no comment) nor its old nodes."""
    SlowFirstResume.at_work[:], SlowFirstResume.overlaps[:] = [], []
    fake = FakeSlurm(config['node_names'])
    conf = dict(config, scontrol_retry_seconds=5, reconfigure_delay=0.2, reconfigure_hold=0)
    setup_logging(conf['log_file'])
    svc = service.Service(conf, SlowFirstResume, service.Slurm(conf, run=fake.run, read=fake.read, sleep=lambda s: None))
    fake.allocate(7, ['gpu-1'])
    service.submit(conf, 'resume', 'gpu-1', [dict(job_id=7, nodes='gpu-1')])
    svc.pick_up()
    time.sleep(0.2)
    fake.allocate(7, ['gpu-2'])  # requeued and given other nodes
    service.submit(conf, 'resume', 'gpu-2', [dict(job_id=7, nodes='gpu-2')])
    run_all(svc)
    assert SlowFirstResume.overlaps == []
    assert fake.nodes['gpu-2']['addr'] and fake.jobs[7]['comment'] == '' and not fake.jobs[7]['held']
    assert not [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]
    assert svc.state.read()['attempts'] == {}
    logged(config, 'resume gpu-1 for job 7: failed after the job got a newer resume (gpu-2)')


def test_the_metrics_say_which_sources_cool_their_stock_outs_and_the_reservations_hosts_free(sim3, config3, tmp_path):
    config3['capacity_sources'][1].update(name='r1', kind='reservation', capacity_reservation_id='ocid1.capacityreservation.oc1..r1')
    config3['capacity_sources'][2].update(name='r2', kind='reservation', capacity_reservation_id='ocid1.capacityreservation.oc1..r2')
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    _autoscale.Autoscaler(config3).resume('gpu-1')
    svc = service.Service(config3, _autoscale.Autoscaler, None)

    def call(fn, reservation_id):  # pylint: disable=unused-argument
        if reservation_id.endswith('r2'):
            raise _oci.ServiceError(404, 'NotAuthorizedOrNotFound', {}, 'Authorization failed or requested resource not found.')
        return types.SimpleNamespace(reserved_instance_count=4, used_instance_count=1)
    scaler = types.SimpleNamespace(session=types.SimpleNamespace(call=call, compute=types.SimpleNamespace(
        get_compute_capacity_reservation=None)))
    svc._read_reservations(scaler)  # pylint: disable=protected-access
    svc._read_reservations(scaler)  # pylint: disable=protected-access
    assert len(logged(config3, 'capacity reservation ocid1.capacityreservation.oc1..r2 of source r2 could not be read')) == 1
    text = svc.metrics_text()
    assert 'ocigpu_autoscaler_capacity_source_cooling{source="ad-1"} 1\n' in text
    assert 'ocigpu_autoscaler_capacity_source_cooling{source="r1"} 0\n' in text
    assert 'ocigpu_autoscaler_stock_outs_total{source="ad-1"} 1\n' in text
    assert 'ocigpu_autoscaler_stock_outs_total{source="r2"} 0\n' in text
    assert 'ocigpu_autoscaler_capacity_source_hosts_free{source="r1"} 3\n' in text
    assert 'source="r2"} ' in text and 'hosts_free{source="r2"}' not in text and 'hosts_free{source="ad-1"}' not in text
    sim3.clock.advance(601)
    assert 'ocigpu_autoscaler_capacity_source_cooling{source="ad-1"} 0\n' in svc.metrics_text()


def test_the_nodes_view_gives_each_instance_its_capacity_source(sim3, config3):
    sim3.capacity.set(SHAPE, 0, ads(sim3)[0])
    _autoscale.Autoscaler(config3).resume('gpu-1')
    gpu1, = NodesView(config3).nodes()
    assert gpu1['capacity_source'] == 'ad-2' and gpu1['availability_domain'] == ads(sim3)[1]


def test_a_full_reservation_gives_way_to_the_next_source_and_its_hosts_free_are_read(sim3, config3):
    """The simulator's capacity reservation of 2 hosts: a first job of 2 nodes runs in it, the second finds it
    full (the cluster network's work request fails) and runs in ad-2; the reconcile reads its hosts free."""
    ad1 = ads(sim3)[0]
    reservation = sim3.create_capacity_reservation(ad1, SHAPE, 2, display_name='r1')['id']
    sim3.capacity.set(SHAPE, 2, ad1)  # no on-demand host left beside the reserved ones
    config3['capacity_sources'][0].update(name='r1', kind='reservation', capacity_reservation_id=reservation,
                                          instance_configuration_id=template(sim3, ad1, config3['instance_configuration_id'],
                                                                             reservation))
    first = _autoscale.Autoscaler(config3)
    assert [m['capacity_source'] for m in first.resume('gpu-[1-2]')] == ['r1', 'r1'] and first.capacity_notes == []
    second = _autoscale.Autoscaler(config3)
    assert [m['capacity_source'] for m in second.resume('gpu-[3-4]')] == ['ad-2', 'ad-2']
    assert second.capacity_notes == ['reservation r1 full, running in ad-2']
    logged(config3, 'resume gpu-[3-4]: r1: reservation r1 full (Out of host capacity.); cooling until ')
    svc = service.Service(config3, _autoscale.Autoscaler, None)
    svc._read_reservations(second)  # pylint: disable=protected-access
    assert svc.hosts_free == {'r1': 0}
    first.suspend('gpu-[1-2]')
    svc._read_reservations(second)  # pylint: disable=protected-access
    assert svc.hosts_free == {'r1': 2}
    assert 'ocigpu_autoscaler_capacity_source_hosts_free{source="r1"} 2\n' in svc.metrics_text()
