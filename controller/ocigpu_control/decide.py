# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The decisions of the autoscaler service's loop, apart from their doing.

Each pass of the loop observes (Slurm's nodes, the cluster networks OCI lists, the loop's records in the
state file, the names the requests at work hold), hands what it saw to a function of this module, and
applies the decisions it gets back, in their order, once per group of names:

    decisions = decide(observation, now, settings)   # [Decision(action, names, why, data)]

Nothing here runs a command, reads a file or the clock: every decision is a row of a table test
(tests/unit/controller/test_decide.py). The service (service.py) applies the reconcile's actions, the
self-healing loop (heal.py) those of the ``HEAL_*`` family, with the log sentence of each.

A node is a ``Node`` of module_utils/_slurm.py (its named predicates: powered_down, power_down_done,
powering_up, powered_up, drain, busy, down, not_responding, resume_failed, and its reason, address and
slurmd_start).

The steps of a node the self-healing loop follows (the state file's ``heal.nodes.<name>.step``) move
along ``TRANSITIONS``, each row with the action that moves it and when; a move the table does not list is
marked (``data['unlisted']``) and the loop says so in its log (the table tests hold none).
"""

from __future__ import annotations

import collections

from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import is_stock_out
from ansible_collections.ocigpu.cluster.plugins.module_utils._health import ACTIVE_DRAIN_PREFIX, DRAIN_PREFIX

# Reasons of DOWN nodes that the service returns to service: a failed resume, never a person's.
RETURN_REASONS = ('ResumeTimeout reached', 'ocigpu-autoscaler')
# The reason prefix of the self-healing loop's own drains.
HEAL_PREFIX = 'ocigpu-heal:'

# The reconcile's actions.
RETURN_TO_SERVICE = 'return_to_service'   # DOWN and powered down after a failed resume: state=RESUME
TAKE_OVER = 'take_over'                   # powering up with no resume at work for takeover_after: a resume request
WATCH = 'watch'                           # powering up with no resume at work, not for long yet: its time is kept
TERMINATE_NETWORK = 'terminate_network'   # a cluster network whose nodes are all powered down: terminated

# The self-healing loop's actions.
HEAL_REPLACE = 'heal_replace'                   # drained by a check, no job: POWER_DOWN_FORCE, the old instance goes
HEAL_REPLACE_STATIC = 'heal_replace_static'     # a static node drained by a check: DRAIN, a replace request (the pool)
HEAL_REPLACE_AGAIN = 'heal_replace_again'       # a failed replacement, powered down again: POWER_UP
HEAL_RETURN = 'heal_return'                     # drained by a check and powered down already: state=RESUME
HEAL_HELD = 'heal_held'                         # powered down, its old instance runs on: kept drained, waits
HEAL_POWER_UP = 'heal_power_up'                 # its old instance is gone: POWER_UP
HEAL_POWER_UP_AGAIN = 'heal_power_up_again'     # still powered down a minute after POWER_UP: POWER_UP again
HEAL_POWER_DOWN_AGAIN = 'heal_power_down_again'  # still powered up a minute after its power down: once more
HEAL_UP_BY_HAND = 'heal_up_by_hand'             # powered up by another hand: its new instance is followed
HEAL_DONE = 'heal_done'                         # the new instance registered: back in service
HEAL_DONE_BY_HAND = 'heal_done_by_hand'         # powered down, up and registered by another hand
HEAL_FOUND = 'heal_found'                       # a static node's new instance came from the pool
HEAL_ASK_AGAIN = 'heal_ask_again'               # a static node's replace request ended without a word: asked again
HEAL_FAIL = 'heal_fail'                         # a replacement failed: another within the limits
HEAL_LEAVE = 'heal_leave'                       # left drained for a person
HEAL_DROP = 'heal_drop'                         # drained by a person while being replaced: theirs
HEAL_FORGET = 'heal_forget'                     # the record goes (failure window over, a person resumed it)
HEAL_PAUSE = 'heal_pause'                       # too many drained at once: nothing is replaced
HEAL_UNPAUSE = 'heal_unpause'
HEAL_WAIT = 'heal_wait'                         # max_at_once or max_per_hour reached

# The steps (None: no record).
NEW = None
DOWN = 'down'          # POWER_DOWN_FORCE given; its old instance is going
UP = 'up'              # its new instance is on its way (POWER_UP given, or one came from the pool)
AGAIN = 'again'        # a replacement failed; another is tried within the limits
HEALTHY = 'healthy'    # back in service, watched for heal.failure_window
LEFT = 'left'          # left drained for a person
POOL = 'pool'          # a static node whose replacement through the cluster network's pool is asked for

# What a step is called in the metrics (heal.metrics_text).
STEP_NAMES = {DOWN: 'replacing', UP: 'powering_up', AGAIN: 'retrying', HEALTHY: 'in_service', LEFT: 'left_for_a_person',
              POOL: 'replacing_in_the_pool'}
# The steps whose nodes are followed each pass; those counted against max_at_once; those a new replacement starts from.
FOLLOWED = (DOWN, UP, HEALTHY, POOL)
AT_WORK = (DOWN, UP, POOL)
STARTS_FROM = (NEW, AGAIN, HEALTHY)

Transition = collections.namedtuple('Transition', 'source target action when')
TRANSITIONS = (
    Transition(NEW, DOWN, HEAL_REPLACE, 'drained by a hardware check, no job on it, within the limits'),
    Transition(AGAIN, DOWN, HEAL_REPLACE, 'drained by a hardware check again after a failed replacement'),
    Transition(HEALTHY, DOWN, HEAL_REPLACE, 'drained by a hardware check after its failure window'),
    Transition(NEW, POOL, HEAL_REPLACE_STATIC, 'a static node drained by a hardware check, no job, within the limits'),
    Transition(AGAIN, POOL, HEAL_REPLACE_STATIC, 'a static node whose new instance failed'),
    Transition(HEALTHY, POOL, HEAL_REPLACE_STATIC, 'a static node drained by a hardware check again'),
    Transition(AGAIN, UP, HEAL_REPLACE_AGAIN, 'its failed new instance is powered down and gone'),
    Transition(NEW, HEALTHY, HEAL_RETURN, 'drained by a hardware check and powered down already, instance gone'),
    Transition(AGAIN, HEALTHY, HEAL_RETURN, 'the same, after a failed replacement'),
    Transition(HEALTHY, HEALTHY, HEAL_RETURN, 'the same, within its failure window'),
    Transition(POOL, HEALTHY, HEAL_RETURN, 'the same, for a name that was static before'),
    Transition(DOWN, DOWN, HEAL_POWER_DOWN_AGAIN, 'still powered up a minute after its power down'),
    Transition(DOWN, UP, HEAL_POWER_UP, 'powered down, its old instance gone'),
    Transition(DOWN, UP, HEAL_UP_BY_HAND, 'powering up before the loop powered it up'),
    Transition(DOWN, HEALTHY, HEAL_DONE_BY_HAND, 'powered up, registered and not drained a minute after'),
    Transition(DOWN, NEW, HEAL_DROP, 'drained by a person with a reason of their own'),
    Transition(UP, UP, HEAL_POWER_UP_AGAIN, 'still powered down a minute after POWER_UP'),
    Transition(UP, HEALTHY, HEAL_DONE, 'its new instance registered'),
    Transition(UP, AGAIN, HEAL_FAIL, 'its resume failed, or no registration within ResumeTimeout (static_timeout)'),
    Transition(UP, LEFT, HEAL_LEAVE, 'out of host capacity, or max_failures failures in a row'),
    Transition(POOL, POOL, HEAL_ASK_AGAIN, 'its replace request ended without a result two minutes ago'),
    Transition(POOL, UP, HEAL_FOUND, 'a new instance came from the pool'),
    Transition(UP, UP, HEAL_FOUND, 'a second replace request (asked again) found the same new instance'),
    Transition(POOL, AGAIN, HEAL_FAIL, 'the replacement through the pool failed'),
    Transition(POOL, LEFT, HEAL_LEAVE, 'the pool is out of host capacity, or max_failures failures in a row'),
    Transition(HEALTHY, NEW, HEAL_FORGET, 'its failure window is over'),
    Transition(HEALTHY, AGAIN, HEAL_FAIL, 'drained again by a hardware check within its failure window'),
    Transition(HEALTHY, LEFT, HEAL_LEAVE, 'the same, after max_failures failures in a row'),
    Transition(LEFT, NEW, HEAL_FORGET, 'a person returned it to service'),
)
_ALLOWED = frozenset((t.source, t.target, t.action) for t in TRANSITIONS)


def next_steps(step):
    """The steps a record at step may move to."""
    return sorted(set(t.target for t in TRANSITIONS if t.source == step), key=str)


class Decision(collections.namedtuple('Decision', 'action names why data')):
    """One action for a group of names: why (the words of its log line) and data (what applying it needs;
    for the self-healing loop, the record it leaves: 'record', the values set, the whole record when 'new';
    or 'drop'; and 'started' when it counts against max_per_hour)."""

    def __new__(cls, action, names, why='', data=None):
        return super(Decision, cls).__new__(cls, action, list(names), why, dict(data or {}))


class Observation(object):
    """What one pass of the loop saw.

    nodes: {name: Node} of the nodes watched; busy: names the requests at work or waiting hold;
    networks: [(cluster network id, display name, [Slurm names])] of the live ones, None when not listed;
    resumed: names the service resumed that may still boot; powering_seen: {name: when the loop first
    saw it powering up with no request}; heal: the state file's 'heal' record ({nodes, started, paused});
    carriers: {name: what carries it} for the names a live cluster network carries (none by default), or a
    function that returns that, or None when OCI does not answer (called once, when a decision needs it)."""

    def __init__(self, nodes, busy=(), networks=None, resumed=(), powering_seen=None, heal=None, carriers=None):
        self.nodes = nodes
        self.busy = set(busy)
        self.networks = networks
        self.resumed = set(resumed)
        self.powering_seen = dict(powering_seen or {})
        self.heal = heal or dict(nodes={}, started=[], paused=False)
        self._carriers = {} if carriers is None else carriers
        self._asked = not callable(self._carriers)

    def held(self, name):
        """What still carries name's old instance ('' when nothing does)."""
        if not self._asked:
            self._carriers, self._asked = self._carriers(), True
        if self._carriers is None:
            return 'OCI does not answer'
        return self._carriers.get(name) or ''


def settings(config, heal=None, static=()):
    """What the decisions read of the service's configuration; heal: the heal section with its defaults;
    static: the static nodes the self-healing loop replaces through the pool."""
    return dict(on_demand=list(config['node_names']), static=list(static),
                takeover_after=float(config['takeover_after']), reason_prefix=config['resume_fail_reason_prefix'],
                heal=dict(heal or dict(enabled=False)))


def hardware_checks(reason, checks):
    """The checks of a health-check drain reason ('ocigpu-health: gpu_count 7 of 8; xid 79') among checks;
    an active check's ('ocigpu-nccl: all_reduce busbw ... below the threshold ...') is nccl_active."""
    if reason.startswith(ACTIVE_DRAIN_PREFIX):
        return ['nccl_active'] if 'nccl_active' in checks else []
    if not reason.startswith(DRAIN_PREFIX):
        return []
    named = [part.strip().split(' ')[0] for part in reason[len(DRAIN_PREFIX):].split(';') if part.strip()]
    return [c for c in named if c in checks]


def decide(observation, now, conf):
    """Every decision of one reconcile: the self-healing loop's first (it reads the reasons of failed new
    instances before they are returned to service), then the reconcile's."""
    return heal(observation, now, conf) + reconcile(observation, now, conf)


# The reconcile -----------------------------------------------------------------------------------------

def reconcile(obs, now, conf):
    """The reconcile's decisions (service.py's docs): return DOWN nodes after a failed resume, take over
    nodes powering up with no resume at work, terminate cluster networks whose nodes are all powered down.
    Names a request holds are left to it."""
    nodes, busy = obs.nodes, obs.busy
    mine = [n for n in conf['on_demand'] if n in nodes and n not in busy]
    decisions = []
    down = [n for n in mine if nodes[n].resume_failed(RETURN_REASONS)]
    if down:
        decisions.append(Decision(RETURN_TO_SERVICE, down, '; '.join(sorted(set(nodes[n].reason for n in down)))))
    # Nodes this service resumed boot and register on their own time (up to ResumeTimeout).
    booting = set(n for n in obs.resumed if n in nodes and nodes[n].powering_up)
    up = [n for n in mine if n not in booting and nodes[n].powering_up]
    seen = dict((n, obs.powering_seen.get(n, now)) for n in up)
    orphans = [n for n in up if now - seen[n] >= conf['takeover_after']]
    if orphans:
        decisions.append(Decision(TAKE_OVER, orphans, 'powering up for %ds with no resume at work' % int(
            now - min(seen[n] for n in orphans)), dict(since=min(seen[n] for n in orphans))))
    watched = [n for n in up if n not in orphans]
    if watched:
        decisions.append(Decision(WATCH, watched, 'powering up with no resume at work',
                                  dict(seen=dict((n, seen[n]) for n in watched))))
    for cn_id, display_name, carried in obs.networks or []:
        if set(carried) & busy:
            continue
        if all(n in nodes and nodes[n].powered_down for n in carried):
            decisions.append(Decision(TERMINATE_NETWORK, carried, 'carries only powered-down nodes',
                                      dict(id=cn_id, display_name=display_name)))
    return decisions


# The self-healing loop ---------------------------------------------------------------------------------

class _Plan(object):
    """The decisions of one pass of the self-healing loop, and the records as they are after them."""

    def __init__(self, heal):
        self.records = dict((n, dict(r)) for n, r in (heal.get('nodes') or {}).items())
        self.started = list(heal.get('started') or [])
        self.decisions = []

    def step(self, name):
        return (self.records.get(name) or {}).get('step')

    def add(self, action, name, why='', record=None, drop=False, started=None, **data):
        """A decision for one name; record: the values its record gets (merged unless data['new'])."""
        source = self.step(name)
        if drop:
            target = NEW
            self.records.pop(name, None)
            data['drop'] = True
        elif record is not None:
            if data.get('new'):
                self.records[name] = dict(record)
            else:
                self.records.setdefault(name, {}).update(record)
            target = self.records[name].get('step')
            data['record'] = record
        else:
            target = source
        if (record is not None or drop) and (source, target, action) not in _ALLOWED:
            # Not in the table: applied all the same (the loop goes on), and said in the log.
            data['unlisted'] = (source, target)
        if started is not None:
            self.started.append(started)
            data['started'] = started
        self.decisions.append(Decision(action, [name], why, data))


def heal(obs, now, conf):
    """The self-healing loop's decisions (heal.py's docs) for one pass."""
    settings_ = conf['heal']
    if not settings_.get('enabled'):
        return []
    plan = _Plan(obs.heal)
    followed = set()
    for name in sorted(plan.records):
        if name in obs.nodes and name not in obs.busy and plan.step(name) in FOLLOWED:
            _follow(plan, obs, name, obs.nodes[name], now, conf)
            followed.add(name)
    # What Slurm showed is older than the commands just given for the nodes followed: those wait.
    _start(plan, obs, dict((n, v) for n, v in obs.nodes.items() if n not in followed), now, conf)
    return plan.decisions


def _held(plan, obs, name, node, old):
    """Whether name's old instance still runs (its cluster network is kept for nodes in use, or OCI does
    not answer): its new instance waits, or a resume would adopt the old one; it stays drained meanwhile."""
    held = obs.held(name)
    if held:
        plan.add(HEAL_HELD, name, held, drain=not node.drain, old=old)
    return bool(held)


def _fail(plan, name, rec, why, now, conf):
    failures = int(rec.get('failures', 0)) + 1
    if failures >= int(conf['heal']['max_failures']):
        _leave(plan, name, 'left for a person after %d failed replacements in a row: %s' % (failures, why))
        return
    plan.add(HEAL_FAIL, name, why, record=dict(step=AGAIN, failures=failures, failed_at=now), failures=failures)


def _leave(plan, name, why):
    reason = ('%s %s' % (HEAL_PREFIX, why))[:200]
    plan.add(HEAL_LEAVE, name, why, record=dict(step=LEFT, reason=reason), new=True, reason=reason)


def _capacity_or_fail(plan, name, rec, message, why, now, conf):
    if is_stock_out(message) or 'waiting for capacity' in message.lower():
        _leave(plan, name, 'no host for a new instance (%s); left drained, nothing else is tried' % message)
    else:
        _fail(plan, name, rec, why, now, conf)


def _follow(plan, obs, name, node, now, conf):
    rec = plan.records[name]
    step = rec['step']
    checks = conf['heal']['checks']
    if name in conf['static'] and step in (POOL, UP):
        _follow_static(plan, name, rec, node, now, conf)
        return
    if step == DOWN:
        if node.power_down_done:
            if _held(plan, obs, name, node, rec.get('reason', '')):
                return
            # The loop's own drain goes first (Slurm may keep DRAIN over a power down): the new instance
            # registers undrained; it was checked in its pull.
            plan.add(HEAL_POWER_UP, name, 'old instance gone after %.0fs' % (now - rec['since']),
                     record=dict(step=UP, up_since=now), undrain=node.drain and node.reason.startswith(HEAL_PREFIX))
        elif node.powering_up:
            # Powered up by another hand before the loop did it (a person's POWER_UP): followed as the loop's own.
            plan.add(HEAL_UP_BY_HAND, name, 'powered up by another hand', record=dict(step=UP, up_since=now))
        elif node.powered_up and now - rec['since'] > 60:
            if not node.drain:
                plan.add(HEAL_DONE_BY_HAND, name, 'back in service after %.0fs' % (now - rec['drained_seen']),
                         record=dict(step=HEALTHY, healed_at=now))
            elif node.reason.startswith(HEAL_PREFIX) or hardware_checks(node.reason, checks):
                # The power down did not take (slurmctld restarted in between): once more.
                plan.add(HEAL_POWER_DOWN_AGAIN, name, 'still powered up %.0fs after its power down' % (now - rec['since']),
                         record=dict(since=now), old=rec.get('reason', ''))
            else:
                plan.add(HEAL_DROP, name, node.reason, drop=True)
        return
    if step == HEALTHY:
        # Drained again by the checks soon after: the replacement failed too.
        if now - rec['healed_at'] > float(conf['heal']['failure_window']):
            plan.add(HEAL_FORGET, name, 'its failure window is over', drop=True)
        elif node.drain and hardware_checks(node.reason, checks):
            _fail(plan, name, rec, 'drained again %.0fs after its replacement: %s' % (now - rec['healed_at'], node.reason),
                  now, conf)
        return
    # step UP: waiting for the new instance (not powering up from here on: powered_down is POWERED_DOWN)
    if node.powering_up:
        return
    prefix = conf['reason_prefix']
    if node.reason.startswith(prefix) and (node.powered_down or node.down):
        message = node.reason[len(prefix):].lstrip(': ')
        _capacity_or_fail(plan, name, rec, message, 'the new instance failed: %s' % message, now, conf)
        return
    if 'ResumeTimeout' in node.reason:
        _fail(plan, name, rec, 'the new instance did not register within ResumeTimeout', now, conf)
        return
    if node.powered_up and not node.down:
        _done(plan, name, rec, node, now)
    elif node.powered_down and now - rec['up_since'] > 60:
        # POWER_UP did not take (slurmctld restarted in between): once more.
        plan.add(HEAL_POWER_UP_AGAIN, name, 'still powered down', record=dict(up_since=now))


def _done(plan, name, rec, node, now):
    """The new instance registered: the loop's own drain goes, the node takes jobs."""
    plan.add(HEAL_DONE, name, 'back in service after %.0fs' % (now - rec['drained_seen']),
             record=dict(step=HEALTHY, healed_at=now), undrain=node.drain and node.reason.startswith(HEAL_PREFIX),
             drain_to_service=now - rec['drained_seen'])


def _follow_static(plan, name, rec, node, now, conf):
    if rec['step'] == POOL:
        # The service's request ended without a word (an unexpected error): it is asked again; the
        # replacement picks up where it was (static.py).
        if now - rec['since'] > 120:
            plan.add(HEAL_ASK_AGAIN, name, 'its replacement through the pool ended without a result',
                     record=dict(since=now), addr=rec.get('addr', ''))
        return
    prefix = conf['reason_prefix']
    if node.reason.startswith(prefix):
        _fail(plan, name, rec, 'the new instance failed: %s' % node.reason[len(prefix):].lstrip(': '), now, conf)
        return
    started = node.slurmd_start
    if started is not None and started >= rec.get('up_wall', 0) - 5 and not (node.down or node.not_responding):
        # The new instance's slurmd registered (it starts only after the pull and the checks passed).
        _done(plan, name, rec, node, now)
    elif now - rec['up_since'] > float(conf['heal']['static_timeout']):
        _fail(plan, name, rec, 'the new instance did not register within %ss' % conf['heal']['static_timeout'], now, conf)


def replaced(heal_record, name, found, error, now, wall, conf):
    """The decisions when the service's replacement of a static node ended: found (the new instance:
    id, private_ip) or error (its words)."""
    plan = _Plan(heal_record)
    rec = dict(plan.records.get(name) or {})
    if found is not None:
        # up_wall: wall-clock time, for slurmd's start time (the loop's clock may be monotonic).
        plan.add(HEAL_FOUND, name, 'new instance %s at %s from the pool' % (found['id'], found['private_ip']),
                 record=dict(step=UP, up_since=now, up_wall=wall, instance_id=found['id']))
    else:
        _capacity_or_fail(plan, name, rec, error, 'the replacement through the pool failed: %s' % error, now, conf)
    return plan.decisions


def _start(plan, obs, nodes, now, conf):
    settings_ = conf['heal']
    checks = settings_['checks']
    busy = obs.busy
    static = conf['static']
    up = [n for n in conf['on_demand'] + static if n in nodes and nodes[n].powered_up]
    sick = [n for n in up if nodes[n].drain and hardware_checks(nodes[n].reason, checks)]
    # A node left for a person that a person returned to service (no longer drained) starts afresh.
    for name in sorted(plan.records):
        if plan.step(name) == LEFT and name in nodes and not nodes[name].drain:
            plan.add(HEAL_FORGET, name, 'returned to service by a person', drop=True)
    records = dict((n, dict(r)) for n, r in plan.records.items())
    candidates = [n for n in sick if n not in busy and not nodes[n].busy and plan.step(n) in STARTS_FROM]
    # A node whose new instance failed and that is powered down again (its suspend ran: a later reconcile
    # than the one that saw the failure): only a power up is left to do.
    candidates += [n for n, r in sorted(records.items()) if r.get('step') == AGAIN and n in nodes and n not in busy
                   and nodes[n].power_down_done and now > float(r.get('failed_at', 0))
                   and not _held(plan, obs, n, nodes[n], r.get('reason', ''))]
    # A static node whose new instance failed is replaced again (it stays drained meanwhile).
    candidates += [n for n, r in sorted(records.items()) if r.get('step') == AGAIN and n in static
                   and n in nodes and n not in busy and n not in candidates and not nodes[n].busy
                   and now > float(r.get('failed_at', 0))]
    at_work = [n for n, r in records.items() if r.get('step') in AT_WORK]
    recent = [t for t in plan.started if now - t < 3600]
    # Slurm powered a sick idle node down before the loop got to it (SuspendTime): its instance is gone
    # already (once its cluster network ended), and the next one is checked in its pull. It goes back to
    # service powered down.
    gone = [n for n in conf['on_demand'] if n in nodes and n not in busy
            and nodes[n].drain and nodes[n].power_down_done and hardware_checks(nodes[n].reason, checks)
            and plan.step(n) not in (DOWN, UP, LEFT) and not _held(plan, obs, n, nodes[n], nodes[n].reason)]
    for name in gone:
        rec = records.get(name, {})
        plan.add(HEAL_RETURN, name, nodes[name].reason, record=dict(
            step=HEALTHY, healed_at=now, failures=int(rec.get('failures', 0)), reason=nodes[name].reason),
            new=True, started=now)
    if not candidates:
        return
    share = 1.0 - float(settings_['min_in_service_share'])
    if len(sick) >= 2 and len(sick) > share * len(up):
        if not obs.heal.get('paused'):
            plan.decisions.append(Decision(HEAL_PAUSE, sick, '%d of %d powered-up on-demand nodes are drained by the '
                                           'checks at once (more than %d%%)' % (len(sick), len(up), round(share * 100))))
        return
    if obs.heal.get('paused'):
        plan.decisions.append(Decision(HEAL_UNPAUSE, [], 'fewer nodes are drained by the checks'))
    for name in candidates:
        if len(at_work) >= int(settings_['max_at_once']):
            plan.decisions.append(Decision(HEAL_WAIT, [name], 'waiting: %d replacement(s) at work (at most %s at once)' % (
                len(at_work), settings_['max_at_once'])))
            break
        if len(recent) >= int(settings_['max_per_hour']):
            plan.decisions.append(Decision(HEAL_WAIT, [name], 'waiting: %d replacement(s) started in the last hour '
                                           '(at most %s)' % (len(recent), settings_['max_per_hour'])))
            break
        rec = records.get(name, {})
        old = nodes[name].reason if name in sick else rec.get('reason', '')
        kept = dict(drained_seen=rec.get('drained_seen', now), failures=int(rec.get('failures', 0)), reason=old)
        at_work.append(name)
        recent.append(now)
        if name in static:
            addr = nodes[name].address or ''
            plan.add(HEAL_REPLACE_STATIC, name, old, record=dict(kept, step=POOL, since=now, up_since=now, addr=addr),
                     new=True, started=now, addr=addr, old=old, count=len(recent))
        elif name in sick:
            plan.add(HEAL_REPLACE, name, old, record=dict(kept, step=DOWN, since=now, up_since=now), new=True,
                     started=now, old=old, count=len(recent))
        else:
            plan.add(HEAL_REPLACE_AGAIN, name, old, record=dict(kept, step=UP, since=now, up_since=now), new=True,
                     started=now, old=old, count=len(recent))
