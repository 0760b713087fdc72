#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: compute_cluster
short_description: Create or delete an OCI compute cluster
version_added: 0.1.0
description:
  - Creates or deletes a compute cluster, the RDMA group that bare-metal GPU instances join one by
    one (O(ocigpu.cluster.instance#module:compute_cluster_id)) instead of through a cluster network.
  - The compute cluster is found by compartment, display name and the freeform tag C(ocigpu-cluster),
    so running the task again adopts it.
  - Only tags can change in place; a different availability domain fails with a message saying so.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.WAIT
  - ocigpu.cluster.oci.TAGS
options:
  display_name:
    description: Display name (1 to 255 characters). Defaults to C(<cluster_name>-compute-cluster).
    type: str
  availability_domain:
    description:
      - Availability domain, for example C(Uocm:AP-TOKYO-1-AD-1). Required with O(state=present).
      - For a new compute cluster it must be one of the region's; checked before anything is created.
    type: str
  state:
    description: Whether the compute cluster should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Compute cluster for H100 nodes
  ocigpu.cluster.compute_cluster:
    cluster_name: train1
    compartment_id: "{{ compartment_ocid }}"
    availability_domain: "{{ ad_name }}"
  register: cc

- name: Remove it
  ocigpu.cluster.compute_cluster:
    cluster_name: train1
    compartment_id: "{{ compartment_ocid }}"
    state: absent
"""

RETURN = r"""
compute_cluster:
  description: The compute cluster (null when absent). In check mode a cluster to be created has a null id.
  returned: always
  type: dict
  contains:
    id: {description: OCID., type: str, returned: success}
    display_name: {description: Display name., type: str, returned: success}
    availability_domain: {description: Availability domain., type: str, returned: success}
    lifecycle_state: {description: ACTIVE or DELETED., type: str, returned: success}
    freeform_tags: {description: Freeform tags., type: dict, returned: success}
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

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _resource
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import ResourceModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError, pick_tagged

try:
    from oci.core.models import CreateComputeClusterDetails, UpdateComputeClusterDetails
except ImportError:
    pass  # OCIModule reports the missing library


class ComputeCluster(ResourceModule):
    RESOURCE = 'compute_cluster'
    UPDATABLE = ('freeform_tags', 'defined_tags')

    @property
    def name(self):
        return self.params['display_name'] or '%s-compute-cluster' % self.cluster_name

    def validate(self):
        if self.params['state'] == 'present' and not self.params['availability_domain']:
            raise InputError('availability_domain: required with state=present')
        if self.params['state'] == 'present':
            _resource.check_display_names('display_name' if self.params['display_name'] else 'cluster_name', [self.name])

    def find(self):
        compute = self.session.compute
        items = self.session.list_all(compute.list_compute_clusters, self.params['compartment_id'],
                                      display_name=self.name)
        res = pick_tagged(items, self.name, self.cluster_name, 'display_name')
        if res is None and self.params['state'] == 'present':
            # A new one: its availability domain must be one of the region's (an existing one's cannot change).
            _launch.check_availability_domain(self.session, self.params['compartment_id'], self.params['availability_domain'])
        return res

    def desired(self):
        return dict(display_name=self.name, availability_domain=self.params['availability_domain'],
                    freeform_tags=self.tags(), defined_tags=self.params['defined_tags'] or None)

    def current(self, res):
        return _resource.current_with_tags(res, self.desired())

    def create(self):
        details = CreateComputeClusterDetails(
            compartment_id=self.params['compartment_id'], availability_domain=self.params['availability_domain'],
            display_name=self.name, freeform_tags=self.tags(), defined_tags=self.params['defined_tags'])
        res = self.session.create(self.session.compute.create_compute_cluster, details).data
        return self.wait_active(res)

    def update(self, res, changes):
        details = UpdateComputeClusterDetails(**changes)
        res = self.session.call(self.session.compute.update_compute_cluster, res.id, details)
        return self.wait_active(res)

    def delete(self, res):
        self.session.call_response(self.session.compute.delete_compute_cluster, res.id)
        if self.params['wait']:
            self.waiter.gone(self.session.compute.get_compute_cluster, res.id, what='compute cluster %s' % res.id)

    def wait_active(self, res):
        if not self.params['wait']:
            return res
        return self.waiter.lifecycle(self.session.compute.get_compute_cluster, res.id, ['ACTIVE'],
                                     failed_states=('DELETED',), what='compute cluster %s' % res.id)


def main():
    ComputeCluster(dict(
        display_name=dict(type='str'),
        availability_domain=dict(type='str'),
    )).run()


if __name__ == '__main__':
    main()
