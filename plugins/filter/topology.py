# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

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
