# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Static nodes of the cluster network, replaced by the self-healing loop (the ``static`` section of
the autoscaler's configuration: the cluster network's OCID, the static nodes' hostlist and the path
of the slurm role's ``nodes.conf``).

A replacement is the one ``provision.yml -e gpu_replace_nodes=...`` makes: the old instance is
detached from the cluster network's instance pool without a size decrement, so the pool launches a
new one in its place (``ClusterOps.replace``). The new instance then gets what a node needs to
configure itself by pull, as the on-demand nodes do: its Slurm name in the inventory's tag
``ocigpu-slurm-name`` (not ``ocigpu-slurm-node``, which would move it to the inventory's on-demand
group), its display name, and where its pull server is. Its address goes
to Slurm twice: ``scontrol update NodeAddr=`` for now, and the node's line in ``nodes.conf`` (Slurm's
user's file) so that a reconfigure or a restart of slurmctld keeps it.

Every step survives the service stopping in the middle: the old instance and the pool's instances
before the detach are written to the state file first, so that a second run detaches nothing twice,
and labels the instance the pool launched in the meantime.
"""

from __future__ import annotations

import re

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch
from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import SLURM_NAME_TAG
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
from ocigpu_control.topology import write_text

STATE_KEY = 'static_replacements'  # in the service's state file: {name: {old_id, before}}


def static_names(config):
    """The static nodes the loop may replace: none without a ``static`` section."""
    return expand_hostlist((config.get('static') or {}).get('nodes') or '')


def set_node_address(path, name, addr):
    """Give NodeName=<name> the address addr in nodes.conf; returns whether the file changed.

    In place: Slurm's user may write the file but not its folder. A node without a line of its own (a
    hostlist line, or none) is refused: the file is left as it is."""
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    lines = text.split('\n')
    hits = [i for i, line in enumerate(lines) if re.match(r'NodeName=%s(\s|$)' % re.escape(name), line)]
    if len(hits) != 1:
        raise InputError('%s: %d lines for NodeName=%s, not 1; its address is not written' % (path, len(hits), name))
    line = lines[hits[0]]
    if re.search(r'\sNodeAddr=', line):
        line = re.sub(r'(\s)NodeAddr=\S+', lambda m: m.group(1) + 'NodeAddr=' + addr, line, count=1)
    else:
        line = line.replace('NodeName=%s' % name, 'NodeName=%s NodeAddr=%s' % (name, addr), 1)
    if line == lines[hits[0]]:
        return False
    lines[hits[0]] = line
    write_text(path, '\n'.join(lines), atomic=False)
    return True


def replace(scaler, name, addr):
    """Replace the static node name (its instance: the one tagged with that Slurm name, else the one
    at addr, its NodeAddr) through the pool; returns {name, id, private_ip, hostname, old_id}.

    scaler: the service's Autoscaler (its session, cluster operations, state file and pull tags)."""
    static = scaler.config.get('static') or {}
    if name not in static_names(scaler.config):
        raise InputError('%s is not among the static nodes %s' % (name, static.get('nodes') or '(none)'))
    cn_id = static['cluster_network_id']
    res = scaler.ops.wait_running(cn_id)
    nodes = scaler.ops.nodes(cn_id)
    record = scaler.state.read().get(STATE_KEY, {}).get(name)
    if record is None:
        old = [n for n in nodes if n.get('slurm_name') == name] or [n for n in nodes if n.get('private_ip') == addr]
        if len(old) != 1:
            raise InputError('cluster network %s: %d instances carry %s (tag %s or address %s), not 1' % (
                cn_id, len(old), name, SLURM_NAME_TAG, addr))
        record = dict(old_id=old[0]['id'], display_name=old[0]['display_name'], before=sorted(n['id'] for n in nodes))
        scaler.state.update(lambda s: s.setdefault(STATE_KEY, {}).__setitem__(name, record))
    if record['old_id'] in [n['id'] for n in nodes]:
        res = scaler.ops.detach(res, record['old_id'], decrement=False)
        nodes = scaler.ops.nodes(res.id)
    new = [n for n in nodes if n['id'] not in record['before']]
    if len(new) != 1:
        raise InputError('cluster network %s shows %d new instances after the detach of %s, not 1; nothing labelled' % (
            cn_id, len(new), record['old_id']))
    _launch.label_instance(scaler.session, new[0]['id'], display_name=record['display_name'],
                           freeform_tags=dict(scaler.pull_tags(), **{SLURM_NAME_TAG: name}))
    scaler.state.update(lambda s: s.setdefault(STATE_KEY, {}).pop(name, None))
    return dict(name=name, id=new[0]['id'], private_ip=new[0].get('private_ip'), hostname=new[0].get('hostname_label'),
                old_id=record['old_id'], cluster_network_id=res.id)
