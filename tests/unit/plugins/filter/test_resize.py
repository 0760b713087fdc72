# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""resize_plan: which nodes leave a cluster network and their Slurm names (issue 16)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.resize import REPLACE_REASON, resize_plan
from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import parse_slurm_nodes

NODES = [dict(id='ocid1.instance.%d' % n, display_name='inst-%d-c1-cn-pool' % n, private_ip='10.0.1.%d' % n)
         for n in (1, 2, 3, 4)]
# scontrol show node --oneliner, trimmed: node 4 runs a job, node 2 is idle, node 3 is not in Slurm.
SLURM = '\n'.join([
    'NodeName=gpu-a Arch=x86_64 CoresPerSocket=1 NodeAddr=10.0.1.1 NodeHostName=gpu-a State=MIXED Partitions=gpu',
    'NodeName=gpu-b Arch=x86_64 NodeAddr=10.0.1.2 NodeHostName=gpu-b State=IDLE Partitions=gpu',
    'NodeName=gpu-d Arch=x86_64 NodeAddr=10.0.1.4 NodeHostName=gpu-d State=ALLOCATED Partitions=gpu',
])


def names(nodes):
    return [n['display_name'] for n in nodes]


def test_the_slurm_parser_reads_name_address_state_and_reason():
    drained = SLURM + '\nNodeName=gpu-e NodeAddr=10.0.1.5 State=IDLE+DRAIN Reason=bad DIMM, ticket 4711 [root@2026-11-23T10:00:00]'
    assert [(n['name'], n['addr'], n['state'], n['reason']) for n in parse_slurm_nodes(drained)] == [
        ('gpu-a', '10.0.1.1', 'MIXED', ''), ('gpu-b', '10.0.1.2', 'IDLE', ''), ('gpu-d', '10.0.1.4', 'ALLOCATED', ''),
        ('gpu-e', '10.0.1.5', 'IDLE+DRAIN', 'bad DIMM, ticket 4711')]
    assert parse_slurm_nodes('') == []


def test_same_size_changes_nothing_and_growth_is_counted():
    assert resize_plan(NODES, 4) == dict(remove=[], replace=[], grow=0, picked=None, drain=[], drain_replace=[], kept=[],
                                         gone=[])
    assert resize_plan(NODES, 6)['grow'] == 2
    assert resize_plan([], 2)['grow'] == 2


def test_named_nodes_go_by_name_ocid_or_address():
    plan = resize_plan(NODES, 2, remove=['inst-1-c1-cn-pool', '10.0.1.4'], slurm=SLURM)
    assert names(plan['remove']) == ['inst-1-c1-cn-pool', 'inst-4-c1-cn-pool'] and plan['picked'] == 'named'
    assert plan['drain'] == ['gpu-a', 'gpu-d'] and plan['remove'][0]['slurm_state'] == 'MIXED'
    assert names(resize_plan(NODES, 3, remove=['ocid1.instance.2'])['remove']) == ['inst-2-c1-cn-pool']


def test_picked_nodes_have_the_fewest_jobs_then_the_highest_names():
    plan = resize_plan(NODES, 2, slurm=SLURM)
    assert names(plan['remove']) == ['inst-3-c1-cn-pool', 'inst-2-c1-cn-pool'] and plan['picked'] == 'fewest jobs'
    assert plan['drain'] == ['gpu-b']  # node 3 is not a Slurm node: nothing to drain there
    plan = resize_plan(NODES, 1, slurm=SLURM)
    assert names(plan['remove']) == ['inst-3-c1-cn-pool', 'inst-2-c1-cn-pool', 'inst-4-c1-cn-pool']
    without = resize_plan(NODES, 2)
    assert names(without['remove']) == ['inst-4-c1-cn-pool', 'inst-3-c1-cn-pool'] and without['picked'] == 'by name'
    assert len(resize_plan(NODES, 0)['remove']) == 4


def test_replaced_nodes_are_drained_and_never_picked_to_go():
    plan = resize_plan(NODES, 3, replace=['inst-4-c1-cn-pool'], slurm=SLURM)
    assert names(plan['replace']) == ['inst-4-c1-cn-pool'] and names(plan['remove']) == ['inst-3-c1-cn-pool']
    assert plan['drain'] == ['gpu-d']
    assert plan['drain_replace'] == [dict(slurm_name='gpu-d', instance_id='ocid1.instance.4',
                                          reason='ocigpu: being replaced (provision.yml) instance ocid1.instance.4')]


def test_a_re_run_after_the_nodes_left_changes_nothing():
    plan = resize_plan(NODES[:2], 2, remove=['inst-3-c1-cn-pool', 'inst-4-c1-cn-pool'], replace=['gone-node'])
    assert plan['remove'] == [] and plan['replace'] == []
    assert plan['gone'] == ['inst-3-c1-cn-pool', 'inst-4-c1-cn-pool', 'gone-node']


@pytest.mark.parametrize('count, remove, replace, message', [
    (2, ['inst-1-c1-cn-pool'], [], 'gpu_remove_nodes names 1 node(s) of the cluster network (inst-1-c1-cn-pool), '
                                   'but gpu_node_count 2 takes 2 of its 4 nodes away'),
    (4, ['inst-1-c1-cn-pool'], [], 'but gpu_node_count 4 takes 0 of its 4 nodes away'),
    (3, ['inst-9'], [], 'gpu_remove_nodes: inst-9 is not a node of the cluster network. Nodes: inst-1-c1-cn-pool'),
    (3, ['inst-1-c1-cn-pool'], ['10.0.1.1'], 'gpu_remove_nodes and gpu_replace_nodes both name inst-1-c1-cn-pool'),
    (0, [], ['inst-1-c1-cn-pool'], 'with gpu_node_count 0 every node goes'),
    (-1, [], [], 'gpu_node_count: -1'),
])
def test_names_that_do_not_fit_are_refused_with_the_reason(count, remove, replace, message):
    with pytest.raises(AnsibleFilterError) as err:
        resize_plan(NODES, count, remove=remove, replace=replace)
    assert message in str(err.value)


# Node 2 was replaced: the new instance (ocid1.instance.9, a new address) carries the display name and, as
# its tag, the Slurm name gpu-b.
REPLACED = [n for n in NODES if n['id'] != 'ocid1.instance.2'] + [
    dict(id='ocid1.instance.9', display_name='inst-2-c1-cn-pool', private_ip='10.0.1.9', slurm_name='gpu-b')]


def slurm_with(state, reason=''):
    line = 'NodeName=gpu-b Arch=x86_64 NodeAddr=10.0.1.2 State=%s Partitions=gpu' % state
    line += (' Reason=%s [root@2026-11-24T00:00:00]' % reason) if reason else ''
    return SLURM.replace(SLURM.splitlines()[1], line)


def test_a_replacement_is_found_in_slurm_by_the_name_it_carries():
    plan = resize_plan(REPLACED, 3, remove=['inst-2-c1-cn-pool'], slurm=slurm_with('IDLE'))
    assert plan['drain'] == ['gpu-b'] and plan['remove'][0]['slurm_state'] == 'IDLE'


@pytest.mark.parametrize('state,reason,slurm', [
    ('IDLE', '', True),                                                  # configured, in use
    ('IDLE+DRAIN', REPLACE_REASON + 'ocid1.instance.2', True),           # drained for its own replacement
    (None, None, False),                                                 # Slurm cannot be read
])
def test_the_same_replace_list_again_keeps_the_replacement(state, reason, slurm):
    plan = resize_plan(REPLACED, 4, replace=['inst-2-c1-cn-pool'], slurm=slurm_with(state, reason) if slurm else '')
    assert plan['replace'] == [] and plan['drain'] == [] and plan['drain_replace'] == []
    assert [k['display_name'] for k in plan['kept']] == ['inst-2-c1-cn-pool']
    assert 'replacement made for gpu-b' in plan['kept'][0]['why']
    assert ('Slurm cannot be read' in plan['kept'][0]['why']) == (not slurm)


@pytest.mark.parametrize('reason', ['ocigpu-health: xid Xid 79', 'ocigpu-nccl: busbw 300.00 GB/s at 4 GiB is low',
                                    'bad DIMM, ticket 4711'])
def test_a_replacement_drained_for_another_reason_is_replaced(reason):
    plan = resize_plan(REPLACED, 4, replace=['inst-2-c1-cn-pool'], slurm=slurm_with('IDLE+DRAIN', reason))
    assert [n['id'] for n in plan['replace']] == ['ocid1.instance.9'] and plan['kept'] == []
    assert plan['drain_replace'] == [dict(slurm_name='gpu-b', instance_id='ocid1.instance.9',
                                          reason=REPLACE_REASON + 'ocid1.instance.9')]


@pytest.mark.parametrize('ref', ['ocid1.instance.9', '10.0.1.9'])
def test_a_replacement_named_by_ocid_or_address_is_replaced(ref):
    for slurm in (slurm_with('IDLE'), ''):
        plan = resize_plan(REPLACED, 4, replace=[ref], slurm=slurm)
        assert [n['id'] for n in plan['replace']] == ['ocid1.instance.9'] and plan['kept'] == []
