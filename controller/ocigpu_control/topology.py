# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where OCI put the on-demand nodes the service brought up, in Slurm's topology.conf (``add_places``), and
the writer of the control plane's text files (``write_text``).

topology.conf has two writers and one renderer, the collection's ``module_utils/_topology``: the slurm
role (its ``slurm_topology`` filter, from the inventory's places of the static nodes, leaving the
on-demand nodes in ``unknown``, and ``topology.json``, what it rendered from), and the service after a
resume, which renders the file again from ``topology.json`` and every place it has recorded
(``places.json`` in its state folder, which the slurm role reads back when it runs again).
"""

from __future__ import annotations

import json

from ansible_collections.ocigpu.cluster.plugins.module_utils import _health
from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import topology_lines, with_places


def _read_json(path, default):
    try:
        with open(path, encoding='utf-8') as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def write_text(path, text, atomic=True):
    """Write a text file readable by all (0644); atomic: whole or not at all, as a reader sees it."""
    if not atomic:
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(text)
        return
    _health.write_text(path, text)


def add_places(conf, inputs, places, found):
    """Record ``found`` ({name: place}) in the places file and render topology.conf again from the
    slurm role's inputs (topology.json) and every recorded place, keeping the file's comment lines.
    Returns (names whose place is new, whether topology.conf changed), or None when there is nothing
    to render from (no inputs: the slurm role wrote no topology for on-demand nodes)."""
    data = _read_json(inputs, None)
    if data is None:
        return None
    recorded = _read_json(places, {})
    moved = sorted(n for n, p in found.items() if recorded.get(n) != list(p))
    recorded.update((n, list(p)) for n, p in found.items())
    if moved:
        write_text(places, json.dumps(recorded, indent=2, sort_keys=True) + '\n')
    unknown = data.get('unknown') or []
    placed = with_places(data.get('placed') or {}, unknown, recorded)
    try:
        with open(conf, encoding='utf-8') as handle:
            current = handle.read()
    except FileNotFoundError:
        current = None
    head = [line for line in (current or '').splitlines() if line.startswith('#')]
    text = '\n'.join(head + topology_lines(data.get('kind') or 'tree', placed, unknown)) + '\n'
    changed = current != text
    if changed:
        # In place: Slurm's user may write the file but not its folder.
        write_text(conf, text, atomic=False)
    return moved, changed
