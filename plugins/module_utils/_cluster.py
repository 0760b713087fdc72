# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Cluster network operations: create and wait on the work request, resize, terminate, list nodes.

Used by the cluster_network module and, without Ansible, by the Slurm autoscaler:

    session = _oci.OCISession(auth_params)
    ops = ClusterOps(session, Waiter(session, timeout=3600), compartment_id, cluster_name)
    cn = ops.create('c1-cn', dict(node_count=2, instance_configuration_id=..., availability_domain=...,
                                  subnet_id=..., freeform_tags=cluster_tags('c1')))
    ops.describe(cn)['nodes']            # [{id, display_name, private_ip, ...}]
    ops.terminate(cn.id, wait=True)
"""

from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _shapes
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError, attr
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitFailed

try:
    from oci.core import models as M
except ImportError:
    M = None

LIVE_NODE_STATES = ('PROVISIONING', 'STARTING', 'RUNNING', 'STOPPING', 'STOPPED')
# On an instance that replaced another: the Slurm name it carries on (the old node's host name). The
# inventory plugin gives it to configure.yml as ocigpu_slurm_name, which makes it the host name.
SLURM_NAME_TAG = 'ocigpu-slurm-name'


def pool_facts(res):
    pool = (attr(res, 'instance_pools') or [None])[0]
    placement = attr(res, 'placement_configuration')
    subnet = attr(placement, 'primary_subnet_id') or attr(attr(placement, 'primary_vnic_subnets'), 'subnet_id')
    return dict(node_count=attr(pool, 'size'), instance_configuration_id=attr(pool, 'instance_configuration_id'),
                instance_pool_id=attr(pool, 'id'), availability_domain=attr(placement, 'availability_domain'),
                subnet_id=subnet, placement_constraint=attr(placement, 'placement_constraint'),
                hpc_island_id=attr(res, 'hpc_island_id'),
                network_block_ids=sorted(attr(res, 'network_block_ids') or []) or None)


def match_nodes(nodes, refs, keys=('id', 'display_name', 'private_ip')):
    """The nodes that refs name (by any of keys), in the order named and each once, and the refs that
    name no node. Used by the cluster_network module and the resize_plan filter."""
    found, unknown = [], []
    for ref in refs:
        hits = [n for n in nodes if ref in [n.get(k) for k in keys]]
        if not hits:
            unknown.append(ref)
        elif hits[0] not in found:
            found.append(hits[0])
    return found, unknown


class ClusterOps(object):

    def __init__(self, mod=None, session=None, waiter=None, compartment_id=None, wait=True):
        if mod is not None:
            session, waiter = mod.session, mod.waiter
            compartment_id, wait = mod.params['compartment_id'], mod.params['wait']
        self.session = session
        self.cm = session.compute_management
        self.waiter = waiter
        self.compartment_id = compartment_id
        self.wait = wait
        self.work_request_id = None

    def check_configuration(self, configuration_id):
        """The instance configuration must exist and use a shape that joins cluster networks."""
        config = self.session.get_or_none(self.cm.get_instance_configuration, configuration_id)
        if config is None:
            raise InputError('instance_configuration_id: %s not found' % configuration_id)
        shape = attr(attr(attr(config, 'instance_details'), 'launch_details'), 'shape')
        facts = _shapes.SHAPES.get(shape)
        if facts is None or facts['cluster_kind'] != 'cluster_network':
            raise InputError('instance_configuration_id: its shape %s cannot join a cluster network (RDMA shapes: %s)' % (
                shape, ', '.join(n for n in _shapes.known_shapes() if _shapes.SHAPES[n]['cluster_kind'])))
        return config

    def _wait_work_request(self, response, what):
        wr_id = response.headers.get('opc-work-request-id')
        if wr_id:
            self.work_request_id = wr_id
            self.waiter.work_request(wr_id, what='%s (work request %s)' % (what, wr_id))

    def create(self, display_name, want):
        details = M.CreateClusterNetworkDetails(
            compartment_id=self.compartment_id, display_name=display_name,
            freeform_tags=want.get('freeform_tags'), defined_tags=want.get('defined_tags'),
            instance_pools=[M.CreateClusterNetworkInstancePoolDetails(
                instance_configuration_id=want['instance_configuration_id'], size=want['node_count'],
                display_name='%s-pool' % display_name, freeform_tags=want.get('freeform_tags'))],
            placement_configuration=M.ClusterNetworkPlacementConfigurationDetails(
                availability_domain=want['availability_domain'], primary_subnet_id=want['subnet_id'],
                placement_constraint=want.get('placement_constraint')),
            # Only within this HPC island (and these network blocks, when given).
            cluster_configuration=M.ClusterConfigurationDetails(
                hpc_island_id=want['hpc_island_id'], network_block_ids=want.get('network_block_ids') or None)
            if want.get('hpc_island_id') else None)
        response = self.session.create(self.cm.create_cluster_network, details)
        res = response.data
        if not self.wait:
            return res
        try:
            return self._wait_created(response, res)
        except WaitFailed as exc:
            exc.details.setdefault('resource_id', res.id)
            raise

    def _wait_created(self, response, res):
        """A new cluster network RUNNING: its work request first (its errors say why it failed), then its state."""
        self._wait_work_request(response, 'create of cluster network %s' % res.id)
        return self.wait_running(res.id)

    def wait_running(self, cluster_network_id):
        return self.waiter.lifecycle(self.cm.get_cluster_network, cluster_network_id, ['RUNNING'],
                                     failed_states=('TERMINATING', 'TERMINATED'),
                                     what='cluster network %s' % cluster_network_id)

    def update(self, res, changes):
        pool_changes = {}
        if 'node_count' in changes:
            pool_changes['size'] = changes.pop('node_count')
        if 'instance_configuration_id' in changes:
            pool_changes['instance_configuration_id'] = changes.pop('instance_configuration_id')
        pools = None
        if pool_changes:
            pools = [M.UpdateClusterNetworkInstancePoolDetails(id=pool_facts(res)['instance_pool_id'], **pool_changes)]
        details = M.UpdateClusterNetworkDetails(instance_pools=pools, **changes)
        response = self.session.call_response(self.cm.update_cluster_network, res.id, details)
        if not self.wait:
            return response.data
        self._wait_work_request(response, 'update of cluster network %s' % res.id)
        return self.wait_running(res.id)

    def detach(self, res, instance_id, decrement=True):
        """Take one chosen instance out of the cluster network and terminate it (DetachInstancePoolInstance
        with isAutoTerminate): with decrement the pool's size drops by one, else the pool launches a
        replacement. Always waits: the pool takes no other change while it scales."""
        details = M.DetachInstancePoolInstanceDetails(instance_id=instance_id, is_decrement_size=decrement,
                                                      is_auto_terminate=True)
        response = self.session.create(self.cm.detach_instance_pool_instance,
                                       pool_facts(res)['instance_pool_id'], details)
        what = '%s of instance %s from cluster network %s' % ('removal' if decrement else 'replacement',
                                                              instance_id, res.id)
        self._wait_work_request(response, what)
        return self.wait_running(res.id)

    def replace(self, res, node):
        """Detach one node without a size decrement, so the pool launches a new instance, and give that
        instance the old display name and the old Slurm name (SLURM_NAME_TAG: the old node's own tag,
        else its host name). Returns the cluster network and {old_id, new_id, display_name, slurm_name}."""
        before = set(n['id'] for n in self.nodes(res.id))
        slurm_name = node.get('slurm_name') or node.get('hostname_label') or node['display_name']
        res = self.detach(res, node['id'], decrement=False)
        new = [n for n in self.nodes(res.id) if n['id'] not in before]
        if len(new) != 1:
            raise InputError('replacement of %s: the cluster network shows %d new instances, not 1; nothing labelled'
                             % (node['display_name'], len(new)))
        _launch.label_instance(self.session, new[0]['id'], display_name=node['display_name'],
                               freeform_tags={SLURM_NAME_TAG: slurm_name})
        return res, dict(old_id=node['id'], new_id=new[0]['id'], display_name=node['display_name'],
                         slurm_name=slurm_name)

    def terminate(self, cluster_network_id, wait=True):
        current = self.session.get_or_none(self.cm.get_cluster_network, cluster_network_id)
        if current is None or current.lifecycle_state == 'TERMINATED':
            return
        if current.lifecycle_state != 'TERMINATING':
            response = self.session.call_response(self.cm.terminate_cluster_network, cluster_network_id)
            self.work_request_id = response.headers.get('opc-work-request-id') or self.work_request_id
        if wait:
            self.wait_gone(cluster_network_id)

    def wait_gone(self, cluster_network_id):
        """Wait until a cluster network whose termination was asked for is gone."""
        self.waiter.gone(self.cm.get_cluster_network, cluster_network_id, what='cluster network %s' % cluster_network_id)

    def nodes(self, cluster_network_id):
        items = self.session.list_all(self.cm.list_cluster_network_instances, self.compartment_id, cluster_network_id)
        items = [i for i in items if (i.state or '').upper() in LIVE_NODE_STATES]
        ips = _launch.instance_ips(self.session, self.compartment_id, [i.id for i in items])
        tags = _launch.instance_tags(self.session, self.compartment_id, [i.id for i in items])
        nodes = [dict(dict(id=i.id, display_name=i.display_name, state=i.state, fault_domain=i.fault_domain,
                           shape=i.shape, slurm_name=tags.get(i.id, {}).get(SLURM_NAME_TAG)), **ips[i.id])
                 for i in items]
        return sorted(nodes, key=lambda n: (n['display_name'] or '', n['id']))

    def describe(self, res):
        out = dict(id=res.id, display_name=res.display_name, lifecycle_state=res.lifecycle_state,
                   freeform_tags=res.freeform_tags)
        out.update(pool_facts(res))
        out['nodes'] = self.nodes(res.id) if res.lifecycle_state not in ('TERMINATING', 'TERMINATED') else []
        return out
