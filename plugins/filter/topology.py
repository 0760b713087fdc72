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
  - Returns an empty list when no node has a place (then the role writes no topology.conf).
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

from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import compress_hostlist


_NODE_NAME = re.compile(r'\bNodeName=(\S+)')


def _short_names(prefix, ids):
    """{id: switch name}: the shortest tail (8 characters or more) that tells the ids apart."""
    ids = sorted(set(ids))
    for width in range(8, max([len(i) for i in ids] + [8]) + 1):
        tails = [i[-width:] for i in ids]
        if len(set(tails)) == len(ids):
            return {i: '%s-%s' % (prefix, t) for i, t in zip(ids, tails)}
    return {i: '%s-%s' % (prefix, i) for i in ids}


def _get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        raise AnsibleFilterError('slurm_topology: each node is a dict, not %r' % (mapping,))


def slurm_topology(nodes, unknown=None):
    placed = {}
    lost = []
    for item in unknown or []:
        found = _NODE_NAME.search(str(item))
        lost.append(found.group(1) if found else str(item).strip())
    for node in nodes or []:
        name = _get(node, 'name') or _get(_get(node, 'ansible_facts') or {}, 'hostname')
        if not name:
            raise AnsibleFilterError('slurm_topology: each node is a dict with a name (or ansible_facts.hostname), '
                                     'not %r' % (node,))
        where = tuple(_get(node, key) or _get(node, 'oci_' + key)
                      for key in ('hpc_island_id', 'network_block_id', 'local_block_id'))
        if all(where):
            placed[str(name)] = tuple(str(w) for w in where)
        else:
            lost.append(str(name))
    if not placed:
        return []
    islands = _short_names('is', [w[0] for w in placed.values()])
    blocks = _short_names('nb', [w[1] for w in placed.values()])
    locals_ = _short_names('lb', [w[2] for w in placed.values()])
    tree = {}
    for name, (island, block, local) in placed.items():
        tree.setdefault(island, {}).setdefault(block, {}).setdefault(local, []).append(name)
    lines = []
    for island in sorted(tree, key=islands.get):
        for block in sorted(tree[island], key=blocks.get):
            for local in sorted(tree[island][block], key=locals_.get):
                lines.append('SwitchName=%s Nodes=%s' % (locals_[local], compress_hostlist(tree[island][block][local])))
            lines.append('SwitchName=%s Switches=%s' % (
                blocks[block], ','.join(sorted(locals_[lb] for lb in tree[island][block]))))
        lines.append('SwitchName=%s Switches=%s' % (islands[island], ','.join(sorted(blocks[b] for b in tree[island]))))
    top = sorted(islands[i] for i in tree)
    if lost:
        lines.append('SwitchName=unknown Nodes=%s' % ','.join(sorted(set(lost))))
        top.append('unknown')
    if len(top) > 1:
        lines.append('SwitchName=root Switches=%s' % ','.join(top))
    return lines


class FilterModule(object):
    def filters(self):
        return {'slurm_topology': slurm_topology}
