# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: resize_plan
short_description: Decide which GPU nodes leave a cluster network, and their Slurm names
version_added: 0.2.0
description:
  - Takes the nodes of a cluster network (as M(ocigpu.cluster.cluster_info) returns them) and the wanted node count,
    and returns the nodes that go and the nodes to replace - each named by display name, instance OCID or private IP.
  - A shrink with no named nodes picks them - with the controller's Slurm view, nodes without jobs first (not in
    Slurm, down, drained or idle), then busy ones; among equals the highest display name first. Without Slurm, the
    highest display names.
  - Names that do not fit are refused with a message saying why, before anything changes - too many or too few
    for the shrink, named nodes kept by the node count, a node both removed and replaced. A named node that is no
    longer a member is listed in C(gone) (a re-run after the node left) and otherwise ignored.
  - Used by C(provision.yml), which drains the chosen nodes in Slurm before they leave.
options:
  _input:
    description: Nodes of the cluster network, dicts with C(id), C(display_name) and C(private_ip).
    type: list
    elements: dict
    required: true
  node_count:
    description: Nodes wanted.
    type: int
    required: true
  remove:
    description: Nodes that go when the count shrinks (C(gpu_remove_nodes)).
    type: list
    elements: str
    default: []
  replace:
    description: Nodes to replace by new ones (C(gpu_replace_nodes)).
    type: list
    elements: str
    default: []
  slurm:
    description: Output of C(scontrol show node --oneliner) on the controller; empty when no Slurm runs there.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The nodes that leave
  ansible.builtin.set_fact:
    plan: "{{ cn.nodes | ocigpu.cluster.resize_plan(gpu_node_count, remove=gpu_remove_nodes, slurm=scontrol.stdout) }}"
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    remove: {description: Nodes that go (dicts of the input, with C(slurm_name) and C(slurm_state))., type: list}
    replace: {description: Nodes to replace (the same dicts)., type: list}
    grow: {description: Nodes to add., type: int}
    picked: {description: How the nodes that go were chosen - C(named), C(fewest jobs) or C(by name)., type: str}
    drain: {description: Slurm node names of the nodes that go or are replaced., type: list}
    gone: {description: Named nodes that are not members (any more)., type: list}
"""

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import match_nodes

BUSY = ('ALLOCATED', 'MIXED', 'COMPLETING')


def slurm_nodes(text):
    """NodeAddr -> (NodeName, State) from `scontrol show node --oneliner`."""
    nodes = {}
    for line in (text or '').splitlines():
        fields = dict(re.findall(r'(\w+)=(\S*)', line))
        if fields.get('NodeName'):
            nodes[fields.get('NodeAddr') or fields['NodeName']] = (fields['NodeName'], fields.get('State', ''))
    return nodes


def resize_plan(members, node_count, remove=None, replace=None, slurm=''):
    members = [dict(m) for m in members or []]
    node_count = int(node_count)
    if node_count < 0:
        raise AnsibleFilterError('gpu_node_count: %d; it cannot be negative' % node_count)
    known = slurm_nodes(slurm)
    for node in members:
        name, state = known.get(node.get('private_ip'), (None, None))
        node.update(slurm_name=name, slurm_state=state)
    named, gone = match_nodes(members, remove or [])
    replaced, gone_replace = match_nodes(members, replace or [])
    both = [n['display_name'] for n in named if n in replaced]
    if both:
        raise AnsibleFilterError('gpu_remove_nodes and gpu_replace_nodes both name %s' % ', '.join(both))
    if node_count == 0 and replaced:
        raise AnsibleFilterError('gpu_replace_nodes: with gpu_node_count 0 every node goes; nothing is replaced')
    shrink = max(0, len(members) - node_count)
    names = ', '.join(m['display_name'] for m in members)
    if named and len(named) != shrink:
        raise AnsibleFilterError(
            'gpu_remove_nodes names %d node(s) of the cluster network (%s), but gpu_node_count %d takes %d of its %d '
            'nodes away; name exactly the nodes that go, or leave gpu_remove_nodes empty to let the controller pick '
            'the nodes with the fewest jobs. Nodes: %s' % (
                len(named), ', '.join(n['display_name'] for n in named), node_count, shrink, len(members), names))
    if shrink and not named and remove:
        raise AnsibleFilterError('gpu_remove_nodes: %s %s not a node of the cluster network. Nodes: %s' % (
            ', '.join(gone), 'is' if len(gone) == 1 else 'are', names))
    if named:
        going, picked = named, 'named'
    else:
        def busy(node):
            return node['slurm_name'] is not None and any(b in (node['slurm_state'] or '') for b in BUSY)
        free = sorted((m for m in members if m not in replaced), key=lambda n: n['display_name'] or '', reverse=True)
        if known:
            free.sort(key=busy)  # stable: the highest names first among equals
        going, picked = free[:shrink], 'fewest jobs' if known else 'by name'
    drain = [n['slurm_name'] for n in going + replaced if n['slurm_name']]
    return dict(remove=going, replace=replaced, grow=max(0, node_count - len(members)),
                picked=picked if going else None, drain=drain, gone=gone + gone_replace)


class FilterModule(object):
    def filters(self):
        return {'resize_plan': resize_plan}
