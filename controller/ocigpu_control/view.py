# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The OCI side of the operator's view (``ocigpu-slurm-autoscaler nodes``, read by ``ocigpu status``):
one record per instance that carries a Slurm name of this cluster, TERMINATING and TERMINATED ones
included while OCI still lists them, so that the operator's join can tell a node whose instance is gone
from one that never had one.

- On-demand instances carry their Slurm name in the tag ``ocigpu-slurm-node`` (scaler.NODE_TAG), a
  name of the configuration's ``nodes``; static ones in ``ocigpu-slurm-name`` (the self-healing loop's
  replacements, and nodes an operator tagged), a name of ``static.nodes``, or are the members of the
  static cluster network whose host name is a static name (the instances provision.yml made).
- The cluster network of an instance: the one whose members OCI lists it in; for an instance no
  longer a member, the cluster network of this cluster whose tag ``ocigpu-slurm-nodes`` carries its
  name and which was made last before it.
- The capacity source: the cluster network's tag ``ocigpu-capacity-source`` (scaler.SOURCE_TAG, set by the
  autoscaler when it creates one in a configured source), else the instance's availability domain.
- The local block: from the listing of the compute hosts where the policy allows it, else from the
  places the service recorded (``topology.places``, keyed by Slurm name), else None.

Read with the service's listings (cloud.py): one listing of the compartment's instances, cluster
networks and compute hosts, and one listing of members per cluster network of this cluster.
"""

from __future__ import annotations

import json

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import SLURM_NAME_TAG
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import _natural, expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import CLUSTER_TAG, attr
from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import place_of
from ocigpu_control.cloud import PAGE, REFUSED, Listings
from ocigpu_control.scaler import NODE_TAG, NODES_TAG, SOURCE_TAG

KEYS = ('name', 'instance_id', 'instance_state', 'display_name', 'private_ip', 'availability_domain', 'fault_domain',
        'cluster_network_id', 'cluster_network_name', 'cluster_network_state', 'local_block', 'kind', 'time_created',
        'capacity_source')


def _time(value):
    return value.isoformat() if hasattr(value, 'isoformat') else (str(value) if value else None)


def _read_places(path):
    if not path:
        return {}
    try:
        with open(path, encoding='utf-8') as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class NodesView(object):
    """The records of ``nodes()``; session and listings as the service's (programs.py makes them)."""

    def __init__(self, config, session=None, listings=None):
        self.config = config
        self.session = session or _oci.OCISession(dict(config['auth']))
        self.listings = listings or Listings(self.session, config['compartment_id'])
        self.on_demand = set(config.get('node_names') or expand_hostlist(config.get('nodes') or ''))
        static = config.get('static') or {}
        self.static = set(expand_hostlist(static.get('nodes') or ''))
        self.static_cn = static.get('cluster_network_id')

    def _claim(self, instance, members, labels):
        """(Slurm name, kind) an instance carries for this cluster, or (None, None)."""
        tags = attr(instance, 'freeform_tags') or {}
        if tags.get(CLUSTER_TAG) not in (None, self.config['cluster_name']):
            return None, None
        if tags.get(NODE_TAG) in self.on_demand:
            return tags[NODE_TAG], 'on_demand'
        if tags.get(SLURM_NAME_TAG) in self.static:
            return tags[SLURM_NAME_TAG], 'static'
        member = members.get(instance.id)
        if member is not None and member.id == self.static_cn:
            for name in (labels.get(instance.id), attr(instance, 'display_name')):
                if name in self.static:
                    return name, 'static'
        return None, None

    def _ours(self, cn):
        tags = attr(cn, 'freeform_tags') or {}
        return cn.id == self.static_cn or (tags.get(CLUSTER_TAG) == self.config['cluster_name'] and NODES_TAG in tags)

    def _members(self, networks):
        """{instance id: cluster network} of the members OCI lists for this cluster's cluster networks."""
        found = {}
        s = self.session
        for cn in networks:
            if not self._ours(cn) or cn.lifecycle_state == 'TERMINATED':
                continue
            try:
                items = s.list_all(s.compute_management.list_cluster_network_instances, self.config['compartment_id'],
                                   cn.id, limit=PAGE)
            except _oci.ServiceError as exc:
                if exc.status not in REFUSED:
                    raise
                continue
            for item in items:
                found.setdefault(item.id, cn)
        return found

    def _carrier(self, networks, name, created):
        """The cluster network of this cluster tagged with `name` and made last before `created`."""
        carriers = [cn for cn in networks if self._ours(cn) and name in expand_hostlist(
            (attr(cn, 'freeform_tags') or {}).get(NODES_TAG) or '')]
        before = [cn for cn in carriers if not created or not attr(cn, 'time_created') or cn.time_created <= created]
        pick = sorted(before or carriers, key=lambda cn: _time(attr(cn, 'time_created')) or '')
        return pick[-1] if pick else None

    def _blocks(self):
        """({instance id: local block} from the compute hosts, {name: local block} from the places file)."""
        by_id = {}
        try:
            for host in self.listings.get('compute_hosts'):
                place = place_of(host)
                if place and attr(host, 'instance_id'):
                    by_id[host.instance_id] = place[2]
        except _oci.ServiceError as exc:
            if exc.status not in REFUSED:
                raise
        places = _read_places((self.config.get('topology') or {}).get('places'))
        by_name = dict((n, p[2]) for n, p in places.items() if isinstance(p, list) and len(p) == 3 and p[2])
        return by_id, by_name

    def _addresses(self, ids):
        """{instance id: (private IP, host name)} of the primary VNICs, from the shared listings; the VNICs
        of the instances these do not show (the policy refuses the private IPs) are read one by one."""
        found, unread = {}, []
        attachments = self.listings.get('vnic_attachments')
        for ocid in ids:
            atts = [a for a in attachments.get(ocid, []) if attr(a, 'nic_index', 0) in (0, None)]
            ip = self.listings.private_ip(atts[0]) if atts else None
            if ip is None:
                unread.append(ocid)
            else:
                found[ocid] = (ip.ip_address, attr(ip, 'hostname_label'))
        if unread:
            for ocid, ips in _launch.instance_ips(self.session, self.config['compartment_id'], unread).items():
                found[ocid] = (ips['private_ip'], ips['hostname_label'])
        return found

    def nodes(self):
        networks = list(self.listings.get('cluster_networks'))
        members = self._members(networks)
        by_id, by_name = self._blocks()
        instances = [i for i in self.listings.get('instances').values()
                     if i.lifecycle_state not in ('TERMINATING', 'TERMINATED')]
        static_members = [i.id for i in instances if self.static_cn and i.id in members and members[i.id].id == self.static_cn]
        addresses = self._addresses(static_members)
        labels = dict((ocid, found[1]) for ocid, found in addresses.items())
        records = []
        for instance in self.listings.get('instances').values():
            name, kind = self._claim(instance, members, labels)
            if name is None:
                continue
            cn = members.get(instance.id) or self._carrier(networks, name, attr(instance, 'time_created'))
            live = instance.lifecycle_state not in ('TERMINATING', 'TERMINATED')
            if live and instance.id not in addresses:
                addresses.update(self._addresses([instance.id]))
            records.append(dict(
                name=name, instance_id=instance.id, instance_state=instance.lifecycle_state,
                display_name=attr(instance, 'display_name'), private_ip=addresses.get(instance.id, (None,))[0] if live else None,
                availability_domain=attr(instance, 'availability_domain'), fault_domain=attr(instance, 'fault_domain'),
                cluster_network_id=cn.id if cn else None, cluster_network_name=attr(cn, 'display_name') if cn else None,
                cluster_network_state=cn.lifecycle_state if cn else None,
                local_block=by_id.get(instance.id) or (by_name.get(name) if live else None), kind=kind,
                time_created=_time(attr(instance, 'time_created')),
                capacity_source=(attr(cn, 'freeform_tags') or {}).get(SOURCE_TAG) if cn else None))
            records[-1]['capacity_source'] = records[-1]['capacity_source'] or records[-1]['availability_domain']
        return sorted(records, key=lambda r: (_natural(r['name']), r['time_created'] or '', r['instance_id']))
