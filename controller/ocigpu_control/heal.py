# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The self-healing loop of the autoscaler service (the ``heal`` section of its configuration, off by
default): an on-demand node that the collection's own health check drained for a hardware reason, with
no job left on it, gets a new instance, which is checked before it takes a job.

One step per reconcile, each decided from what Slurm shows and the service's state file, so that a
restart of the service (or of the whole controller) in the middle goes on where it was and never
replaces a node twice:

1. **replace**: the node is DRAINED (drained, no job on it) with a reason of ``ocigpu-health:`` that
   names a check of ``heal.checks``, and it is powered up -> ``POWER_DOWN_FORCE`` with the reason
   ``ocigpu-heal: replacing (<old reason>)``: Slurm runs the suspend program and the instance goes.
2. **power up**: the node is powered down (``POWERED_DOWN``, no longer ``POWERING_DOWN``) ->
   ``POWER_UP``: Slurm runs the resume program and a new instance is made. It configures itself by
   pull and runs the passive health checks before slurmd starts; a node that fails them tells the
   pull server and never registers (``pull_failed``).
   A sick node that Slurm powered down first (an idle node reaches SuspendTime) has lost its
   instance already: it is returned to service powered down (``RESUME``), and its next instance is
   checked in its pull.
3. **done**: the node registered -> back in service; or its resume failed (handed back with the
   autoscaler's reason): out of host capacity leaves it drained and says so, any other failure counts.
   A node drained again by the checks within ``heal.failure_window`` of its replacement counts a
   failure too; after ``heal.max_failures`` failures in a row it is left drained for a person.

Limits: at most ``heal.max_at_once`` replacements at work and ``heal.max_per_hour`` started in the
last hour; when two or more, and more than ``1 - heal.min_in_service_share``, of the on-demand nodes that
are powered up are drained by the checks at once, nothing is replaced (a fault of the whole cluster, an
image or a driver, is not mended by new instances) and the log says so. A person's drain (any other reason) is
never touched.

Every step writes one line to the autoscaler's log, starting with ``heal <node>:``. The loop looks at
Slurm every ``heal.poll_interval`` seconds (one ``scontrol show node``), between the service's
reconciles too, so that a drain or a finished power down is acted on within seconds. With
``heal.metrics_file``, each look also writes the loop's figures there in Prometheus' text format
(``metrics_text``), for the rdma_exporter's text files and the dashboard's "Self-healing loop" row.
"""

from __future__ import annotations

import time

from ocigpu_control.scaler import log
from ocigpu_control.static import static_names
from ansible_collections.ocigpu.cluster.plugins.module_utils._health import ACTIVE_DRAIN_PREFIX, DRAIN_PREFIX, write_text

HEAL_PREFIX = 'ocigpu-heal:'
DEFAULTS = dict(enabled=False, checks=['gpu_count', 'xid', 'rdma_links', 'nvme_scratch', 'nccl_active'], max_at_once=1,
                max_per_hour=4, min_in_service_share=0.5, max_failures=2, failure_window=3600, poll_interval=10,
                metrics_file='', static_timeout=1800)
BUSY = ('ALLOCATED', 'MIXED', 'COMPLETING')


def settings(config):
    """The ``heal`` section with its defaults."""
    return dict(DEFAULTS, **(config.get('heal') or {}))


def hardware_checks(reason, checks):
    """The checks of a health-check drain reason ('ocigpu-health: gpu_count 7 of 8; xid 79') among checks;
    an active check's ('ocigpu-nccl: all_reduce busbw ... below the threshold ...') is nccl_active."""
    if reason.startswith(ACTIVE_DRAIN_PREFIX):
        return ['nccl_active'] if 'nccl_active' in checks else []
    if not reason.startswith(DRAIN_PREFIX):
        return []
    named = [part.strip().split(' ')[0] for part in reason[len(DRAIN_PREFIX):].split(';') if part.strip()]
    return [c for c in named if c in checks]


# What a node's record step is called in the metrics.
STEP_NAMES = dict(down='replacing', up='powering_up', again='retrying', healthy='in_service', left='left_for_a_person',
                  pool='replacing_in_the_pool')
COUNTED = ('replaced', 'powered_up', 'healed', 'failed', 'left')


def metrics_text(heal, enabled=True):
    """The loop's figures in Prometheus' text format, from its state (the state file's 'heal' key)."""
    nodes = heal.get('nodes') or {}
    counts = heal.get('counts') or {}
    lines = ['# HELP ocigpu_heal_enabled Whether the self-healing loop is on.', '# TYPE ocigpu_heal_enabled gauge',
             'ocigpu_heal_enabled %d' % bool(enabled),
             '# HELP ocigpu_heal_paused 1 while many nodes are drained at once and the loop replaces none.',
             '# TYPE ocigpu_heal_paused gauge', 'ocigpu_heal_paused %d' % bool(heal.get('paused')),
             '# HELP ocigpu_heal_steps_total Steps the loop took: replacements started, new instances powered up, '
             'nodes back in service, failed replacements, nodes left drained for a person.',
             '# TYPE ocigpu_heal_steps_total counter']
    lines += ['ocigpu_heal_steps_total{step="%s"} %d' % (k, int(counts.get(k, 0))) for k in COUNTED]
    lines += ['# HELP ocigpu_heal_nodes Nodes the loop follows, by where they are.', '# TYPE ocigpu_heal_nodes gauge']
    lines += ['ocigpu_heal_nodes{step="%s"} %d' % (v, sum(1 for r in nodes.values() if r.get('step') == k))
              for k, v in sorted(STEP_NAMES.items(), key=lambda kv: kv[1])]
    lines += ['# HELP ocigpu_heal_node The step of each node the loop follows (1).', '# TYPE ocigpu_heal_node gauge']
    lines += ['ocigpu_heal_node{node="%s",step="%s"} 1' % (n, STEP_NAMES.get(r.get('step'), 'unknown'))
              for n, r in sorted(nodes.items())]
    lines += ['# HELP ocigpu_heal_last_drain_to_service_seconds Seconds from drain to back in service of the last '
              'node healed.', '# TYPE ocigpu_heal_last_drain_to_service_seconds gauge',
              'ocigpu_heal_last_drain_to_service_seconds %.1f' % float(heal.get('last_drain_to_service') or 0)]
    return '\n'.join(lines) + '\n'


def _powered_up(state):
    return not state & {'POWERED_DOWN', 'POWERING_DOWN', 'POWERING_UP', 'POWER_DOWN'}


class Healer(object):
    """One step of the loop per call of ``step(nodes)`` (the service's reconcile)."""

    def __init__(self, config, slurm, state, clock=time.time, submit=None, carriers=None):
        self.config = config
        self.heal = settings(config)
        self.slurm = slurm
        self.state = state          # the service's StateFile: key 'heal'
        self.clock = clock
        self.reason_prefix = config['resume_fail_reason_prefix']
        # Static nodes of the cluster network (config 'static'): replaced through its pool by a request
        # to the service (submit('replace', name, addr=...)), not by a power down and up.
        self.static = static_names(config) if submit else []
        self.submit = submit
        # carriers(): {name: what carries it} for the names a live cluster network carries, or None when
        # OCI does not answer. A node's instance in a cluster network kept for its other nodes runs on
        # after its power down, and a resume would adopt that same instance again.
        self.carriers = carriers
        self._carried = None    # carriers() of this step, asked once at most
        self._told = {}         # name -> what holds it, as last logged

    def _read(self):
        return self.state.read().get('heal') or dict(nodes={}, started=[], paused=False)

    def _write(self, fn):
        def update(state):
            heal = state.setdefault('heal', {})
            heal.setdefault('nodes', {})
            heal.setdefault('started', [])
            return fn(heal)
        return self.state.update(update)

    def step(self, nodes, busy=()):
        """nodes: {name: (state flags, reason)} of the on-demand nodes; busy: names a request works on.
        Returns {'replaced': [...], 'powered_up': [...], 'healed': [...], 'failed': [...], 'left': [...]}."""
        done = dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
        if not self.heal['enabled']:
            return done
        now = self.clock()
        heal = self._read()
        self._carried = None
        followed = set()
        for name in sorted(heal['nodes']):
            if name in nodes and name not in busy and heal['nodes'][name].get('step') in ('down', 'up', 'healthy', 'pool'):
                self._follow(name, heal['nodes'][name], nodes[name], now, done)
                followed.add(name)
        # What Slurm showed is older than the commands just given for the nodes followed: those wait.
        self._start(dict((n, v) for n, v in nodes.items() if n not in followed), busy, now, done)
        self._count(done)
        if self.heal['metrics_file']:
            try:
                # Whole or not at all, as the exporter reads it, and readable by its user (0644).
                write_text(self.heal['metrics_file'], metrics_text(self._read()))
            except (IOError, OSError) as exc:
                log.warning('heal: the metrics file %s could not be written: %s', self.heal['metrics_file'], exc)
        return done

    # nodes being replaced
    def _follow(self, name, rec, node, now, done):
        flags, reason = node
        if name in self.static and rec['step'] in ('pool', 'up'):
            self._follow_static(name, rec, node, now, done)
            return
        if rec['step'] == 'down':
            if 'POWERED_DOWN' in flags and 'POWERING_DOWN' not in flags:
                if self._held(name, flags, rec.get('reason', '')):
                    return
                # The loop's own drain goes first (Slurm may keep DRAIN over a power down): the new
                # instance registers undrained; it was checked in its pull.
                if 'DRAIN' in flags and reason.startswith(HEAL_PREFIX):
                    self.slurm.return_to_service(name)
                status = self._update(name, 'state=POWER_UP')
                if status:
                    log.warning('heal %s: powered down; POWER_UP failed (scontrol exited %s), tried again', name, status)
                    return
                self._set(name, step='up', up_since=now)
                log.info('heal %s: old instance gone after %.0fs; powering up a new one (state=POWER_UP)',
                         name, now - rec['since'])
                done['powered_up'].append(name)
            elif 'POWERING_UP' in flags:
                # Powered up by another hand before the loop did it (a person's POWER_UP): the new
                # instance is on its way, and is followed as the loop's own.
                self._set(name, step='up', up_since=now)
                log.info('heal %s: powered up by another hand after its power down; following the new instance', name)
            elif _powered_up(flags) and 'POWERING_DOWN' not in flags and now - rec['since'] > 60:
                if 'DRAIN' not in flags:
                    # Powered down, up and registered while the loop was not looking (a person): nothing left to do.
                    self._set(name, step='healthy', healed_at=now)
                    log.info('heal %s: back in service after %.0fs (another hand powered it up)', name,
                             now - rec['drained_seen'])
                    done['healed'].append(name)
                elif reason.startswith(HEAL_PREFIX) or hardware_checks(reason, self.heal['checks']):
                    # The power down did not take (slurmctld restarted in between): once more.
                    self.slurm.power_down(name, '%s replacing (%s)' % (HEAL_PREFIX, rec.get('reason', '')))
                    self._set(name, since=now)
                    log.info('heal %s: still powered up %.0fs after its power down; POWER_DOWN_FORCE again', name,
                             now - rec['since'])
                else:
                    # A person drained it again with a reason of their own: theirs now.
                    self._drop(name)
                    log.info('heal %s: drained by a person while it was being replaced (%s); left to them', name, reason)
            return
        if rec['step'] == 'healthy':
            # Drained again by the checks soon after: the replacement failed too.
            if now - rec['healed_at'] > float(self.heal['failure_window']):
                self._drop(name)
            elif 'DRAIN' in flags and hardware_checks(reason, self.heal['checks']):
                self._fail(name, rec, 'drained again %.0fs after its replacement: %s' % (now - rec['healed_at'], reason),
                           done)
            return
        # step 'up': waiting for the new instance
        if 'POWERING_UP' in flags:
            return
        if reason.startswith(self.reason_prefix) and ('POWERED_DOWN' in flags or 'DOWN' in flags):
            message = reason[len(self.reason_prefix):].lstrip(': ')
            if 'out of host capacity' in reason.lower():
                self._leave(name, 'no host for a new instance (%s); left drained, nothing else is tried' % message, done)
                return
            self._fail(name, rec, 'the new instance failed: %s' % message, done)
            return
        if 'ResumeTimeout' in reason:
            self._fail(name, rec, 'the new instance did not register within ResumeTimeout', done)
            return
        if _powered_up(flags) and 'DOWN' not in flags:
            self._back_in_service(name, rec, node, now, done)
        elif 'POWERED_DOWN' in flags and now - rec['up_since'] > 60:
            # POWER_UP did not take (slurmctld restarted in between): once more.
            self._update(name, 'state=POWER_UP')
            self._set(name, up_since=now)
            log.info('heal %s: still powered down; POWER_UP again', name)

    def _held(self, name, flags, old):
        """Whether name's old instance still runs (its cluster network is kept for nodes in use, or OCI
        does not answer): its new instance waits, or a resume would adopt the old one. The node stays
        drained meanwhile, so that no job powers it up either. Logged once."""
        if self.carriers is None:
            return False
        if self._carried is None:
            self._carried = self.carriers()
        held = 'OCI does not answer' if self._carried is None else self._carried.get(name)
        if held and 'DRAIN' not in flags:
            self._update(name, 'state=DRAIN', 'reason=%s replacing (%s)' % (HEAL_PREFIX, old))
        if held and self._told.get(name) != held:
            log.info('heal %s: powered down, but its old instance runs on in %s; its new instance waits until '
                     'that ends', name, held)
        self._told[name] = held
        return bool(held)

    def _back_in_service(self, name, rec, node, now, done):
        """The new instance registered: the loop's own drain goes, the node takes jobs."""
        flags, reason = node
        if 'DRAIN' in flags and reason.startswith(HEAL_PREFIX):
            self.slurm.return_to_service(name)
        self._set(name, step='healthy', healed_at=now)
        self._write(lambda h: h.__setitem__('last_drain_to_service', now - rec['drained_seen']))
        log.info('heal %s: back in service after %.0fs (drain to registered; the new instance passed its checks)',
                 name, now - rec['drained_seen'])
        done['healed'].append(name)

    # static nodes, replaced through the pool
    def replacing(self, name):
        """Whether name is a static node whose new instance is on its way (its pull reports a failure)."""
        return name in self.static and (self._read()['nodes'].get(name) or {}).get('step') in ('pool', 'up')

    def replaced(self, name, found, error):
        """The service's replacement of a static node ended: found (the new instance) or error."""
        rec = self._read()['nodes'].get(name) or {}
        done = dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
        if found is not None:
            # up_wall: wall-clock time, for slurmd's start time (the loop's clock may be monotonic).
            self._set(name, step='up', up_since=self.clock(), up_wall=time.time(), instance_id=found['id'])
            log.info('heal %s: new instance %s at %s from the pool; waiting for its pull, checks and slurmd',
                     name, found['id'], found['private_ip'])
            done['powered_up'].append(name)
        elif 'out of host capacity' in error.lower():
            self._leave(name, 'no host for a new instance (%s); left drained, nothing else is tried' % error, done)
        else:
            self._fail(name, rec, 'the replacement through the pool failed: %s' % error, done)
        self._count(done)

    def _follow_static(self, name, rec, node, now, done):
        flags, reason = node
        if rec['step'] == 'pool':
            # The service's request ended without a word (an unexpected error): it is asked again; the
            # replacement picks up where it was (static.py).
            if now - rec['since'] > 120:
                self.submit('replace', name, addr=rec.get('addr', ''))
                self._set(name, since=now)
                log.warning('heal %s: its replacement through the pool ended without a result; asked again', name)
            return
        if reason.startswith(self.reason_prefix):
            self._fail(name, rec, 'the new instance failed: %s' % reason[len(self.reason_prefix):].lstrip(': '), done)
            return
        fields = self.slurm.node_fields(name) or {}
        started = fields.get('slurmd_start')
        if started is not None and started >= rec.get('up_wall', 0) - 5 and not flags & {'DOWN', 'NOT_RESPONDING'}:
            # The new instance's slurmd registered (it starts only after the pull and the checks passed).
            self._back_in_service(name, rec, node, now, done)
        elif now - rec['up_since'] > float(self.heal['static_timeout']):
            self._fail(name, rec, 'the new instance did not register within %ss' % self.heal['static_timeout'], done)

    def _start_static(self, name, rec, old, now):
        """Drain the node with the loop's reason and ask the service to replace it through the pool."""
        fields = self.slurm.node_fields(name)
        if fields is None:
            return 'slurmctld does not answer'
        status = self._update(name, 'state=DRAIN', 'reason=%s replacing (%s)' % (HEAL_PREFIX, old))
        if status:
            return 'DRAIN failed (scontrol exited %s)' % status
        self.submit('replace', name, addr=fields.get('addr') or '')

        def start(h):
            h['nodes'][name] = dict(step='pool', since=now, up_since=now, addr=fields.get('addr') or '',
                                    drained_seen=rec.get('drained_seen', now), failures=int(rec.get('failures', 0)),
                                    reason=old)
            self._started(h, now)
        self._write(start)
        return None

    def _count(self, done):
        if any(done.values()):
            def count(h):
                counts = h.setdefault('counts', {})
                for key, names in done.items():
                    counts[key] = int(counts.get(key, 0)) + len(names)
            self._write(count)

    def _fail(self, name, rec, why, done):
        failures = int(rec.get('failures', 0)) + 1
        if failures >= int(self.heal['max_failures']):
            self._leave(name, 'left for a person after %d failed replacements in a row: %s' % (failures, why), done)
            return
        log.warning('heal %s: replacement %d failed: %s; tried again within the limits', name, failures, why)
        self._set(name, step='again', failures=failures, failed_at=self.clock())
        done['failed'].append(name)

    def _leave(self, name, why, done):
        reason = ('%s %s' % (HEAL_PREFIX, why))[:200]
        self._update(name, 'state=DRAIN', 'reason=%s' % reason)
        self._write(lambda heal: heal['nodes'].__setitem__(name, dict(step='left', reason=reason)))
        log.warning('heal %s: %s', name, why)
        done['left'].append(name)

    def _update(self, name, *settings):
        return self.slurm.command([self.slurm.scontrol, 'update', 'nodename=%s' % name] + list(settings))

    def _set(self, name, **values):
        self._write(lambda heal: heal['nodes'].setdefault(name, {}).update(values))

    def _drop(self, name):
        """The node starts afresh: no record, no failures in a row."""
        self._write(lambda heal: heal['nodes'].pop(name, None))

    @staticmethod
    def _started(heal, now):
        """Count a replacement started now; those of the last hour are kept for max_per_hour."""
        heal['started'] = [t for t in heal['started'] if now - t < 3600] + [now]

    # new replacements
    def _start(self, nodes, busy, now, done):
        checks = self.heal['checks']
        heal = self._read()
        up = [n for n in self.config['node_names'] + self.static if n in nodes and _powered_up(nodes[n][0])]
        sick = [n for n in up if 'DRAIN' in nodes[n][0] and hardware_checks(nodes[n][1], checks)]
        # A node left for a person that a person returned to service (no longer drained) starts afresh.
        for name, rec in list(heal['nodes'].items()):
            if rec.get('step') == 'left' and name in nodes and 'DRAIN' not in nodes[name][0]:
                self._drop(name)
        heal = self._read()
        candidates = [n for n in sick if n not in busy and not nodes[n][0] & set(BUSY)
                      and heal['nodes'].get(n, {}).get('step') in (None, 'again', 'healthy')]
        # A node whose new instance failed and that is powered down again (its suspend ran: a later
        # reconcile than the one that saw the failure): only a power up is left to do.
        candidates += [n for n, r in sorted(heal['nodes'].items()) if r.get('step') == 'again' and n in nodes
                       and n not in busy and 'POWERED_DOWN' in nodes[n][0] and 'POWERING_DOWN' not in nodes[n][0]
                       and now > float(r.get('failed_at', 0)) and not self._held(n, nodes[n][0], r.get('reason', ''))]
        # A static node whose new instance failed is replaced again (it stays drained meanwhile).
        candidates += [n for n, r in sorted(heal['nodes'].items()) if r.get('step') == 'again' and n in self.static
                       and n in nodes and n not in busy and n not in candidates and not nodes[n][0] & set(BUSY)
                       and now > float(r.get('failed_at', 0))]
        # Slurm powered a sick idle node down before the loop got to it (SuspendTime): its instance is
        # gone already (once its cluster network ended), and the next one is checked in its pull. It goes
        # back to service powered down.
        gone = [n for n in self.config['node_names'] if n in nodes and n not in busy
                and {'DRAIN', 'POWERED_DOWN'} <= nodes[n][0] and 'POWERING_DOWN' not in nodes[n][0]
                and hardware_checks(nodes[n][1], checks) and heal['nodes'].get(n, {}).get('step') not in ('down', 'up', 'left')
                and not self._held(n, nodes[n][0], nodes[n][1])]
        for name in gone:
            if self.slurm.return_to_service(name):
                continue
            rec = heal['nodes'].get(name, {})

            def returned(h, name=name, rec=rec):
                h['nodes'][name] = dict(step='healthy', healed_at=now, failures=int(rec.get('failures', 0)),
                                        reason=nodes[name][1])
                self._started(h, now)
            self._write(returned)
            log.info('heal %s: drained by the checks (%s) and powered down already (its instance is gone); returned to '
                     'service powered down (state=RESUME): its next instance is checked in its pull', name, nodes[name][1])
            done['replaced'].append(name)
        if not candidates:
            return
        at_work = [n for n, r in heal['nodes'].items() if r.get('step') in ('down', 'up', 'pool')]
        if len(sick) >= 2 and len(sick) > (1.0 - float(self.heal['min_in_service_share'])) * len(up):
            if not heal.get('paused'):
                log.warning('heal: %d of %d powered-up on-demand nodes are drained by the checks at once (more than %d%%); '
                            'nothing is replaced: a fault of the whole cluster needs a person', len(sick), len(up),
                            round((1.0 - float(self.heal['min_in_service_share'])) * 100))
                self._write(lambda h: h.__setitem__('paused', True))
            return
        if heal.get('paused'):
            self._write(lambda h: h.__setitem__('paused', False))
        recent = [t for t in heal['started'] if now - t < 3600]
        for name in candidates:
            if len(at_work) >= int(self.heal['max_at_once']):
                log.info('heal %s: waiting: %d replacement(s) at work (at most %s at once)', name, len(at_work),
                         self.heal['max_at_once'])
                break
            if len(recent) >= int(self.heal['max_per_hour']):
                log.info('heal %s: waiting: %d replacement(s) started in the last hour (at most %s)', name, len(recent),
                         self.heal['max_per_hour'])
                break
            rec = heal['nodes'].get(name, {})
            old = nodes[name][1] if name in sick else rec.get('reason', '')
            if name in self.static:
                why = self._start_static(name, rec, old, now)
                if why:
                    log.warning('heal %s: not replaced now: %s; tried again later', name, why)
                    continue
                at_work.append(name)
                recent.append(now)
                log.info('heal %s: drained by the checks (%s) with no job on it; replacing its instance through the '
                         'cluster network\'s pool (replacement %d of at most %s this hour)', name, old, len(recent),
                         self.heal['max_per_hour'])
                done['replaced'].append(name)
                continue
            if name in sick:
                status = self.slurm.power_down(name, '%s replacing (%s)' % (HEAL_PREFIX, old))
            else:
                status = self._update(name, 'state=POWER_UP')
            if status:
                log.warning('heal %s: %s failed (scontrol exited %s); tried again later', name,
                            'POWER_DOWN_FORCE' if name in sick else 'POWER_UP', status)
                continue

            def start(h, name=name, rec=rec, old=old, step='down' if name in sick else 'up'):
                h['nodes'][name] = dict(step=step, since=now,
                                        up_since=now, drained_seen=rec.get('drained_seen', now),
                                        failures=int(rec.get('failures', 0)), reason=old)
                self._started(h, now)
            self._write(start)
            at_work.append(name)
            recent.append(now)
            if name in sick:
                log.info('heal %s: drained by the checks (%s) with no job on it; replacing it (state=POWER_DOWN_FORCE; '
                         'replacement %d of at most %s this hour)', name, old, len(recent), self.heal['max_per_hour'])
            else:
                log.info('heal %s: powering up another new instance (state=POWER_UP; replacement %d of at most %s '
                         'this hour)', name, len(recent), self.heal['max_per_hour'])
            done['replaced'].append(name)
