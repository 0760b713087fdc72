# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The autoscaler service against the simulator and a model of slurmctld (fakeslurm.py): programs that
only hand requests over, resumes grouped by job, a capacity shortfall that fails one job alone, a
service killed in the middle of a resume, slurmctld unreachable while it restarts, and the reconcile
that leaves no node DOWN and nothing billable."""
from __future__ import annotations

import json
import time

from ansible_collections.ocigpu.cluster.plugins.module_utils import _hostlist
from ocigpu_control import scaler as _autoscale
from ocigpu_control import programs as _autoscale_cli
from ocigpu_control import requests, service
from ocigpu_control.settings import setup_logging
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    SHAPE, config, gpu_instances, live, sim)
from tests.unit.controller.test_autoscale_faults import (
    kill_while_provisioning, logged, nothing_billable, program_config)


def make(config, fake, **changes):  # pylint: disable=redefined-outer-name
    # No hold for booting nodes unless a test asks: FakeSlurm's nodes power up until a test registers them.
    conf = dict(config, **dict(dict(scontrol_retry_seconds=5, reconfigure_delay=0.2, reconfigure_hold=0), **changes))
    setup_logging(conf['log_file'])
    slurm = service.Slurm(conf, run=fake.run, read=fake.read, sleep=lambda s: None)
    return conf, service.Service(conf, _autoscale.Autoscaler, slurm)


def resume_file(tmp_path, jobs):
    path = tmp_path / 'resume.json'
    path.write_text(json.dumps(dict(all_nodes_resume=_hostlist.compress_hostlist(
        n for j in jobs for n in _hostlist.expand_hostlist(j[1])),
        jobs=[dict(job_id=i, nodes_alloc=h, nodes_resume=h, partition='gpu') for i, h in jobs])))
    return str(path)


def run_all(svc):
    """Pick up every waiting request and wait for it to end."""
    for _round in range(20):
        if not svc.waiting():
            break
        svc.pick_up()
        svc.wait(120)
    assert svc.waiting() == [] and svc.active == {}


def cluster_networks_by_name(sim):  # pylint: disable=redefined-outer-name
    return sorted((c['freeformTags'].get('ocigpu-slurm-nodes'), c['lifecycleState']) for c in live(sim, 'cluster_networks'))


def test_resume_program_only_hands_a_request_to_the_service(sim, tmp_path, config, monkeypatch):
    path = program_config(tmp_path, config)
    requests.beat(config, time.time())  # the service is running
    monkeypatch.setenv('SLURM_RESUME_FILE', resume_file(tmp_path, [(7, 'gpu-[1-2]'), (8, 'gpu-3')]))
    before = sim.calls.total()
    assert _autoscale_cli.main(['--config', path, 'resume', 'gpu-[1-3]'], run=lambda argv: 1 / 0) == 0
    assert sim.calls.total() == before
    (rid, req), = [(r, json.load(open(p))) for r, p in service.Service(config, None, None).waiting()]
    assert (req['action'], req['nodes'], req['jobs']) == ('resume', 'gpu-[1-3]', [
        dict(job_id=7, nodes='gpu-[1-2]'), dict(job_id=8, nodes='gpu-3')])
    logged(config, 'resume gpu-[1-3]: handed to the autoscaler service (request %s; jobs 7: gpu-[1-2], 8: gpu-3)' % rid)


def test_each_job_gets_its_own_cluster_network(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake)
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    fake.allocate(2, ['gpu-3'])
    service.submit(conf, 'resume', 'gpu-[1-3]', [dict(job_id=1, nodes='gpu-[1-2]'), dict(job_id=2, nodes='gpu-3')])
    run_all(svc)
    assert cluster_networks_by_name(sim) == [('gpu-3', 'RUNNING'), ('gpu-[1-2]', 'RUNNING')]
    assert all(fake.nodes[n]['addr'] for n in ('gpu-1', 'gpu-2', 'gpu-3'))
    logged(config, 'resume gpu-[1-3]: 2 group(s) by job: gpu-[1-2] for job 1; gpu-3 for job 2')
    logged(config, 'resume gpu-[1-2] for job 1: done: gpu-1=')
    logged(config, 'resume gpu-3 for job 2: done: gpu-3=')


def test_capacity_shortfall_fails_only_the_job_that_does_not_fit_and_it_runs_when_hosts_return(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake)
    sim.capacity.set(SHAPE, 3)
    jobs = [(1, ['gpu-1', 'gpu-2']), (2, ['gpu-3']), (3, ['gpu-4'])]
    for job_id, names in jobs:
        fake.allocate(job_id, names)
    service.submit(conf, 'resume', 'gpu-[1-4]', [dict(job_id=j, nodes=_hostlist.compress_hostlist(n)) for j, n in jobs])
    start = time.monotonic()
    run_all(svc)
    assert time.monotonic() - start < 60
    failed = [j for j, v in fake.jobs.items() if v['state'] == 'PENDING']
    assert len(failed) == 1, fake.jobs
    job = fake.jobs[failed[0]]
    # Out of hosts: the job waits for capacity (the first back-off step: its one source cools not), no attempt counted.
    assert job['comment'] == 'ocigpu-autoscaler: waiting for capacity: ad-1 out of host capacity'
    assert job['start_after'] == 60 and not job['held']
    ran = [n for j, names in jobs if j not in failed for n in names]
    assert all(fake.nodes[n]['addr'] for n in ran)
    lost = dict(jobs)[failed[0]]
    assert all(fake.nodes[n]['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'} and fake.nodes[n]['addr'] is None for n in lost)
    assert len(live(sim, 'cluster_networks')) == 2 and len(gpu_instances(sim)) == 4 - len(lost)
    line, = logged(config, 'for job %d failed: ' % failed[0])
    assert 'Out of host capacity.' in line and line.endswith(
        'handed back to Slurm powered down (state=POWER_DOWN_FORCE); job %d requeued to wait for capacity, may start '
        'again in 60s or when hosts are freed (not counted toward the hold)' % failed[0])

    # The jobs that ran end; Slurm suspends their nodes: their hosts are free, so the requeued job may
    # start now rather than after its back-off; it gets nodes again and fits.
    service.submit(conf, 'suspend', _hostlist.compress_hostlist(ran))
    run_all(svc)
    assert nothing_billable(sim)
    assert [c for c in fake.commands if c[-1] == 'starttime=now'] == [
        [conf['scontrol'], 'update', 'jobid=%d' % failed[0], 'starttime=now']]
    logged(config, 'hosts are free again: job %d may start now' % failed[0])
    fake.allocate(failed[0], lost)
    service.submit(conf, 'resume', _hostlist.compress_hostlist(lost),
                   [dict(job_id=failed[0], nodes=_hostlist.compress_hostlist(lost))])
    run_all(svc)
    assert all(fake.nodes[n]['addr'] for n in lost)
    assert _autoscale.StateFile(config['state_file']).read()['attempts'] == {}
    service.submit(conf, 'suspend', _hostlist.compress_hostlist(lost))
    run_all(svc)
    assert nothing_billable(sim)


def one_of_two_jobs_short_of_hosts(sim, config, **settings):
    """Jobs 1 and 2 of one node each resumed with hosts for one: (fake Slurm, conf, service, the job that
    failed and waits, the node of the one that ran)."""
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, **settings)
    sim.capacity.set(SHAPE, 1)
    fake.allocate(1, ['gpu-1'])
    fake.allocate(2, ['gpu-2'])
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=1, nodes='gpu-1'), dict(job_id=2, nodes='gpu-2')])
    run_all(svc)
    failed, = [j for j, v in fake.jobs.items() if v['state'] == 'PENDING']
    return fake, conf, svc, failed, 'gpu-2' if failed == 1 else 'gpu-1'


def test_freed_hosts_do_not_retry_moving_a_job_that_started_meanwhile(sim, tmp_path, config):
    fake, conf, svc, failed, ran = one_of_two_jobs_short_of_hosts(sim, config, scontrol_retry_seconds=60)
    fake.allocate(failed, ['gpu-3'])  # its back-off ran out and Slurm started it elsewhere
    start = time.monotonic()
    service.submit(conf, 'suspend', ran)
    run_all(svc)
    assert time.monotonic() - start < 30
    assert [c for c in fake.commands if c[-1] == 'starttime=now'] == [
        [conf['scontrol'], 'update', 'jobid=%d' % failed, 'starttime=now']]
    logged(config, 'hosts are free again: job %d not moved (scontrol exited 1: started already, or gone)' % failed)


def test_a_job_resumed_after_its_back_off_is_not_moved_when_hosts_are_freed(sim, tmp_path, config):
    fake, conf, svc, failed, ran = one_of_two_jobs_short_of_hosts(sim, config)
    assert _autoscale.StateFile(config['state_file']).read()['capacity_waits'] == [str(failed)]
    # Its back-off ran out and it was resumed elsewhere, on hosts that came back.
    sim.capacity.set(SHAPE, 2)
    fake.allocate(failed, ['gpu-3'])
    service.submit(conf, 'resume', 'gpu-3', [dict(job_id=failed, nodes='gpu-3')])
    run_all(svc)
    assert fake.nodes['gpu-3']['addr'] and _autoscale.StateFile(config['state_file']).read()['capacity_waits'] == []
    service.submit(conf, 'suspend', ran)
    run_all(svc)
    assert [c for c in fake.commands if c[-1] == 'starttime=now'] == []
    service.submit(conf, 'suspend', 'gpu-3')
    run_all(svc)
    assert nothing_billable(sim)


def test_a_job_that_keeps_failing_is_held_with_the_reason(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, max_resume_attempts=3)
    # An error that is not capacity (a stock-out never holds a job: test_autoscale_failover.py).
    sim.faults.add('POST /clusterNetworks', status=400, code='InvalidParameter', message='Bad placement.')
    for attempt in (1, 2, 3):
        fake.allocate(9, ['gpu-1', 'gpu-2'])
        service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=9, nodes='gpu-[1-2]')])
        run_all(svc)
        assert fake.jobs[9]['held'] == (attempt == 3)
    assert fake.jobs[9]['comment'].startswith('ocigpu-autoscaler: held after 3 failed resumes: cluster network ')
    assert fake.jobs[9]['comment'].endswith('Bad placement. (scontrol release 9 tries again)')
    logged(config, 'job 9 held (attempt 3 of 3)')
    assert nothing_billable(sim)


def test_a_node_whose_pull_failed_is_handed_back_at_once_and_its_job_held_after_the_limit(sim, tmp_path, config):
    """The pull server's report (a new node could not configure itself) fails the resume now, not at
    ResumeTimeout; a resume that reached OCI does not reset the count of failed pulls."""
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, max_resume_attempts=2)
    for attempt in (1, 2):
        fake.allocate(5, ['gpu-1', 'gpu-2'])
        service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=5, nodes='gpu-[1-2]')])
        run_all(svc)
        assert fake.nodes['gpu-2']['addr'] and 'POWERING_UP' in fake.nodes['gpu-2']['state']
        service.submit(conf, service.PULL_FAILED, 'gpu-2', source='pull server', instance_id='ocid1.instance.oc1..x',
                       message='configure failed (exit 2): enroot: sha256 mismatch')
        run_all(svc)
        assert fake.nodes['gpu-2']['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}
        assert fake.nodes['gpu-2']['reason'] == ('ocigpu-autoscaler: the pull on ocid1.instance.oc1..x failed: '
                                                 'configure failed (exit 2): enroot: sha256 mismatch')
        assert fake.jobs[5]['state'] == 'PENDING' and fake.jobs[5]['held'] == (attempt == 2)
        # Slurm powers the job's nodes down; their cluster network ends.
        service.submit(conf, 'suspend', 'gpu-[1-2]')
        run_all(svc)
    assert fake.jobs[5]['comment'].startswith(
        'ocigpu-autoscaler: held after 2 failed resumes: the pull on ocid1.instance.oc1..x failed: configure failed')
    assert nothing_billable(sim)
    logged(config, 'resume gpu-2 for job 5 failed: the pull on ocid1.instance.oc1..x failed')

    # A report about a node that is not powering up (it registered meanwhile, or a stale one) is left alone.
    fake.nodes['gpu-3']['state'] = {'IDLE', 'CLOUD'}
    service.submit(conf, service.PULL_FAILED, 'gpu-3', message='late')
    run_all(svc)
    assert fake.nodes['gpu-3']['state'] == {'IDLE', 'CLOUD'}
    assert not [c for c in fake.commands if 'nodename=gpu-3' in c]
    logged(config, 'gpu-3: the pull on its instance failed: late; not powering up (gpu-3 CLOUD+IDLE), left alone')


def test_a_resume_waits_for_the_suspend_of_its_names_made_before_it(sim, tmp_path, config):
    """Slurm powered gpu-[1-2] down and, SuspendTimeout later, up again for a new job, before the service
    got to the suspend: the old cluster network is ended first, then a new one is made, never adopted
    and then ended under the new job."""
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake)
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=1, nodes='gpu-[1-2]')])
    run_all(svc)
    old, = [c['id'] for c in live(sim, 'cluster_networks')]
    service.submit(conf, 'suspend', 'gpu-[1-2]')
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=2, nodes='gpu-[1-2]')])
    service.submit(conf, 'resume', 'gpu-3', [dict(job_id=3, nodes='gpu-3')])
    assert svc.pick_up() == 2  # the suspend and gpu-3's resume; gpu-[1-2]'s waits for the suspend
    assert sorted(r['action'] + ' ' + ','.join(sorted(n)) for r, n in
                  [(dict(action=k.split('-')[1]), v) for k, v in svc.active.items()]) == ['resume gpu-3', 'suspend gpu-1,gpu-2']
    run_all(svc)
    new = [c for c in live(sim, 'cluster_networks') if c['freeformTags']['ocigpu-slurm-nodes'] == 'gpu-[1-2]']
    assert [c['lifecycleState'] for c in new] == ['RUNNING'] and new[0]['id'] != old
    assert sim.state.get(old)['lifecycleState'] in ('TERMINATING', 'TERMINATED')
    assert sim.calls['POST /clusterNetworks'] == 3


def test_addresses_reach_slurmctld_after_it_restarts(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, scontrol_retry_seconds=60)
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    fake.answering = False
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=1, nodes='gpu-[1-2]')])
    svc.pick_up()
    deadline = time.monotonic() + 60
    while fake.refused < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    fake.answering = True  # slurmctld is back
    run_all(svc)
    assert fake.refused >= 3 and fake.nodes['gpu-1']['addr'] and fake.nodes['gpu-2']['addr']


def test_service_killed_in_the_middle_of_a_resume_adopts_on_restart(sim, tmp_path, config):
    path = program_config(tmp_path, config, scontrol='true', squeue='true')
    requests.beat(config, time.time())  # the service is running
    assert _autoscale_cli.main(['--config', path, 'resume', 'gpu-[1-2]']) == 0
    # The service in its own process, killed while the cluster network it creates is PROVISIONING.
    cn_id = kill_while_provisioning(sim, path, 'service')

    fake = FakeSlurm(config['node_names'])
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    _conf, svc = make(config, fake)
    assert len(svc.waiting()) == 1  # the request outlived its service
    run_all(svc)
    assert sim.calls['POST /clusterNetworks'] == 1
    assert [(c['id'], c['lifecycleState']) for c in live(sim, 'cluster_networks')] == [(cn_id, 'RUNNING')]
    assert fake.nodes['gpu-1']['addr'] and fake.nodes['gpu-2']['addr']
    logged(config, 'resume gpu-[1-2]: adopting cluster network %s (PROVISIONING, gpu-[1-2]) for gpu-[1-2]' % cn_id)


def test_reconcile_returns_nodes_down_after_a_failed_resume_and_leaves_a_persons_down_alone(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    _conf, svc = make(config, fake)
    fake.allocate(4, ['gpu-1', 'gpu-2'])
    fake.resume_timeout(['gpu-1', 'gpu-2'])
    fake.set_down(['gpu-8'], 'disk replaced by hand')
    done = svc.reconcile(now=0)
    assert done['returned'] == ['gpu-1', 'gpu-2']
    assert fake.nodes['gpu-1']['state'] == fake.nodes['gpu-2']['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}
    assert 'DOWN' in fake.nodes['gpu-8']['state']
    logged(config, 'reconcile: gpu-[1-2] DOWN after a failed resume (ResumeTimeout reached); returned to service '
                   'powered down (state=RESUME)')


def test_reconcile_resumes_nodes_whose_resume_program_died(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, takeover_after=20)
    fake.allocate(5, ['gpu-3', 'gpu-4'])  # powering up, and no request: the program died before writing it
    assert svc.reconcile(now=100)['taken_over'] == []  # seen once: the program may still be writing it
    assert svc.reconcile(now=110)['taken_over'] == []
    assert svc.reconcile(now=121)['taken_over'] == ['gpu-3', 'gpu-4']
    (_rid, path), = svc.waiting()
    assert json.load(open(path))['jobs'] == [dict(job_id=5, nodes='gpu-[3-4]')]
    assert svc.reconcile(now=200)['taken_over'] == []  # the request is there: nothing twice
    run_all(svc)
    assert fake.nodes['gpu-3']['addr'] and cluster_networks_by_name(sim) == [('gpu-[3-4]', 'RUNNING')]
    logged(config, 'reconcile: gpu-[3-4] powering up for 21s with no resume at work')
    # Resumed, they boot and register on their own time: no second resume while they power up.
    assert svc.reconcile(now=300)['taken_over'] == [] and svc.reconcile(now=400)['taken_over'] == []
    assert svc.waiting() == [] and sim.calls['POST /clusterNetworks'] == 1
    del conf


def test_reconcile_terminates_a_cluster_network_whose_nodes_are_all_powered_down(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake)
    fake.allocate(6, ['gpu-1', 'gpu-2'])
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=6, nodes='gpu-[1-2]')])
    run_all(svc)
    assert svc.reconcile(now=0)['terminated'] == []  # powering up: in use
    # Slurm powered the nodes down, but the suspend program was killed before it did anything.
    fake.run(['scontrol', 'update', 'nodename=gpu-[1-2]', 'state=POWER_DOWN_FORCE', 'reason=idle'])
    cn_id, = [c['id'] for c in live(sim, 'cluster_networks')]
    assert svc.reconcile(now=30)['terminated'] == [cn_id]
    assert nothing_billable(sim)
    logged(config, 'reconcile: cluster network %s (as-gpu-1-2) carries only powered-down nodes gpu-[1-2]' % cn_id)


def test_reconcile_does_nothing_while_slurmctld_does_not_answer(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake)
    service.submit(conf, 'resume', 'gpu-[1-2]')
    run_all(svc)
    fake.answering = False
    assert svc.reconcile(now=0) == dict(returned=[], taken_over=[], terminated=[])
    assert len(live(sim, 'cluster_networks')) == 1
    logged(config, 'reconcile: slurmctld does not answer; nothing compared')


def test_resume_groups_join_jobs_that_share_nodes_and_keep_the_rest_together():
    groups = service.resume_groups(['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4', 'gpu-5'], [
        dict(job_id=3, nodes='gpu-[1-2]'), dict(job_id=4, nodes='gpu-3'), dict(job_id=5, nodes='gpu-[3-4]')])
    assert groups == [([3], ['gpu-1', 'gpu-2']), ([4, 5], ['gpu-3', 'gpu-4']), ([], ['gpu-5'])]
    assert service.resume_groups(['gpu-1'], []) == [([], ['gpu-1'])]


def test_short_soak_leaves_no_node_down_and_nothing_billable(sim, tmp_path, config):
    """A few minutes of tests/perf/autoscale_soak.py (the long run is in its docs): random jobs, API
    faults, capacity shortfalls, slurmctld restarts and killed programs."""
    from tests.perf import autoscale_soak  # pylint: disable=import-outside-toplevel
    fig = autoscale_soak.run_soak(sim, dict(config, node_names=_hostlist.expand_hostlist('gpu-[1-8]')), cycles=25,
                                  seed=7)
    assert fig['nodes_left_down'] == [] and fig['billable_left'] == 0, fig
    assert fig['jobs_completed'] + fig['jobs_held'] == fig['jobs_submitted'] == 25, fig
    assert sum(fig['faults'].values()) > 0, fig


def test_short_soak_with_the_healing_loop_replaces_sick_nodes_once_each(sim, tmp_path, config):
    """The same with the self-healing loop on and nodes falling sick among the faults: sick nodes come
    back, no node name ever has two instances, nothing is left DOWN or billable."""
    from tests.perf import autoscale_soak  # pylint: disable=import-outside-toplevel
    fig = autoscale_soak.run_soak(sim, dict(config, node_names=_hostlist.expand_hostlist('gpu-[1-8]')), cycles=25,
                                  seed=3, heal=True)
    assert fig['nodes_left_down'] == [] and fig['billable_left'] == 0, fig
    assert fig['jobs_completed'] + fig['jobs_held'] == fig['jobs_submitted'] == 25, fig
    assert fig['faults'].get('nodes fallen sick', 0) > 0, fig
    assert fig['heal_steps'].get('replaced', 0) > 0 and fig['heal_back_in_service'] > 0, fig
    assert fig['instances_for_one_node_max'] == 1, fig


def _topology(tmp_path, unknown):
    """The slurm role's topology.json for a cluster of on-demand nodes only, and its first topology.conf."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import tree_lines
    conf, inputs = tmp_path / 'topology.conf', tmp_path / 'topology.json'
    inputs.write_text(json.dumps(dict(placed={}, unknown=unknown)))
    conf.write_text('# managed\n' + '\n'.join(tree_lines({}, unknown)) + '\n')
    return dict(conf=str(conf), inputs=str(inputs), places=str(tmp_path / 'state' / 'places.json'))


def test_on_demand_nodes_move_from_the_unknown_switch_to_their_local_blocks_when_they_come_up(sim, tmp_path, config):
    from tests.ocisim import compute as sim_compute
    sim.local_block_hosts = 2
    names = _hostlist.expand_hostlist(config['nodes'])
    topo = _topology(tmp_path, names)
    assert open(topo['conf']).read().splitlines()[1:] == ['SwitchName=unknown Nodes=gpu-[1-8]']
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, topology=topo)
    fake.allocate(1, ['gpu-1', 'gpu-2', 'gpu-3'])
    service.submit(conf, 'resume', 'gpu-[1-3]', [dict(job_id=1, nodes='gpu-[1-3]')])
    run_all(svc)
    lines = open(topo['conf']).read().splitlines()
    assert lines[0] == '# managed'            # the slurm role's header stays
    hosts = dict((i['id'], sim_compute.host_of(sim, i)) for i in gpu_instances(sim))
    assert len(set(h['localBlockId'] for h in hosts.values())) == 2   # 3 nodes, blocks of 2
    places = json.load(open(topo['places']))
    assert sorted(places) == ['gpu-1', 'gpu-2', 'gpu-3']
    for name, place in places.items():
        assert tuple(place) in set((h['hpcIslandId'], h['networkBlockId'], h['localBlockId']) for h in hosts.values())
        leaf = [line for line in lines if line.startswith('SwitchName=lb-' + place[2][-8:])]
        assert len(leaf) == 1 and name in _hostlist.expand_hostlist(leaf[0].split('Nodes=')[1])
    assert 'SwitchName=unknown Nodes=gpu-[4-8]' in lines
    assert fake.reconfigured == 1
    logged(config, 'topology gpu-[1-3] for job 1: gpu-1 in local block ')

    # The hosts cannot be read for the next node: it stays in unknown, nothing else moves.
    sim.faults.add('GET /computeHosts', status=404, code='NotAuthorizedOrNotFound')
    fake.allocate(2, ['gpu-4'])
    service.submit(conf, 'resume', 'gpu-4', [dict(job_id=2, nodes='gpu-4')])
    run_all(svc)
    assert open(topo['conf']).read().splitlines() == lines
    assert fake.reconfigured == 1
    logged(config, 'topology gpu-4 for job 2: not updated')


def test_the_groups_of_one_resume_placed_within_seconds_share_one_reconfigure(sim, tmp_path, config):
    # Each reconfigure restarts slurmctld (Slurm 23.11 and later): three jobs resumed at once make one.
    names = _hostlist.expand_hostlist(config['nodes'])
    topo = _topology(tmp_path, names)
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, topology=topo, reconfigure_delay=2)
    for job, nodes in ((1, ['gpu-1', 'gpu-2']), (2, ['gpu-3']), (3, ['gpu-4'])):
        fake.allocate(job, nodes)
    service.submit(conf, 'resume', 'gpu-[1-4]', [dict(job_id=1, nodes='gpu-[1-2]'), dict(job_id=2, nodes='gpu-3'),
                                                 dict(job_id=3, nodes='gpu-4')])
    run_all(svc)
    assert sorted(json.load(open(topo['places']))) == ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4']
    assert fake.reconfigured == 1
    line, = [x for x in open(conf['log_file']).read().splitlines() if 'topology: slurmctld reconfigured for ' in x]
    assert all(('%s for job %d' % (n, j)) in line for n, j in (('gpu-[1-2]', 1), ('gpu-3', 2), ('gpu-4', 3)))

    # A placement while none is due gets its own, after the delay.
    fake.allocate(4, ['gpu-5'])
    service.submit(conf, 'resume', 'gpu-5', [dict(job_id=4, nodes='gpu-5')])
    run_all(svc)
    assert fake.reconfigured == 2
    logged(conf, 'topology: slurmctld reconfigured for gpu-5 for job 4')


def test_a_reconfigure_for_placements_waits_for_the_resumed_nodes_to_register(sim, tmp_path, config):
    # A reconfigure restarts slurmctld: a configless slurmd that starts meanwhile registers at its next try.
    names = _hostlist.expand_hostlist(config['nodes'])
    topo = _topology(tmp_path, names)
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, topology=topo, reconfigure_hold=30)
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=1, nodes='gpu-[1-2]')])
    svc.pick_up()
    for thread in list(svc.threads):  # the resume's, not the reconfigure's
        thread.join(60)
    time.sleep(1)  # reconfigure_delay, and more
    assert sorted(json.load(open(topo['places']))) == ['gpu-1', 'gpu-2']  # topology.conf written already
    assert fake.reconfigured == 0  # gpu-[1-2] still power up
    logged(conf, 'topology: the reconfigure waits for gpu-[1-2] to register (at most 30s)')
    fake.register(['gpu-1'])
    time.sleep(2.5)
    assert fake.reconfigured == 0
    fake.register(['gpu-2'])
    deadline = time.time() + 10
    while fake.reconfigured == 0 and time.time() < deadline:
        time.sleep(0.2)
    assert fake.reconfigured == 1
    svc.wait(10)

    # Nodes that never register hold it reconfigure_hold seconds at most.
    conf, svc = make(config, fake, topology=topo, reconfigure_hold=1.5)
    fake.allocate(2, ['gpu-3'])
    started = time.time()
    service.submit(conf, 'resume', 'gpu-3', [dict(job_id=2, nodes='gpu-3')])
    run_all(svc)
    svc.wait(30)
    assert fake.reconfigured == 2 and time.time() - started < 20
    with svc.lock:
        assert svc.reconfigure_thread is None


def test_without_the_slurm_roles_inputs_topology_is_left_alone(sim, tmp_path, config):
    topo = _topology(tmp_path, ['gpu-1'])
    (tmp_path / 'topology.json').unlink()
    before = open(topo['conf']).read()
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, topology=topo)
    fake.allocate(1, ['gpu-1'])
    service.submit(conf, 'resume', 'gpu-1', [dict(job_id=1, nodes='gpu-1')])
    run_all(svc)
    assert open(topo['conf']).read() == before and fake.reconfigured == 0
    logged(config, 'topology gpu-1 for job 1: ')


def test_on_demand_cluster_networks_are_placed_as_the_cluster_vars_ask(sim, tmp_path, config):
    island = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaisland07'
    fake = FakeSlurm(config['node_names'])
    conf, svc = make(config, fake, placement_constraint='SINGLE_BLOCK', hpc_island_id=island)
    fake.allocate(1, ['gpu-1', 'gpu-2'])
    service.submit(conf, 'resume', 'gpu-[1-2]', [dict(job_id=1, nodes='gpu-[1-2]')])
    run_all(svc)
    cn, = live(sim, 'cluster_networks')
    assert (cn['placementConfiguration']['placementConstraint'], cn['hpcIslandId']) == ('SINGLE_BLOCK', island)
