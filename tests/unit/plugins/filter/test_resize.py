# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""resize_plan: which nodes leave a cluster network and their Slurm names (issue 16)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.resize import resize_plan, slurm_nodes

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


def test_slurm_nodes_are_found_by_address():
    assert slurm_nodes(SLURM) == {'10.0.1.1': ('gpu-a', 'MIXED'), '10.0.1.2': ('gpu-b', 'IDLE'),
                                  '10.0.1.4': ('gpu-d', 'ALLOCATED')}
    assert slurm_nodes('') == {}


def test_same_size_changes_nothing_and_growth_is_counted():
    assert resize_plan(NODES, 4) == dict(remove=[], replace=[], grow=0, picked=None, drain=[], gone=[])
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
