# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The decisions of the autoscaler service's loop (controller/ocigpu_control/decide.py), one row per
(observation -> action): what Slurm shows of a few nodes, the loop's records, the names the requests hold
and the cluster networks OCI lists, and the one action each group of nodes gets. No service is stepped."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import Node
from ocigpu_control import decide
from ocigpu_control import heal as heal_loop

NOW = 100000.0
SICK = 'ocigpu-health: gpu_count 7 of 8'
FAILED = 'ocigpu-autoscaler: cluster network x failed: Out of host capacity.'
CONFIG = dict(node_names=['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4'], takeover_after=20,
              resume_fail_reason_prefix='ocigpu-autoscaler')

# Slurm's states, as scontrol prints them.
IDLE = 'IDLE+CLOUD'
OFF = 'IDLE+CLOUD+POWERED_DOWN'
BOOTING = 'IDLE+CLOUD+POWERING_UP'
GOING = 'IDLE+CLOUD+POWERED_DOWN+POWERING_DOWN'
DRAINED = 'IDLE+CLOUD+DRAIN'
DRAINED_OFF = 'IDLE+CLOUD+DRAIN+POWERED_DOWN'
FAILED_OFF = 'DOWN+CLOUD+POWERED_DOWN'


def settings(static=(), **heal):
    return decide.settings(CONFIG, dict(heal_loop.DEFAULTS, **dict(dict(enabled=True), **heal)), static)


def nodes_of(spec):
    """{name: Node} from {name: state} or {name: (state, reason)} or {name: (state, reason, slurmd_start)}."""
    found = {}
    for name, value in spec.items():
        value = value if isinstance(value, tuple) else (value,)
        found[name] = Node(name, state=value[0], reason=value[1] if len(value) > 1 else '',
                           address='10.0.0.%s' % name.split('-')[-1],
                           slurmd_start=value[2] if len(value) > 2 else None)
    return found


def actions(decisions):
    return [(d.action, d.names) for d in decisions]


# The reconcile ------------------------------------------------------------------------------------------

def network(cn_id, *names):
    return (cn_id, 'cn-' + cn_id, list(names))


RECONCILE = [
    # (id, nodes, busy, resumed, powering_seen, networks, expected)
    ('a failed resume (ResumeTimeout) goes back to service', {'gpu-1': (FAILED_OFF, 'ResumeTimeout reached')},
     (), (), {}, [], [(decide.RETURN_TO_SERVICE, ['gpu-1'])]),
    ("the autoscaler's own failed resume goes back to service", {'gpu-1': (FAILED_OFF, FAILED)},
     (), (), {}, [], [(decide.RETURN_TO_SERVICE, ['gpu-1'])]),
    ('all failed resumes in one group (one scontrol)', {'gpu-1': (FAILED_OFF, FAILED), 'gpu-3': (FAILED_OFF, 'ResumeTimeout reached')},
     (), (), {}, [], [(decide.RETURN_TO_SERVICE, ['gpu-1', 'gpu-3'])]),
    ("a person's DOWN is never returned", {'gpu-1': (FAILED_OFF, 'maintenance by ops')}, (), (), {}, [], []),
    ('a DOWN node that is powered up is not a failed resume', {'gpu-1': ('DOWN+CLOUD', FAILED)}, (), (), {}, [], []),
    ('a failed resume a request holds is left to it', {'gpu-1': (FAILED_OFF, FAILED)}, ('gpu-1',), (), {}, [], []),
    ('a node that is not autoscaled is left alone', {'gpu-9': (FAILED_OFF, FAILED)}, (), (), {}, [], []),
    ('a node powering up with no resume at work is watched', {'gpu-2': BOOTING}, (), (), {}, [],
     [(decide.WATCH, ['gpu-2'])]),
    ('watched, not for takeover_after yet', {'gpu-2': BOOTING}, (), (), {'gpu-2': NOW - 19}, [],
     [(decide.WATCH, ['gpu-2'])]),
    ('an orphan powering up for takeover_after is taken over', {'gpu-2': BOOTING, 'gpu-3': BOOTING}, (), (),
     {'gpu-2': NOW - 20, 'gpu-3': NOW - 30}, [], [(decide.TAKE_OVER, ['gpu-2', 'gpu-3'])]),
    ('one orphan taken over, the other still watched', {'gpu-2': BOOTING, 'gpu-3': BOOTING}, (), (),
     {'gpu-2': NOW - 25}, [], [(decide.TAKE_OVER, ['gpu-2']), (decide.WATCH, ['gpu-3'])]),
    ('a node this service resumed boots on its own time', {'gpu-2': BOOTING}, (), ('gpu-2',), {'gpu-2': NOW - 300}, [], []),
    ('a node powering up that a request holds is not an orphan', {'gpu-2': BOOTING}, ('gpu-2',), (),
     {'gpu-2': NOW - 300}, [], []),
    ('a cluster network whose nodes are all powered down is terminated', {'gpu-1': OFF, 'gpu-2': OFF}, (), (), {},
     [network('cn1', 'gpu-1', 'gpu-2')], [(decide.TERMINATE_NETWORK, ['gpu-1', 'gpu-2'])]),
    ('a power down under way counts as powered down', {'gpu-1': GOING}, (), (), {}, [network('cn1', 'gpu-1')],
     [(decide.TERMINATE_NETWORK, ['gpu-1'])]),
    ('a cluster network with a node in use is kept', {'gpu-1': OFF, 'gpu-2': IDLE}, (), (), {},
     [network('cn1', 'gpu-1', 'gpu-2')], []),
    ('a cluster network with a node powering up is kept', {'gpu-1': OFF, 'gpu-2': BOOTING}, (), ('gpu-2',), {},
     [network('cn1', 'gpu-1', 'gpu-2')], []),
    ('a cluster network a request works on is skipped (busy names)', {'gpu-1': OFF, 'gpu-2': OFF}, ('gpu-2',), (), {},
     [network('cn1', 'gpu-1', 'gpu-2')], []),
    ('a cluster network with a name Slurm does not show is kept', {'gpu-1': OFF}, (), (), {},
     [network('cn1', 'gpu-1', 'gpu-2')], []),
    ('each cluster network decided alone', {'gpu-1': OFF, 'gpu-2': IDLE, 'gpu-3': OFF}, (), (), {},
     [network('cn1', 'gpu-1'), network('cn2', 'gpu-2'), network('cn3', 'gpu-3')],
     [(decide.TERMINATE_NETWORK, ['gpu-1']), (decide.TERMINATE_NETWORK, ['gpu-3'])]),
    ('no listing of OCI, nothing terminated', {'gpu-1': OFF}, (), (), {}, None, []),
]


@pytest.mark.parametrize('nodes, busy, resumed, seen, networks, expected', [r[1:] for r in RECONCILE],
                         ids=[r[0] for r in RECONCILE])
def test_reconcile(nodes, busy, resumed, seen, networks, expected):
    observed = decide.Observation(nodes_of(nodes), busy, networks=networks, resumed=resumed, powering_seen=seen)
    assert actions(decide.reconcile(observed, NOW, settings())) == expected


def test_the_reconcile_says_what_it_saw():
    observed = decide.Observation(nodes_of({'gpu-1': (FAILED_OFF, FAILED), 'gpu-2': BOOTING, 'gpu-3': OFF}),
                                  powering_seen={'gpu-2': NOW - 42}, networks=[network('cn3', 'gpu-3')])
    back, taken, ended = decide.reconcile(observed, NOW, settings())
    assert back.why == FAILED
    assert taken.data['since'] == NOW - 42 and taken.why == 'powering up for 42s with no resume at work'
    assert ended.data == dict(id='cn3', display_name='cn-cn3')


# The self-healing loop ----------------------------------------------------------------------------------

def rec(step, **values):
    base = dict(step=step, since=NOW - 600, up_since=NOW - 600, drained_seen=NOW - 900, failures=0, reason=SICK)
    if step == decide.HEALTHY:
        base['healed_at'] = NOW - 600
    if step == decide.LEFT:
        base = dict(step=step, reason='ocigpu-heal: left')
    return dict(base, **values)


HEAL = [
    # (id, nodes, records, extra: busy/started/paused/carriers/static/settings, expected [(action, names, step after)])
    ('drained by a hardware check with no job -> replaced', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE, 'gpu-3': IDLE},
     {}, {}, [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN)]),
    ('an active check (NCCL) is a hardware check', {'gpu-1': (DRAINED, 'ocigpu-nccl: all_reduce busbw 90 below 150'),
                                                    'gpu-2': IDLE}, {}, {}, [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN)]),
    ("a person's drain -> nothing", {'gpu-1': (DRAINED, 'maintenance'), 'gpu-2': IDLE}, {}, {}, []),
    ('a check that is not a hardware one -> nothing', {'gpu-1': (DRAINED, 'ocigpu-health: container_paths missing'),
                                                       'gpu-2': IDLE}, {}, {}, []),
    ('a job still on it -> nothing', {'gpu-1': ('MIXED+CLOUD+DRAIN', SICK), 'gpu-2': IDLE}, {}, {}, []),
    ('a request works on it -> nothing', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE}, {}, dict(busy=['gpu-1']), []),
    ('too many drained at once -> paused', {'gpu-1': (DRAINED, SICK), 'gpu-2': (DRAINED, SICK), 'gpu-3': IDLE},
     {}, {}, [(decide.HEAL_PAUSE, ['gpu-1', 'gpu-2'], None)]),
    ('paused already -> nothing more said', {'gpu-1': (DRAINED, SICK), 'gpu-2': (DRAINED, SICK), 'gpu-3': IDLE},
     {}, dict(paused=True), []),
    ('two drained of five is within min_in_service_share', {'gpu-1': (DRAINED, SICK), 'gpu-2': (DRAINED, SICK),
                                                            'gpu-3': IDLE, 'gpu-4': IDLE, 'gpu-5': IDLE},
     {}, dict(static=['gpu-5'], max_at_once=2), [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN),
                                                 (decide.HEAL_REPLACE, ['gpu-2'], decide.DOWN)]),
    ('paused, then few enough drained -> unpaused and replaced', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {}, dict(paused=True), [(decide.HEAL_UNPAUSE, [], None), (decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN)]),
    ('max_at_once replacements at work -> waits', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {'gpu-4': rec(decide.UP)}, {}, [(decide.HEAL_WAIT, ['gpu-1'], None)]),
    ('max_per_hour started in the last hour -> waits', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {}, dict(started=[NOW - 3000] * 4), [(decide.HEAL_WAIT, ['gpu-1'], None)]),
    ('starts older than an hour do not count', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {}, dict(started=[NOW - 3700] * 4), [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN)]),
    ('one replacement at once: the second waits', {'gpu-1': (DRAINED, SICK), 'gpu-2': (DRAINED, SICK), 'gpu-3': IDLE,
                                                   'gpu-4': IDLE}, {}, {},
     [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN), (decide.HEAL_WAIT, ['gpu-2'], None)]),
    ('down: powered down -> power up', {'gpu-1': (DRAINED_OFF, 'ocigpu-heal: replacing (x)')},
     {'gpu-1': rec(decide.DOWN)}, {}, [(decide.HEAL_POWER_UP, ['gpu-1'], decide.UP)]),
    ('down: still powering down -> nothing', {'gpu-1': (GOING, '')}, {'gpu-1': rec(decide.DOWN)}, {}, []),
    ('down: powered down, its cluster network runs on for others -> held', {'gpu-1': (OFF, '')},
     {'gpu-1': rec(decide.DOWN)}, dict(carriers={'gpu-1': 'cluster network cn (cn1) beside gpu-2'}),
     [(decide.HEAL_HELD, ['gpu-1'], decide.DOWN)]),
    ('down: powered down, OCI does not answer -> held', {'gpu-1': (OFF, '')},
     {'gpu-1': rec(decide.DOWN)}, dict(carriers=lambda: None), [(decide.HEAL_HELD, ['gpu-1'], decide.DOWN)]),
    ('down: powered up by another hand -> followed', {'gpu-1': BOOTING}, {'gpu-1': rec(decide.DOWN)}, {},
     [(decide.HEAL_UP_BY_HAND, ['gpu-1'], decide.UP)]),
    ('down: up and registered by another hand -> done', {'gpu-1': IDLE}, {'gpu-1': rec(decide.DOWN)}, {},
     [(decide.HEAL_DONE_BY_HAND, ['gpu-1'], decide.HEALTHY)]),
    ('down: the power down did not take -> once more', {'gpu-1': (DRAINED, 'ocigpu-heal: replacing (x)')},
     {'gpu-1': rec(decide.DOWN)}, {}, [(decide.HEAL_POWER_DOWN_AGAIN, ['gpu-1'], decide.DOWN)]),
    ('down: within a minute of its power down -> nothing', {'gpu-1': (DRAINED, 'ocigpu-heal: replacing (x)')},
     {'gpu-1': rec(decide.DOWN, since=NOW - 30)}, {}, []),
    ('down: drained by a person meanwhile -> theirs', {'gpu-1': (DRAINED, 'bad cable, ops')},
     {'gpu-1': rec(decide.DOWN)}, {}, [(decide.HEAL_DROP, ['gpu-1'], None)]),
    ('up: still powering up -> nothing', {'gpu-1': BOOTING}, {'gpu-1': rec(decide.UP)}, {}, []),
    ('up: registered -> done', {'gpu-1': IDLE}, {'gpu-1': rec(decide.UP)}, {},
     [(decide.HEAL_DONE, ['gpu-1'], decide.HEALTHY)]),
    ('up: resume failed for capacity -> left drained', {'gpu-1': (FAILED_OFF, FAILED)}, {'gpu-1': rec(decide.UP)}, {},
     [(decide.HEAL_LEAVE, ['gpu-1'], decide.LEFT)]),
    ('up: resume failed otherwise -> counted, tried again', {'gpu-1': (FAILED_OFF, 'ocigpu-autoscaler: API error')},
     {'gpu-1': rec(decide.UP)}, {}, [(decide.HEAL_FAIL, ['gpu-1'], decide.AGAIN)]),
    ('up: max_failures failures in a row -> left for a person', {'gpu-1': (FAILED_OFF, 'ocigpu-autoscaler: API error')},
     {'gpu-1': rec(decide.UP, failures=1)}, {}, [(decide.HEAL_LEAVE, ['gpu-1'], decide.LEFT)]),
    ('up: no registration within ResumeTimeout -> counted', {'gpu-1': (FAILED_OFF, 'ResumeTimeout reached')},
     {'gpu-1': rec(decide.UP)}, {}, [(decide.HEAL_FAIL, ['gpu-1'], decide.AGAIN)]),
    ('up: POWER_UP did not take -> once more', {'gpu-1': OFF}, {'gpu-1': rec(decide.UP)}, {},
     [(decide.HEAL_POWER_UP_AGAIN, ['gpu-1'], decide.UP)]),
    ('healthy: failure window over -> forgotten', {'gpu-1': IDLE}, {'gpu-1': rec(decide.HEALTHY, healed_at=NOW - 3700)},
     {}, [(decide.HEAL_FORGET, ['gpu-1'], None)]),
    ('healthy: drained again within the window -> counted', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {'gpu-1': rec(decide.HEALTHY)}, {}, [(decide.HEAL_FAIL, ['gpu-1'], decide.AGAIN)]),
    ('healthy: in service -> nothing', {'gpu-1': IDLE}, {'gpu-1': rec(decide.HEALTHY)}, {}, []),
    ('again: sick and powered up -> replaced again', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE},
     {'gpu-1': rec(decide.AGAIN, failures=1, failed_at=NOW - 60)}, {}, [(decide.HEAL_REPLACE, ['gpu-1'], decide.DOWN)]),
    ('again: powered down again -> power up', {'gpu-1': OFF}, {'gpu-1': rec(decide.AGAIN, failed_at=NOW - 60)}, {},
     [(decide.HEAL_REPLACE_AGAIN, ['gpu-1'], decide.UP)]),
    ('again: powered down, but held -> waits', {'gpu-1': OFF}, {'gpu-1': rec(decide.AGAIN, failed_at=NOW - 60)},
     dict(carriers={'gpu-1': 'cluster network cn (cn1) beside gpu-2'}), [(decide.HEAL_HELD, ['gpu-1'], decide.AGAIN)]),
    ('left: still drained -> nothing', {'gpu-1': (DRAINED, 'ocigpu-heal: left')}, {'gpu-1': rec(decide.LEFT)}, {}, []),
    ('left: returned to service by a person -> starts afresh', {'gpu-1': IDLE}, {'gpu-1': rec(decide.LEFT)}, {},
     [(decide.HEAL_FORGET, ['gpu-1'], None)]),
    ('drained by a check and powered down already -> returned to service', {'gpu-1': (DRAINED_OFF, SICK)}, {}, {},
     [(decide.HEAL_RETURN, ['gpu-1'], decide.HEALTHY)]),
    ('drained by a check, powered down, held -> waits', {'gpu-1': (DRAINED_OFF, SICK)}, {},
     dict(carriers={'gpu-1': 'cluster network cn (cn1) beside gpu-2'}), [(decide.HEAL_HELD, ['gpu-1'], None)]),
    ('static: drained by a check -> replaced through the pool', {'gpu-5': (DRAINED, SICK), 'gpu-1': IDLE}, {},
     dict(static=['gpu-5']), [(decide.HEAL_REPLACE_STATIC, ['gpu-5'], decide.POOL)]),
    ('static: never powered down or returned', {'gpu-5': (DRAINED_OFF, SICK)}, {}, dict(static=['gpu-5']), []),
    ('static: its request ended without a word -> asked again', {'gpu-5': (DRAINED, 'ocigpu-heal: replacing (x)')},
     {'gpu-5': rec(decide.POOL, since=NOW - 121)}, dict(static=['gpu-5']), [(decide.HEAL_ASK_AGAIN, ['gpu-5'], decide.POOL)]),
    ('static: its request at work -> nothing', {'gpu-5': (DRAINED, 'ocigpu-heal: replacing (x)')},
     {'gpu-5': rec(decide.POOL, since=NOW - 60)}, dict(static=['gpu-5']), []),
    ('static: slurmd of the new instance started -> done', {'gpu-5': (DRAINED, 'ocigpu-heal: replacing (x)', NOW - 10)},
     {'gpu-5': rec(decide.UP, up_wall=NOW - 300)}, dict(static=['gpu-5']), [(decide.HEAL_DONE, ['gpu-5'], decide.HEALTHY)]),
    ("static: slurmd's start is the old instance's -> waits", {'gpu-5': (DRAINED, 'ocigpu-heal: replacing (x)', NOW - 900)},
     {'gpu-5': rec(decide.UP, up_wall=NOW - 300, up_since=NOW - 300)}, dict(static=['gpu-5']), []),
    ('static: no registration within static_timeout -> counted', {'gpu-5': (DRAINED, 'ocigpu-heal: replacing (x)')},
     {'gpu-5': rec(decide.UP, up_since=NOW - 1801)}, dict(static=['gpu-5']), [(decide.HEAL_FAIL, ['gpu-5'], decide.AGAIN)]),
    ("static: the new instance's pull failed -> counted", {'gpu-5': (DRAINED, 'ocigpu-autoscaler: the pull failed')},
     {'gpu-5': rec(decide.UP)}, dict(static=['gpu-5']), [(decide.HEAL_FAIL, ['gpu-5'], decide.AGAIN)]),
    ('static: after a failure -> replaced again through the pool', {'gpu-5': (DRAINED, 'ocigpu-autoscaler: x')},
     {'gpu-5': rec(decide.AGAIN, failures=1, failed_at=NOW - 60)}, dict(static=['gpu-5']),
     [(decide.HEAL_REPLACE_STATIC, ['gpu-5'], decide.POOL)]),
    ('a followed node a request holds waits', {'gpu-1': OFF}, {'gpu-1': rec(decide.DOWN)}, dict(busy=['gpu-1']), []),
    ('the loop off -> nothing', {'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE}, {}, dict(enabled=False), []),
]


def heal_pass(nodes, records, extra):
    extra = dict(extra)
    observed = decide.Observation(nodes_of(nodes), extra.pop('busy', ()), carriers=extra.pop('carriers', None),
                                  heal=dict(nodes=records, started=extra.pop('started', []), paused=extra.pop('paused', False)))
    static = extra.pop('static', ())
    return decide.heal(observed, NOW, settings(static, **extra))


def step_after(decision, records):
    if decision.data.get('drop'):
        return None
    if 'record' in decision.data:
        if decision.data.get('new'):
            return decision.data['record']['step']
        return dict(records.get(decision.names[0]) or {}, **decision.data['record']).get('step')
    return (records.get(decision.names[0]) or {}).get('step') if decision.names else None


@pytest.mark.parametrize('nodes, records, extra, expected', [r[1:] for r in HEAL], ids=[r[0] for r in HEAL])
def test_heal(nodes, records, extra, expected):
    decisions = heal_pass(nodes, records, extra)
    assert [(d.action, d.names, step_after(d, records)) for d in decisions] == expected
    assert not [d for d in decisions if d.data.get('unlisted')]


def test_a_replacement_keeps_what_the_loop_knew_of_the_node():
    records = {'gpu-1': rec(decide.AGAIN, failures=1, failed_at=NOW - 60, drained_seen=NOW - 5000)}
    (replace,) = heal_pass({'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE}, records, dict(started=[NOW - 100]))
    assert replace.data['record'] == dict(step=decide.DOWN, since=NOW, up_since=NOW, drained_seen=NOW - 5000, failures=1,
                                          reason=SICK)
    assert replace.data['started'] == NOW and replace.data['count'] == 2 and replace.data['old'] == SICK


def test_a_failure_is_counted_and_leaving_says_why():
    (fail,) = heal_pass({'gpu-1': (FAILED_OFF, 'ocigpu-autoscaler: API error')}, {'gpu-1': rec(decide.UP)}, {})
    assert fail.data['record'] == dict(step=decide.AGAIN, failures=1, failed_at=NOW)
    assert fail.why == 'the new instance failed: API error'
    (leave,) = heal_pass({'gpu-1': (FAILED_OFF, FAILED)}, {'gpu-1': rec(decide.UP)}, {})
    assert leave.data['reason'].startswith('ocigpu-heal: no host for a new instance (cluster network x failed: Out of host')


def test_the_loop_undrains_only_its_own_drain():
    (power_up,) = heal_pass({'gpu-1': (DRAINED_OFF, 'ocigpu-heal: replacing (x)')}, {'gpu-1': rec(decide.DOWN)}, {})
    assert power_up.data['undrain'] is True
    (power_up,) = heal_pass({'gpu-1': OFF}, {'gpu-1': rec(decide.DOWN)}, {})
    assert power_up.data['undrain'] is False


def test_oci_is_asked_only_when_a_decision_needs_it():
    asked = []

    def carriers():
        asked.append(1)
        return {}
    observed = decide.Observation(nodes_of({'gpu-1': (DRAINED, SICK), 'gpu-2': IDLE}), carriers=carriers)
    decide.heal(observed, NOW, settings())
    assert asked == []
    observed = decide.Observation(nodes_of({'gpu-1': OFF, 'gpu-2': (DRAINED_OFF, SICK)}), carriers=carriers,
                                  heal=dict(nodes={'gpu-1': rec(decide.DOWN)}, started=[]))
    assert actions(decide.heal(observed, NOW, settings())) == [(decide.HEAL_POWER_UP, ['gpu-1']),
                                                               (decide.HEAL_RETURN, ['gpu-2'])]
    assert asked == [1]


REPLACED = [
    ('a new instance from the pool -> powering up', dict(id='ocid1.instance.new', private_ip='10.0.0.5'), None,
     decide.HEAL_FOUND, decide.UP),
    ('the pool out of host capacity -> left drained', None, 'Out of host capacity.', decide.HEAL_LEAVE, decide.LEFT),
    ('another failure -> counted', None, 'API error 500', decide.HEAL_FAIL, decide.AGAIN),
]


@pytest.mark.parametrize('found, error, action, step', [r[1:] for r in REPLACED], ids=[r[0] for r in REPLACED])
def test_a_static_replacement_ended(found, error, action, step):
    (decision,) = decide.replaced(dict(nodes={'gpu-5': rec(decide.POOL)}), 'gpu-5', found, error, NOW, 1.7e9,
                                  settings(['gpu-5']))
    assert (decision.action, decision.names, step_after(decision, {'gpu-5': rec(decide.POOL)})) == (action, ['gpu-5'], step)
    assert not decision.data.get('unlisted')


def test_decide_is_heal_then_reconcile():
    nodes = {'gpu-1': (FAILED_OFF, 'ocigpu-autoscaler: API error'), 'gpu-2': IDLE}
    observed = decide.Observation(nodes_of(nodes), heal=dict(nodes={'gpu-1': rec(decide.UP)}, started=[]), networks=[])
    assert actions(decide.decide(observed, NOW, settings())) == [(decide.HEAL_FAIL, ['gpu-1']),
                                                                 (decide.RETURN_TO_SERVICE, ['gpu-1'])]


# The table of steps -------------------------------------------------------------------------------------

def test_every_step_has_a_name_in_the_metrics_and_a_way_on():
    steps = set(t.source for t in decide.TRANSITIONS) | set(t.target for t in decide.TRANSITIONS)
    assert steps == set([decide.NEW]) | set(decide.STEP_NAMES)
    assert heal_loop.STEP_NAMES is decide.STEP_NAMES
    for step in steps:
        assert decide.next_steps(step), step
    assert decide.next_steps(decide.LEFT) == [None]
    assert decide.next_steps(decide.DOWN) == sorted([decide.DOWN, decide.UP, decide.HEALTHY, None], key=str)


def test_every_move_of_the_table_is_made_by_a_row():
    """Each (step, next step, action) of TRANSITIONS is taken by a row above, or is one of the few only a
    whole service reaches (a static node's second replace request)."""
    made = set()
    for _id, nodes, records, extra, _expected in HEAL:
        for d in heal_pass(nodes, records, extra):
            if d.data.get('record') is not None or d.data.get('drop'):
                made.add(((records.get(d.names[0]) or {}).get('step'), step_after(d, records), d.action))
    for _id, found, error, _action, _step in REPLACED:
        for d in decide.replaced(dict(nodes={'gpu-5': rec(decide.POOL)}), 'gpu-5', found, error, NOW, 0, settings(['gpu-5'])):
            made.add((decide.POOL, step_after(d, {'gpu-5': rec(decide.POOL)}), d.action))
    listed = set((t.source, t.target, t.action) for t in decide.TRANSITIONS)
    assert made <= listed
    assert listed - made <= set([(decide.UP, decide.UP, decide.HEAL_FOUND), (decide.POOL, decide.HEALTHY, decide.HEAL_RETURN),
                                 (decide.HEALTHY, decide.POOL, decide.HEAL_REPLACE_STATIC),
                                 (decide.NEW, decide.POOL, decide.HEAL_REPLACE_STATIC),
                                 (decide.HEALTHY, decide.DOWN, decide.HEAL_REPLACE),
                                 (decide.AGAIN, decide.HEALTHY, decide.HEAL_RETURN),
                                 (decide.HEALTHY, decide.HEALTHY, decide.HEAL_RETURN),
                                 (decide.HEALTHY, decide.LEFT, decide.HEAL_LEAVE)]), listed - made
