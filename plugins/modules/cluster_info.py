#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_info
short_description: Everything of one GPU cluster, found by its tag
version_added: 0.1.0
description:
  - Finds, by the freeform tag C(ocigpu-cluster), the cluster's network (VCN and subnets), bastion, cluster
    networks with their instance pools, compute clusters, instance configurations and GPU nodes with their IPs.
  - C(billable) counts what still costs money, so teardown playbooks can assert that nothing is left.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.READ_ONLY
  - ocigpu.cluster.oci.ATTRIBUTES
options:
  cluster_name:
    description: Value of the C(ocigpu-cluster) tag.
    type: str
    required: true
  compartment_id:
    description: Compartment of the cluster, its OCID (C(ocid1.compartment...) or the tenancy's); any other is refused before any call to OCI.
    type: str
    required: true
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Look the cluster up
  ocigpu.cluster.cluster_info:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
  register: cluster

- name: Nothing billable is left after teardown
  ansible.builtin.assert:
    that: cluster.billable == 0
"""

RETURN = r"""
vcn:
  description: The VCN (id, display_name, cidr_block) or null.
  returned: always
  type: dict
subnets:
  description: Subnets of the VCN (id, display_name, cidr_block, subnet_domain_name).
  returned: always
  type: list
  elements: dict
bastion:
  description: The bastion instance (id, display_name, shape, state, availability_domain, private_ip, public_ip) or null.
  returned: always
  type: dict
nodes:
  description: GPU nodes - of the cluster networks and standalone - with id, display_name, shape, state, private_ip.
  returned: always
  type: list
  elements: dict
cluster_networks:
  description: Live cluster networks (id, display_name, lifecycle_state, instance_pool_id, node_count, nodes).
  returned: always
  type: list
  elements: dict
compute_clusters:
  description: Compute clusters (id, display_name, availability_domain).
  returned: always
  type: list
  elements: dict
instance_configurations:
  description:
    - Instance configurations (id, display_name, time_created, freeform_tags), with the availability domain and
      capacity reservation of their launch details (availability_domain, capacity_reservation_id; one read each).
    - The capacity source a node template serves is its tag C(ocigpu-capacity-source) (provision.yml).
  returned: always
  type: list
  elements: dict
file_storage:
  version_added: 0.4.0
  description:
    - The cluster's File Storage parts (M(ocigpu.cluster.file_storage)) in every availability domain of the region -
      file systems and mount targets (kind, id, display_name, availability_domain).
  returned: always
  type: list
  elements: dict
billable:
  description: Number of live instances, cluster networks, file systems and mount targets of the cluster.
  returned: always
  type: int
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _cluster, _launch
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import CLUSTER_TAG, attr, is_live

LIVE_INSTANCE = ('PROVISIONING', 'STARTING', 'RUNNING', 'STOPPING', 'STOPPED', 'MOVING', 'CREATING_IMAGE')


class ClusterInfo(OCIModule):

    def mine(self, items):
        return [i for i in items if is_live(i) and (i.freeform_tags or {}).get(CLUSTER_TAG) == self.params['cluster_name']]

    def configuration(self, summary):
        """A node template with its launch details' availability domain and capacity reservation (a template
        gone between the list and the read has neither)."""
        full = self.session.get_or_none(self.session.compute_management.get_instance_configuration, summary.id)
        launch = attr(attr(full, 'instance_details'), 'launch_details')
        return dict(id=summary.id, display_name=summary.display_name,
                    time_created=summary.time_created.isoformat() if summary.time_created else None,
                    freeform_tags=summary.freeform_tags or {}, availability_domain=attr(launch, 'availability_domain'),
                    capacity_reservation_id=attr(launch, 'capacity_reservation_id'))

    def execute(self):
        s, comp = self.session, self.params['compartment_id']
        vcns = self.mine(s.list_all(s.network.list_vcns, comp))
        vcn = vcns[0] if vcns else None
        subnets = s.list_all(s.network.list_subnets, comp, vcn_id=vcn.id) if vcn else []
        instances = [i for i in self.mine(s.list_all(s.compute.list_instances, comp)) if i.lifecycle_state in LIVE_INSTANCE]
        ips = _launch.instance_ips(s, comp, [i.id for i in instances])
        ops = _cluster.ClusterOps(session=s, compartment_id=comp)
        networks = []
        for cn in self.mine(s.list_all(s.compute_management.list_cluster_networks, comp)):
            networks.append(ops.describe(s.call(s.compute_management.get_cluster_network, cn.id)))
        bastion = None
        nodes = []
        for i in instances:
            entry = dict(dict(id=i.id, display_name=i.display_name, shape=i.shape, state=i.lifecycle_state,
                              availability_domain=i.availability_domain, fault_domain=i.fault_domain), **ips[i.id])
            if (i.freeform_tags or {}).get('ocigpu-role') == 'bastion':
                bastion = bastion or entry
            else:
                nodes.append(entry)
        in_networks = set(n['id'] for cn in networks for n in cn['nodes'])
        nodes.extend(n for cn in networks for n in cn['nodes'] if n['id'] not in set(x['id'] for x in nodes))
        compute_clusters = self.mine(s.list_all(s.compute.list_compute_clusters, comp))
        configs = self.mine(s.list_all(s.compute_management.list_instance_configurations, comp))
        # File Storage is listed per availability domain: every one of the region.
        storage = []
        for ad in sorted(a.name for a in s.call(s.identity.list_availability_domains, comp)):
            for kind, fn in (('file_system', s.file_storage.list_file_systems),
                             ('mount_target', s.file_storage.list_mount_targets)):
                storage.extend(dict(kind=kind, id=r.id, display_name=r.display_name, availability_domain=ad)
                               for r in self.mine(s.list_all(fn, comp, ad)))
        return dict(
            vcn=dict(id=vcn.id, display_name=vcn.display_name, cidr_block=vcn.cidr_block) if vcn else None,
            subnets=[dict(id=n.id, display_name=n.display_name, cidr_block=n.cidr_block,
                          subnet_domain_name=n.subnet_domain_name) for n in subnets if is_live(n)],
            bastion=bastion, cluster_networks=networks,
            nodes=sorted(nodes, key=lambda n: (n['display_name'] or '', n['id'])),
            compute_clusters=[dict(id=c.id, display_name=c.display_name, availability_domain=c.availability_domain)
                              for c in compute_clusters],
            instance_configurations=[self.configuration(c) for c in configs],
            file_storage=storage,
            billable=len(set(i.id for i in instances) | in_networks) + len(networks) + len(storage),
        )


def main():
    ClusterInfo(dict(
        cluster_name=dict(type='str', required=True),
        compartment_id=dict(type='str', required=True),
    ), wait=False, tags=False).run()


if __name__ == '__main__':
    main()
