# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Soak of the autoscaler service: many jobs of random sizes through a model of slurmctld's power
saving, against the OCI simulator with its clock running fast, while the API throttles and fails,
the shape runs out of hosts, slurmctld restarts and the resume and suspend programs are killed; with
``--heal``, the self-healing loop is on and nodes fall sick among the faults.

    python -m tests.perf.autoscale_soak [--cycles 200] [--seed 1] [--heal] [--sources 3]

Each cycle submits one job (1, 2 or 4 nodes, 1 to 10 minutes of work). Slurm is the model of
tests/unit/plugins/module_utils/fakeslurm.py with a scheduler: it allocates powered-down nodes to
pending jobs, runs the resume program (which hands a request to the service, or is killed first),
registers a node once OCI runs an instance with its name and the service gave Slurm its address,
sets nodes DOWN after ResumeTimeout, runs the suspend program after SuspendTime, and requeues the
jobs of nodes powered down by force (begin time +121 s, as Slurm does). The service runs in this
process with its reconcile; the simulator's clock moves 5 s a tick and with every wait.

Figures: jobs completed and held, the slowest job's wait beyond provisioning (from submission to
start, less the time from its last allocation to its nodes' addresses, counted in passes of the loop
times 5 s: the simulator's own clock also jumps with every wait of every thread, so it overstates;
it includes queueing behind other jobs for the 16 nodes), with the median,
nodes left DOWN (goal 0), billable resources left at the end (goal 0), and the faults injected, which
go on until every job has ended.

With ``--heal``: a powered-up node (idle, or running a job) is drained now and then as its health check
would (``ocigpu-health: xid 79``), and a quarter of the new instances fall sick again soon after they
register (for ``heal.max_failures``). A node back in service is not drained again at random within
``heal.failure_window``: the loop rightly counts such a drain as a failed replacement, and at this
soak's rate of faults (a powered-up node drained about every 2,000 s) chance alone would leave most
nodes for a person and the big jobs unscheduled. Slurm powers a drained idle node down after
SuspendTime, as it does an idle one, so both of the loop's paths are taken. More figures: the loop's
steps (replacements started, new instances powered up, healed, failed, left drained for a person), the
time from drain to back in service (schedulable: undrained and registered, or undrained and powered
down; in passes times 5 s, as the wait above, and with the same queueing: a node is replaced only once
its job ended), nodes still drained by the checks at the end, and ``instances_for_one_node_max``: the
most RUNNING instances one node name had at once (goal 1: the loop never replaces a node twice). A real
slurmctld is not used: 200 cycles would take hours of real time; `make demo-ondemand` runs the service
with one.

With ``--sources N`` (N > 1), the simulator has N availability domains and the autoscaler N capacity sources,
one on-demand source per AD (ad-1 first), each with its node template; the shortfalls fall on one AD at a time
(0 to 4 hosts), so a resume meets stock-outs and moves on to the next source. More figures: jobs held for
capacity (goal 0: a stock-out never holds a job), jobs resumed twice at once (two resumes of one job at work at
the same time in the service; goal 0), the stock-outs per source and the resumes that ran in another source
than the first. ``--sources 1`` (the default) is the soak as it was, with the old configuration (no
capacity_sources).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import threading
import time

# The checkout as the collection (tests/infra/venv.sh makes the link) and the control plane, as pytest.ini has it.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [p for p in (os.path.join(_ROOT, '.build', 'collections'), os.path.join(_ROOT, 'controller')) if p not in sys.path]

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci  # noqa: E402
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import compress_hostlist, _natural  # noqa: E402
from ocigpu_control import scaler as _autoscale  # noqa: E402
from ocigpu_control import service  # noqa: E402
from ocigpu_control.settings import setup_logging  # noqa: E402
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm  # noqa: E402

SHAPE = 'BM.GPU4.8'
REQUEUE_DELAY = 121  # Slurm: a requeued batch job begins after cred_expire + 1 s


class SlurmModel(FakeSlurm):
    """FakeSlurm with a scheduler and the timers of power saving; see the module's docs."""

    def __init__(self, names, sim, config, rng, suspend_time=60, suspend_timeout=60, resume_timeout=1800,
                 register_delay=30):
        super(SlurmModel, self).__init__(names)
        self.sim, self.config, self.rng = sim, config, rng
        self.suspend_time, self.suspend_timeout = suspend_time, suspend_timeout
        self.resume_timeout, self.register_delay = resume_timeout, register_delay
        self.t = dict((n, dict(since=0.0, addr_at=None)) for n in names)
        self.kill_program = 0.0
        self.events = collections.Counter()
        self.next_id = 1
        self.tick = 0  # passes of the loop: the figure's clock (the simulator's also moves with every wait)
        self.sick_since = {}      # node -> the pass (tick) in which its health check drained it
        self.sick_again = set()   # nodes whose next instance falls sick soon after it registers
        self.back_in_service = []  # passes from drain to back in service
        self.healed_at = {}       # node -> when (the simulator's clock) it was last back in service
        self.most_instances = 0   # the most RUNNING instances one node name had at once

    def now(self):
        return self.sim.clock.now()

    # the programs slurmctld runs
    def program(self, action, names, jobs=None):
        if not names:
            return
        if self.rng.random() < self.kill_program:
            self.events['%s program killed' % action] += 1
            return
        service.submit(self.config, action, compress_hostlist(sorted(names, key=_natural)), jobs or [])

    # what the service does to Slurm
    def run(self, argv):
        args = dict(a.split('=', 1) for a in argv[2:] if '=' in a)
        with self.lock:
            drained = set(n for n in _autoscale.expand_hostlist(args['nodename']) if 'DRAIN' in self.nodes[n]['state']) \
                if argv[1] == 'update' and 'nodename' in args else set()
        status = super(SlurmModel, self).run(argv)
        if status or argv[1] != 'update':
            return status
        forced, powered_up = [], []
        with self.lock:
            if 'jobid' in args and self.jobs[int(args['jobid'])]['start_after'] is not None:
                job = self.jobs[int(args['jobid'])]
                job['begin'] = self.now() + job['start_after']
                job['start_after'] = None
            elif 'nodename' in args:
                names = _autoscale.expand_hostlist(args['nodename'])
                for n in names:
                    if 'nodeaddr' in args:
                        self.t[n]['addr_at'] = self.now()
                    elif args.get('state') == 'POWER_DOWN_FORCE':
                        # Slurm keeps a drain over a power down.
                        self.nodes[n]['state'] = {'IDLE', 'CLOUD', 'POWERING_DOWN'} | ({'DRAIN'} if n in drained else set())
                        self.nodes[n]['addr'] = None
                        self.t[n].update(since=self.now(), addr_at=None)
                    elif args.get('state') == 'POWER_UP':
                        self.t[n].update(since=self.now(), addr_at=None)
                        powered_up.append(n)
                if args.get('state') == 'POWER_DOWN_FORCE':
                    forced = names
        if forced:
            self.program('suspend', forced)
        if powered_up:
            self.program('resume', powered_up)
        return status

    def _requeue(self, name):
        """Requeue the job on name; its other nodes that are up become idle (those booting boot on)."""
        for job in self.jobs.values():
            if name in job['nodes'] and job['state'] in ('CONFIGURING', 'RUNNING'):
                for n in job['nodes']:
                    if n != name and self.nodes[n]['state'] - {'DRAIN'} == {'ALLOCATED', 'CLOUD'}:
                        self.nodes[n]['state'] = {'IDLE', 'CLOUD'} | (self.nodes[n]['state'] & {'DRAIN'})
                        self.t[n]['since'] = self.now()
                job.update(state='PENDING', nodes=[], begin=self.now() + REQUEUE_DELAY)
                job['requeued'] += 1

    # the test's side
    def submit(self, size, runtime):
        with self.lock:
            job_id, self.next_id = self.next_id, self.next_id + 1
            self.jobs[job_id] = dict(nodes=[], state='PENDING', comment='', start_after=None, held=False, size=size,
                                     runtime=runtime, submitted=self.tick, begin=self.now(), allocated=None,
                                     addressed=None, started=None, ended=None, requeued=0)
        return job_id

    def running_instances(self):
        names = collections.Counter()
        for inst in list(self.sim.state.instances.values()):
            tag = (inst.get('freeformTags') or {}).get(_autoscale.NODE_TAG)
            if tag and inst.get('lifecycleState') == 'RUNNING':
                names[tag] += 1
        self.most_instances = max([self.most_instances] + list(names.values()))
        return names

    def fall_sick(self, again=0.25):
        """A powered-up node, idle or running a job, and not back in service within the loop's failure
        window, is drained by its health check (as slurmd's HealthCheckProgram would); with the chance
        again, its next instance falls sick too."""
        # The loop's window, and two of the service's reconciles (the loop may see the return that late).
        window = float(self.config['heal']['failure_window']) + 2 * self.config['reconcile_interval']
        now = self.now()
        with self.lock:
            up = [n for n, v in sorted(self.nodes.items(), key=lambda nv: _natural(nv[0]))
                  if (v['state'] == {'IDLE', 'CLOUD'} or (v['state'] == {'ALLOCATED', 'CLOUD'} and any(
                      j['state'] == 'RUNNING' and n in j['nodes'] for j in self.jobs.values())))
                  and now - self.healed_at.get(n, -window) >= window]
        if not up:
            return None
        name = self.rng.choice(up)
        self.drain_by_checks(name, 'ocigpu-health: xid 79 (sick in the soak)')
        self.sick_since.setdefault(name, self.tick)
        if self.rng.random() < again:
            self.sick_again.add(name)
        return name

    def step(self):
        """One pass of slurmctld: scheduling, registration, timers."""
        if not self.answering:
            return
        now = self.now()
        resume, resume_jobs, suspend, failed = [], [], [], []
        running = self.running_instances()
        with self.lock:
            for job_id, job in sorted(self.jobs.items()):
                if job['state'] != 'PENDING' or job['held'] or job['begin'] > now:
                    continue
                free = sorted((n for n, v in self.nodes.items() if v['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}),
                              key=_natural)
                if len(free) < job['size']:
                    continue
                mine = free[:job['size']]
                job.update(state='CONFIGURING', nodes=mine, allocated=self.tick, addressed=None)
                for n in mine:
                    self.nodes[n].update(state={'IDLE', 'CLOUD', 'POWERING_UP'}, reason='')
                    self.t[n].update(since=now, addr_at=None)
                resume.extend(mine)
                resume_jobs.append(dict(job_id=job_id, nodes=compress_hostlist(mine)))
            for n, v in self.nodes.items():
                t = self.t[n]
                if 'POWERING_UP' in v['state']:
                    if t['addr_at'] is not None and now - t['addr_at'] >= self.register_delay and n in running:
                        held = any(j['state'] == 'CONFIGURING' and n in j['nodes'] for j in self.jobs.values())
                        v['state'] = {'ALLOCATED', 'CLOUD'} if held else {'IDLE', 'CLOUD'}
                        t['since'] = now
                        if n in self.sick_again and not held:
                            # The new instance is sick too: its first health check drains it.
                            self.sick_again.discard(n)
                            v['state'] = v['state'] | {'DRAIN'}
                            v['reason'] = 'ocigpu-health: xid 79 (sick again in the soak)'
                            self.sick_since[n] = self.tick
                            self.events['new instances fallen sick again'] += 1
                    elif now - t['since'] >= self.resume_timeout:
                        v.update(state={'DOWN', 'CLOUD', 'POWERED_DOWN'}, reason='ResumeTimeout reached', addr=None)
                        self._requeue(n)
                        failed.append(n)
                elif 'POWERING_DOWN' in v['state'] and now - t['since'] >= self.suspend_timeout:
                    v['state'] = (v['state'] - {'POWERING_DOWN'}) | {'POWERED_DOWN'}
                elif v['state'] - {'DRAIN'} == {'IDLE', 'CLOUD'} and now - t['since'] >= self.suspend_time:
                    # A drained idle node is powered down too (and keeps its drain).
                    v['state'] = v['state'] | {'POWERING_DOWN'}
                    t['since'] = now
                    suspend.append(n)
            for job in self.jobs.values():
                if job['state'] == 'CONFIGURING':
                    if job['addressed'] is None and all(self.nodes[n]['addr'] for n in job['nodes']):
                        job['addressed'] = self.tick
                    if all(self.nodes[n]['state'] == {'ALLOCATED', 'CLOUD'} for n in job['nodes']):
                        job.update(state='RUNNING', started=now, started_tick=self.tick)
                elif job['state'] == 'RUNNING' and now - job['started'] >= job['runtime']:
                    job.update(state='COMPLETED', ended=now)
                    for n in job['nodes']:
                        self.nodes[n]['state'] = {'IDLE', 'CLOUD'} | (self.nodes[n]['state'] & {'DRAIN'})
                        self.t[n]['since'] = now
            for n in list(self.sick_since):
                v = self.nodes[n]['state']
                # A failed new instance is handed back with the autoscaler's reason, undrained until the
                # loop's next look drains it: not back in service.
                schedulable = not v & {'DRAIN', 'DOWN', 'POWERING_UP', 'POWERING_DOWN'} and (
                    'POWERED_DOWN' in v or n in running) and not self.nodes[n]['reason']
                if schedulable:
                    self.back_in_service.append(self.tick - self.sick_since.pop(n))
                    self.healed_at[n] = now
        if resume:
            self.program('resume', resume, resume_jobs)
        if suspend:
            self.program('suspend', suspend)
        if failed:
            self.program('resume-fail', failed)

    def quiet(self):
        """Every job ended or held, every node powered down. A node DOWN after ResumeTimeout is not quiet:
        the service's next reconcile returns it to service (one that stays DOWN ends the soak at its
        last tick, in the figure nodes_left_down)."""
        with self.lock:
            return (all(j['state'] == 'COMPLETED' or j['held'] for j in self.jobs.values())
                    and all(v['state'] - {'DRAIN'} == {'IDLE', 'CLOUD', 'POWERED_DOWN'} for v in self.nodes.values()))


def billable(sim):
    cns = [c for c in sim.state.cluster_networks.values() if c.get('lifecycleState') not in ('TERMINATED', 'TERMINATING')]
    gpus = [i for i in sim.state.instances.values() if i.get('shape') == SHAPE
            and i.get('lifecycleState') not in ('TERMINATED', 'TERMINATING')]
    return len(cns) + len(gpus)


ROUTES = ['GET /clusterNetworks', 'POST /clusterNetworks', 'GET /workRequests/{workRequestId}',
          'GET /clusterNetworks/{clusterNetworkId}', 'GET /clusterNetworks/{clusterNetworkId}/instances',
          'PUT /instances/{instanceId}', 'POST /clusterNetworks/{clusterNetworkId}/actions/terminate',
          'DELETE /clusterNetworks/{clusterNetworkId}']


HEAL = dict(enabled=True, max_at_once=2, max_per_hour=8, min_in_service_share=0.5, max_failures=2, failure_window=3600)


def watch_resumes(svc):
    """The jobs whose resumes the service carried out at the same time (a job resumed twice at once): {job ids}.
    What is watched is the work on OCI and Slurm of a group (Service._resume_group), after its wait for an
    earlier resume of the same job."""
    lock, at_work, twice = threading.Lock(), collections.Counter(), set()
    carry_out = svc._resume_group  # pylint: disable=protected-access

    def watched(job_ids, *args):
        with lock:
            twice.update(j for j in job_ids if at_work[j])
            at_work.update(job_ids)
        try:
            return carry_out(job_ids, *args)
        finally:
            with lock:
                at_work.subtract(job_ids)
    svc._resume_group = watched  # pylint: disable=protected-access
    return twice


def shortfall(sim, rng, ads):
    """A capacity shortfall: the shape's hosts in every AD (one source), or in one AD of several."""
    if len(ads) < 2:
        sim.capacity.set(SHAPE, rng.randint(1, 4))
    else:
        sim.capacity.set(SHAPE, rng.randint(0, 4), rng.choice(ads))


def run_soak(sim, config, cycles=200, seed=1, tick=5.0, out=sys.stdout, max_ticks=None, heal=False):
    """Run the soak; returns the figures (a dict)."""
    rng = random.Random(seed)
    ads = sorted(set(s['availability_domain'] for s in config['capacity_sources']))
    conf = dict(config, service=True, scontrol_retry_seconds=2, reconcile_interval=30, takeover_after=20)
    if heal:
        conf['heal'] = dict(HEAL)
    setup_logging(conf['log_file'])
    model = SlurmModel(conf['node_names'], sim, conf, rng)
    slurm = service.Slurm(conf, run=model.run, read=model.read, sleep=lambda s: time.sleep(0.005))
    svc = service.Service(conf, _autoscale.Autoscaler, slurm, clock=sim.clock.now)
    twice = watch_resumes(svc)
    faults = collections.Counter()
    steps = collections.Counter()
    submitted, ticks, restart_left, started = 0, 0, 0, time.monotonic()
    max_ticks = max_ticks or cycles * 60 + 2000
    while ticks < max_ticks:
        ticks += 1
        model.tick = ticks
        # Faults go on until every job has ended (or is held); then the soak drains.
        draining = submitted >= cycles and all(j['state'] == 'COMPLETED' or j['held'] for j in model.jobs.values())
        if submitted < cycles and rng.random() < 0.5:
            model.submit(rng.choice([1, 1, 2, 2, 4]), rng.uniform(60, 600))
            submitted += 1
        if not draining:
            model.kill_program = 0.08
            r = rng.random()
            if r < 0.05:
                sim.faults.throttle(route=rng.choice(ROUTES), count=rng.randint(1, 3))
                faults['429 answers'] += 1
            elif r < 0.09:
                sim.faults.error(rng.choice([500, 502, 503, 504]), route=rng.choice(ROUTES), count=rng.randint(1, 2))
                faults['5xx answers'] += 1
            r = rng.random()
            if r < 0.02:
                shortfall(sim, rng, ads)
                faults['capacity shortfalls'] += 1
            elif r < 0.06:
                sim.capacity.set(SHAPE, None)
            if heal and rng.random() < 0.02 and model.fall_sick():
                faults['nodes fallen sick'] += 1
            if restart_left == 0 and rng.random() < 0.01:
                model.answering, restart_left = False, rng.randint(1, 3)
                faults['slurmctld restarts'] += 1
        else:
            model.kill_program = 0.0
            sim.capacity.set(SHAPE, None)
            sim.faults.clear()
        if restart_left:
            restart_left -= 1
            model.answering = restart_left == 0
        model.step()
        svc.pick_up()
        if svc.last_reconcile is None or sim.clock.now() - svc.last_reconcile >= conf['reconcile_interval']:
            steps.update(dict((k, len(v)) for k, v in svc.reconcile().get('heal', {}).items()))
        sim.clock.advance(tick)
        time.sleep(0.01)
        if draining and model.quiet() and not svc.waiting() and not svc.active and billable(sim) == 0:
            break
    svc.wait(60)
    faults.update(model.events)
    jobs = list(model.jobs.values())
    done = [j for j in jobs if j['state'] == 'COMPLETED']
    beyond = [tick * ((j['started_tick'] - j['submitted']) - ((j['addressed'] or j['started_tick']) - j['allocated']))
              for j in done]
    fig = dict(
        cycles=cycles, seed=seed, ticks=ticks, real_seconds=round(time.monotonic() - started, 1),
        jobs_submitted=len(jobs), jobs_completed=len(done), jobs_held=sum(1 for j in jobs if j['held']),
        jobs_requeued=sum(1 for j in jobs if j['requeued']),
        slowest_wait_beyond_provisioning_s=round(max(beyond), 1) if beyond else None,
        median_wait_beyond_provisioning_s=round(sorted(beyond)[len(beyond) // 2], 1) if beyond else None,
        nodes_left_down=sorted(n for n, v in model.nodes.items() if 'DOWN' in v['state']),
        billable_left=billable(sim), faults=dict(faults),
        cluster_networks_created=sim.calls['POST /clusterNetworks'],
        jobs_held_for_capacity=sum(1 for j in jobs if j['held'] and 'capacity' in (j['comment'] or '').lower()),
        jobs_resumed_twice_at_once=sorted(twice))
    if len(config['capacity_sources']) > 1:
        state = svc.state.read()
        fig.update(sources=len(config['capacity_sources']), stock_outs=state.get('stock_outs') or {},
                   resumes_in_a_later_source=sum(1 for line in open(conf['log_file']) if ', running in ad-' in line
                                                 and ': done:' not in line and 'waiting' not in line))
    if heal:
        back = sorted(tick * b for b in model.back_in_service)
        fig.update(
            heal_steps=dict(steps), heal_back_in_service=len(back),
            heal_median_drain_to_service_s=round(back[len(back) // 2], 1) if back else None,
            heal_slowest_drain_to_service_s=round(back[-1], 1) if back else None,
            heal_left_drained=sorted((n for n, v in model.nodes.items() if 'DRAIN' in v['state']), key=_natural),
            instances_for_one_node_max=model.most_instances)
    out.write(json.dumps(fig, indent=1, sort_keys=True) + '\n')
    flag = (' --heal' if heal else '') + (' --sources %d' % len(config['capacity_sources'])
                                          if len(config['capacity_sources']) > 1 else '')
    out.write('reproduce: python -m tests.perf.autoscale_soak --cycles %d --seed %d%s\n' % (cycles, seed, flag))
    return fig


def setup(sim, work, sources=1):
    """The network, node templates and configuration the autoscaler needs, in a fresh simulator: with
    sources > 1, one on-demand capacity source per AD of the simulator."""
    # pylint: disable=import-outside-toplevel
    from tests.unit.controller.test_autoscale import autoscaler_config
    from tests.unit.controller.test_autoscale_failover import template
    config = autoscaler_config(sim, 'soak', 'gpu-[1-16]', os.path.join(work, 'state'), os.path.join(work, 'autoscaler.log'))
    if sources < 2:
        return config
    ads = sorted(sim.availability_domains)[:sources]
    return _autoscale.check_config(dict(config, capacity_sources=[
        dict(name='ad-%d' % (i + 1), kind='on-demand', availability_domain=ad, capacity_reservation_id=None,
             instance_configuration_id=config['instance_configuration_id'] if i == 0 else
             template(sim, ad, config['instance_configuration_id'])) for i, ad in enumerate(ads)]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--cycles', type=int, default=200)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--heal', action='store_true', help='the self-healing loop on, with sick nodes among the faults')
    parser.add_argument('--sources', type=int, default=1,
                        help='capacity sources, one per availability domain of the simulator (default 1: as before)')
    parser.add_argument('--work', default=None, help='folder for the state and autoscaler.log (default: a new temporary one)')
    args = parser.parse_args(argv)
    import types  # pylint: disable=import-outside-toplevel
    import oci  # pylint: disable=import-outside-toplevel
    from tests.ocisim import Simulator  # pylint: disable=import-outside-toplevel
    work = args.work or tempfile.mkdtemp(prefix='ocigpu-soak-')
    sim = Simulator(manual_clock=True, availability_domains=args.sources if args.sources > 1 else None)
    sim.start()
    try:
        sim.write_config(os.path.join(work, 'oci-config'))
        fake_time = types.SimpleNamespace(time=sim.clock.now, sleep=sim.clock.advance, monotonic=sim.clock.now)
        oci.waiter.time = fake_time
        oci.retry.retry.time = fake_time
        _oci.CLOCK.sleep, _oci.CLOCK.monotonic = sim.clock.sleep, sim.clock.now
        _autoscale.epoch_seconds = sim.clock.now  # the cooldowns on the simulator's clock
        fig = run_soak(sim, setup(sim, work, args.sources), cycles=args.cycles, seed=args.seed, heal=args.heal)
        sys.stdout.write('log: %s\n' % os.path.join(work, 'autoscaler.log'))
    finally:
        sim.stop()
    return 0 if not fig['nodes_left_down'] and fig['billable_left'] == 0 and not fig['jobs_resumed_twice_at_once'] else 1


if __name__ == '__main__':
    sys.exit(main())
