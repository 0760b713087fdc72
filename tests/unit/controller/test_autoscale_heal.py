# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The self-healing loop (controller/ocigpu_control/heal.py) in the autoscaler service, against the
simulator and a model of slurmctld: a sick node replaced and back in service, each limit, a capacity
error, a replacement that fails twice, and a service restarted in the middle."""
from __future__ import annotations

from ocigpu_control import heal
from ocigpu_control import service
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    SHAPE, config, gpu_instances, live, sim)
from tests.unit.controller.test_autoscale_faults import logged, nothing_billable
from tests.unit.controller.test_autoscale_service import make, run_all

SICK = 'ocigpu-health: gpu_count 7 of 8'


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def healing(config, fake, **limits):  # pylint: disable=redefined-outer-name
    conf, svc = make(config, fake, heal=dict(dict(enabled=True), **limits))
    clock = Clock()
    svc.healer.clock = clock
    return conf, svc, clock


def bring_up(conf, svc, fake, names, job_id):
    """A job powers the nodes up, they register, the job ends: the nodes are up and idle."""
    fake.allocate(job_id, names)
    service.submit(conf, 'resume', ','.join(names), [dict(job_id=job_id, nodes=','.join(names))])
    run_all(svc)
    fake.register(names)
    fake.jobs[job_id]['state'] = 'COMPLETED'


def one_sick_node(config, **limits):  # pylint: disable=redefined-outer-name
    """The loop on, gpu-1 up and idle, then drained by its health check."""
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake, **limits)
    bring_up(conf, svc, fake, ['gpu-1'], 1)
    fake.drain_by_checks('gpu-1', SICK)
    return fake, conf, svc, clock


def instance_of(sim, name):  # pylint: disable=redefined-outer-name
    found = [i['id'] for i in gpu_instances(sim) if i['freeformTags'].get('ocigpu-slurm-node') == name]
    return found[0] if found else None


def slurmctld_follows(sim, conf, svc, fake):  # pylint: disable=redefined-outer-name
    """What slurmctld does after the loop's commands: the suspend program for the nodes it powered down
    (POWER_DOWN_FORCE), the resume program for those POWER_UP powered up."""
    down = sorted(n for n, v in fake.nodes.items() if 'POWERED_DOWN' in v['state'] and instance_of(sim, n))
    if down:
        service.submit(conf, 'suspend', ','.join(down))
    while fake.powered_up:
        name = fake.powered_up.pop(0)
        service.submit(conf, 'resume', name)
    run_all(svc)


def replace_once(sim, conf, svc, fake, clock, name):  # pylint: disable=redefined-outer-name
    """One reconcile starts the replacement, slurmctld suspends, the next powers up, slurmctld resumes."""
    done = svc.reconcile()['heal']
    assert done['replaced'] == [name], done
    slurmctld_follows(sim, conf, svc, fake)
    assert instance_of(sim, name) is None  # the old instance is gone
    clock.now += 30
    done = svc.reconcile()['heal']
    assert done['powered_up'] == [name], done
    slurmctld_follows(sim, conf, svc, fake)


def test_a_sick_node_gets_a_new_instance_and_is_back_in_service(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake)
    bring_up(conf, svc, fake, ['gpu-1'], 1)
    old = instance_of(sim, 'gpu-1')
    fake.drain_by_checks('gpu-1', SICK)
    replace_once(sim, conf, svc, fake, clock, 'gpu-1')
    new = instance_of(sim, 'gpu-1')
    assert new and new != old
    fake.register(['gpu-1'])
    clock.now += 100
    assert svc.reconcile()['heal']['healed'] == ['gpu-1']
    assert fake.nodes['gpu-1']['state'] == {'IDLE', 'CLOUD'}
    down, = [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]
    assert down[-1] == 'reason=ocigpu-heal: replacing (%s)' % SICK
    logged(config, 'heal gpu-1: drained by the checks (%s) with no job on it; replacing it' % SICK)
    logged(config, 'heal gpu-1: old instance gone after 30s; powering up a new one (state=POWER_UP)')
    logged(config, 'heal gpu-1: back in service after 130s')
    # Nothing more happens to a healthy node.
    assert svc.reconcile()['heal'] == dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])


def test_a_node_sharing_its_cluster_network_gets_a_new_instance_only_once_that_network_ends(sim, tmp_path, config):
    # gpu-[1-2] came up for one job, in one cluster network; gpu-2 falls sick, gpu-1 stays in use.
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake)
    bring_up(conf, svc, fake, ['gpu-1', 'gpu-2'], 1)
    old = instance_of(sim, 'gpu-2')
    fake.drain_by_checks('gpu-2', SICK)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-2']
    slurmctld_follows(sim, conf, svc, fake)
    assert instance_of(sim, 'gpu-2') == old          # the suspend keeps the cluster network for gpu-1
    for _look in range(2):
        # A power up now would have the resume adopt the same, sick, instance: the loop waits.
        clock.now += 30
        assert svc.reconcile()['heal']['powered_up'] == []
        assert fake.powered_up == [] and 'DRAIN' in fake.nodes['gpu-2']['state']
    waiting, = logged(config, 'heal gpu-2: powered down, but its old instance runs on in cluster network ')
    assert 'beside gpu-1' in waiting
    # gpu-1 reaches SuspendTime: the cluster network ends, gpu-2 gets a new instance.
    service.submit(conf, 'suspend', 'gpu-1')
    run_all(svc)
    clock.now += 30
    assert svc.reconcile()['heal']['powered_up'] == ['gpu-2']
    slurmctld_follows(sim, conf, svc, fake)
    new = instance_of(sim, 'gpu-2')
    assert new and new != old
    fake.register(['gpu-2'])
    clock.now += 30
    assert svc.reconcile()['heal']['healed'] == ['gpu-2']


def test_a_persons_drain_a_software_reason_a_busy_node_and_the_loop_turned_off_are_left_alone(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc, _clock = healing(config, fake, max_at_once=5, min_in_service_share=0)
    bring_up(conf, svc, fake, ['gpu-1', 'gpu-2', 'gpu-3'], 1)
    fake.drain_by_checks('gpu-1', 'maintenance by alice')
    fake.drain_by_checks('gpu-2', 'ocigpu-health: container_paths missing enroot')
    fake.drain_by_checks('gpu-3', SICK)
    fake.nodes['gpu-3']['state'] |= {'ALLOCATED'}  # a job still runs on it
    assert svc.reconcile()['heal']['replaced'] == []
    assert not [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]
    off = make(config, fake)[1]
    fake.nodes['gpu-3']['state'] -= {'ALLOCATED'}
    assert off.reconcile()['heal']['replaced'] == []
    assert svc.reconcile()['heal']['replaced'] == ['gpu-3']


def test_at_most_n_at_once_and_per_hour(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake, max_at_once=1, max_per_hour=2, min_in_service_share=0)
    for job, name in enumerate(['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4'], 1):
        bring_up(conf, svc, fake, [name], job)    # one cluster network each: a power down ends an instance
    for n in ('gpu-1', 'gpu-2', 'gpu-3'):
        fake.drain_by_checks(n, SICK)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    assert svc.reconcile()['heal']['replaced'] == []  # one at work already
    logged(config, 'heal gpu-2: waiting: 1 replacement(s) at work (at most 1 at once)')
    slurmctld_follows(sim, conf, svc, fake)
    clock.now += 10
    svc.reconcile()
    slurmctld_follows(sim, conf, svc, fake)
    fake.register(['gpu-1'])
    clock.now += 10
    done = svc.reconcile()['heal']
    assert done['healed'] == ['gpu-1'] and done['replaced'] == ['gpu-2']
    slurmctld_follows(sim, conf, svc, fake)
    svc.reconcile()
    slurmctld_follows(sim, conf, svc, fake)
    fake.register(['gpu-2'])
    clock.now += 10
    done = svc.reconcile()['heal']
    assert done['healed'] == ['gpu-2'] and done['replaced'] == []  # two started this hour
    logged(config, 'heal gpu-3: waiting: 2 replacement(s) started in the last hour (at most 2)')
    clock.now += 3600
    assert svc.reconcile()['heal']['replaced'] == ['gpu-3']


def test_never_below_the_share_in_service(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc, _clock = healing(config, fake, max_at_once=5, min_in_service_share=0.5)
    bring_up(conf, svc, fake, ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4'], 1)
    for n in ('gpu-1', 'gpu-2', 'gpu-3'):
        fake.drain_by_checks(n, SICK)
    assert svc.reconcile()['heal']['replaced'] == []
    line, = logged(config, 'heal: 3 of 4 powered-up on-demand nodes are drained by the checks at once (more than 50%)')
    assert 'nothing is replaced: a fault of the whole cluster needs a person' in line
    # Said once, not at every reconcile; a person heals two by hand and the loop takes the third.
    svc.reconcile()
    assert len(logged(config, 'drained by the checks at once')) == 1
    for n in ('gpu-1', 'gpu-2'):
        fake.register([n])
    assert svc.reconcile()['heal']['replaced'] == ['gpu-3']


def test_a_capacity_error_leaves_the_node_drained_and_says_so(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    slurmctld_follows(sim, conf, svc, fake)
    sim.capacity.set(SHAPE, 0)
    clock.now += 30
    svc.reconcile()
    slurmctld_follows(sim, conf, svc, fake)  # the resume fails: out of host capacity
    assert 'Out of host capacity' in fake.nodes['gpu-1']['reason']
    assert svc.reconcile()['heal']['left'] == ['gpu-1']
    assert 'DRAIN' in fake.nodes['gpu-1']['state']
    assert fake.nodes['gpu-1']['reason'].startswith('ocigpu-heal: no host for a new instance (')
    logged(config, 'left drained, nothing else is tried')
    assert svc.reconcile()['heal'] == dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
    assert nothing_billable(sim)


def test_a_node_whose_replacements_fail_twice_is_left_for_a_person(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config, max_per_hour=10)
    replace_once(sim, conf, svc, fake, clock, 'gpu-1')
    # The new instance fails its checks in its pull and tells the pull server.
    service.submit(conf, service.PULL_FAILED, 'gpu-1', instance_id=instance_of(sim, 'gpu-1'), message='health: gpu_count 7 of 8')
    run_all(svc)
    clock.now += 10
    assert svc.reconcile()['heal']['failed'] == ['gpu-1']
    logged(config, 'heal gpu-1: replacement 1 failed: the new instance failed: the pull on ocid1.instance')
    slurmctld_follows(sim, conf, svc, fake)  # the suspend of the failed one
    clock.now += 10
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']  # powered up once more
    slurmctld_follows(sim, conf, svc, fake)
    # This one registers, then the checks drain it again: the second failure in a row.
    fake.register(['gpu-1'])
    clock.now += 10
    assert svc.reconcile()['heal']['healed'] == ['gpu-1']
    fake.drain_by_checks('gpu-1', SICK)
    clock.now += 60
    assert svc.reconcile()['heal']['left'] == ['gpu-1']
    assert fake.nodes['gpu-1']['reason'].startswith('ocigpu-heal: left for a person after 2 failed replacements in a row')
    before = len(fake.commands)
    clock.now += 3600
    assert svc.reconcile()['heal'] == dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
    assert not [c for c in fake.commands[before:] if c[1] == 'update']


def test_a_restart_in_the_middle_goes_on_and_never_replaces_twice(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    # slurmctld runs the suspend program, which hands the request over; the service restarts before
    # carrying it out: the restarted one waits for the suspend, then powers up once.
    service.submit(conf, 'suspend', 'gpu-1')
    svc = make(conf, fake)[1]
    svc.healer.clock = clock
    assert svc.reconcile()['heal'] == dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
    run_all(svc)
    assert instance_of(sim, 'gpu-1') is None
    svc = make(conf, fake)[1]
    svc.healer.clock = clock
    clock.now += 30
    assert svc.reconcile()['heal']['powered_up'] == ['gpu-1']
    svc = make(conf, fake)[1]
    svc.healer.clock = clock
    assert svc.reconcile()['heal']['powered_up'] == []  # powering up: nothing to do
    slurmctld_follows(sim, conf, svc, fake)
    fake.register(['gpu-1'])
    svc = make(conf, fake)[1]
    svc.healer.clock = clock
    assert svc.reconcile()['heal']['healed'] == ['gpu-1']
    assert len([c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]) == 1
    assert len([c for c in fake.commands if 'state=POWER_UP' in c]) == 1
    assert len(gpu_instances(sim)) == 1


def test_a_sick_node_that_slurm_powered_down_first_goes_back_to_service_powered_down(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config)
    fake.run([conf['scontrol'], 'update', 'nodename=gpu-1', 'state=POWER_DOWN_FORCE', 'reason=' + SICK])  # SuspendTime
    fake.nodes['gpu-1']['state'] |= {'DRAIN'}
    service.submit(conf, 'suspend', 'gpu-1')
    run_all(svc)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    assert fake.nodes['gpu-1']['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}
    logged(config, 'heal gpu-1: drained by the checks (%s) and powered down already' % SICK)
    # Its next instance is drained again soon after: that counts as a failed replacement.
    bring_up(conf, svc, fake, ['gpu-1'], 2)
    fake.drain_by_checks('gpu-1', SICK)
    clock.now += 60
    done = svc.reconcile()['heal']
    assert done['failed'] == ['gpu-1'] and done['replaced'] == []
    clock.now += 10
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']


SLOW = 'ocigpu-nccl: all_reduce busbw 120.31 GB/s at 4 GiB is below the threshold 148.00 GB/s'


def test_the_reason_names_the_checks():
    assert heal.hardware_checks(SICK + '; xid 79 on GPU 3', heal.DEFAULTS['checks']) == ['gpu_count', 'xid']
    assert heal.hardware_checks('ocigpu-health: container_paths missing enroot', heal.DEFAULTS['checks']) == []
    assert heal.hardware_checks('gpu_count by hand', heal.DEFAULTS['checks']) == []
    # The active check's drain when a node fell short is nccl_active; its hold while it runs is not.
    assert heal.hardware_checks(SLOW, heal.DEFAULTS['checks']) == ['nccl_active']
    assert heal.hardware_checks(SLOW, ['gpu_count', 'xid']) == []
    assert heal.hardware_checks('ocigpu-nccl: active NCCL check running', heal.DEFAULTS['checks']) == []


def test_a_node_the_periodic_active_check_found_slow_is_replaced(sim, tmp_path, config):
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake)
    bring_up(conf, svc, fake, ['gpu-1'], 1)
    fake.drain_by_checks('gpu-1', SLOW)
    replace_once(sim, conf, svc, fake, clock, 'gpu-1')
    fake.register(['gpu-1'])
    clock.now += 100
    assert svc.reconcile()['heal']['healed'] == ['gpu-1']
    logged(config, 'heal gpu-1: drained by the checks (%s) with no job on it; replacing it' % SLOW)
    # Without nccl_active among the checks, such a drain is left to a person.
    fake = FakeSlurm(config['node_names'])
    conf, svc, clock = healing(config, fake, checks=['gpu_count'])
    bring_up(conf, svc, fake, ['gpu-2'], 2)
    fake.drain_by_checks('gpu-2', SLOW)
    assert svc.reconcile()['heal']['replaced'] == []


def test_a_power_down_that_did_not_take_is_given_again_after_a_minute(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    # slurmctld restarted and lost the power down: the node is up and drained by the loop.
    fake.nodes['gpu-1']['state'] = {'IDLE', 'CLOUD', 'DRAIN'}
    clock.now += 30
    svc.reconcile()
    assert len([c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]) == 1  # not yet: it may be on its way
    clock.now += 40
    svc.reconcile()
    downs = [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c]
    assert len(downs) == 2 and downs[-1][-1] == 'reason=ocigpu-heal: replacing (%s)' % SICK
    logged(config, 'heal gpu-1: still powered up 70s after its power down; POWER_DOWN_FORCE again')
    slurmctld_follows(sim, conf, svc, fake)
    clock.now += 30
    assert svc.reconcile()['heal']['powered_up'] == ['gpu-1']


def test_a_node_powered_up_by_another_hand_while_down_is_followed_and_not_replaced_again(sim, tmp_path, config):
    fake, conf, svc, clock = one_sick_node(config)
    assert svc.reconcile()['heal']['replaced'] == ['gpu-1']
    slurmctld_follows(sim, conf, svc, fake)
    # A person returns it to service and powers it up before the loop's next reconcile.
    fake.run([conf['scontrol'], 'update', 'nodename=gpu-1', 'state=RESUME'])
    fake.run([conf['scontrol'], 'update', 'nodename=gpu-1', 'state=POWER_UP'])
    clock.now += 30
    assert svc.reconcile()['heal']['powered_up'] == []
    assert svc.healer._read()['nodes']['gpu-1']['step'] == 'up'
    logged(config, 'heal gpu-1: powered up by another hand after its power down; following the new instance')
    slurmctld_follows(sim, conf, svc, fake)
    fake.register(['gpu-1'])
    assert svc.reconcile()['heal']['healed'] == ['gpu-1']
    assert len([c for c in fake.commands if 'state=POWER_UP' in c]) == 1  # only the person's
    assert len(gpu_instances(sim)) == 1


def test_the_loop_looks_between_reconciles_every_poll_interval(sim, tmp_path, config):
    """serve(): a drain seen by the heal poll (10 s) is acted on before the next reconcile (30 s)."""
    import threading  # pylint: disable=import-outside-toplevel
    fake, conf, svc, clock = one_sick_node(config, poll_interval=10)
    svc.clock = clock
    svc.last_reconcile = clock.now  # a reconcile just ran (before the drain)
    stop, looks = threading.Event(), []

    def sleep(seconds):
        clock.now += 5
        looks.append(clock.now)
        if len(looks) >= 3:
            stop.set()
    svc.serve(stop=stop, sleep=sleep)
    assert clock.now - svc.last_reconcile < 30  # no reconcile ran
    assert [c for c in fake.commands if 'state=POWER_DOWN_FORCE' in c], fake.commands
    logged(config, 'heal gpu-1: drained by the checks (%s) with no job on it; replacing it' % SICK)


def test_the_loop_writes_its_figures_for_the_dashboard(sim, tmp_path, config):
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    prom = tmp_path / 'autoscaler.prom'
    fake, conf, svc, clock = one_sick_node(config, metrics_file=str(prom))
    replace_once(sim, conf, svc, fake, clock, 'gpu-1')

    def samples():
        return dict(((s.name, tuple(sorted(s.labels.items()))), s.value)
                    for f in text_string_to_metric_families(prom.read_text()) for s in f.samples)
    now = samples()
    assert now[('ocigpu_heal_nodes', (('step', 'powering_up'),))] == 1
    assert now[('ocigpu_heal_node', (('node', 'gpu-1'), ('step', 'powering_up')))] == 1
    assert now[('ocigpu_heal_steps_total', (('step', 'replaced'),))] == 1
    fake.register(['gpu-1'])
    clock.now += 100
    svc.reconcile()
    now = samples()
    assert now[('ocigpu_heal_steps_total', (('step', 'healed'),))] == 1
    assert now[('ocigpu_heal_steps_total', (('step', 'powered_up'),))] == 1
    assert now[('ocigpu_heal_steps_total', (('step', 'failed'),))] == 0
    assert now[('ocigpu_heal_nodes', (('step', 'in_service'),))] == 1
    assert now[('ocigpu_heal_last_drain_to_service_seconds', ())] == 130
    assert now[('ocigpu_heal_enabled', ())] == 1 and now[('ocigpu_heal_paused', ())] == 0
    assert oct(prom.stat().st_mode & 0o777) == '0o644'
