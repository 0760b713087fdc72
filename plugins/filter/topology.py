# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: slurm_topology
short_description: Slurm's tree topology (topology.conf) from where OCI puts each GPU node
version_added: 0.3.0
description:
  - Takes the Slurm nodes with their place in OCI's RDMA fabric (HPC island, network block, local block, as
    the M(ocigpu.cluster.gpu_nodes) inventory reads them from the Compute Hosts API) and returns the C(SwitchName)
    lines of Slurm's C(topology/tree) plugin - a switch per local block holding its nodes, a switch per network
    block holding its local blocks, a switch per HPC island holding its network blocks, and one C(root) switch
    above the islands when there is more than one top switch.
  - A node whose place is unknown (an on-demand node declared before it exists, a node whose compute host
    could not be read) goes into the switch C(unknown) under C(root), so the file stays whole and such a node
    can still run jobs with the others.
  - Switch names are C(lb-), C(nb-) and C(is-) with the last 8 characters of the block's OCID (more when two
    blocks share those). The same nodes always give the same lines, in the same order.
  - Returns an empty list when no node has a place and O(places) is not given (then the role writes no
    topology.conf).
options:
  _input:
    description:
      - Nodes, dicts with the Slurm node name in C(name) (or C(ansible_facts.hostname), as the slurm role names
        its nodes) and the place in C(hpc_island_id), C(network_block_id), C(local_block_id) (or the inventory's
        C(oci_hpc_island_id), C(oci_network_block_id), C(oci_local_block_id)); a missing or null place is unknown.
      - So C(groups['gpu_nodes'] | map('extract', hostvars)) can be given as it is.
    type: list
    elements: dict
    required: true
  unknown:
    description:
      - More Slurm node names (or hostlists) whose place is unknown, such as the on-demand nodes, or
        slurm.conf C(NodeName=) lines (the role's C(slurm_extra_nodes)), whose C(NodeName) is taken.
    type: list
    elements: str
    default: []
  kind:
    description:
      - V(tree) for Slurm's C(topology/tree) (switches per local block, network block and island), V(block) for
        C(topology/block) (C(BlockName) lines, one block per local block, neighbours adjacent; Slurm 23.11 or later).
    type: str
    choices: [tree, block]
    default: tree
  places:
    description:
      - "Places found later for some of the O(unknown) nodes, each name mapped to [island, network block, local
        block] (or to a dict with C(hpc_island_id), C(network_block_id), C(local_block_id)): the on-demand nodes
        the autoscaler brought up (its C(places.json)). A name that is not in O(unknown) is ignored."
      - When given (even empty) with O(unknown) nodes, the lines are returned even though nothing is placed
        yet (all in C(unknown)), so that the topology plugin is on before the first on-demand node appears.
    type: dict
"""

EXAMPLES = r"""
# topology.conf for the GPU nodes of the inventory and the on-demand nodes gpu-[1-8]
- name: Write topology.conf
  ansible.builtin.copy:
    dest: /etc/slurm/topology.conf
    content: |
      {% for line in groups['gpu_nodes'] | map('extract', hostvars) | ocigpu.cluster.slurm_topology(unknown=['gpu-[1-8]']) %}
      {{ line }}
      {% endfor %}
    mode: "0644"
"""

RETURN = r"""
_value:
  description: Lines of topology.conf, without newlines.
  type: list
  elements: str
"""

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import place_of, topology_lines, with_places


_NODE_NAME = re.compile(r'\bNodeName=(\S+)')


def _get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        raise AnsibleFilterError('slurm_topology: each node is a dict, not %r' % (mapping,))


def slurm_topology(nodes, unknown=None, places=None, kind='tree'):
    placed, lost = _inputs(nodes, unknown)
    placed = with_places(placed, lost, places)
    if not placed and not (unknown and places is not None):
        return []
    try:
        return topology_lines(kind, placed, lost)
    except ValueError as exc:
        raise AnsibleFilterError('slurm_topology: %s' % exc)


def slurm_topology_inputs(nodes, unknown=None, kind='tree'):
    """What slurm_topology renders from, as data: {placed: {name: [island, network block, local block]},
    unknown: [names]} - the file the autoscaler renders topology.conf from after a resume."""
    placed, lost = _inputs(nodes, unknown)
    return dict(kind=kind, placed=dict((k, list(v)) for k, v in sorted(placed.items())), unknown=sorted(set(lost)))


def _inputs(nodes, unknown):
    placed = {}
    lost = []
    for item in unknown or []:
        found = _NODE_NAME.search(str(item))
        lost.extend(expand_hostlist(found.group(1) if found else str(item).strip()))
    for node in nodes or []:
        name = _get(node, 'name') or _get(_get(node, 'ansible_facts') or {}, 'hostname')
        if not name:
            raise AnsibleFilterError('slurm_topology: each node is a dict with a name (or ansible_facts.hostname), '
                                     'not %r' % (node,))
        where = place_of(node)
        if where:
            placed[str(name)] = where
        else:
            lost.append(str(name))
    return placed, lost


class FilterModule(object):
    def filters(self):
        return {'slurm_topology': slurm_topology, 'slurm_topology_inputs': slurm_topology_inputs}
