# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burst benchmark of the on-demand cluster: N nodes resumed at once for a mix of jobs, through the real
control plane, against the OCI simulator throttling per operation and running out of hosts.

    .venv/bin/python -m tests.perf.burst_bench --nodes 10,100,1000 [--provision-s 120] [--rate 10]

For each N: N/10 jobs of 8 nodes and N/5 jobs of 1 node (100 x 8 + 200 x 1 at 1,000), submitted over
--spread seconds (default 0.06 s per node: a minute at 1,000). Real time throughout.

What runs for real, each in a process of its own:

- the autoscaler service (``ocigpu-slurm-autoscaler service``: controller/ocigpu_control/programs.py's main),
  with its configuration file as the slurm_autoscaler role writes it (pull path and topology.conf on);
- the resume and suspend programs, run by the model of slurmctld as slurmctld runs them: one process
  per power-save pass with the pass's hostlist, and for a resume the resume file in SLURM_RESUME_FILE
  (``all_nodes_resume`` and ``jobs`` with ``job_id``, ``nodes_alloc``, ``nodes_resume``...);
- the pull server (``ocigpu-slurm-autoscaler pull-server``) over TLS on 127.0.0.1, deciding each join
  with the OCI API (the simulator);
- the nodes: one process whose threads are the nodes' pull client (roles/slurm_autoscaler/files/ocigpu_pull.py:
  Controller, pinned to the certificate, the join from a privileged source port, its retry() with the
  program's attempts and delays, report_failure()), each connecting from its own VNIC address (the
  subnet is 127.64.0.0/16, so the pull server's address check is the real one). What the node does
  after the join (the roles' run, the health checks, slurmd) is a stand-in: --configure-s seconds, then
  the node registers with the model of slurmctld.

The simulator (tests/ocisim, real clock) creates a cluster network in --provision-s seconds, answers
429 TooManyRequests beyond --rate calls a second per operation (burst 2 x rate), answers the first
--stockouts creates with 500 InternalError "Out of host capacity." as OCI does, and has --short hosts
fewer than N until the first cluster network whose work request fails "Out of host capacity." (OCI's
other way of saying it); then the hosts come back. A job whose resume failed is requeued by the
service with its back-off (--backoff, the service's retry_backoff: 10, 20, 40 s here, not its 60, 120...).
With --pull-failures K, the stand-in run of the last K nodes fails once (their next instance's succeeds):
the node reports it (POST /v1/failed) and the service hands it back to Slurm, which requeues the job.

slurmctld is the model of tests/unit/plugins/module_utils/fakeslurm.py with a scheduler and the timers
of power saving; ``scontrol`` and ``squeue`` are stand-in programs that ask it over a Unix socket, so the
service runs them as processes, as it runs Slurm's. What the model leaves out: slurmctld's own cost
(each command is answered at once, with no RPC queue, no lock contention with the scheduler, no
slurmd registrations or TreeWidth fan-out); the restart a ``scontrol reconfigure`` makes since Slurm
23.11 (counted here, but nothing waits on it); ResumeRate (the role's default is 0, no limit) and
the power-save thread's interval (the model runs a pass every 0.5 s, and each pass calls the resume
program once with all the nodes allocated since the last); the scheduler's own time (backfill,
priorities; a job is allocated in the first pass with enough powered-down nodes); the resume file's
fields beyond the job's id and nodes; topology-aware placement (topology.conf is counted, not read);
and ResumeTimeout, SuspendTime and SuspendTimeout are a few seconds, not minutes.

Figures, for each N:

- controller overhead: submission -> every node's join accepted, less the simulated provisioning (the
  create time, and --boot-s of node boot): for the whole burst (from the first submission) and per job
  (slowest, median; the jobs that met a stock-out are counted apart); and submission -> resume program
  called (slurmctld's part);
- OCI calls per node by operation (resume side and release side) and the 429s met by operation (the
  service and the pull server ride them out with the ThrottledRetrier of plugins/module_utils/_oci.py:
  a pause per operation, decorrelated jitter, no attempt used up; no Retry-After from OCI);
- the pull server: p50/p99 of the bundle and of the join (each successful request, as the node timed
  it), the tries that failed (connections refused or cut) and the 503s it gave when OCI failed it;
- scontrol calls by kind, reconfigures, topology.conf rewrites;
- the service's and the pull server's CPU seconds and peak memory (VmHWM), from /proc;
- nodes left DOWN and billable resources left at the end (goal 0 each).

The bench needs root (a join comes from a privileged source port) and writes only under its work folder.
"""
from __future__ import annotations

import argparse
import collections
import http.client
import importlib.util
import json
import multiprocessing
import os
import re
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import types

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PATHS = [os.path.join(_ROOT, '.build', 'collections'), os.path.join(_ROOT, 'controller')]
sys.path[:0] = [p for p in _PATHS if p not in sys.path]

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci  # noqa: E402
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import _natural, compress_hostlist  # noqa: E402
from ocigpu_control import scaler as _scaler  # noqa: E402
from tests.unit.plugins.module_utils.fakeslurm import FakeSlurm  # noqa: E402

SHAPE = 'BM.GPU4.8'
SUBNET = '127.64.0.0/16'
PROGRAM = 'import sys; from ocigpu_control.programs import main; sys.exit(main())'
OUT_OF_CAPACITY = 'Out of host capacity.'
REQUEUE_DELAY = 121
_PULL_PATH = os.path.join(_ROOT, 'roles', 'slurm_autoscaler', 'files', 'ocigpu_pull.py')

STANDIN = '''#!%s -S
"""Stand-in for %s: asks the burst benchmark's model of slurmctld over a Unix socket."""
import json, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(%r)
sock.sendall(json.dumps(sys.argv).encode() + b"\\n")
data = b""
while True:
    chunk = sock.recv(65536)
    if not chunk:
        break
    data += chunk
answer = json.loads(data.decode())
sys.stdout.write(answer["out"])
sys.exit(answer["status"])
'''


# slurmctld ---------------------------------------------------------------------------------------

class Slurmctld(FakeSlurm):
    """FakeSlurm with a scheduler, the timers of power saving and the programs run as slurmctld runs
    them; see the module's docs for what it leaves out."""

    def __init__(self, names, bench):
        super(Slurmctld, self).__init__(names)
        self.bench = bench
        self.since = dict((n, 0.0) for n in names)
        self.kinds = collections.Counter()
        self.programs = []     # (action, started, seconds, exit status, node count)
        self.program_threads = []
        self.stop = threading.Event()
        self.next_id = 1
        self.registered = {}   # name -> time its slurmd registered
        self.hold_idle = True  # until the burst is over, idle nodes are not suspended (the release is measured apart)

    # the scontrol and squeue the service runs
    def answer(self, argv):
        prog = os.path.basename(argv[0])
        args = argv[1:]
        if prog == 'squeue':
            self.kinds['squeue'] += 1
            return self.read(['squeue'] + args)
        if args[:3] == ['-o', 'show', 'node']:
            self.kinds['show node'] += 1
            return self.read(['scontrol'] + args)
        kind = args[0] if args[0] in ('reconfigure', 'hold') else ' '.join(
            sorted(a.split('=', 1)[0] for a in args[1:] if a.split('=', 1)[0] not in ('nodename', 'reason', 'nodehostname')))
        self.kinds[kind] += 1
        return self.run(['scontrol'] + args), ''

    def run(self, argv):
        args = dict(a.split('=', 1) for a in argv[2:] if '=' in a)
        status = super(Slurmctld, self).run(argv)
        if status or argv[1] != 'update':
            return status
        now = time.time()
        forced = []
        with self.lock:
            if 'jobid' in args and self.jobs[int(args['jobid'])]['start_after'] is not None:
                job = self.jobs[int(args['jobid'])]
                job['begin'] = now + job['start_after']
                job['start_after'] = None
            elif args.get('state') == 'POWER_DOWN_FORCE':
                # slurmctld powers the nodes down: the suspend program, SuspendTimeout, then powered down.
                forced = _scaler.expand_hostlist(args['nodename'])
                for n in forced:
                    self.nodes[n]['state'] = {'IDLE', 'CLOUD', 'POWERING_DOWN'}
                    self.nodes[n]['addr'] = None
                    self.since[n] = now
                    self.registered.pop(n, None)
        if forced:
            self.program('suspend', forced)
        return status

    def _requeue(self, name):
        for job in self.jobs.values():
            if name in job['nodes'] and job['state'] in ('CONFIGURING', 'RUNNING'):
                # Slurm: a requeued batch job begins after cred_expire + 1 s (the service's starttime moves it)
                job.update(state='PENDING', nodes=[], begin=time.time() + REQUEUE_DELAY)
                job['requeued'] += 1

    # the test's side
    def submit(self, size):
        with self.lock:
            job_id, self.next_id = self.next_id, self.next_id + 1
            self.jobs[job_id] = dict(nodes=[], state='PENDING', comment='', start_after=None, held=False, size=size,
                                     submitted=time.time(), begin=0.0, resume_called=None, requeued=0, started=None,
                                     first_nodes=None)
        return job_id

    def register_node(self, name):
        """The node's slurmd started (after the stand-in run): it registers."""
        with self.lock:
            node = self.nodes[name]
            if 'POWERING_UP' not in node['state']:
                return
            held = any(j['state'] == 'CONFIGURING' and name in j['nodes'] for j in self.jobs.values())
            node['state'] = {'ALLOCATED', 'CLOUD'} if held else {'IDLE', 'CLOUD'}
            self.since[name] = time.time()
            self.registered[name] = time.time()

    def program(self, action, names, jobs=None):
        thread = threading.Thread(target=self.bench.run_program, args=(self, action, names, jobs or []), daemon=True)
        thread.start()
        self.program_threads.append(thread)

    def loop(self):
        while not self.stop.wait(0.5):
            self.step()

    def step(self):
        b = self.bench.args
        now = time.time()
        resume, resume_jobs, suspend = [], [], []
        with self.lock:
            free = sorted((n for n, v in self.nodes.items() if v['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'}), key=_natural)
            for job_id, job in sorted(self.jobs.items()):
                if job['state'] != 'PENDING' or job['held'] or job['begin'] > now or len(free) < job['size']:
                    continue
                mine, free = free[:job['size']], free[job['size']:]
                job.update(state='CONFIGURING', nodes=mine)
                job['first_nodes'] = job['first_nodes'] or list(mine)
                for n in mine:
                    self.nodes[n].update(state={'IDLE', 'CLOUD', 'POWERING_UP'}, reason='')
                    self.since[n] = now
                resume.extend(mine)
                resume_jobs.append((job_id, mine))
            for n, v in self.nodes.items():
                if 'POWERING_UP' in v['state'] and now - self.since[n] >= b.resume_timeout:
                    v.update(state={'DOWN', 'CLOUD', 'POWERED_DOWN'}, reason='ResumeTimeout reached', addr=None)
                    self._requeue(n)
                elif 'POWERING_DOWN' in v['state'] and now - self.since[n] >= b.suspend_timeout:
                    v['state'] = (v['state'] - {'POWERING_DOWN'}) | {'POWERED_DOWN'}
                elif v['state'] == {'IDLE', 'CLOUD'} and not self.hold_idle and now - self.since[n] >= b.suspend_time:
                    v['state'] = v['state'] | {'POWERING_DOWN'}
                    self.since[n] = now
                    self.registered.pop(n, None)
                    suspend.append(n)
            for job in self.jobs.values():
                if job['state'] == 'CONFIGURING' and all(self.nodes[n]['state'] == {'ALLOCATED', 'CLOUD'} for n in job['nodes']):
                    job.update(state='COMPLETED', started=now)  # no work: the burst is what is measured
                    for n in job['nodes']:
                        self.nodes[n]['state'] = {'IDLE', 'CLOUD'}
                        self.since[n] = now
        if resume:
            for job_id, _mine in resume_jobs:
                self.jobs[job_id]['resume_called'] = self.jobs[job_id]['resume_called'] or now
            self.program('resume', resume, resume_jobs)
        if suspend:
            self.program('suspend', suspend)

    def down(self):
        with self.lock:
            return sorted((n for n, v in self.nodes.items() if 'DOWN' in v['state']), key=_natural)


class StandInServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def standin_handler(model):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            argv = json.loads(self.rfile.readline().decode())
            status, out = model.answer(argv)
            self.wfile.write(json.dumps(dict(status=status, out=out)).encode())
    return Handler


# the nodes ---------------------------------------------------------------------------------------

def _load_pull_client():
    spec = importlib.util.spec_from_file_location('ocigpu_pull', _PULL_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nodes_main(conn, boot_s, configure_s, fail_names):
    """The nodes' process: one thread per node, the pull client's network path from the node's own address."""
    pull = _load_pull_client()
    _first, server, pin = conn.recv()
    local = threading.local()

    class Connection(http.client.HTTPSConnection):
        """The client's connection, from this node's address (the port the client chose is kept)."""

        def __init__(self, host, port=None, **kw):
            kw['source_address'] = (local.ip, (kw.get('source_address') or ('', 0))[1])
            super(Connection, self).__init__(host, port, **kw)

    pull.httplib = types.SimpleNamespace(HTTPSConnection=Connection, HTTPException=http.client.HTTPException)
    lock = threading.Lock()
    failed_once = set()

    def send(*msg):
        with lock:
            conn.send(msg)

    def node(name, instance_id, ip):
        local.ip = ip
        time.sleep(boot_s)
        ctl = pull.Controller(server, pin, timeout=60)
        timings, failures = {}, collections.Counter()

        def timed(what, fn):
            started = time.monotonic()
            try:
                answer = fn()
            except Exception as exc:
                failures['%s: %s' % (what, type(exc).__name__ if not isinstance(exc, pull.PullError)
                                     else re.sub(r'^.*?: (\d{3}).*$', r'HTTP \1', str(exc)))] += 1
                raise
            timings[what] = time.monotonic() - started
            return answer

        def log(message, *args):
            pass
        try:
            pull.retry(lambda: timed('bundle', lambda: ctl.request('GET', '/v1/bundle', out=os.devnull)), 30, 10, log,
                       'fetching the bundle')
            pull.retry(lambda: timed('join', lambda: ctl.request('POST', '/v1/join', privileged=True, body=dict(
                instance_id=instance_id, name=name))), 6, 10, log, 'joining')
        except pull.PullError as exc:
            send('gave_up', name, time.time(), str(exc), dict(failures))
            return
        send('joined', name, time.time(), timings, dict(failures))
        time.sleep(configure_s)
        if name in fail_names and name not in failed_once:
            failed_once.add(name)  # its next instance's run succeeds
            told = pull.report_failure(ctl, instance_id, name, 'configure failed (exit 2): stand-in', log)
            send('failed', name, time.time(), told)
        else:
            send('slurmd', name, time.time())

    while True:
        msg = conn.recv()
        if msg[0] == 'stop':
            return
        threading.Thread(target=node, args=msg[1:], daemon=True).start()


# the bench ---------------------------------------------------------------------------------------

def proc_figures(pid):
    """(CPU seconds, peak resident MiB) of a live process, from /proc."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        with open('/proc/%d/status' % pid) as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))
    except (IOError, OSError, StopIteration):
        return None, None
    tick = os.sysconf('SC_CLK_TCK')
    return round((int(fields[11]) + int(fields[12])) / float(tick), 1), round(hwm / 1024.0, 1)


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    return round(values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))], 3)


def billable(sim):
    with sim.store.lock:
        cns = [c for c in sim.store.cluster_networks.values() if c.get('lifecycleState') not in ('TERMINATED', 'TERMINATING')]
        gpus = [i for i in sim.store.instances.values() if i.get('shape') == SHAPE
                and i.get('lifecycleState') not in ('TERMINATED', 'TERMINATING')]
    return len(cns) + len(gpus)


class Bench(object):

    def __init__(self, args, n, work, out=sys.stdout):
        self.args, self.n, self.work, self.out = args, n, work, out
        self.names = ['gpu-%d' % i for i in range(1, n + 1)]
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(_PATHS + [os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep))
        self.lock = threading.Lock()
        self.joined, self.gave_up, self.failed_reports = {}, {}, {}
        self.timings = collections.defaultdict(list)
        self.failures = collections.Counter()
        self.booted = {}
        self.resume_files = 0

    def run_program(self, model, action, names, jobs):
        hostlist = compress_hostlist(sorted(names, key=_natural))
        env = dict(self.env)
        path = None
        if action == 'resume':
            with self.lock:
                self.resume_files += 1
                path = os.path.join(self.work, 'resume-%d.json' % self.resume_files)
            text = dict(all_nodes_resume=hostlist, jobs=[dict(
                extra=None, features=None, job_id=job_id, nodes_alloc=compress_hostlist(mine),
                nodes_resume=compress_hostlist(mine), oversubscribe='OK', partition='gpu', reservation=None)
                for job_id, mine in jobs])
            with open(path, 'w') as f:
                json.dump(text, f)
            env['SLURM_RESUME_FILE'] = path
        started = time.time()
        proc = subprocess.run([sys.executable, '-c', PROGRAM, '--config', self.config_path, action, hostlist], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        with model.lock:
            model.programs.append((action, started, time.time() - started, proc.returncode, len(names)))
        if path:
            os.remove(path)  # slurmctld removes it once the program has run

    def setup(self):
        from tests.ocisim import Simulator  # pylint: disable=import-outside-toplevel
        from tests.perf.pull_hostile_bench import make_files  # pylint: disable=import-outside-toplevel
        import oci  # pylint: disable=import-outside-toplevel
        a = self.args
        sim = self.sim = Simulator(manual_clock=False, durations=dict(
            cluster_network_create=a.provision_s, cluster_network_terminate=a.terminate_s, instance_terminate=a.terminate_s))
        sim.start()
        sim.write_config(os.path.join(self.work, 'oci-config'))
        _vcn, subnet = sim.seed_network(sim.compartment_id, SUBNET, name='burst')
        compute = sim.client(oci.core.ComputeClient)
        image = compute.list_images(sim.compartment_id, shape=SHAPE).data[0]
        ad = sorted(sim.availability_domains)[0]
        M = oci.core.models
        ic = sim.client(oci.core.ComputeManagementClient).create_instance_configuration(M.CreateInstanceConfigurationDetails(
            compartment_id=sim.compartment_id, display_name='burst-gpu-config',
            instance_details=M.ComputeInstanceDetails(launch_details=M.InstanceConfigurationLaunchInstanceDetails(
                compartment_id=sim.compartment_id, availability_domain=ad, shape=SHAPE,
                source_details=M.InstanceConfigurationInstanceSourceViaImageDetails(image_id=image.id),
                create_vnic_details=M.InstanceConfigurationCreateVnicDetails(subnet_id=subnet['id'], assign_public_ip=False))))).data
        sim.capacity.set(SHAPE, max(0, self.n - a.short) if a.short else None)
        files, self.pin = make_files(self.work, a.bundle_kib)
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        self.server = '127.0.0.1:%d' % port
        pull = dict(files['pull'], port=port, server=self.server, cert_sha256=self.pin,
                    log_file=os.path.join(self.work, 'pull.log'))
        topo = dict(conf=os.path.join(self.work, 'topology.conf'), inputs=os.path.join(self.work, 'topology.json'),
                    places=os.path.join(self.work, 'places.json'))
        with open(topo['inputs'], 'w') as f:
            json.dump(dict(kind='tree', placed={}, unknown=self.names), f)
        sock = os.path.join(self.work, 'slurmctld.sock')
        for prog in ('scontrol', 'squeue'):
            path = os.path.join(self.work, prog)
            with open(path, 'w') as f:
                f.write(STANDIN % (sys.executable, prog, sock))
            os.chmod(path, 0o755)
        config = dict(
            cluster_name='burst', compartment_id=sim.compartment_id, availability_domain=ad, subnet_id=subnet['id'],
            instance_configuration_id=ic.id, nodes=compress_hostlist(self.names), auth=sim.auth_args(),
            state_file=os.path.join(self.work, 'state', 'state.json'), log_file=os.path.join(self.work, 'autoscaler.log'),
            wait_timeout=3600, service=True, pull=pull, topology=topo, retry_backoff=[int(x) for x in a.backoff.split(',')],
            scontrol=os.path.join(self.work, 'scontrol'), squeue=os.path.join(self.work, 'squeue'))
        self.config_path = os.path.join(self.work, 'autoscaler.json')
        with open(self.config_path, 'w') as f:
            json.dump(config, f, indent=1)
        self.config = config
        self.model = Slurmctld(self.names, self)
        self.standin = StandInServer(sock, standin_handler(self.model))
        threading.Thread(target=self.standin.serve_forever, daemon=True).start()
        if a.stockouts:
            sim.faults.add('POST /clusterNetworks', status=500, code='InternalError', message=OUT_OF_CAPACITY,
                           count=a.stockouts)
        sim.faults.rate_limit(a.rate, 2 * a.rate, route='*')

    def start_processes(self):
        log = open(os.path.join(self.work, 'processes.out'), 'a')
        self.service = subprocess.Popen([sys.executable, '-c', PROGRAM, '--config', self.config_path, 'service'],
                                        env=self.env, stdout=log, stderr=log)
        self.pull = subprocess.Popen([sys.executable, '-c', PROGRAM, '--config', self.config_path, 'pull-server'],
                                     env=self.env, stdout=log, stderr=log)
        heartbeat = os.path.join(self.work, 'state', 'heartbeat.json')
        deadline = time.time() + 60
        while not os.path.exists(heartbeat) or not self._pull_answers():
            if time.time() > deadline or self.service.poll() is not None or self.pull.poll() is not None:
                raise RuntimeError('the service or the pull server did not start; see %s' % log.name)
            time.sleep(0.2)

    def _pull_answers(self):
        try:
            with socket.create_connection(('127.0.0.1', int(self.server.rsplit(':', 1)[1])), timeout=1):
                return True
        except OSError:
            return False

    def watch(self, conn, stop):
        """RUNNING instances that carry their Slurm name and the pull tags boot (after --boot-s)."""
        while not stop.wait(0.5):
            self.sim.store.tick()
            with self.sim.store.lock:
                vnic_of = dict((a['instanceId'], a['vnicId']) for a in self.sim.store.vnic_attachments.values())
                ready = []
                for inst in self.sim.store.instances.values():
                    tags = inst.get('freeformTags') or {}
                    if inst['id'] in self.booted or inst.get('lifecycleState') != 'RUNNING' \
                            or not tags.get(_scaler.NODE_TAG) or not tags.get(_scaler.PULL_SERVER_TAG):
                        continue
                    vnic = self.sim.store.vnics.get(vnic_of.get(inst['id']))
                    if vnic:
                        ready.append((tags[_scaler.NODE_TAG], inst['id'], vnic['privateIp']))
            for name, instance_id, ip in ready:
                self.booted[instance_id] = time.time()
                conn.send(('boot', name, instance_id, ip))

    def listen(self, conn):
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            kind, name, when = msg[0], msg[1], msg[2]
            with self.lock:
                if kind == 'joined':
                    self.joined.setdefault(name, []).append(when)
                    for what, seconds in msg[3].items():
                        self.timings[what].append(seconds)
                    self.failures.update(msg[4])
                elif kind == 'gave_up':
                    self.gave_up[name] = msg[3]
                    self.failures.update(msg[4])
                elif kind == 'failed':
                    self.failed_reports[name] = msg[3]
            if kind == 'slurmd':
                self.model.register_node(name)

    def run(self):
        a = self.args
        context = multiprocessing.get_context('fork')
        parent, child = context.Pipe()
        fail_names = set(self.names[-a.pull_failures:]) if a.pull_failures else set()
        # Forked before this process starts a thread; it learns the server and its pin in its first message.
        nodes = context.Process(target=nodes_main, args=(child, a.boot_s, a.configure_s, fail_names), daemon=True)
        nodes.start()
        self.setup()
        parent.send(('server', self.server, self.pin))
        self.start_processes()
        stop = threading.Event()
        threads = [threading.Thread(target=self.watch, args=(parent, stop), daemon=True),
                   threading.Thread(target=self.listen, args=(parent,), daemon=True),
                   threading.Thread(target=self.model.loop, daemon=True)]
        for t in threads:
            t.start()
        try:
            return self.burst(nodes, parent, stop)
        finally:
            stop.set()
            self.model.stop.set()
            for proc in (self.service, self.pull):
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(10)
            try:
                parent.send(('stop',))
            except OSError:
                pass
            nodes.join(5)
            if nodes.is_alive():
                nodes.terminate()
            self.standin.shutdown()
            self.sim.stop()

    def burst(self, nodes, conn, stop):
        a, sim, model = self.args, self.sim, self.model
        sizes = [8] * (self.n // 10) + [1] * (self.n - 8 * (self.n // 10))
        spread = a.spread if a.spread is not None else 0.06 * self.n
        sim.calls.reset()  # the setup's calls are not the burst's
        started = time.time()
        for i, size in enumerate(sizes):
            time.sleep(max(0.0, started + spread * i / max(1, len(sizes)) - time.time()))
            model.submit(size)
        submitted = time.time()
        deadline = started + a.limit
        restored = False
        failed_reports = set()
        while time.time() < deadline:
            if a.short and not restored and any(w['status'] == 'FAILED' for w in list(sim.state.work_requests.values())):
                sim.capacity.set(SHAPE, None)  # the hosts came back
                restored = True
            with model.lock:
                done = all(j['state'] == 'COMPLETED' for j in model.jobs.values())
            failed_reports = set(self.failed_reports)
            if done and set(self.joined) >= set(self.names) - failed_reports:
                break
            time.sleep(0.5)
        up_done = time.time()
        up_service, up_pull = proc_figures(self.service.pid), proc_figures(self.pull.pid)
        calls_up = sim.calls.as_dict()
        throttled_up = dict(sim.faults.throttled)
        # The release: the nodes went idle when their jobs ended; SuspendTime after now the suspend program runs.
        with model.lock:
            model.hold_idle = False
            for name in model.since:
                model.since[name] = max(model.since[name], up_done)
        while time.time() < deadline + a.release_limit:
            with model.lock:
                quiet = all(v['state'] == {'IDLE', 'CLOUD', 'POWERED_DOWN'} or 'DOWN' in v['state'] for v in model.nodes.values())
            if quiet and billable(sim) == 0 and not os.listdir(os.path.join(self.work, 'state', 'requests')):
                break
            time.sleep(0.5)
        down_done = time.time()
        service_fig, pull_fig = proc_figures(self.service.pid), proc_figures(self.pull.pid)
        for t in list(model.program_threads):
            t.join(30)
        return self.figures(started, submitted, up_done, down_done, calls_up, throttled_up, up_service, up_pull,
                            service_fig, pull_fig, spread)

    def figures(self, started, submitted, up_done, down_done, calls_up, throttled_up, up_service, up_pull,
                service_fig, pull_fig, spread):
        a, sim, model, n = self.args, self.sim, self.model, self.n
        provisioning = a.provision_s + a.boot_s
        calls = sim.calls.as_dict()
        down_calls = dict((k, v - calls_up.get(k, 0)) for k, v in calls.items() if v - calls_up.get(k, 0))
        wr_failed = [w for w in sim.state.work_requests.values() if w['status'] == 'FAILED']
        last_join = dict((name, max(times)) for name, times in self.joined.items())
        per_job, stocked, once = [], 0, []
        for job in model.jobs.values():
            names = job['first_nodes'] or []
            if job['requeued'] or any(len(self.joined.get(x, [])) > 1 for x in names):
                stocked += 1
                continue
            if names and all(x in last_join for x in names):
                per_job.append(max(last_join[x] for x in names) - job['submitted'] - provisioning)
                once.append(max(last_join[x] for x in names))
        called = [j['resume_called'] - j['submitted'] for j in model.jobs.values() if j['resume_called']]
        log_text = _read(self.config['log_file'])
        pull_text = _read(self.config['pull']['log_file'])
        steps = breakdown(model, log_text, last_join, a.provision_s)
        programs = collections.Counter(p[0] for p in model.programs)
        all_joined = max(last_join.values()) if len(last_join) == n else None
        fig = dict(
            nodes=n, jobs=len(model.jobs), spread_s=round(spread, 1), submitted_in_s=round(submitted - started, 1), provision_s=a.provision_s, boot_s=a.boot_s,
            rate_per_operation=a.rate, stockouts=a.stockouts, short_hosts=a.short,
            joined=len(last_join), gave_up=len(self.gave_up),
            submit_to_all_joined_s=round(all_joined - started, 1) if all_joined else None,
            overhead_s=round(all_joined - started - provisioning, 1) if all_joined else None,
            overhead_first_try_s=round(max(once) - started - provisioning, 1) if once else None,
            job_overhead_max_s=round(max(per_job), 1) if per_job else None,
            job_overhead_p50_s=percentile(per_job, 50), jobs_measured=len(per_job), jobs_after_a_stockout=stocked,
            submit_to_resume_program_p50_s=percentile(called, 50), submit_to_resume_program_max_s=round(max(called), 2) if called else None,
            resume_programs=programs['resume'], suspend_programs=programs['suspend'],
            program_seconds_max=round(max([p[2] for p in model.programs] or [0]), 2),
            release_s=round(down_done - up_done, 1),
            oci_calls_per_node_up=dict((k, round(v / float(n), 2)) for k, v in sorted(calls_up.items())),
            oci_calls_per_node_down=dict((k, round(v / float(n), 2)) for k, v in sorted(down_calls.items())),
            oci_calls_up=sum(calls_up.values()), oci_calls_down=sum(down_calls.values()),
            throttled_429=dict(sim.faults.throttled), throttled_429_up=sum(throttled_up.values()),
            work_requests_failed=len(wr_failed),
            cluster_networks_created=sum(1 for c in sim.state.cluster_networks.values()),
            pull_bundle_p50_s=percentile(self.timings['bundle'], 50), pull_bundle_p99_s=percentile(self.timings['bundle'], 99),
            pull_join_p50_s=percentile(self.timings['join'], 50), pull_join_p99_s=percentile(self.timings['join'], 99),
            pull_tries_failed=dict(self.failures),
            pull_refused_by_server=sum(int(x) for x in re.findall(r'connections already open: (\d+) more refused', pull_text)),
            pull_503_oci=len(re.findall(r'the OCI API failed', pull_text)),
            pull_failure_reports=len(self.failed_reports),
            scontrol_calls=dict(model.kinds), scontrol_total=sum(model.kinds.values()),
            reconfigures=model.reconfigured,
            topology_rewrites=len(re.findall(r'topology\.conf rewritten', log_text)),
            rewrites_not_reconfigured=len(re.findall(r'topology\.conf rewritten',
                                                     log_text.rsplit('slurmctld reconfigured for', 1)[-1])),
            service_cpu_s=service_fig[0], service_peak_mib=service_fig[1],
            service_cpu_s_at_all_joined=up_service[0],
            pull_cpu_s=pull_fig[0], pull_peak_mib=pull_fig[1], pull_cpu_s_at_all_joined=up_pull[0],
            nodes_left_down=model.down(), billable_left=billable(sim),
            errors_in_log=len(re.findall(r' ERROR ', log_text)))
        fig.update(steps)
        return fig


STAMP = r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \d+ \w+ '


def _stamp(match):
    return time.mktime(time.strptime(match.group(1), '%Y-%m-%d %H:%M:%S')) + int(match.group(2)) / 1000.0


def breakdown(model, log_text, last_join, provision_s):
    """Where a job's time goes, from the autoscaler's log, for the jobs resumed once: the program's
    hand-over to the service's create, the create to RUNNING seen less the provisioning (the waiter's
    polls), RUNNING to the addresses given (the instances read and labelled, scontrol), and the
    addresses to the last join (the node's boot and its pull)."""
    found = collections.defaultdict(list)
    for key, pattern in (('create', r'resume (\S+): creating cluster network'), ('running', r'resume (\S+): cluster network \S+ RUNNING'),
                         ('done', r'resume (\S+) for job [\d,]+: done:')):
        for match in re.finditer(STAMP + pattern, log_text, re.M):
            found[(key, match.group(3))].append(_stamp(match))
    parts = collections.defaultdict(list)
    for job in model.jobs.values():
        names = job['first_nodes'] or []
        what = compress_hostlist(names)
        times = [found.get((k, what)) for k in ('create', 'running', 'done')]
        if job['requeued'] or not job['resume_called'] or not all(t and len(t) == 1 for t in times) \
                or not all(n in last_join for n in names):
            continue
        create, running, done = (t[0] for t in times)
        parts['program_to_create'].append(create - job['resume_called'])
        parts['create_to_running_less_provisioning'].append(running - create - provision_s)
        parts['running_to_addresses'].append(done - running)
        parts['addresses_to_last_join'].append(max(last_join[n] for n in names) - done)
    return dict(('step_%s_p50_max_s' % k, [percentile(v, 50), round(max(v), 2)]) for k, v in parts.items())


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return ''


def retrier_text():
    r = _oci.Retrier()
    return ('ThrottledRetrier: a 429 uses up no attempt and waits out a pause per operation shared by the threads '
            '(%s-%s s, decorrelated jitter), at most %d s a call; other retryable errors %d attempts' % (
                r.base, r.cap, r.max_seconds, r.attempts))


def table(figs, out):
    rows = [
        ('jobs (8-node + 1-node), spread over', lambda f: '%d in %.0f s' % (f['jobs'], f['spread_s'])),
        ('joins accepted / gave up', lambda f: '%d / %d' % (f['joined'], f['gave_up'])),
        ('submit -> all joins accepted (s)', lambda f: f['submit_to_all_joined_s']),
        ('  less provisioning once: overhead (s)', lambda f: f['overhead_s']),
        ('  the jobs resumed once: overhead (s)', lambda f: f['overhead_first_try_s']),
        ('  per job: slowest / median overhead (s)', lambda f: '%s / %s' % (f['job_overhead_max_s'], f['job_overhead_p50_s'])),
        ('  jobs resumed again (stock-out, failed pull)', lambda f: f['jobs_after_a_stockout']),
        ('submit -> resume program: median / max (s)', lambda f: '%s / %s' % (
            f['submit_to_resume_program_p50_s'], f['submit_to_resume_program_max_s'])),
        ('  program -> create POST: median / max (s)', lambda f: '%s / %s' % tuple(f.get('step_program_to_create_p50_max_s') or ['-', '-'])),
        ('  create -> RUNNING seen, less provisioning', lambda f: '%s / %s' % tuple(
            f.get('step_create_to_running_less_provisioning_p50_max_s') or ['-', '-'])),
        ('  RUNNING -> addresses in Slurm', lambda f: '%s / %s' % tuple(f.get('step_running_to_addresses_p50_max_s') or ['-', '-'])),
        ('  addresses -> last join of the job', lambda f: '%s / %s' % tuple(f.get('step_addresses_to_last_join_p50_max_s') or ['-', '-'])),
        ('resume / suspend programs run', lambda f: '%d / %d' % (f['resume_programs'], f['suspend_programs'])),
        ('OCI calls per node, up (all operations)', lambda f: round(f['oci_calls_up'] / float(f['nodes']), 2)),
        ('OCI calls per node, release', lambda f: round(f['oci_calls_down'] / float(f['nodes']), 2)),
        ('429s met (up)', lambda f: '%d' % f['throttled_429_up']),
        ('cluster networks created / work requests failed', lambda f: '%d / %d' % (
            f['cluster_networks_created'], f['work_requests_failed'])),
        ('pull bundle p50 / p99 (s)', lambda f: '%s / %s' % (f['pull_bundle_p50_s'], f['pull_bundle_p99_s'])),
        ('pull join p50 / p99 (s)', lambda f: '%s / %s' % (f['pull_join_p50_s'], f['pull_join_p99_s'])),
        ('pull tries failed / refused by server / 503 (OCI)', lambda f: '%d / %d / %d' % (
            sum(f['pull_tries_failed'].values()), f['pull_refused_by_server'], f['pull_503_oci'])),
        ('scontrol calls (total)', lambda f: f['scontrol_total']),
        ('reconfigures / topology.conf rewrites', lambda f: '%d / %d' % (f['reconfigures'], f['topology_rewrites'])),
        ('service CPU s (at all joined / end), peak MiB', lambda f: '%s / %s, %s' % (
            f['service_cpu_s_at_all_joined'], f['service_cpu_s'], f['service_peak_mib'])),
        ('pull server CPU s (at all joined / end), peak MiB', lambda f: '%s / %s, %s' % (
            f['pull_cpu_s_at_all_joined'], f['pull_cpu_s'], f['pull_peak_mib'])),
        ('release: burst over -> nothing billable (s)', lambda f: f['release_s']),
        ('nodes left DOWN / billable left', lambda f: '%d / %d' % (len(f['nodes_left_down']), f['billable_left'])),
    ]
    width = max(len(r[0]) for r in rows)
    out.write('%-*s %s\n' % (width, 'nodes', ' '.join('%18s' % f['nodes'] for f in figs)))
    for label, get in rows:
        out.write('%-*s %s\n' % (width, label, ' '.join('%18s' % (get(f),) for f in figs)))
    ops = sorted(set().union(*[f['oci_calls_per_node_up'] for f in figs] + [f['oci_calls_per_node_down'] for f in figs]))
    out.write('\nOCI calls per node by operation (up | release), 429s met:\n')
    for op in ops:
        out.write('  %-52s %s\n' % (op, ' '.join('%18s' % ('%s | %s, %s' % (
            f['oci_calls_per_node_up'].get(op, 0), f['oci_calls_per_node_down'].get(op, 0), f['throttled_429'].get(op, 0)))
            for f in figs)))
    out.write('\nscontrol calls by kind:\n')
    for kind in sorted(set().union(*[f['scontrol_calls'] for f in figs])):
        out.write('  %-52s %s\n' % (kind, ' '.join('%18s' % f['scontrol_calls'].get(kind, 0) for f in figs)))
    out.write('\n429s: %s; the SDK\'s own retries and circuit breaker are off; the nodes retry as ocigpu_pull.py does '
              '(bundle 30 x 10 s, join 6 x 10 s)\n' % retrier_text())


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--nodes', default='10,100', help='comma-separated node counts (default 10,100)')
    parser.add_argument('--provision-s', type=float, default=120.0, help='seconds the simulator takes to create a cluster network')
    parser.add_argument('--terminate-s', type=float, default=30.0, help='seconds it takes to terminate one')
    parser.add_argument('--boot-s', type=float, default=0.0, help='seconds from RUNNING to the node\'s first request')
    parser.add_argument('--configure-s', type=float, default=2.0, help='seconds of the stand-in for the roles\' run')
    parser.add_argument('--rate', type=float, default=10.0, help='calls a second per operation before 429 (burst 2 x)')
    parser.add_argument('--stockouts', type=int, default=1, help='creates answered 500 "Out of host capacity."')
    parser.add_argument('--short', type=int, default=1, help='hosts fewer than N until a work request fails for want of them')
    parser.add_argument('--pull-failures', type=int, default=0, help='nodes whose stand-in run fails and report it')
    parser.add_argument('--spread', type=float, default=None, help='seconds over which the jobs are submitted (default 0.06 N)')
    parser.add_argument('--backoff', default='10,20,40', help='the service\'s retry_backoff: seconds before a requeued job starts again')
    parser.add_argument('--bundle-kib', type=int, default=1024)
    parser.add_argument('--suspend-time', type=float, default=5.0)
    parser.add_argument('--suspend-timeout', type=float, default=5.0)
    parser.add_argument('--resume-timeout', type=float, default=1800.0)
    parser.add_argument('--limit', type=float, default=1200.0, help='seconds for the burst at most')
    parser.add_argument('--release-limit', type=float, default=600.0, help='seconds for the release at most')
    parser.add_argument('--work', default=None, help='folder for the logs (default: a new temporary one)')
    parser.add_argument('--json', action='store_true', help='print the figures as JSON too')
    return parser


def measure(argv):
    """Run the bench with the command line argv; the figures of each node count."""
    args = arguments().parse_args(argv)
    figs = []
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    for n in [int(x) for x in args.nodes.split(',') if x]:
        work = tempfile.mkdtemp(prefix='ocigpu-burst-%d-' % n, dir=args.work)
        fig = Bench(args, n, work).run()
        fig['work'] = work
        figs.append(fig)
        sys.stderr.write('burst of %d nodes done: logs in %s\n' % (n, work))
    return args, figs


def main(argv=None):
    if os.geteuid() != 0:
        sys.exit('run as root: a join comes from a privileged source port')
    args, figs = measure(argv)
    table(figs, sys.stdout)
    if args.json:
        sys.stdout.write(json.dumps(figs, indent=1, sort_keys=True) + '\n')
    given = list(argv if argv is not None else sys.argv[1:])
    keep = [a for i, a in enumerate(given) if not a.startswith('--work') and not (i and given[i - 1] == '--work')]
    sys.stdout.write('reproduce: .venv/bin/python -m tests.perf.burst_bench %s\n' % ' '.join(keep or ['--nodes', args.nodes]))
    good = all(f['joined'] >= f['nodes'] and not f['nodes_left_down'] and f['billable_left'] == 0
               for f in figs)
    return 0 if good else 1


if __name__ == '__main__':
    sys.exit(main())
