# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm node model: the parser of `scontrol -o show node` and each named predicate, as table rows."""
from __future__ import annotations

import time

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import (
    Node, Scontrol, SlurmError, is_busy, parse_show_node, parse_slurm_nodes, run_command, slurm_action)

# The layout of `scontrol -o show node` of Debian 13's Slurm 24.11.5 (slurmctld with a static node gpu-1
# and CLOUD nodes od-[1-3]): every field as it printed them, double spaces and the trailing one included;
# only the name, the address, the state and what follows AveWatts vary.
REAL = ('NodeName={name} CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.00 AvailableFeatures=(null) '
        'ActiveFeatures=(null) Gres=(null) NodeAddr={addr} NodeHostName={name}  RealMemory=1 AllocMem=0 FreeMem=N/A '
        'Sockets=2 Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  '
        'BootTime=None SlurmdStartTime=None LastBusyTime=Unknown ResumeAfterTime=None CfgTRES=cpu=2,mem=1M,billing=2 '
        'AllocTRES= CurrentWatts=0 AveWatts=0 {tail}')


def real(name, state, reason=None, addr=None, after=''):
    tail = ' Reason=%s [root@2026-11-28T18:00:52]%s' % (reason, after) if reason is not None else ''
    return REAL.format(name=name, addr=addr or name, state=state, tail=tail)


# What 24.11.5 printed (the states and reasons of a capture: a drained static node that never registered,
# CLOUD nodes powered down, powering up, drained by a person, and DOWN after ResumeTimeout with a comment).
CAPTURED = '\n'.join([
    real('gpu-1', 'UNKNOWN+DRAIN+NOT_RESPONDING', 'ocigpu-health: xid 79; gpu_count 7 of 8 [bad=x]', addr='10.0.2.7'),
    real('od-1', 'IDLE+CLOUD+POWERED_DOWN'),
    real('od-2', 'IDLE+CLOUD+NOT_RESPONDING+POWERING_UP'),
    real('od-3', 'IDLE+CLOUD+DRAIN+POWERED_DOWN', 'a person, ticket=4711'),
    real('od-4', 'DOWN+CLOUD+POWERED_DOWN', 'ResumeTimeout reached', after=' Comment=x y [a@b] z Extra=e=1'),
])


def test_the_parser_reads_what_slurm_24_11_prints():
    nodes = parse_show_node(CAPTURED)
    assert list(nodes) == ['gpu-1', 'od-1', 'od-2', 'od-3', 'od-4']
    assert nodes['gpu-1'] == Node('gpu-1', state='UNKNOWN+DRAIN+NOT_RESPONDING', address='10.0.2.7', gres='(null)',
                                  partitions='gpu', reason='ocigpu-health: xid 79; gpu_count 7 of 8 [bad=x]')
    assert nodes['gpu-1'].flags == frozenset(('UNKNOWN', 'DRAIN', 'NOT_RESPONDING'))
    assert [(n.name, n.address, n.state, n.reason, n.slurmd_start) for n in list(nodes.values())[1:]] == [
        ('od-1', 'od-1', 'IDLE+CLOUD+POWERED_DOWN', '', None),
        ('od-2', 'od-2', 'IDLE+CLOUD+NOT_RESPONDING+POWERING_UP', '', None),
        ('od-3', 'od-3', 'IDLE+CLOUD+DRAIN+POWERED_DOWN', 'a person, ticket=4711', None),
        ('od-4', 'od-4', 'DOWN+CLOUD+POWERED_DOWN', 'ResumeTimeout reached', None)]


@pytest.mark.parametrize('tail, reason', [
    ('', ''),                                                                           # no Reason at all
    (' Reason=bad DIMM, ticket 4711 [root@2026-11-23T10:00:00]', 'bad DIMM, ticket 4711'),
    (' Reason=a person, ticket=4711 [root@2026-11-28T18:00:52]', 'a person, ticket=4711'),   # '=' inside
    (' Reason=xid 79 [bad=x] on [GPU 3] [root@2026-11-28T18:00:52]', 'xid 79 [bad=x] on [GPU 3]'),  # brackets
    (' Reason=ResumeTimeout reached [slurm@2026-11-26T00:00:00] Comment=(null)', 'ResumeTimeout reached'),
    (' Reason=ResumeTimeout reached [root@2026-11-28T18:01:06] Comment=x y [a@b] z Extra=e=1', 'ResumeTimeout reached'),
    (' Reason=mail [a@b] first [root@2026-11-28T18:01:06]', 'mail [a@b] first'),     # a [x@y] inside the text
    (' Reason=no suffix here Comment=(null)', 'no suffix here'),                        # no [user@time]: up to the next field
    (' Reason=State=BOGUS NodeAddr=1.2.3.4 [root@2026-11-28T18:01:06]', 'State=BOGUS NodeAddr=1.2.3.4'),
])
def test_a_reason_is_read_whole_up_to_its_user_and_time(tail, reason):
    node = parse_show_node('NodeName=gpu-1 NodeAddr=10.0.2.7 State=IDLE+DRAIN Partitions=gpu' + tail)['gpu-1']
    assert node.reason == reason
    # The free text of a reason never passes for a field of the node.
    assert (node.state, node.address) == ('IDLE+DRAIN', '10.0.2.7')


def test_fields_the_callers_read_and_lines_that_are_no_node():
    started = time.mktime(time.strptime('2026-11-26T00:00:00', '%Y-%m-%dT%H:%M:%S'))
    text = '\n'.join([
        # the controller's model of slurmctld (tests/unit/plugins/module_utils/fakeslurm.py)
        'NodeName=od-1 Arch=x86_64 CoresPerSocket=1 NodeAddr=10.0.3.9 State=IDLE+CLOUD ThreadsPerCore=1 '
        'SlurmdStartTime=2026-11-26T00:00:00 Comment=(null)',
        'NodeName=od-2 Arch=x86_64 CoresPerSocket=1 NodeAddr=od-2 State=IDLE+CLOUD+POWERED_DOWN ThreadsPerCore=1 '
        'SlurmdStartTime=None Comment=(null)',
        # the sweep's stand-in
        'NodeName=gpu-1 Arch=x86_64 Gres=gpu:a100:8(S:0-1) NodeAddr=gpu-1 Partitions=gpu,debug State=IDLE ThreadsPerCore=2',
        # no NodeAddr
        'NodeName=gpu-2 Arch=x86_64 State=MIXED',
        '', 'slurm_load_node error: Unable to contact slurm controller (connect failure)', 'Node gpu-9 not found',
    ])
    nodes = parse_show_node(text)
    assert list(nodes) == ['od-1', 'od-2', 'gpu-1', 'gpu-2']
    assert (nodes['od-1'].address, nodes['od-1'].slurmd_start) == ('10.0.3.9', started)
    assert nodes['od-2'].slurmd_start is None
    assert (nodes['gpu-1'].gres, nodes['gpu-1'].partitions) == ('gpu:a100:8(S:0-1)', 'gpu,debug')
    assert (nodes['gpu-2'].address, nodes['gpu-2'].gres, nodes['gpu-2'].partitions) == (None, '', '')
    assert parse_show_node('') == {} and parse_show_node(None) == {}


PREDICATES = ('powered_down', 'power_down_done', 'powering_up', 'powering_down', 'powered_up', 'down',
              'not_responding', 'busy', 'drain', 'drained', 'draining', 'plain_idle')


@pytest.mark.parametrize('state, true', [
    # power saving
    ('IDLE+CLOUD+POWERED_DOWN', {'powered_down', 'power_down_done'}),
    ('IDLE+CLOUD+POWERED_DOWN+POWERING_DOWN', {'powered_down', 'powering_down'}),  # within SuspendTimeout
    ('IDLE+CLOUD+POWERING_DOWN', {'powering_down'}),
    ('IDLE+CLOUD+NOT_RESPONDING+POWERING_UP', {'powering_up', 'not_responding'}),  # 24.11.5, after POWER_UP
    ('ALLOCATED+CLOUD+POWERING_UP', {'powering_up', 'busy'}),                       # a job waits for it to boot
    ('IDLE+CLOUD+POWER_DOWN', set()),                                               # asked to power down
    ('MIXED+CLOUD+POWER_DOWN', {'busy'}),
    ('IDLE+CLOUD', {'powered_up', 'plain_idle'}),
    ('IDLE', {'powered_up', 'plain_idle'}),
    # DOWN
    ('DOWN+CLOUD+POWERED_DOWN', {'powered_down', 'power_down_done', 'down'}),       # after ResumeTimeout
    ('DOWN+NOT_RESPONDING', {'powered_up', 'down', 'not_responding'}),
    ('IDLE+NOT_RESPONDING', {'powered_up', 'not_responding'}),
    # drains: with no job (drained) or with jobs (draining)
    ('IDLE+DRAIN', {'powered_up', 'drain', 'drained'}),
    ('ALLOCATED+DRAIN', {'powered_up', 'busy', 'drain', 'draining'}),
    ('MIXED+DRAIN', {'powered_up', 'busy', 'drain', 'draining'}),
    ('IDLE+COMPLETING+DRAIN', {'powered_up', 'busy', 'drain', 'draining'}),
    ('DRAINED', {'powered_up', 'drain', 'drained'}),                                # sinfo's words
    ('DRAINING', {'powered_up', 'drain', 'draining'}),
    ('UNKNOWN+DRAIN+NOT_RESPONDING', {'powered_up', 'drain', 'drained', 'not_responding'}),
    ('IDLE+CLOUD+DRAIN+POWERED_DOWN', {'powered_down', 'power_down_done', 'drain', 'drained'}),
    ('DOWN+DRAIN', {'powered_up', 'down', 'drain', 'drained'}),
    # neither idle only, nor busy
    ('IDLE+RESERVED', {'powered_up'}),
    ('ALLOCATED', {'powered_up', 'busy'}),
    ('MIXED', {'powered_up', 'busy'}),
    ('', {'powered_up'}),                                                           # a line without State
])
def test_each_predicate_reads_its_state_words(state, true):
    node = parse_show_node(real('n1', state) if state else 'NodeName=n1 Arch=x86_64')['n1']
    assert set(p for p in PREDICATES if getattr(node, p)) == true
    assert is_busy(state) is ('busy' in true)


RESUME_FAILED = ('ResumeTimeout reached', 'ocigpu-autoscaler')


@pytest.mark.parametrize('state, reason, failed', [
    ('DOWN+CLOUD+POWERED_DOWN', 'ResumeTimeout reached', True),
    ('DOWN+CLOUD+POWERED_DOWN', 'ocigpu-autoscaler: cluster network od-1 failed: Out of host capacity', True),
    ('DOWN+CLOUD+POWERED_DOWN', 'node od-1 ResumeTimeout reached', True),   # held anywhere in the reason, as the service reads it
    ('DOWN+CLOUD+POWERED_DOWN', 'bad PSU, a person set it DOWN', False),
    ('DOWN+CLOUD+POWERED_DOWN', '', False),
    ('DOWN+CLOUD', 'ResumeTimeout reached', False),                          # not powered down
    ('IDLE+CLOUD+POWERED_DOWN', 'ResumeTimeout reached', False),             # not DOWN (returned to service)
    ('IDLE+CLOUD+DRAIN+POWERED_DOWN', 'ocigpu-autoscaler: new instance failed', False),
])
def test_resume_failed_is_down_and_powered_down_with_a_failed_resumes_reason(state, reason, failed):
    node = parse_show_node(real('od-1', state, reason or None))['od-1']
    assert node.resume_failed(RESUME_FAILED) is failed


@pytest.mark.parametrize('state, reason, ours', [
    ('IDLE+DRAIN', 'ocigpu-health: xid 79', True),
    ('MIXED+DRAIN', 'ocigpu-health: xid 79', True),                          # draining counts: the drain is ours
    ('IDLE+CLOUD+DRAIN+POWERED_DOWN', 'ocigpu-health: gpu_count 7 of 8', True),
    ('DOWN', 'ocigpu-health: xid 79', False),                                # a reason, no drain
    ('IDLE+DRAIN', 'bad DIMM; ocigpu-health: xid 79', False),                # a person's, naming the check
    ('IDLE+DRAIN', 'ocigpu-nccl: all_reduce busbw 300 GB/s', False),         # another owner's
    ('IDLE+DRAIN', '', False),
])
def test_drained_by_is_a_drain_whose_reason_starts_with_the_owner(state, reason, ours):
    node = parse_show_node(real('gpu-1', state, reason or None))['gpu-1']
    assert node.drained_by('ocigpu-health:') is ours


@pytest.mark.parametrize('state, reason, failed, action, message', [
    (None, '', True, None, 'unknown to slurmctld, nothing done'),
    ('IDLE', '', True, 'drain', 'drained (ocigpu-health: xid 79)'),
    ('MIXED+DRAIN', 'ocigpu-health: ecc', True, 'drain', 'drained (ocigpu-health: xid 79)'),
    ('IDLE+DRAIN', 'ocigpu-health: xid 79', True, None, 'stays drained (ocigpu-health: xid 79)'),
    ('IDLE+DRAIN', 'bad DIMM', True, None, 'was drained by someone else (bad DIMM), left as it is'),
    ('IDLE+DRAIN', 'ocigpu-health: xid 79', False, 'resume', 'resumed (was: ocigpu-health: xid 79)'),
    ('IDLE+DRAIN', 'ocigpu-health: xid 79', None, None, 'left drained (ocigpu-health: xid 79)'),
    ('IDLE+DRAIN', 'bad DIMM', False, None, 'left drained (bad DIMM)'),
    ('IDLE', '', False, None, 'not drained, nothing to do'),
    ('DOWN', 'ocigpu-health: xid 79', False, None, 'not drained, nothing to do'),
])
def test_a_check_drains_and_resumes_only_its_own(state, reason, failed, action, message):
    node = None if state is None else Node('gpu-1', state=state, reason=reason)
    assert slurm_action('ocigpu-health:', node, failed, 'ocigpu-health: xid 79' if failed else '') == (action, message)


def test_a_node_is_an_immutable_value_with_a_dict_view():
    node = parse_show_node(real('gpu-1', 'MIXED+DRAIN', 'bad DIMM', addr='10.0.2.7'))['gpu-1']
    with pytest.raises(AttributeError):
        node.reason = 'changed'
    assert node == Node('gpu-1', state='MIXED+DRAIN', reason='bad DIMM', address='10.0.2.7', gres='(null)', partitions='gpu')
    assert node != Node('gpu-1', state='MIXED', reason='bad DIMM', address='10.0.2.7', gres='(null)', partitions='gpu')
    assert len(set([node, parse_show_node(real('gpu-1', 'MIXED+DRAIN', 'bad DIMM', addr='10.0.2.7'))['gpu-1']])) == 1
    assert node.as_dict() == dict(name='gpu-1', addr='10.0.2.7', state='MIXED+DRAIN', reason='bad DIMM', gres='(null)',
                                  partitions='gpu')
    assert parse_slurm_nodes('NodeName=gpu-2 State=IDLE\nNodeName=gpu-1 State=IDLE') == [
        dict(name='gpu-2', addr='gpu-2', state='IDLE', reason='', gres='', partitions=''),
        dict(name='gpu-1', addr='gpu-1', state='IDLE', reason='', gres='', partitions='')]
    assert 'POWERED_DOWN' not in repr(Node('x', state='IDLE')) and "state='IDLE'" in repr(Node('x', state='IDLE'))


class Answers(object):
    """A runner for Scontrol: records each argv and answers (status, stdout, stderr) from a list."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_the_adapter_reads_nodes_and_tells_unknown_from_unanswered():
    run = Answers((0, CAPTURED + '\n', ''), (0, real('od-3', 'IDLE+CLOUD+DRAIN+POWERED_DOWN', 'a person') + '\n', ''),
                  (1, '', 'Node gpu-9 not found\n'),
                  (1, '', 'slurm_load_node error: Unable to contact slurm controller (connect failure)\n'))
    slurm = Scontrol(run, '/usr/bin/scontrol')
    assert list(slurm.show_node()) == ['gpu-1', 'od-1', 'od-2', 'od-3', 'od-4']
    node = slurm.node('od-3')
    assert node.drained and node.reason == 'a person'
    assert slurm.node('gpu-9') is None
    with pytest.raises(SlurmError) as raised:
        slurm.node('od-1')
    assert raised.value.text == 'slurm_load_node error: Unable to contact slurm controller (connect failure)'
    assert str(raised.value).startswith('scontrol show node --oneliner od-1 failed (rc 1): slurm_load_node error')
    assert run.calls == [['/usr/bin/scontrol', 'show', 'node', '--oneliner'],
                         ['/usr/bin/scontrol', 'show', 'node', '--oneliner', 'od-3'],
                         ['/usr/bin/scontrol', 'show', 'node', '--oneliner', 'gpu-9'],
                         ['/usr/bin/scontrol', 'show', 'node', '--oneliner', 'od-1']]


def test_the_adapter_drains_and_resumes_as_slurm_action_says():
    run = Answers((0, '', ''), (0, '', ''), (1, '', 'slurm_update error: Invalid node name specified\n'))
    slurm = Scontrol(run)
    assert slurm.apply('gpu-1', 'drain', 'ocigpu-health: xid 79') == (0, '')
    assert slurm.apply('gpu-1', 'resume') == (0, '')
    assert slurm.drain('gpu-[1-2]', 'ocigpu-nccl: all_reduce x') == (1, 'slurm_update error: Invalid node name specified')
    assert run.calls == [['scontrol', 'update', 'NodeName=gpu-1', 'State=DRAIN', 'Reason=ocigpu-health: xid 79'],
                         ['scontrol', 'update', 'NodeName=gpu-1', 'State=RESUME'],
                         ['scontrol', 'update', 'NodeName=gpu-[1-2]', 'State=DRAIN', 'Reason=ocigpu-nccl: all_reduce x']]


def test_the_programs_runner_gives_status_and_both_outputs():
    assert run_command(['sh', '-c', 'echo out; echo err >&2; exit 3']) == (3, 'out\n', 'err\n')
    status, out, err = run_command(['/nonexistent/scontrol', 'show', 'node'])
    assert (status, out) == (127, '') and 'nonexistent' in err
