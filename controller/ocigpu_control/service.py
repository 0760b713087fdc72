# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The autoscaler service: carries out what slurmctld's power-saving programs ask, and keeps Slurm and
OCI in step when a program, slurmctld or the service itself died on the way.

slurmctld runs its ResumeProgram, SuspendProgram and ResumeFailProgram in its own control group, so a
``systemctl restart slurmctld`` (configure.yml restarts it when slurm.conf changes) kills a resume that
waits on OCI. So the programs only write a request file into ``<state dir>/requests`` (requests.py) and
return at once;
``ocigpu-autoscaler.service`` (its own unit, as the Slurm user) carries each request out in a thread and
removes its file when done. A request whose service died is carried out again when the service starts:
a resume adopts the cluster network that carries its Slurm names (never launches twice), a suspend
finds nothing left to end.

Resumes are grouped by job: Slurm's resume file (``SLURM_RESUME_FILE``) says which of the nodes each
job waits for, and each job gets its own cluster network, made at the same time as the others. A job
whose cluster network fails (out of host capacity, API errors spent, a timeout) is the only one told:
its nodes are handed back powered down (``POWER_DOWN_FORCE``: Slurm requeues the job), the job gets
the reason in its comment and a later start time (``retry_backoff``), and after ``max_resume_attempts``
failures in a row it is held with the reason; ``scontrol release`` lets it try again. A job that
failed for want of hosts may start again as soon as this service ends a cluster network (its hosts
are free), without waiting for its back-off.

Every ``reconcile_interval`` seconds the service compares Slurm's nodes with OCI:

- nodes DOWN and powered down after a failed resume (reason ``ResumeTimeout reached`` or the
  autoscaler's own) go back to service powered down (``state=RESUME``: ``idle~``);
- nodes powering up that no request carries and that this service has not resumed (their resume
  program died before it wrote one) for ``takeover_after`` seconds get a resume from the service,
  grouped by the jobs Slurm gives them;
- a cluster network whose Slurm names are all powered down (their suspend died) is terminated;
- with ``heal`` on, a node drained by the health checks for a hardware reason gets a new instance
  (controller/ocigpu_control/heal.py).

Every outcome is one line of the autoscaler's log.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ocigpu_control.requests import heartbeat, keep_beating, submit, waiting as waiting_requests
from ocigpu_control import scaler as scaling
from ocigpu_control.scaler import ResumeFailed, _error_text, log, scontrol_address_command
from ocigpu_control.settings import scontrol_fail_command
from ocigpu_control.state import StateFile
from ocigpu_control import static as static_nodes
from ocigpu_control import decide
from ocigpu_control import heal as healing
from ocigpu_control import metrics
from ocigpu_control.heal import Healer
from ansible_collections.ocigpu.cluster.plugins.module_utils._health import write_text
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import _natural, compress_hostlist, expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import parse_show_node
from ocigpu_control.topology import add_places
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitError

# Reasons of DOWN nodes that the service returns to service: a failed resume, never a person's.
RETURN_REASONS = decide.RETURN_REASONS
# The request the pull server writes when a new node says its pull failed (controller/ocigpu_control/pull_server.py).
PULL_FAILED = 'pull_failed'


def resume_groups(names, jobs):
    """[(job ids, names)]: one group per job's nodes; jobs that share a node share a group; names no job
    asked for make one group of their own (a person's power up)."""
    groups = []
    for job in jobs:
        mine = set(n for n in expand_hostlist(job['nodes']) if n in names)
        if not mine:
            continue
        joined = [g for g in groups if g[1] & mine]
        ids, members = [job['job_id']], set(mine)
        for g in joined:
            ids = g[0] + ids
            members |= g[1]
            groups.remove(g)
        groups.append((ids, members))
    rest = set(names) - set().union(*[g[1] for g in groups]) if groups else set(names)
    if rest:
        groups.append(([], rest))
    order = dict((n, i) for i, n in enumerate(names))
    return [(sorted(set(ids)), sorted(members, key=order.get)) for ids, members in groups]


def _jobs_text(ids):
    return ' for job %s' % ','.join(str(i) for i in ids) if ids else ''


class Slurm(object):
    """slurmctld through scontrol and squeue. `run(argv)` returns the exit status, `read(argv)` the
    exit status and output; commands that cannot reach slurmctld (restarting) are tried again."""

    def __init__(self, config, run, read, sleep=time.sleep):
        self.scontrol = config['scontrol']
        self.squeue = config['squeue']
        self.retry_seconds = float(config['scontrol_retry_seconds'])
        self._run = run
        self._read = read
        self._sleep = sleep

    def command(self, argv, retry=True):
        """Run argv until it succeeds or retry_seconds pass (once with retry=False); the last exit status."""
        deadline = time.monotonic() + (self.retry_seconds if retry else 0)
        delay = 1.0
        while True:
            status = self._run(argv)
            if status == 0 or time.monotonic() >= deadline:
                return status
            self._sleep(delay)
            delay = min(delay * 2, 15.0)

    def set_addresses(self, mapping):
        """Every node's address and host name in one command (one slurmctld RPC whatever the job's size)."""
        return self.command(scontrol_address_command(self.scontrol, mapping)) if mapping else 0

    def power_down(self, hostlist, reason):
        return self.command(scontrol_fail_command(self.scontrol, hostlist, reason))

    def return_to_service(self, hostlist):
        return self.command([self.scontrol, 'update', 'nodename=%s' % hostlist, 'state=RESUME'])

    def tell_job(self, job_id, comment, start_after=None, hold=False):
        status = self.command([self.scontrol, 'update', 'jobid=%s' % job_id, 'comment=%s' % comment[:250]])
        if hold:
            status = self.command([self.scontrol, 'hold', str(job_id)]) or status
        elif start_after:
            status = self.command([self.scontrol, 'update', 'jobid=%s' % job_id,
                                   'starttime=now+%d' % int(start_after)]) or status
        return status

    def nodes(self, hostlist):
        """{name: Node} (module_utils/_slurm.py) from `scontrol -o show node`; None when slurmctld does not answer."""
        status, out = self._read([self.scontrol, '-o', 'show', 'node', hostlist])
        if status != 0:
            return None
        return parse_show_node(out)

    def jobs_on(self, names):
        """[{'job_id', 'nodes'}] of the pending or configuring jobs that hold any of the names."""
        status, out = self._read([self.squeue, '-h', '-t', 'CF,PD', '-o', '%i %N'])
        if status != 0:
            return []
        jobs = []
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                mine = [n for n in expand_hostlist(parts[1]) if n in names]
                if mine:
                    jobs.append(dict(job_id=int(parts[0]), nodes=compress_hostlist(mine)))
        return jobs


class Service(object):
    """The requests of one state folder, carried out in threads, and the periodic reconcile."""

    def __init__(self, config, scaler_factory, slurm, clock=time.monotonic):
        self.config = config
        self.scaler_factory = scaler_factory
        self.slurm = slurm
        self.clock = clock
        self.active = {}        # request id -> set of names it works on
        self.threads = []
        self.lock = threading.Lock()
        self.resumes_done = threading.Condition(self.lock)
        self.resuming = {}       # job id -> the group (its names) whose resume is at work for the job
        self.superseded = set()  # ids of the groups at work whose job got a newer resume meanwhile
        self.powering_seen = {}  # name -> when the reconcile first saw it powering up with no request
        self.resumed = set()     # names this service resumed that may still be booting (not taken over)
        self.last_reconcile = None
        self.last_heal = None
        self.reconfigure_for = []    # (what, placements or None) the next batch is for
        self.reconfigure_thread = None
        self.metrics_failed = False
        self.hosts_free = {}        # reservation source name -> hosts free (reserved - used), read at each reconcile
        self.hosts_free_failed = set()  # sources whose reservation could not be read (logged once)
        self.state = StateFile(config['state_file'])
        self.healer = Healer(config, slurm, self.state, clock=self.clock,
                             submit=lambda action, name, **extra: submit(config, action, name, source='heal', **extra),
                             carriers=self._carriers, more_metrics=self.metrics_text)

    # requests
    def waiting(self):
        """The request files, oldest first: [(id, path)]."""
        return waiting_requests(self.config)

    def busy_names(self):
        """Names of the requests being carried out or waiting."""
        with self.lock:
            names = set().union(*self.active.values()) if self.active else set()
            known = set(self.active)
        for rid, path in self.waiting():
            if rid in known:
                continue
            try:
                with open(path) as f:
                    names |= set(expand_hostlist(json.load(f)['nodes']))
            except (IOError, OSError, ValueError, KeyError, InputError):
                continue
        return names

    def pick_up(self):
        """Start a thread for each request not yet started; returns how many started.

        A resume waits for the suspends and resume-fails of its names made before it: Slurm powered
        those nodes down and up again, so the old cluster network is ended before a new one is made
        (run together, the suspend would end what the resume adopts). A suspend made after a resume runs
        at once: it ends a cluster network on its way up for a job that is gone."""
        started = 0
        earlier = []  # (action, names) of the requests before this one, oldest first
        for rid, path in self.waiting():
            try:
                with open(path) as f:
                    request = json.load(f)
                names = set(expand_hostlist(request['nodes']))
            except (IOError, OSError, ValueError, KeyError, InputError) as exc:
                log.error('request %s unreadable (%s); removed', rid, exc)
                self._remove(path)
                continue
            blocked = request['action'] == 'resume' and any(
                action != 'resume' and names & other for action, other in earlier)
            earlier.append((request['action'], names))
            with self.lock:
                if rid in self.active or blocked:
                    continue
                self.active[rid] = names
            thread = threading.Thread(target=self._carry_out, args=(rid, path, request), name=rid)
            thread.daemon = True
            thread.start()
            self.threads.append(thread)
            started += 1
        self.threads = [t for t in self.threads if t.is_alive()]
        return started

    @staticmethod
    def _remove(path):
        try:
            os.remove(path)
        except OSError:
            pass

    def _carry_out(self, rid, path, request):
        try:
            if request['action'] == 'resume':
                self.resume(request)
            elif request['action'] == PULL_FAILED:
                self.pull_failed(request)
            elif request['action'] == 'replace':
                self.replace_static(request)
            else:
                self.suspend(request)
        except Exception as exc:  # pylint: disable=broad-except
            log.exception('%s %s (request %s): unexpected error: %s', request.get('action'), request.get('nodes'),
                          rid, _error_text(exc))
        finally:
            self._remove(path)
            with self.lock:
                self.active.pop(rid, None)

    def wait(self, timeout=None):
        """Wait for the started requests to end, and for the reconfigure they asked for (tests and `--once`)."""
        for thread in list(self.threads):
            thread.join(timeout)
        with self.lock:
            thread = self.reconfigure_thread
        if thread is not None:
            thread.join(timeout)

    # resume
    def resume(self, request):
        names = expand_hostlist(request['nodes'])
        groups = resume_groups(names, request.get('jobs') or [])
        if len(groups) > 1:
            log.info('resume %s: %d group(s) by job: %s', request['nodes'], len(groups),
                     '; '.join('%s%s' % (compress_hostlist(n), _jobs_text(j)) for j, n in groups))
        threads = [threading.Thread(target=self.resume_group, args=(ids, members), name='%s:%s' % (request['id'], i))
                   for i, (ids, members) in enumerate(groups)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def resume_group(self, job_ids, names):
        """Resume one job's nodes. A job is resumed by one group at a time: Slurm may give up on a resume
        (ResumeTimeout: the nodes resume-failed, the job requeued, perhaps on other nodes) while the service
        still carries it out; the job's newer resume waits for that one to end, and that one's failure is
        then not the job's (no attempt counted, no comment, its nodes are Slurm's already)."""
        what = compress_hostlist(names)
        group = object()
        with self.resumes_done:
            self.superseded.update(id(self.resuming[j][0]) for j in job_ids if j in self.resuming)
            while any(j in self.resuming for j in job_ids):
                self.resumes_done.wait()
            self.resuming.update((j, (group, what)) for j in job_ids)
        try:
            return self._resume_group(job_ids, what, group)
        finally:
            with self.resumes_done:
                for job_id in job_ids:
                    if self.resuming.get(job_id, (None,))[0] is group:
                        del self.resuming[job_id]
                self.superseded.discard(id(group))
                self.resumes_done.notify_all()

    def _superseded(self, job_ids, group, what, message):
        """Whether the group's jobs got a newer resume while it failed; if so, say so (the failure is left alone)."""
        with self.lock:
            if id(group) not in self.superseded:
                return False
        newer = sorted(set(self._waiting_resumes(job_ids)) - {what})
        log.warning('resume %s%s: failed after the job got a newer resume (%s): %s; the job and these nodes are '
                    'left to it and to Slurm (no attempt counted)', what, _jobs_text(job_ids),
                    ', '.join(newer) or 'waiting', message)
        self.state.update(lambda state: metrics.count_resume(state, 'failed'))
        return True

    def _waiting_resumes(self, job_ids):
        """The names of the resume requests waiting or at work that carry any of the jobs."""
        found = []
        for _rid, path in self.waiting():
            try:
                with open(path) as f:
                    request = json.load(f)
            except (IOError, OSError, ValueError):
                continue
            if request.get('action') == 'resume' and any(j.get('job_id') in job_ids for j in request.get('jobs') or []):
                found.append(request['nodes'])
        return found

    def _resume_group(self, job_ids, what, group):
        jobs = _jobs_text(job_ids)
        try:
            scaler = self.scaler_factory(self.config)
            mapping = scaler.resume(what)
        except (ResumeFailed, InputError, WaitError, _oci.OCIConfigError, _oci.ServiceError) as exc:
            message = getattr(exc, 'message', None) or _error_text(exc)
            if isinstance(exc, ResumeFailed):
                log.info('resume %s: failure details %s', what, json.dumps(exc.details, default=str))
            if self._superseded(job_ids, group, what, message):
                return False
            if isinstance(exc, ResumeFailed):
                self._failed(what, job_ids, message, exc.outcome, capacity=exc.details if exc.details.get('capacity') else None)
            else:
                self._failed(what, job_ids, message, ResumeFailed.LEFT)
            return False
        with self.lock:
            self.resumed.update(m['name'] for m in mapping)
        status = self.slurm.set_addresses(mapping)
        self._forget_attempts(job_ids)
        notes = getattr(scaler, 'capacity_notes', None)
        if notes:
            # Another source than the first one: the job's comment says which were tried and where it runs.
            comment = '%s: %s' % (self.config['resume_fail_reason_prefix'], '; '.join(notes))
            for job_id in job_ids:
                self.slurm.tell_job(job_id, comment)
        self.state.update(lambda state: metrics.count_resume(state, 'done'))
        log.info('resume %s%s: done: %s%s', what, jobs, ', '.join('%s=%s' % (m['name'], m['private_ip']) for m in mapping),
                 '' if not status else '; telling slurmctld the addresses failed (scontrol exited %s)' % status)
        self._node_setup(mapping)
        self._place(scaler, what + jobs, mapping)
        return True

    def _place(self, scaler, what, mapping):
        """Put the nodes where OCI placed them in topology.conf (config ``topology``): their hosts are read
        here (the shared listing of compute hosts), the file is written by the next batch (``_reconfigure``)
        with every placement of its ``reconfigure_delay`` seconds. A node whose host cannot be read stays in
        the switch unknown."""
        topo = self.config.get('topology') or {}
        if not topo.get('conf'):
            return
        try:
            found = scaler.places(mapping)
        # The nodes are up whatever happens here: their place is worth a warning, never a failed resume.
        except Exception as exc:  # pylint: disable=broad-except
            log.warning('topology %s: not updated (%s); the nodes stay in the switch unknown', what, _error_text(exc))
            return
        lost = sorted(set(m['name'] for m in mapping) - set(found))
        log.info('topology %s: %s%s', what,
                 ', '.join('%s in local block %s' % (n, found[n][2][-8:]) for n in sorted(found, key=_natural)) or 'no host found',
                 '; host not found for %s (left in the switch unknown)' % compress_hostlist(lost) if lost else '')
        if found:
            self._reconfigure_soon(what, found)

    def _reconfigure_soon(self, what, found=None):
        """topology.conf written once, and one ``scontrol reconfigure``, for the placements (``found``) and
        the other changes (a static node's new address in nodes.conf) of the next ``reconfigure_delay`` seconds.

        Since Slurm 23.11 a reconfigure restarts slurmctld, which answers no one meanwhile; the groups of
        one resume end within seconds of each other, and one restart each kept squeue, the jobs' comments
        and the other groups' ``scontrol update`` waiting for tens of seconds. Rendered once per group, the
        file cost N x groups bytes written for a burst."""
        with self.lock:
            self.reconfigure_for.append((what, found))
            if self.reconfigure_thread is not None:
                return
            thread = self.reconfigure_thread = threading.Thread(target=self._reconfigure, name='reconfigure')
        thread.daemon = True
        thread.start()

    def _booting(self):
        """The nodes this service resumed that Slurm shows still powering up (their slurmd not registered yet)."""
        with self.lock:
            resumed = sorted(self.resumed, key=_natural)
        nodes = (self.slurm.nodes(compress_hostlist(resumed)) if resumed else None) or {}
        return [n for n in resumed if n in nodes and nodes[n].powering_up]

    def _hold_for_booting(self):
        """A reconfigure for placements alone waits while nodes this service resumed still boot, up to
        ``reconfigure_hold`` seconds (topology.conf is written already). The reconfigure restarts slurmctld,
        and a configless slurmd that starts meanwhile registers only at its next try: 8-10 s later in the
        demo's rehearsal, where a node whose slurmd started 1.8 s after a reconfigure registered 8.4 s
        after its start, against 0.1-2 s for the others. The nodes placed run the jobs they were resumed
        for; the topology counts for the jobs scheduled after. A change that Slurm needs now (a static
        node's new address) ends the wait."""
        deadline = time.time() + float(self.config.get('reconfigure_hold') or 0)
        said = False
        while time.time() < deadline:
            with self.lock:
                if any(entry[1] is None for entry in self.reconfigure_for):
                    return
            booting = self._booting()
            if not booting:
                return
            if not said:
                log.info('topology: the reconfigure waits for %s to register (at most %ss)', compress_hostlist(booting),
                         self.config.get('reconfigure_hold'))
                said = True
            time.sleep(min(2.0, max(0.0, deadline - time.time())))

    def _take_batch(self):
        """The changes asked for since the last batch, topology.conf written for its placements: (what each
        was for, whether slurmctld must read them, whether they are all placements)."""
        with self.lock:
            batch, self.reconfigure_for = self.reconfigure_for, []
        whats = [entry[0] for entry in batch]
        placed = {}
        for entry in batch:
            placed.update(entry[1] or {})
        needed = any(entry[1] is None for entry in batch)  # a change other than a placement
        if placed:
            needed = self._write_places(whats, placed) or needed
        return whats, needed, all(entry[1] is not None for entry in batch)

    def _reconfigure(self):
        # Placements made while scontrol runs get one more batch after it. One lost when the service
        # stops is not needed: topology.conf is written, and slurmctld reads it when it starts.
        while True:
            time.sleep(float(self.config['reconfigure_delay']))
            with self.lock:
                if not self.reconfigure_for:
                    self.reconfigure_thread = None
                    return
            whats, needed, placements_only = self._take_batch()
            if not needed:
                continue
            if placements_only:
                self._hold_for_booting()
                more, more_needed, _alone = self._take_batch()  # what came meanwhile goes with it
                whats, needed = whats + more, needed or more_needed
            status = self.slurm.command([self.slurm.scontrol, 'reconfigure'])
            log.info('topology: %s for %s', 'slurmctld reconfigured' if not status
                     else 'scontrol reconfigure exited %s' % status, '; '.join(whats))

    def _write_places(self, whats, placed):
        """Record the placements and render topology.conf again; whether the file changed."""
        topo = self.config['topology']
        try:
            done = add_places(topo['conf'], topo['inputs'], topo['places'], placed)
        except Exception as exc:  # pylint: disable=broad-except
            log.warning('topology %s: not updated (%s); the nodes stay in the switch unknown', '; '.join(whats),
                        _error_text(exc))
            return False
        if done is None:
            log.info('topology %s: %s missing (no topology for on-demand nodes); nothing to update', '; '.join(whats),
                     topo['inputs'])
            return False
        moved, changed = done
        log.info('topology: %d node(s) placed for %s: %s; topology.conf %s', len(placed), '; '.join(whats),
                 '%s moved' % compress_hostlist(moved) if moved else 'no node moved',
                 'rewritten' if changed else 'already right')
        return changed

    def _node_setup(self, mapping):
        if not self.config.get('node_setup_command'):
            return
        cmd = list(self.config['node_setup_command']) + [compress_hostlist(m['name'] for m in mapping)]
        env = dict(os.environ, OCIGPU_AUTOSCALER_NODES=json.dumps(mapping))
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        if proc.returncode:
            log.error('node setup %s exited %d: %s', cmd[0], proc.returncode,
                      proc.stdout.decode('utf-8', 'replace').strip()[-500:])

    def _failed(self, what, job_ids, message, outcome, counter='attempts', capacity=None):
        """Hand the nodes back and tell their jobs. `capacity`: the details of a resume that no capacity source
        could serve (scaler.Autoscaler._create): its jobs wait for hosts and are never held for it."""
        prefix = self.config['resume_fail_reason_prefix']
        status = self.slurm.power_down(what, '%s: %s' % (prefix, message))
        self.state.update(lambda state: metrics.count_resume(state, 'failed'))
        told = []
        for job_id in job_ids:
            if capacity is not None:
                told.append(self._wait_for_capacity(job_id, capacity))
                continue
            attempt = self._count_attempt(job_id, False, counter)
            limit = int(self.config['max_resume_attempts'])
            if attempt >= limit:
                comment = '%s: held after %d failed resumes: %s (scontrol release %s tries again)' % (
                    prefix, attempt, message, job_id)
                self.slurm.tell_job(job_id, comment, hold=True)
                told.append('job %s held (attempt %d of %d)' % (job_id, attempt, limit))
            else:
                backoff = list(self.config['retry_backoff']) or [0]
                delay = int(backoff[min(attempt, len(backoff)) - 1])
                comment = '%s: resume attempt %d of %d failed: %s; tried again in %ds or later' % (
                    prefix, attempt, limit, message, delay)
                self.slurm.tell_job(job_id, comment, start_after=delay)
                told.append('job %s requeued, may start again in %ds (attempt %d of %d)' % (job_id, delay, attempt, limit))
        log.error('resume %s%s failed: %s; %s; %s%s', what, _jobs_text(job_ids), message, outcome,
                  'handing %s back to Slurm failed (scontrol exited %s)' % (what, status) if status else
                  '%s handed back to Slurm powered down (state=POWER_DOWN_FORCE)' % what,
                  ('; ' + ', '.join(told)) if told else '')

    def _wait_for_capacity(self, job_id, capacity):
        """A job no source could serve: requeued to start when the first cooldown ends (with no source cooling,
        after the back-off of its capacity failures in a row), or at once when this service frees hosts
        (capacity_waits); it counts no failed resume. What to say of it in the log."""
        key = str(job_id)

        def wait(state):
            failures = state.setdefault('capacity_failures', {})
            failures[key] = int(failures.get(key, 0)) + 1
            state['capacity_waits'] = sorted(set(state.get('capacity_waits') or []) | {key})
            for old in sorted(failures, key=lambda k: int(k) if k.isdigit() else 0)[:max(0, len(failures) - 500)]:
                del failures[old]
            return failures[key]
        times = self.state.update(wait)
        delay = capacity.get('retry_after')
        if not delay:
            backoff = list(self.config['retry_backoff']) or [0]
            delay = int(backoff[min(times, len(backoff)) - 1])
        comment = '%s: waiting for capacity: %s' % (self.config['resume_fail_reason_prefix'],
                                                    ', '.join(capacity.get('sources') or []) or 'no host')
        self.slurm.tell_job(job_id, comment, start_after=delay)
        return 'job %s requeued to wait for capacity, may start again in %ds or when hosts are freed (not counted ' \
            'toward the hold)' % (job_id, delay)

    def _count_attempt(self, job_id, capacity, counter='attempts'):
        """Count a failed resume of the job; one that failed on capacity waits for hosts this service frees."""
        def count(state):
            attempts = state.setdefault(counter, {})
            attempts[str(job_id)] = attempts.get(str(job_id), 0) + 1
            waiting = set(state.get('capacity_waits') or [])
            waiting.discard(str(job_id))
            if capacity and attempts[str(job_id)] < int(self.config['max_resume_attempts']):
                waiting.add(str(job_id))
            state['capacity_waits'] = sorted(waiting)
            # Failed pulls are not forgotten at a resume; the oldest jobs' counts go past 500 of them.
            for old in sorted(attempts, key=lambda k: int(k) if k.isdigit() else 0)[:max(0, len(attempts) - 500)]:
                del attempts[old]
            return attempts[str(job_id)]
        return self.state.update(count)

    def _hosts_freed(self, what):
        """A cluster network ended: the jobs requeued for want of hosts may start again now, not after their
        back-off (a job whose resume fails again counts one more attempt)."""
        def take(state):
            jobs = list(state.get('capacity_waits') or [])
            state['capacity_waits'] = []
            return jobs
        jobs = self.state.update(take)
        for job_id in jobs:
            # Once: a job that has started meanwhile (its back-off ran out) is no longer pending.
            status = self.slurm.command([self.slurm.scontrol, 'update', 'jobid=%s' % job_id, 'starttime=now'], retry=False)
            log.info('%s: hosts are free again: job %s %s', what, job_id,
                     'may start now' if not status else 'not moved (scontrol exited %s: started already, or gone)' % status)
        return jobs

    def _forget_attempts(self, job_ids):
        if not job_ids:
            return

        def forget(state):
            attempts = state.setdefault('attempts', {})
            failures = state.setdefault('capacity_failures', {})
            for job_id in job_ids:
                attempts.pop(str(job_id), None)
                failures.pop(str(job_id), None)
            # Resumed: it waits for hosts no more (else a later freeing would try to move a running job).
            waits = [j for j in state.get('capacity_waits') or [] if j not in set(str(i) for i in job_ids)]
            if waits != list(state.get('capacity_waits') or []):
                state['capacity_waits'] = waits
        self.state.update(forget)

    # a new node's pull failed
    def pull_failed(self, request):
        """A node that came up could not configure itself (it told the pull server): hand it back to Slurm
        now, as a failed resume, rather than when ResumeTimeout runs out; its jobs are requeued. Only a
        node still powering up: one that registered meanwhile (or a stale report) is left alone. The
        failures of a job's pulls are counted apart from its resumes (a resume that reached OCI resets
        those), and the job is held after max_resume_attempts of them."""
        names = expand_hostlist(request['nodes'])
        message = 'the pull on %s failed: %s' % (
            request.get('instance_id') or 'its instance', request.get('message') or 'no reason given')
        static = [n for n in names if self.healer.replacing(n)]
        for name in static:
            # A static node's new instance: it stays drained, with the reason the Healer reads as a failure.
            self.slurm.command([self.slurm.scontrol, 'update', 'nodename=%s' % name, 'state=DRAIN',
                                'reason=%s: %s' % (self.config['resume_fail_reason_prefix'], message[:180])])
            log.error('%s: %s; left drained, the self-healing loop counts a failed replacement', name, message)
        names = [n for n in names if n not in static]
        if not names:
            return True
        what = compress_hostlist(names)
        nodes = self.slurm.nodes(what) or {}
        booting = [n for n in names if n in nodes and nodes[n].powering_up]
        if not booting:
            log.warning('%s: %s; not powering up (%s), left alone', what, message,
                        ', '.join('%s %s' % (n, '+'.join(sorted(nodes[n].flags))) for n in names if n in nodes) or 'unknown')
            return False
        with self.lock:
            self.resumed -= set(booting)
        jobs = [j['job_id'] for j in self.slurm.jobs_on(booting)]
        self._failed(compress_hostlist(booting), jobs, message, 'its instance goes with the power down',
                     counter='pull_failures')
        return True

    # static nodes the self-healing loop replaces
    def replace_static(self, request):
        """Replace a static node through the cluster network's pool (static_nodes.py), then tell Slurm
        its new address, in nodes.conf too; the Healer follows the new instance from there."""
        name = request['nodes']
        try:
            scaler = self.scaler_factory(self.config)
            found = static_nodes.replace(scaler, name, request.get('addr') or '')
        except (InputError, WaitError, _oci.OCIConfigError, _oci.ServiceError) as exc:
            message = getattr(exc, 'message', None) or _error_text(exc)
            log.error('replace %s: failed: %s', name, message)
            self.healer.replaced(name, None, message)
            return False
        nodes_conf = self.config['static'].get('nodes_conf')
        try:
            written = static_nodes.set_node_address(nodes_conf, name, found['private_ip']) if nodes_conf else False
            kept = '%s %s' % (nodes_conf, 'rewritten' if written else 'already right') if nodes_conf else 'no nodes.conf given'
            level = log.info
        except (InputError, IOError, OSError) as exc:
            written, kept = False, 'not in nodes.conf (%s): a reconfigure brings back the old address' % _error_text(exc)
            level = log.warning
        status = self.slurm.set_addresses([found])
        if written:
            self._reconfigure_soon('replace %s' % name)
        level('replace %s: instance %s replaced by %s at %s through the pool of %s; address %s%s', name,
              found['old_id'], found['id'], found['private_ip'], found['cluster_network_id'], kept,
              '' if not status else '; telling slurmctld the address failed (scontrol exited %s)' % status)
        self.healer.replaced(name, found, None)
        return True

    # suspend and resume-fail
    def suspend(self, request):
        action, what = request['action'], request['nodes']
        try:
            scaler = self.scaler_factory(self.config)
            result = scaler.suspend(what, action=action)
        except (InputError, WaitError, _oci.OCIConfigError, _oci.ServiceError) as exc:
            # The names stay released in the state file: the reconcile ends their cluster network later.
            log.error('%s %s failed: %s; the reconcile terminates what is left once the nodes are powered down',
                      action, what, getattr(exc, 'message', None) or _error_text(exc))
            return False
        log.info('%s %s: done: %s', action, what, json.dumps(result))
        if result['terminated']:
            self._hosts_freed('%s %s' % (action, what))
        return True

    # reconcile
    def reconcile(self, now=None):
        """One comparison of Slurm's nodes with OCI (see the module's docs); returns what it did.

        Observe (Slurm's nodes, the requests at work, the cluster networks), decide (decide.reconcile, one
        action per group of nodes), apply. The self-healing loop takes its step first: it reads the reasons
        of failed new instances before they are returned to service."""
        now = self.clock() if now is None else now
        self.last_reconcile = now
        done = dict(returned=[], taken_over=[], terminated=[])
        nodes = self.slurm.nodes(self._watched())
        if nodes is None:
            log.warning('reconcile: slurmctld does not answer; nothing compared')
            return done
        busy = self.busy_names()
        done['heal'] = self.healer.step(nodes, busy)
        self.last_heal = now
        with self.lock:
            # Nodes this service resumed boot and register on their own time (up to ResumeTimeout).
            self.resumed &= set(n for n in nodes if nodes[n].powering_up)
            resumed = set(self.resumed)
        scaler, error = None, None
        try:
            scaler = self.scaler_factory(self.config)
            networks = [(cn.id, cn.display_name, carried) for cn, carried in scaler.cluster_networks()]
        # What Slurm showed is acted on all the same; the error ends the pass afterwards, as before.
        except Exception as exc:  # pylint: disable=broad-except
            networks, error = None, exc
        if scaler is not None:
            self._read_reservations(scaler)
        observed = decide.Observation(nodes, busy, networks=networks, resumed=resumed, powering_seen=self.powering_seen)
        self.powering_seen = {}
        for decision in decide.reconcile(observed, now, decide.settings(self.config)):
            self._apply(decision, now, scaler, done)
        if done['terminated']:
            self._hosts_freed('reconcile')
        if error is not None:
            raise error
        return done

    def _read_reservations(self, scaler):
        """The hosts free of each reservation source (GetComputeCapacityReservation: reserved - used), for the
        metrics; one that cannot be read is unknown (left out of the metrics), said once in the log."""
        for source in self.config.get('capacity_sources') or []:
            if not source.get('capacity_reservation_id'):
                continue
            name = source['name']
            try:
                found = scaler.session.call(scaler.session.compute.get_compute_capacity_reservation,
                                            source['capacity_reservation_id'])
                self.hosts_free[name] = int(found.reserved_instance_count or 0) - int(found.used_instance_count or 0)
                self.hosts_free_failed.discard(name)
            except Exception as exc:  # pylint: disable=broad-except
                self.hosts_free[name] = None
                if name not in self.hosts_free_failed:
                    log.warning('reconcile: capacity reservation %s of source %s could not be read (%s); its hosts free '
                                'are unknown', source['capacity_reservation_id'], name, _error_text(exc))
                self.hosts_free_failed.add(name)

    def _apply(self, decision, now, scaler, done):
        """Carry out one of the reconcile's decisions, for its group of nodes: one command, one log line."""
        names = decision.names
        what = compress_hostlist(names)
        if decision.action == decide.RETURN_TO_SERVICE:
            status = self.slurm.return_to_service(what)
            log.info('reconcile: %s DOWN after a failed resume (%s); %s', what, decision.why,
                     'returned to service powered down (state=RESUME)' if not status else
                     'returning them to service failed (scontrol exited %s)' % status)
            done['returned'] = names
        elif decision.action == decide.WATCH:
            self.powering_seen.update(decision.data['seen'])
        elif decision.action == decide.TAKE_OVER:
            jobs = self.slurm.jobs_on(names)
            rid = submit(self.config, 'resume', what, jobs, source='reconcile')
            log.warning('reconcile: %s powering up for %ds with no resume at work (its program died?); '
                        'resuming them (request %s%s)', what, int(now - decision.data['since']), rid,
                        _jobs_text([j['job_id'] for j in jobs]))
            done['taken_over'] = names
        elif decision.action == decide.TERMINATE_NETWORK:
            log.warning('reconcile: cluster network %s (%s) carries only powered-down nodes %s (their suspend '
                        'died?); terminating it', decision.data['id'], decision.data['display_name'], what)
            scaler.suspend(what, action='reconcile')
            done['terminated'].append(decision.data['id'])

    def _carriers(self):
        """{name: 'cluster network <name> (<id>) beside <others>'} for each name a live cluster network
        carries; None when OCI does not answer (the self-healing loop then waits)."""
        try:
            networks = self.scaler_factory(self.config).cluster_networks()
        except (InputError, _oci.OCIConfigError, _oci.ServiceError) as exc:
            log.warning('heal: the cluster networks could not be listed: %s', _error_text(exc))
            return None
        found = {}
        for cn, carried in networks:
            for name in carried:
                others = [n for n in carried if n != name]
                beside = ' beside %s' % compress_hostlist(others) if others else ''
                found[name] = 'cluster network %s (%s)%s' % (cn.display_name, cn.id, beside)
        return found

    def _watched(self):
        """The on-demand nodes, and the static ones the self-healing loop may replace."""
        return ','.join(h for h in (self.config['nodes'], (self.config.get('static') or {}).get('nodes')) if h)

    def heal(self):
        """One step of the self-healing loop between reconciles (every heal.poll_interval seconds)."""
        self.last_heal = self.clock()
        nodes = self.slurm.nodes(self._watched())
        if nodes is None:
            return None
        return self.healer.step(nodes, self.busy_names())

    # the figures
    def metrics_text(self):
        """The service's figures (metrics.py), written with the loop's into heal.metrics_file."""
        beat = heartbeat(self.config)
        sources = [source['name'] for source in self.config.get('capacity_sources') or []]
        return metrics.service_text(self.state.read(), beat['time'] if beat else time.time(), self.config['max_resume_attempts'],
                                    sources=sources, now=scaling.epoch_seconds(), hosts_free=self.hosts_free)

    def write_metrics(self):
        """With the loop off, the service writes its figures (and the loop's, off) itself; with it on, the loop does."""
        path = self.healer.heal['metrics_file']
        if not path or self.healer.heal['enabled']:
            return
        try:
            write_text(path, healing.metrics_text(self.healer._read(), enabled=False) + self.metrics_text())  # pylint: disable=protected-access
        except (IOError, OSError) as exc:
            if not self.metrics_failed:     # once, not at every pass
                log.warning('service: the metrics file %s could not be written: %s', path, exc)
            self.metrics_failed = True
            return
        self.metrics_failed = False

    # the loop
    def serve(self, stop=None, sleep=None):
        stop = stop or threading.Event()
        keep_beating(self.config, stop)  # the programs hand the nodes back when it stops (requests.py)
        waiting = self.waiting()
        log.info('service: started; %d request(s) waiting%s', len(waiting),
                 (' (%s)' % ', '.join(w[0] for w in waiting)) if waiting else '')
        while not stop.is_set():
            self.pick_up()
            if self.last_reconcile is None or self.clock() - self.last_reconcile >= float(self.config['reconcile_interval']):
                try:
                    self.reconcile()
                except Exception as exc:  # pylint: disable=broad-except
                    log.error('reconcile failed: %s', _error_text(exc))
                    self.last_reconcile = self.clock()
            elif self.healer.heal['enabled'] and (
                    self.last_heal is None or self.clock() - self.last_heal >= float(self.healer.heal['poll_interval'])):
                try:
                    self.heal()
                except Exception as exc:  # pylint: disable=broad-except
                    log.error('heal failed: %s', _error_text(exc))
            self.write_metrics()
            (sleep or stop.wait)(float(self.config['poll_interval']))
        log.info('service: stopped')
