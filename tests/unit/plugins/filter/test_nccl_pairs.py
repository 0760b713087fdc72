# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_pairs: the pairwise NCCL check pairs nodes of one local block first (issue 33, point 4)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.nccl import nccl_pairs


def node(n, local, block='nb1', island='is1'):
    return {'inventory_hostname': 'gpu-%d' % n, 'oci_hpc_island_id': island, 'oci_network_block_id': block,
            'oci_local_block_id': local}


def block_of(nodes):
    return dict((n['inventory_hostname'], n['oci_local_block_id']) for n in nodes)


def test_nodes_of_a_local_block_are_paired_together_whatever_their_names():
    # Blocks interleave by name: name order alone would pair across blocks every time.
    nodes = [node(n, 'lb-a' if n % 2 else 'lb-b') for n in range(1, 9)]
    got = nccl_pairs(nodes)
    where = block_of(nodes)
    assert got['extra'] == []
    assert all(where[a] == where[b] for a, b in got['pairs'])
    assert sorted(n for p in got['pairs'] for n in p) == sorted(where)
    assert got['pairs'][0] == ['gpu-1', 'gpu-3']


def test_leftovers_pair_within_their_network_block_before_another():
    nodes = ([node(n, 'lb-1', 'nb1') for n in (1, 2, 3)] + [node(n, 'lb-2', 'nb2') for n in (4, 5, 6)]
             + [node(n, 'lb-3', 'nb1') for n in (7, 8, 9)] + [node(n, 'lb-4', 'nb2') for n in (10, 11, 12)])
    got = nccl_pairs(nodes)
    assert ['gpu-3', 'gpu-9'] in got['pairs'] and ['gpu-6', 'gpu-12'] in got['pairs']
    assert got['extra'] == []
    assert len(set(n for p in got['pairs'] for n in p)) == 12


def test_an_odd_count_tests_the_last_node_with_a_neighbour_and_unplaced_nodes_pair_last():
    nodes = [node(n, 'lb-1') for n in (1, 2, 3)] + [{'inventory_hostname': 'gpu-%d' % n} for n in (4, 5)]
    got = nccl_pairs(nodes)
    assert got['pairs'] == [['gpu-1', 'gpu-2'], ['gpu-3', 'gpu-4']]
    assert got['extra'] == ['gpu-4', 'gpu-5']           # among the unplaced, its own kind
    got = nccl_pairs([node(n, 'lb-1') for n in (1, 2, 3)])
    assert got == {'pairs': [['gpu-1', 'gpu-2']], 'extra': ['gpu-1', 'gpu-3']}
    assert nccl_pairs([node(1, 'lb-1')]) == {'pairs': [], 'extra': []}


def test_bad_input_is_refused():
    with pytest.raises(AnsibleFilterError, match='is a dict'):
        nccl_pairs(['gpu-1'])
    with pytest.raises(AnsibleFilterError, match='inventory_hostname or name'):
        nccl_pairs([{'oci_local_block_id': 'x'}])
