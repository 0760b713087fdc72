# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_topology: topology.conf's tree from OCI's HPC islands, network blocks and local blocks (issue 33)."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.topology import slurm_topology

ISLAND = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaisland0001'
BLOCKS = ['ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock0001', 'ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock0002']
LOCALS = ['ocid1.computelocalblock.oc1.ap-tokyo-1.aaaalocal000%d' % i for i in (1, 2, 3)]


def node(n, local, block=0, island=ISLAND, prefix=''):
    return {'name': 'gpu-%d' % n, prefix + 'hpc_island_id': island, prefix + 'network_block_id': BLOCKS[block],
            prefix + 'local_block_id': LOCALS[local]}


def thirty_two():
    """32 nodes in three local blocks: 1-12 and 13-24 in network block 1, 25-32 in network block 2."""
    return [node(n, 0 if n <= 12 else 1 if n <= 24 else 2, 0 if n <= 24 else 1) for n in range(1, 33)]


def test_a_32_node_cluster_in_three_local_blocks():
    assert slurm_topology(thirty_two()) == [
        'SwitchName=lb-ocal0001 Nodes=gpu-[1-12]',
        'SwitchName=lb-ocal0002 Nodes=gpu-[13-24]',
        'SwitchName=nb-lock0001 Switches=lb-ocal0001,lb-ocal0002',
        'SwitchName=lb-ocal0003 Nodes=gpu-[25-32]',
        'SwitchName=nb-lock0002 Switches=lb-ocal0003',
        'SwitchName=is-land0001 Switches=nb-lock0001,nb-lock0002',
    ]


def test_the_same_nodes_in_any_order_give_the_same_file_and_inventory_names_work():
    nodes = thirty_two()
    shuffled = nodes[7:] + nodes[:7]
    shuffled.reverse()
    assert slurm_topology(shuffled) == slurm_topology(nodes)
    # hostvars as the inventory and the slurm role hold them
    as_hostvars = [dict({'ansible_facts': {'hostname': n['name']}},
                        **{'oci_' + k: v for k, v in n.items() if k != 'name'}) for n in nodes]
    assert slurm_topology(as_hostvars) == slurm_topology(nodes)


def test_an_unknown_place_goes_to_a_catch_all_switch_under_a_root():
    nodes = thirty_two()
    nodes[4]['local_block_id'] = None              # its compute host could not be read
    lines = slurm_topology(nodes, unknown=['NodeName=ondemand-[1-8] CPUs=2 RealMemory=1000 State=CLOUD'])
    assert 'SwitchName=lb-ocal0001 Nodes=gpu-[1-4,6-12]' in lines
    assert lines[-2:] == ['SwitchName=unknown Nodes=gpu-5,ondemand-[1-8]',
                          'SwitchName=root Switches=is-land0001,unknown']
    # Nothing known: no topology at all (the role then writes no topology.conf).
    assert slurm_topology([{'name': 'gpu-1'}], unknown=['x-[1-2]']) == []


def test_a_node_replaced_into_another_block_moves_there():
    nodes = thirty_two()
    before = slurm_topology(nodes)
    nodes[0] = node(1, 2, 1)                       # the replacement of gpu-1 landed in local block 3
    after = slurm_topology(nodes)
    assert 'SwitchName=lb-ocal0001 Nodes=gpu-[2-12]' in after
    assert 'SwitchName=lb-ocal0003 Nodes=gpu-[1,25-32]' in after
    assert before != after


def test_two_islands_get_a_root_and_blocks_with_one_tail_get_longer_names():
    other = 'ocid1.computehpcisland.oc1.ap-tokyo-1.bbbbisland0001'   # the same last 8 characters
    nodes = [node(1, 0), node(2, 1, island=other)]
    lines = slurm_topology(nodes)
    assert lines[-1] == 'SwitchName=root Switches=is-aisland0001,is-bisland0001'


def test_bad_input_is_refused():
    with pytest.raises(AnsibleFilterError, match='with a name'):
        slurm_topology([{'local_block_id': 'x'}])
    with pytest.raises(AnsibleFilterError, match='is a dict'):
        slurm_topology(['gpu-1'])


def test_the_block_plugin_gets_a_block_per_local_block_neighbours_adjacent():
    nodes = thirty_two()
    nodes[4]['local_block_id'] = None
    assert slurm_topology(nodes, kind='block') == [
        'BlockName=lb-ocal0001 Nodes=gpu-[1-4,6-12]',
        'BlockName=lb-ocal0002 Nodes=gpu-[13-24]',
        'BlockName=lb-ocal0003 Nodes=gpu-[25-32]',
        'BlockName=unknown Nodes=gpu-5',
    ]
    with pytest.raises(AnsibleFilterError, match='neither tree nor block'):
        slurm_topology(nodes, kind='dragonfly')


def test_the_autoscaler_renders_the_same_lines_from_the_roles_inputs(tmp_path):
    """add_places (the autoscaler after a resume): the slurm role's topology.json and the places found give
    the lines the filter gives, for either plugin; the file's comments stay; nothing new, nothing written."""
    import json
    from ansible_collections.ocigpu.cluster.plugins.filter.topology import slurm_topology_inputs
    from ocigpu_control.topology import add_places
    static = thirty_two()[:12]
    place = [ISLAND, BLOCKS[1], LOCALS[2]]
    for kind in ('tree', 'block'):
        conf, inputs, places = tmp_path / (kind + '.conf'), tmp_path / (kind + '.json'), tmp_path / (kind + '-places.json')
        inputs.write_text(json.dumps(slurm_topology_inputs(static, unknown=['od-[1-2]'], kind=kind)))
        conf.write_text('# managed by Ansible\n')
        assert add_places(str(conf), str(inputs), str(places), {'od-2': place}) == (['od-2'], True)
        want = slurm_topology(static, unknown=['od-[1-2]'], places={'od-2': place}, kind=kind)
        assert conf.read_text().splitlines() == ['# managed by Ansible'] + want
        assert json.loads(places.read_text()) == {'od-2': place}
        assert add_places(str(conf), str(inputs), str(places), {'od-2': place}) == ([], False)
