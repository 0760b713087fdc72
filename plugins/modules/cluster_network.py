#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_network
short_description: N bare-metal GPU nodes on an OCI RDMA cluster network
version_added: 0.1.0
description:
  - Creates a cluster network - and with it its instance pool of O(node_count) GPU nodes launched from an
    instance configuration (M(ocigpu.cluster.instance_configuration)) - waits on the work request until it is
    RUNNING and returns the nodes with their IPs.
  - Found again by compartment, display name and the freeform tag C(ocigpu-cluster), so a re-run - also after
    an interrupted one - adopts the existing cluster network and never launches a second set of nodes.
  - A changed O(node_count) or O(instance_configuration_id) updates the instance pool and waits. A larger
    O(node_count) adds nodes. A smaller one must name the nodes that go in O(remove_nodes) - a plain size decrease
    lets OCI choose which instances to terminate, so the module refuses it before any change.
  - O(remove_nodes) and O(replace_nodes) take chosen nodes out of the cluster network, one at a time, with OCI's
    DetachInstancePoolInstance and automatic termination - the first lowering the pool's size, the second keeping
    it so that the pool launches a replacement from the instance configuration. A named node that is no longer a
    member is skipped, so a re-run after an interrupted one finishes the job and then changes nothing. The module
    does not drain Slurm; the C(provision.yml) playbook drains the nodes before it calls the module.
  - A replacement carries on under the old node's names - the module gives the new instance the old display name
    and the freeform tag C(ocigpu-slurm-name) with the old Slurm name (the old node's own tag, else its host name),
    in one UpdateInstance call. C(configure.yml) makes that name the new node's host name, so Slurm sees the same
    node. A replacement named again in O(replace_nodes) by its display name or host name is left alone with a
    warning (the same list on a re-run must not replace the new node); named by OCID or private IP it is replaced,
    and hands the same Slurm name on.
  - A failed work request (for example C(Out of host capacity.)) fails the task with OCI's message and the work
    request id; with O(cleanup_on_failure) the module first terminates what the request created, so nothing
    billable is left.
  - With O(capacity_sources) a new cluster network is made in the first source that has hosts for it - a capacity
    reservation, or an availability domain's on-demand hosts, each with its own instance configuration. A create
    that OCI answers with a stock-out (C(Out of host capacity.), a full reservation; the create call's error or
    its failed work request) is terminated and the next source is tried; any other failure stops there.
    RV(capacity_source) names the source used, RV(capacity_tried) the ones that had no host. An existing cluster
    network stays where it is (a resize never moves it); it is matched to its source by its freeform tag
    C(ocigpu-capacity-source), its instance configuration or its availability domain.
  - O(state=absent) terminates the cluster network and its nodes.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.PLANNED
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.WAIT
  - ocigpu.cluster.oci.TAGS
options:
  display_name:
    description:
      - Display name. Defaults to C(<cluster_name>-cn); the instance pool is C(<display_name>-pool), so at most
        250 characters (OCI takes 255).
    type: str
  instance_configuration_id:
    description: Instance configuration of the nodes. Required with O(state=present).
    type: str
  node_count:
    description: Number of nodes (at least 1). Required with O(state=present).
    type: int
  availability_domain:
    description:
      - Availability domain of the nodes. Required with O(state=present).
      - Must be one of the region's; checked, with O(subnet_id), before anything is created.
    type: str
  subnet_id:
    description:
      - Subnet of the nodes' primary VNICs. Required with O(state=present).
      - The OCID of a subnet (C(ocid1.subnet...)) that exists and, if AD-specific, lies in O(availability_domain).
    type: str
  placement_constraint:
    description:
      - OCI's placement constraint when it reserves the hosts of the cluster network (C(placementConstraint)),
        V(SINGLE_TIER), V(SINGLE_BLOCK) or V(PACKED_DISTRIBUTION_MULTI_BLOCK). Left out, OCI places the nodes as it
        does by default (within one HPC island).
      - Fixed when the cluster network is made; a different value for an existing one fails before any change.
      - A tighter constraint means nodes closer together in the RDMA fabric and more often too few free hosts.
    type: str
    choices: [SINGLE_TIER, SINGLE_BLOCK, PACKED_DISTRIBUTION_MULTI_BLOCK]
    version_added: 0.4.0
  hpc_island_id:
    description:
      - Place the nodes only in this HPC island (C(clusterConfiguration.hpcIslandId)), for example next to another
        cluster network's nodes (the gpu_nodes inventory's C(oci_hpc_island_id)). Fixed when it is made.
    type: str
    version_added: 0.4.0
  network_block_ids:
    description:
      - With O(hpc_island_id), only in these network blocks of it (C(clusterConfiguration.networkBlockIds)).
        Fixed when it is made.
    type: list
    elements: str
    version_added: 0.4.0
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true). On timeout the task fails and reports the last lifecycle state and
        work request percentage seen; run it again to adopt the cluster network and go on waiting.
      - Large clusters may need more (Oracle's HPC stack allows 30 minutes per 20 nodes).
    type: int
    default: 3600
  remove_nodes:
    description:
      - Nodes to take out of the cluster network and terminate, lowering its size by one each - by display name,
        instance OCID or private IP. O(node_count) must be what stays.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  replace_nodes:
    description:
      - Nodes to terminate and have replaced by new ones from the instance configuration (a failed node, by name),
        by display name, instance OCID or private IP. The size stays; the replacement gets a new name and address.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  capacity_sources:
    description:
      - The places to make a new cluster network in, in order of preference (docs/capacity.md). Each a dict with
        C(name) (what the results and the tag C(ocigpu-capacity-source) call it), C(kind) (V(reservation) or
        V(on-demand), the default), C(availability_domain) and C(instance_configuration_id) (the node template of
        that source, with its availability domain and its capacity reservation if any); C(capacity_reservation_id)
        and C(fault_domains) may be given and are not used here.
      - Left empty, the cluster network is made with O(availability_domain) and O(instance_configuration_id),
        which otherwise default to the first source's.
    type: list
    elements: dict
    default: []
    version_added: 0.5.0
  cleanup_on_failure:
    description: When a create fails, terminate what it made before failing the task.
    type: bool
    default: true
  state:
    description: Whether the cluster network should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Two BM.GPU4.8 nodes on an RDMA cluster network (seed 001)
  ocigpu.cluster.cluster_network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    instance_configuration_id: "{{ template.instance_configuration.id }}"
    node_count: 2
    availability_domain: "{{ ad_name }}"
    subnet_id: "{{ net.network.private_subnet_id }}"
  register: cn

- name: Shrink to one node, choosing the node that goes (drain it in Slurm first)
  ocigpu.cluster.cluster_network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    instance_configuration_id: "{{ template.instance_configuration.id }}"
    node_count: 1
    remove_nodes: [inst-wdwdu-gpu1-cn-pool]
    availability_domain: "{{ ad_name }}"
    subnet_id: "{{ net.network.private_subnet_id }}"

- name: Terminate the cluster network and its nodes
  ocigpu.cluster.cluster_network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    state: absent
"""

RETURN = r"""
cluster_network:
  description: The cluster network (null when absent; null id in check mode when one would be created).
  returned: always
  type: dict
  contains:
    id: {description: OCID., type: str, returned: success}
    display_name: {description: Display name., type: str, returned: success}
    lifecycle_state: {description: Lifecycle state (RUNNING after a waited create)., type: str, returned: success}
    instance_pool_id: {description: OCID of its instance pool., type: str, returned: success}
    node_count: {description: Size of the instance pool., type: int, returned: success}
    instance_configuration_id: {description: Instance configuration of the pool., type: str, returned: success}
    availability_domain: {description: Availability domain., type: str, returned: success}
    subnet_id: {description: Primary subnet., type: str, returned: success}
    nodes:
      description: The nodes, sorted by display name.
      type: list
      elements: dict
      returned: success
      contains:
        id: {description: Instance OCID., type: str}
        display_name: {description: Display name., type: str}
        state: {description: Instance state., type: str}
        fault_domain: {description: Fault domain., type: str}
        private_ip: {description: Private IP., type: str}
        hostname_label: {description: Host name., type: str}
        slurm_name: {description: "The Slurm name a replacement carries on (tag C(ocigpu-slurm-name)); null for others.", type: str}
removed_nodes:
  description: Display names of the nodes this run took out of the cluster network (O(remove_nodes)).
  returned: success with O(state=present)
  type: list
  elements: str
replaced_nodes:
  description: Display names of the nodes this run had replaced (O(replace_nodes)).
  returned: success with O(state=present)
  type: list
  elements: str
replacements:
  description: Each replacement this run made - the old and the new instance, and the names the new one carries on.
  returned: success with O(state=present)
  type: list
  elements: dict
  contains:
    old_id: {description: The instance taken out., type: str}
    new_id: {description: The instance the pool launched for it (null in check mode)., type: str}
    display_name: {description: The display name the new instance carries on., type: str}
    slurm_name: {description: The Slurm name the new instance carries on (its tag C(ocigpu-slurm-name))., type: str}
capacity_source:
  description:
    - The name of the capacity source the cluster network is in (the one that held a new one, the one an existing
      one was matched to), with O(capacity_sources).
  returned: success with O(state=present) and O(capacity_sources)
  type: str
  version_added: 0.5.0
capacity_tried:
  description: The sources tried before it that had no host, in order, each with the reason (also on failure).
  returned: with O(state=present) and O(capacity_sources)
  type: list
  elements: dict
  version_added: 0.5.0
  contains:
    name: {description: The source., type: str}
    reason: {description: "Why it did not hold the cluster network (C(reservation r1 full), C(ad-1 out of host capacity))", type: str}
    message: {description: OCI's message., type: str}
work_request_id:
  description: The last work request the module waited on.
  returned: when a work request ran
  type: str
last_wait:
  description: What the last wait saw when it ended - the same fields a timeout error reports.
  returned: when the module waited
  type: dict
  contains:
    resource_id: {description: OCID waited on., type: str, returned: when waiting on a lifecycle state}
    state: {description: Last lifecycle state., type: str, returned: when waiting on a lifecycle state}
    work_request_id: {description: Work request waited on., type: str, returned: when waiting on a work request}
    work_request_status: {description: Last work request status., type: str, returned: when waiting on a work request}
    percent_complete: {description: Last work request percentage., type: float, returned: when waiting on a work request}
    polls: {description: Number of polls., type: int}
    elapsed: {description: Seconds waited., type: float}
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _capacity, _cluster, _launch, _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import ResourceModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    InputError, attr, check_display_names, current_with_tags, pick_tagged)
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitFailed

# On a cluster network made with capacity_sources: the name of the source it is in (the autoscaler's
# own cluster networks carry it too).
SOURCE_TAG = 'ocigpu-capacity-source'


SOURCE_KEYS = ('name', 'kind', 'availability_domain', 'instance_configuration_id', 'capacity_reservation_id', 'fault_domains')


def pool_size(res):
    return _cluster.pool_facts(res)['node_count'] or 0


def check_sources(sources, check_mode=False):
    """The capacity_sources option, checked: [{name, kind, availability_domain, instance_configuration_id}]."""
    found = []
    for index, item in enumerate(sources or [], 1):
        where = 'capacity_sources[%d]' % index
        if not isinstance(item, dict):
            raise InputError('%s: a dict with name, availability_domain and instance_configuration_id, not %r' % (where, item))
        unknown = sorted(set(item) - set(SOURCE_KEYS))
        if unknown:
            raise InputError('%s: unknown key(s) %s; a source takes %s' % (where, ', '.join(unknown), ', '.join(SOURCE_KEYS)))
        name, kind = item.get('name'), item.get('kind') or _capacity.ON_DEMAND
        if not isinstance(name, str) or not _capacity.NAME.match(name):
            raise InputError('%s: name %r: lower-case letters, digits and dashes, 1 to 20 characters' % (where, name))
        if kind not in (_capacity.RESERVATION, _capacity.ON_DEMAND):
            raise InputError('%s: kind %r: reservation or on-demand' % (where, kind))
        if not item.get('availability_domain'):
            raise InputError('%s: availability_domain: required (source %s)' % (where, name))
        template = item.get('instance_configuration_id') or None
        # In check mode a template that an earlier task would make has no id yet.
        if template is None and not check_mode:
            raise InputError('%s: instance_configuration_id: required (source %s)' % (where, name))
        problem = _launch.ocid_problem(template, 'instanceconfiguration')
        if problem:
            raise InputError('%s.instance_configuration_id: %s' % (where, problem))
        found.append(dict(name=name, kind=kind, availability_domain=item['availability_domain'],
                          instance_configuration_id=template))
    names = [s['name'] for s in found]
    if len(set(names)) != len(names):
        raise InputError('capacity_sources: each source needs its own name (%s)' % ', '.join(names))
    return found


class ClusterNetwork(ResourceModule):
    RESOURCE = 'cluster_network'
    UPDATABLE = ('node_count', 'instance_configuration_id', 'freeform_tags', 'defined_tags')
    WAIT_TIMEOUT = 3600

    @property
    def name(self):
        return self.params['display_name'] or '%s-cn' % self.cluster_name

    def validate(self):
        p = self.params
        self.sources = []
        if p['state'] != 'present':
            return
        self.sources = check_sources(p['capacity_sources'], self.check_mode)
        if self.sources:
            # The first source's, unless given.
            for option in ('availability_domain', 'instance_configuration_id'):
                if p[option] is None:
                    p[option] = self.sources[0][option]
        for option in ('instance_configuration_id', 'node_count', 'availability_domain', 'subnet_id'):
            # In check mode, ids that earlier tasks would only create are null: accepted, to predict the run.
            if p[option] is None and not (self.check_mode and option.endswith('_id')):
                raise InputError('%s: required with state=present' % option)
        placement = _launch.placement_problems(p['hpc_island_id'], p['network_block_ids'])
        if placement:
            raise InputError('%s: %s' % placement[0])
        if p['node_count'] < 1:
            raise InputError('node_count: %d; a cluster network needs at least 1 node (use state=absent to remove it)'
                             % p['node_count'])
        check_display_names('display_name' if p['display_name'] else 'cluster_name', [self.name, self.name + '-pool'])
        for option, kind in (('instance_configuration_id', 'instanceconfiguration'), ('subnet_id', 'subnet')):
            problem = _launch.ocid_problem(p[option], kind)
            if problem:
                raise InputError('%s: %s' % (option, problem))

    def find(self):
        self.ops = _cluster.ClusterOps(self)
        p = self.params
        if p['state'] == 'present':
            # Reads that find what OCI would refuse only after the create began.
            places = [(p['instance_configuration_id'], p['availability_domain'])] + [
                (s['instance_configuration_id'], s['availability_domain']) for s in self.sources]
            for template, ad in sorted(set(places), key=places.index):
                if template:
                    self.ops.check_configuration(template)
                _launch.check_availability_domain(self.session, p['compartment_id'], ad)
                if p['subnet_id']:
                    _launch.check_subnet(self.session, p['subnet_id'], ad)
        items = self.session.list_all(self.session.compute_management.list_cluster_networks,
                                      self.params['compartment_id'], display_name=self.name)
        res = pick_tagged(items, self.name, self.cluster_name, 'display_name')
        if res is not None:
            res = self.session.call(self.session.compute_management.get_cluster_network, res.id)
        return res

    def desired(self):
        p = self.params
        source = self.source or {}
        tags = self.tags()
        if source:
            tags = dict(tags, **{SOURCE_TAG: source['name']})
        return dict(node_count=p['node_count'],
                    instance_configuration_id=source.get('instance_configuration_id', p['instance_configuration_id']),
                    availability_domain=source.get('availability_domain', p['availability_domain']), subnet_id=p['subnet_id'],
                    placement_constraint=p['placement_constraint'], hpc_island_id=p['hpc_island_id'],
                    network_block_ids=sorted(p['network_block_ids']) if p['network_block_ids'] else None,
                    freeform_tags=tags, defined_tags=p['defined_tags'] or None)

    def source_of(self, res):
        """The source an existing cluster network is in: named by its tag, else the one of its instance
        configuration, else the first in its availability domain. A resize never moves it."""
        facts = _cluster.pool_facts(res)
        here = [s for s in self.sources if s['availability_domain'] == facts['availability_domain']]
        tag = (attr(res, 'freeform_tags') or {}).get(SOURCE_TAG)
        for pick in ([s for s in here if s['name'] == tag],
                     [s for s in here if s['instance_configuration_id'] == facts['instance_configuration_id']], here):
            if pick:
                return pick[0]
        raise InputError('capacity_sources: cluster network %s is in %s, where none of the sources (%s) is; it stays '
                         'where it is: add a source in that availability domain, or remove the cluster network '
                         '(teardown.yml) to make it again' % (self.name, facts['availability_domain'],
                                                              ', '.join(s['name'] for s in self.sources)))

    def current(self, res):
        have = current_with_tags(res, self.desired())
        have.update(_cluster.pool_facts(res))
        if have['node_count'] is not None:
            have['node_count'] -= self.detached  # check mode: the nodes removal would take
        return have

    def present(self, res):
        if res is not None and res.lifecycle_state in ('PROVISIONING', 'SCALING', 'STARTING') and self.params['wait']:
            # Adopt a cluster network a previous, interrupted run left on its way up (or scaling).
            if not self.check_mode:
                res = self.ops.wait_running(res.id)
        if res is not None and self.sources:
            self.source = self.source_of(res)
        if res is not None:
            res = self.leave(res)
        elif self.params['remove_nodes'] or self.params['replace_nodes']:
            raise InputError('remove_nodes/replace_nodes: cluster network %s does not exist' % self.name)
        return super(ClusterNetwork, self).present(res)

    def leave(self, res):
        """Take the chosen nodes out (remove_nodes, replace_nodes): checked whole before the first detach."""
        p = self.params
        nodes = self.ops.nodes(res.id)
        keys = ('id', 'display_name', 'private_ip', 'hostname_label')
        picked = dict((what, _cluster.match_nodes(nodes, p[what + '_nodes'], keys)[0]) for what in ('remove', 'replace'))
        # A replacement named by a name is the node the last run made for that name: kept (see the docs).
        by_address = set(r for r in p['replace_nodes'] if r.startswith('ocid1.') or r.count('.') == 3)
        kept = [n for n in picked['replace'] if n.get('slurm_name') and not by_address & set([n['id'], n['private_ip']])]
        for node in kept:
            self.module.warn('replace_nodes: %s is the replacement made for that name (%s, Slurm name %s); it is kept. '
                             'Name it by its OCID or private IP to replace it.'
                             % (node['display_name'], node['id'], node['slurm_name']))
        picked['replace'] = [n for n in picked['replace'] if n not in kept]
        both = [n['display_name'] for n in picked['remove'] if n in picked['replace']]
        if both:
            raise InputError('remove_nodes and replace_nodes both name %s' % ', '.join(both))
        size = pool_size(res)
        stays = size - len(picked['remove'])
        if p['node_count'] is not None and p['node_count'] < stays:
            keep = [n['display_name'] for n in nodes if n not in picked['remove']]
            raise InputError(
                'node_count: %d would take %d of the %d nodes of cluster network %s, and OCI would choose which; name '
                'the nodes that go in remove_nodes (provision.yml drains them in Slurm first). Nodes: %s'
                % (p['node_count'], stays - p['node_count'], stays, self.name, ', '.join(keep)))
        self.removed_nodes = [n['display_name'] for n in picked['remove']]
        self.replaced_nodes = [n['display_name'] for n in picked['replace']]
        if not (self.removed_nodes or self.replaced_nodes):
            return res
        self.changed = True
        self.detached = len(picked['remove'])
        if self.check_mode:
            self.replacements = [dict(old_id=n['id'], new_id=None, display_name=n['display_name'],
                                      slurm_name=n.get('slurm_name') or n.get('hostname_label') or n['display_name'])
                                 for n in picked['replace']]
            return res
        for node in picked['remove']:
            res = self.ops.detach(res, node['id'], decrement=True)
        for node in picked['replace']:
            res, made = self.ops.replace(res, node)
            self.replacements.append(made)
        self.detached = 0
        return res

    def create(self):
        if not self.sources:
            return self.create_in(None)
        for source in self.sources:
            self.source = source
            try:
                return self.create_in(source)
            except _oci.ServiceError as exc:
                if not _capacity.is_stock_out(exc.message):
                    raise
                self.stock_out(source, exc.message, _oci.service_error_details(exc))
            except WaitFailed as exc:
                errors = [e.get('message') or '' for e in exc.details.get('errors') or []]
                if not _capacity.is_stock_out(' '.join([exc.message] + errors)):
                    raise
                self.stock_out(source, '; '.join(e for e in errors if e) or exc.message, exc.details)
        self.source = None
        reasons = '; '.join('%s: %s (%s)' % (t['name'], t['reason'], t['message']) for t in self.tried)
        raise WaitFailed('cluster network %s: none of the capacity sources has hosts for %d node(s): %s' % (
            self.name, self.params['node_count'], reasons), **self.failure)

    def create_in(self, source):
        """One create (in the source's availability domain, from its template); a failed one is terminated,
        always when it ran out of hosts (the next source is tried), else with cleanup_on_failure."""
        try:
            return self.ops.create(self.name, self.desired())
        except WaitFailed as exc:
            errors = ' '.join([exc.message] + [e.get('message') or '' for e in exc.details.get('errors') or []])
            out = source is not None and _capacity.is_stock_out(errors)
            if (out or self.params['cleanup_on_failure']) and exc.details.get('resource_id'):
                self.ops.terminate(exc.details['resource_id'], wait=True)
                exc.details['cleaned_up'] = True
            raise

    def stock_out(self, source, message, details):
        self.tried.append(dict(name=source['name'], reason=_capacity.describe_failure(source), message=message))
        self.failure = dict((k, v) for k, v in details.items() if k != 'resource_id')
        self.module.log('capacity source %s: %s (%s); trying the next' % (source['name'], self.tried[-1]['reason'], message))

    def update(self, res, changes):
        return self.ops.update(res, changes)

    def delete(self, res):
        self.ops.terminate(res.id, wait=self.params['wait'])

    def describe(self, res):
        return self.ops.describe(res)

    def predict(self):
        self.source = self.sources[0] if self.sources else None
        want = self.desired()
        return dict(id=None, display_name=self.name, lifecycle_state=None, instance_pool_id=None,
                    node_count=want['node_count'], instance_configuration_id=want['instance_configuration_id'],
                    availability_domain=want['availability_domain'], subnet_id=want['subnet_id'], nodes=[])

    def execute(self):
        self.removed_nodes, self.replaced_nodes, self.replacements, self.detached = [], [], [], 0
        self.source, self.tried, self.failure = None, [], {}
        try:
            result = super(ClusterNetwork, self).execute()
        except WaitFailed as exc:
            if self.tried:
                exc.details['capacity_tried'] = self.tried
            raise
        if self.params['state'] == 'present':
            result.update(removed_nodes=self.removed_nodes, replaced_nodes=self.replaced_nodes,
                          replacements=self.replacements)
            if self.sources:
                result.update(capacity_source=self.source['name'] if self.source else None, capacity_tried=self.tried)
        if self.ops.work_request_id:
            result['work_request_id'] = self.ops.work_request_id
        return result


def main():
    ClusterNetwork(dict(
        display_name=dict(type='str'),
        instance_configuration_id=dict(type='str'),
        node_count=dict(type='int'),
        availability_domain=dict(type='str'),
        subnet_id=dict(type='str'),
        placement_constraint=dict(type='str', choices=['SINGLE_TIER', 'SINGLE_BLOCK', 'PACKED_DISTRIBUTION_MULTI_BLOCK']),
        hpc_island_id=dict(type='str'),
        network_block_ids=dict(type='list', elements='str'),
        remove_nodes=dict(type='list', elements='str', default=[]),
        replace_nodes=dict(type='list', elements='str', default=[]),
        capacity_sources=dict(type='list', elements='dict', default=[]),
        cleanup_on_failure=dict(type='bool', default=True),
    )).run()


if __name__ == '__main__':
    main()
