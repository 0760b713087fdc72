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

The steps and the moves between them are declared in decide.py (``TRANSITIONS``), which also decides,
from one look at Slurm and the state file, what each node needs (``decide.heal``); this module applies
those decisions. Every step writes one line to the autoscaler's log, starting with ``heal <node>:``. The loop looks at
Slurm every ``heal.poll_interval`` seconds (one ``scontrol show node``), between the service's
reconciles too, so that a drain or a finished power down is acted on within seconds. With
``heal.metrics_file``, each look also writes the loop's figures there in Prometheus' text format
(``metrics_text``), for the rdma_exporter's text files and the dashboard's "Self-healing loop" row.
"""

from __future__ import annotations

import time

from ocigpu_control import decide
from ocigpu_control.decide import HEAL_PREFIX, POOL, STEP_NAMES, UP, hardware_checks  # noqa: F401 pylint: disable=unused-import
from ocigpu_control.scaler import log
from ocigpu_control.static import static_names
from ansible_collections.ocigpu.cluster.plugins.module_utils._health import write_text

DEFAULTS = dict(enabled=False, checks=['gpu_count', 'xid', 'rdma_links', 'nvme_scratch', 'nccl_active'], max_at_once=1,
                max_per_hour=4, min_in_service_share=0.5, max_failures=2, failure_window=3600, poll_interval=10,
                metrics_file='', static_timeout=1800)


def settings(config):
    """The ``heal`` section with its defaults."""
    return dict(DEFAULTS, **(config.get('heal') or {}))


# STEP_NAMES (decide.py): what a node's record step is called in the metrics.
COUNTED = ('replaced', 'powered_up', 'healed', 'failed', 'left')


def metrics_text(heal, enabled=True, now=None, max_per_hour=None):
    """The loop's figures in Prometheus' text format, from its state (the state file's 'heal' key); with
    now (the loop's clock) and max_per_hour, also its limit: replacements started in the last hour and the most."""
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
    if now is not None and max_per_hour is not None:
        recent = sum(1 for t in heal.get('started') or [] if now - t < 3600)
        lines += ['# HELP ocigpu_heal_started_last_hour Replacements the loop started in the last hour.',
                  '# TYPE ocigpu_heal_started_last_hour gauge', 'ocigpu_heal_started_last_hour %d' % recent,
                  '# HELP ocigpu_heal_max_per_hour The most replacements the loop starts in an hour (heal.max_per_hour).',
                  '# TYPE ocigpu_heal_max_per_hour gauge', 'ocigpu_heal_max_per_hour %d' % int(max_per_hour)]
    return '\n'.join(lines) + '\n'


# What each applied decision counts in the loop's figures (the state file's heal.counts, the metrics).
COUNTS = {decide.HEAL_REPLACE: 'replaced', decide.HEAL_REPLACE_STATIC: 'replaced', decide.HEAL_REPLACE_AGAIN: 'replaced',
          decide.HEAL_RETURN: 'replaced', decide.HEAL_POWER_UP: 'powered_up', decide.HEAL_FOUND: 'powered_up',
          decide.HEAL_DONE: 'healed', decide.HEAL_DONE_BY_HAND: 'healed', decide.HEAL_FAIL: 'failed',
          decide.HEAL_LEAVE: 'left'}


class Healer(object):
    """One step of the loop per call of ``step(nodes)`` (the service's reconcile, and between them):
    observe, decide (decide.heal), apply each decision with its command and its log line."""

    def __init__(self, config, slurm, state, clock=time.time, submit=None, carriers=None, more_metrics=None):
        self.config = config
        self.more_metrics = more_metrics    # () -> more Prometheus text for the metrics file (the service's figures)
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
        """nodes: {name: Node} of the watched nodes; busy: names a request works on.
        Returns {'replaced': [...], 'powered_up': [...], 'healed': [...], 'failed': [...], 'left': [...]}."""
        done = dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
        if not self.heal['enabled']:
            return done
        now = self.clock()
        observed = decide.Observation(nodes, busy, heal=self._read(), carriers=self.carriers)
        for decision in decide.heal(observed, now, decide.settings(self.config, self.heal, self.static)):
            self._apply(decision, done)
        self._count(done)
        if self.heal['metrics_file']:
            try:
                # Whole or not at all, as the exporter reads it, and readable by its user (0644).
                write_text(self.heal['metrics_file'], metrics_text(self._read(), now=now, max_per_hour=self.heal['max_per_hour'])
                           + (self.more_metrics() if self.more_metrics else ''))
            except (IOError, OSError) as exc:
                log.warning('heal: the metrics file %s could not be written: %s', self.heal['metrics_file'], exc)
        return done

    # applying a decision
    def _apply(self, decision, done):
        """The command of one decision, its record in the state file (once the command took, where it must),
        its log line and its count."""
        action, why, data = decision.action, decision.why, decision.data
        name = decision.names[0] if decision.names else None
        if action == decide.HEAL_PAUSE:
            self._write(lambda h: h.__setitem__('paused', True))
            log.warning('heal: %s; nothing is replaced: a fault of the whole cluster needs a person', why)
            return
        if action == decide.HEAL_UNPAUSE:
            self._write(lambda h: h.__setitem__('paused', False))
            return
        if action == decide.HEAL_HELD:
            if data['drain']:
                self._update(name, 'state=DRAIN', 'reason=%s replacing (%s)' % (HEAL_PREFIX, data['old']))
            if self._told.get(name) != why:
                log.info('heal %s: powered down, but its old instance runs on in %s; its new instance waits until '
                         'that ends', name, why)
            self._told[name] = why
            return
        if action == decide.HEAL_WAIT:
            log.info('heal %s: %s', name, why)
            return
        if not self._command(decision, name):
            return
        if data.get('unlisted'):
            log.warning('heal %s: %s moves its record from %s to %s, which the table of steps does not list', name,
                        action, data['unlisted'][0], data['unlisted'][1])
        self._record(name, data)
        self._say(decision, name)
        if action in (decide.HEAL_POWER_UP, decide.HEAL_REPLACE_AGAIN, decide.HEAL_RETURN):
            self._told.pop(name, None)
        if action in COUNTS:
            done[COUNTS[action]].append(name)

    def _command(self, decision, name):
        """The scontrol command (or request) of a decision; False when one that must take did not."""
        action, data = decision.action, decision.data
        if action == decide.HEAL_POWER_UP:
            if data.get('undrain'):
                self.slurm.return_to_service(name)
            status = self._update(name, 'state=POWER_UP')
            if status:
                log.warning('heal %s: powered down; POWER_UP failed (scontrol exited %s), tried again', name, status)
            return not status
        if action == decide.HEAL_DONE and data.get('undrain'):
            self.slurm.return_to_service(name)
        elif action == decide.HEAL_POWER_DOWN_AGAIN:
            self.slurm.power_down(name, '%s replacing (%s)' % (HEAL_PREFIX, data['old']))
        elif action == decide.HEAL_POWER_UP_AGAIN:
            self._update(name, 'state=POWER_UP')
        elif action == decide.HEAL_ASK_AGAIN:
            self.submit('replace', name, addr=data['addr'])
        elif action == decide.HEAL_LEAVE:
            self._update(name, 'state=DRAIN', 'reason=%s' % data['reason'])
        elif action == decide.HEAL_RETURN:
            return not self.slurm.return_to_service(name)
        elif action == decide.HEAL_REPLACE_STATIC:
            status = self._update(name, 'state=DRAIN', 'reason=%s replacing (%s)' % (HEAL_PREFIX, data['old']))
            if status:
                log.warning('heal %s: not replaced now: %s; tried again later', name, 'DRAIN failed (scontrol exited %s)' % status)
                return False
            self.submit('replace', name, addr=data['addr'])
        elif action in (decide.HEAL_REPLACE, decide.HEAL_REPLACE_AGAIN):
            sick = action == decide.HEAL_REPLACE
            if sick:
                status = self.slurm.power_down(name, '%s replacing (%s)' % (HEAL_PREFIX, data['old']))
            else:
                status = self._update(name, 'state=POWER_UP')
            if status:
                log.warning('heal %s: %s failed (scontrol exited %s); tried again later', name,
                            'POWER_DOWN_FORCE' if sick else 'POWER_UP', status)
                return False
        return True

    def _record(self, name, data):
        """The record a decision leaves in the state file."""
        def write(heal):
            if data.get('drop'):
                heal['nodes'].pop(name, None)
            elif 'record' in data:
                if data.get('new'):
                    heal['nodes'][name] = dict(data['record'])
                else:
                    heal['nodes'].setdefault(name, {}).update(data['record'])
            if 'started' in data:
                self._started(heal, data['started'])
            if 'drain_to_service' in data:
                heal['last_drain_to_service'] = data['drain_to_service']
        if data.get('drop') or 'record' in data or 'started' in data:
            self._write(write)

    def _say(self, decision, name):
        """The log line of an applied decision."""
        action, why, data = decision.action, decision.why, decision.data
        limit = self.heal['max_per_hour']
        if action == decide.HEAL_POWER_UP:
            log.info('heal %s: %s; powering up a new one (state=POWER_UP)', name, why)
        elif action == decide.HEAL_UP_BY_HAND:
            log.info('heal %s: powered up by another hand after its power down; following the new instance', name)
        elif action == decide.HEAL_DONE_BY_HAND:
            log.info('heal %s: %s (another hand powered it up)', name, why)
        elif action == decide.HEAL_POWER_DOWN_AGAIN:
            log.info('heal %s: %s; POWER_DOWN_FORCE again', name, why)
        elif action == decide.HEAL_DROP:
            log.info('heal %s: drained by a person while it was being replaced (%s); left to them', name, why)
        elif action == decide.HEAL_DONE:
            log.info('heal %s: %s (drain to registered; the new instance passed its checks)', name, why)
        elif action == decide.HEAL_POWER_UP_AGAIN:
            log.info('heal %s: still powered down; POWER_UP again', name)
        elif action == decide.HEAL_ASK_AGAIN:
            log.warning('heal %s: its replacement through the pool ended without a result; asked again', name)
        elif action == decide.HEAL_FAIL:
            log.warning('heal %s: replacement %d failed: %s; tried again within the limits', name, data['failures'], why)
        elif action == decide.HEAL_LEAVE:
            log.warning('heal %s: %s', name, why)
        elif action == decide.HEAL_FOUND:
            log.info('heal %s: %s; waiting for its pull, checks and slurmd', name, why)
        elif action == decide.HEAL_RETURN:
            log.info('heal %s: drained by the checks (%s) and powered down already (its instance is gone); returned to '
                     'service powered down (state=RESUME): its next instance is checked in its pull', name, why)
        elif action == decide.HEAL_REPLACE_STATIC:
            log.info('heal %s: drained by the checks (%s) with no job on it; replacing its instance through the '
                     'cluster network\'s pool (replacement %d of at most %s this hour)', name, data['old'], data['count'],
                     limit)
        elif action == decide.HEAL_REPLACE:
            log.info('heal %s: drained by the checks (%s) with no job on it; replacing it (state=POWER_DOWN_FORCE; '
                     'replacement %d of at most %s this hour)', name, data['old'], data['count'], limit)
        elif action == decide.HEAL_REPLACE_AGAIN:
            log.info('heal %s: powering up another new instance (state=POWER_UP; replacement %d of at most %s '
                     'this hour)', name, data['count'], limit)

    # static nodes, replaced through the pool
    def replacing(self, name):
        """Whether name is a static node whose new instance is on its way (its pull reports a failure)."""
        return name in self.static and (self._read()['nodes'].get(name) or {}).get('step') in (POOL, UP)

    def replaced(self, name, found, error):
        """The service's replacement of a static node ended: found (the new instance) or error."""
        done = dict(replaced=[], powered_up=[], healed=[], failed=[], left=[])
        now = self.clock()
        for decision in decide.replaced(self._read(), name, found, error, now, time.time(),
                                        decide.settings(self.config, self.heal, self.static)):
            self._apply(decision, done)
        self._count(done)

    def _count(self, done):
        if any(done.values()):
            def count(h):
                counts = h.setdefault('counts', {})
                for key, names in done.items():
                    counts[key] = int(counts.get(key, 0)) + len(names)
            self._write(count)

    def _update(self, name, *values):
        return self.slurm.command([self.slurm.scontrol, 'update', 'nodename=%s' % name] + list(values))

    @staticmethod
    def _started(heal, now):
        """Count a replacement started now; those of the last hour are kept for max_per_hour."""
        heal['started'] = [t for t in heal['started'] if now - t < 3600] + [now]
