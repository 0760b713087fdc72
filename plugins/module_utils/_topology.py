# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where OCI puts each GPU node, for Slurm and for the NCCL checks.

A place is (HPC island, network block, local block) OCIDs. One renderer of topology.conf (tree or
block plugin) for its two writers: the slurm role (the ``slurm_topology`` filter), from the
inventory's places of the static nodes, and the autoscaler service, which adds the places of the
on-demand nodes it brought up (controller/ocigpu_control/topology.py). ``pairs_by_block`` pairs nodes
for two-node NCCL runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import _natural, compress_hostlist

PLACE_KEYS = ('hpc_island_id', 'network_block_id', 'local_block_id')


def place_of(record):
    """The place of a node or compute host record - a mapping (hostvars, JSON) or an SDK model, its keys
    named as the models (``hpc_island_id``), the gpu_nodes inventory (``oci_hpc_island_id``) or the API
    (``hpcIslandId``) name them - or None when any part is missing."""
    def get(key):
        head, *rest = key.split('_')
        for name in (key, 'oci_' + key, head + ''.join(word.title() for word in rest)):
            value = record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)
            if value:
                return str(value)
        return None
    place = tuple(get(key) for key in PLACE_KEYS)
    return place if all(place) else None


def with_places(placed, unknown, places):
    """``placed`` and, for the names in ``unknown``, the places found for them later (``places``: name ->
    [island, network block, local block] or a record for place_of): the on-demand nodes the autoscaler
    brought up. A name outside ``unknown`` (no longer declared) is left out."""
    out = dict(placed)
    names = set(unknown)
    for name, value in (places or {}).items():
        where = place_of(value) if isinstance(value, Mapping) else (
            tuple(str(v) for v in value) if value and all(value) else None)
        if where and name in names:
            out[str(name)] = where
    return out


def _short_names(prefix, ids):
    """{id: switch name}: the shortest tail (8 characters or more) that tells the ids apart."""
    ids = sorted(set(ids))
    for width in range(8, max([len(i) for i in ids] + [8]) + 1):
        tails = [i[-width:] for i in ids]
        if len(set(tails)) == len(ids):
            return {i: '%s-%s' % (prefix, t) for i, t in zip(ids, tails)}
    return {i: '%s-%s' % (prefix, i) for i in ids}


def block_lines(placed, unknown=()):
    """topology.conf's BlockName lines for Slurm's block plugin: one block per local block, listed in
    (island, network block) order so that neighbouring blocks are adjacent in the file (the plugin
    joins adjacent blocks into larger ones); nodes without a place form the block ``unknown``.
    Returns [] when nothing is placed and nothing is unknown."""
    placed = dict((str(k), tuple(str(p) for p in v)) for k, v in placed.items())
    lost = sorted(set(str(n) for n in unknown) - set(placed))
    locals_ = _short_names('lb', [w[2] for w in placed.values()]) if placed else {}
    blocks = {}
    for name, where in placed.items():
        blocks.setdefault(where, []).append(name)
    lines = ['BlockName=%s Nodes=%s' % (locals_[where[2]], compress_hostlist(blocks[where])) for where in sorted(blocks)]
    if lost:
        lines.append('BlockName=unknown Nodes=%s' % compress_hostlist(lost))
    return lines


def topology_lines(kind, placed, unknown=()):
    """The lines of topology.conf for the plugin ``kind`` (tree or block)."""
    if kind == 'block':
        return block_lines(placed, unknown)
    if kind == 'tree':
        return tree_lines(placed, unknown)
    raise ValueError('topology: %r is neither tree nor block' % (kind,))


def tree_lines(placed, unknown=()):
    """topology.conf's SwitchName lines.

    ``placed``: {node name: (island, network block, local block)}; ``unknown``: node names without a
    place (a name in both is placed). Nodes without a place go into the switch ``unknown``, beside
    the islands under ``root``. Returns [] when nothing is placed and nothing is unknown."""
    placed = dict((str(k), tuple(str(p) for p in v)) for k, v in placed.items())
    lost = sorted(set(str(n) for n in unknown) - set(placed))
    if not placed and not lost:
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
        lines.append('SwitchName=unknown Nodes=%s' % compress_hostlist(lost))
        top.append('unknown')
    if len(top) > 1:
        lines.append('SwitchName=root Switches=%s' % ','.join(top))
    return lines


def pairs_by_block(places):
    """Pairs of nodes for two-node NCCL runs, closest first.

    ``places``: {name: (island, network block, local block) or None}. Nodes are paired inside their
    local block (in name order); the one left over in a block with an odd count is paired with the
    one left over in another block of the same network block, then of the same island, then any;
    nodes without a place are paired among themselves last. Returns (pairs, extra): ``pairs`` share
    no node, so they can run at once; ``extra`` is the one pair that repeats a node when the count is
    odd (the last node with the first of its own local block), or None."""
    order = _natural
    blocks = {}
    for name, place in places.items():
        blocks.setdefault(tuple(place) if place else None, []).append(name)
    pairs, left = [], []
    for place in sorted((p for p in blocks if p is not None)):
        names = sorted(blocks[place], key=order)
        pairs.extend([names[i], names[i + 1]] for i in range(0, len(names) - 1, 2))
        if len(names) % 2:
            left.append((place, names[-1]))
    # Leftovers: nearest first - the same network block, then the same island, then any.
    while len(left) > 1:
        place, name = left.pop(0)
        best = min(range(len(left)), key=lambda i: (left[i][0][:2] != place[:2], left[i][0][0] != place[0], i))
        pairs.append([name, left.pop(best)[1]])
    unplaced = sorted(blocks.get(None, []), key=order)
    if left:
        unplaced = [left[0][1]] + unplaced
    pairs.extend([unplaced[i], unplaced[i + 1]] for i in range(0, len(unplaced) - 1, 2))
    extra = None
    if len(unplaced) % 2 and len(places) > 1:
        last = unplaced[-1]
        home = places.get(last)
        mates = sorted((n for n in places if n != last and places.get(n) == home), key=order) or \
            sorted((n for n in places if n != last), key=order)
        extra = [mates[0], last]
    return pairs, extra
