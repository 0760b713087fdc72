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
  - Nodes are found in Slurm by address, or by the Slurm name a replacement carries on (C(slurm_name), the tag
    C(ocigpu-slurm-name)). A replaced node is drained with the reason C(ocigpu:) followed by
    C(being replaced (provision.yml) instance <OCID>).
  - A node named in O(replace) by a name that is itself a replacement is kept, so that the same
    C(gpu_replace_nodes) on a re-run does not replace the new node - unless Slurm shows it drained for another
    reason than its own replacement (for example by a health check). Named by OCID or private IP it is replaced.
    Without Slurm's view such a node is kept too, and C(kept) says why.
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
    drain_replace:
      description: "The replaced nodes in Slurm: C(slurm_name), C(instance_id) and the drain C(reason) that names the instance."
      type: list
    kept: {description: "Replacements named by a name and kept: C(display_name) and C(why).", type: list}
    gone: {description: Named nodes that are not members (any more)., type: list}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import match_nodes
from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import is_busy, parse_slurm_nodes

# The drain reason of a node being replaced; configure.yml resumes the Slurm name once a node with
# another instance carries it (it defines the same text).
REPLACE_REASON = 'ocigpu: being replaced (provision.yml) instance '


def by_address(node, refs):
    return bool(set(refs or []) & set([node['id'], node.get('private_ip')]))


def keep_replacement(node, refs, known):
    """Why a node named in replace is kept (a replacement named by a name, not to be replaced again), or None."""
    if not node['replacement_for'] or by_address(node, refs):
        return None
    if not known:
        return ('it is the replacement made for %s and Slurm cannot be read; name it by OCID or private IP to replace it'
                % node['replacement_for'])
    if 'DRAIN' not in (node['slurm_state'] or '') or (node['slurm_reason'] or '').startswith(REPLACE_REASON):
        return 'it is the replacement made for %s (Slurm: %s%s)' % (
            node['replacement_for'], node['slurm_state'] or 'not a node',
            ', ' + node['slurm_reason'] if node['slurm_reason'] else '')
    return None


def resize_plan(members, node_count, remove=None, replace=None, slurm=''):
    members = [dict(m) for m in members or []]
    node_count = int(node_count)
    if node_count < 0:
        raise AnsibleFilterError('gpu_node_count: %d; it cannot be negative' % node_count)
    known = parse_slurm_nodes(slurm)
    by_addr = dict((n['addr'], n) for n in known)
    by_name = dict((n['name'], n) for n in known)
    for node in members:
        # slurm_name comes in as the tag of a replacement (the name it carries on), and goes out as the
        # node's name in Slurm (None when Slurm does not list it).
        carries = node.get('slurm_name')
        seen = by_addr.get(node.get('private_ip')) or by_name.get(carries) or {}
        node.update(replacement_for=carries, slurm_name=seen.get('name'), slurm_state=seen.get('state'),
                    slurm_reason=seen.get('reason'))
    named, gone = match_nodes(members, remove or [])
    replaced, gone_replace = match_nodes(members, replace or [])
    kept = [dict(display_name=n['display_name'], why=keep_replacement(n, replace, known)) for n in replaced]
    kept = [k for k in kept if k['why']]
    replaced = [n for n in replaced if n['display_name'] not in [k['display_name'] for k in kept]]
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
            return node['slurm_state'] is not None and is_busy(node['slurm_state'])
        free = sorted((m for m in members if m not in replaced), key=lambda n: n['display_name'] or '', reverse=True)
        if known:
            free.sort(key=busy)  # stable: the highest names first among equals
        going, picked = free[:shrink], 'fewest jobs' if known else 'by name'
    drain = [n['slurm_name'] for n in going + replaced if n['slurm_state'] is not None]
    drain_replace = [dict(slurm_name=n['slurm_name'], instance_id=n['id'], reason=REPLACE_REASON + n['id'])
                     for n in replaced if n['slurm_state'] is not None]
    return dict(remove=going, replace=replaced, grow=max(0, node_count - len(members)),
                picked=picked if going else None, drain=drain, drain_replace=drain_replace, kept=kept,
                gone=gone + gone_replace)


class FilterModule(object):
    def filters(self):
        return {'resize_plan': resize_plan}
