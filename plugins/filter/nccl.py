# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.module_utils._nccl import active_metrics_text, judge, parse_output
from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import pairs_by_block, place_of


def nccl_parse(text):
    return parse_output(text)


def nccl_gate(text, threshold_gbps=None, args='', expected_ranks=None, rc=None, timeout=None):
    """One run judged by the validation report's rules (_nccl.judge): the verdict, its reasons as one
    line, the largest size as size_bytes and the output's error lines."""
    return judge(text, threshold_gbps=threshold_gbps, args=args, expected_ranks=expected_ranks, rc=rc, timeout=timeout)


def nccl_active_metrics(verdict, now):
    """The active check's figures as Prometheus text (_nccl.active_metrics_text)."""
    return active_metrics_text(verdict, float(now))


def nccl_pairs(nodes):
    """Two-node runs for the pairwise check, nodes of one local block together first (_topology.pairs_by_block)."""
    places = {}
    for node in nodes or []:
        if not isinstance(node, Mapping):
            raise AnsibleFilterError('nccl_pairs: each node is a dict (hostvars), not %r' % (node,))
        name = node.get('inventory_hostname') or node.get('name')
        if not name:
            raise AnsibleFilterError('nccl_pairs: each node has inventory_hostname or name, not %r' % (node,))
        places[str(name)] = place_of(node)
    pairs, extra = pairs_by_block(places)
    return dict(pairs=pairs, extra=extra or [])


class FilterModule(object):
    def filters(self):
        return {'nccl_parse': nccl_parse, 'nccl_gate': nccl_gate, 'nccl_pairs': nccl_pairs,
                'nccl_active_metrics': nccl_active_metrics}
