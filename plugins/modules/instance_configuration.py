#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: instance_configuration
short_description: The node template of an OCI cluster network
version_added: 0.1.0
description:
  - Creates the instance configuration that a cluster network (M(ocigpu.cluster.cluster_network)) launches its
    GPU nodes from - shape, image, subnet, SSH keys, cloud-init, boot volume - with the same launch options as
    M(ocigpu.cluster.instance).
  - OCI cannot update an instance configuration. The module names each one C(<display_name>-<hash>) after its
    content; when the wanted template differs from the newest existing one, it creates a new one and reports
    C(replaced_id). Point the cluster network at the new OCID to use it for new nodes; the old one stays until
    O(state=absent) (it may still be in use).
  - The nodes launched from it carry the freeform tags C(ocigpu-cluster) and C(ocigpu-role=gpu).
  - O(state=absent) deletes every configuration of this name and cluster.
  - With O(capacity_reservation_id) the nodes take their hosts from that capacity reservation (launch details
    C(capacityReservationId)); it must hold the shape in O(availability_domain). A changed reservation is a
    changed template (a new one), as any other launch detail is.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.PLANNED
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.TAGS
  - ocigpu.cluster.oci.LAUNCH
options:
  display_name:
    description:
      - Name prefix. Defaults to C(<cluster_name>-gpu-config).
      - With the C(-<hash>) the module adds it must fit OCI's 255 characters, so at most 246.
    type: str
  capacity_reservation_id:
    description:
      - Capacity reservation that the nodes launched from this template use, its OCID
        (C(ocid1.capacityreservation...)). Left out, the nodes use the availability domain's on-demand hosts.
    type: str
    version_added: 0.5.0
  state:
    description: Whether the configuration should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Node template of seed 001 (2x BM.GPU4.8 on a cluster network)
  ocigpu.cluster.instance_configuration:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    shape: BM.GPU4.8
    image_name: Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0
    subnet_id: "{{ net.network.private_subnet_id }}"
    availability_domain: "{{ ad_name }}"
    ssh_authorized_keys: ["{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"]
    user_data_file: files/cloud-init.yml
  register: template
"""

RETURN = r"""
instance_configuration:
  description: The current configuration (null when absent; a null id in check mode when one would be created).
  returned: always
  type: dict
  contains:
    id: {description: OCID., type: str, returned: success}
    display_name: {description: Display name (prefix and content hash)., type: str, returned: success}
    shape: {description: Shape., type: str, returned: success}
    image_id: {description: Image OCID., type: str, returned: success}
    subnet_id: {description: Subnet of the nodes., type: str, returned: success}
    availability_domain: {description: Availability domain., type: str, returned: success}
    boot_volume_size_in_gbs: {description: Boot volume size., type: int, returned: success}
    capacity_reservation_id: {description: Capacity reservation of the nodes (null for on-demand hosts)., type: str, returned: success}
replaced_id:
  description: OCID of the older configuration this run replaced, when the template changed.
  returned: success
  type: str
"""

import hashlib
import json
import re

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import ResourceModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import CLUSTER_TAG, attr, check_display_names, is_live

HASH_LENGTH = 8  # hex digits of the content hash that ends each configuration's display name

try:
    from oci.core.models import ComputeInstanceDetails, CreateInstanceConfigurationDetails
except ImportError:
    pass  # OCIModule reports the missing library


class InstanceConfiguration(ResourceModule):
    RESOURCE = 'instance_configuration'

    @property
    def prefix(self):
        return self.params['display_name'] or '%s-gpu-config' % self.cluster_name

    def node_tags(self):
        return dict(self.tags(), **{'ocigpu-role': 'gpu'})

    def validate(self):
        if self.params['state'] == 'present':
            check_display_names('display_name' if self.params['display_name'] else 'cluster_name',
                                ['%s-%s' % (self.prefix, '0' * HASH_LENGTH)])
            self.spec = _launch.LaunchSpec(self.params, self.check_mode)

    def find_all(self):
        items = self.session.list_all(self.session.compute_management.list_instance_configurations,
                                      self.params['compartment_id'])
        # This prefix and a content hash alone: <cluster>-gpu-template-<hash>, never <cluster>-gpu-template-r1-<hash>.
        name = re.compile('^%s-[0-9a-f]{%d}$' % (re.escape(self.prefix), HASH_LENGTH))
        mine = [i for i in items if is_live(i) and name.match(i.display_name or '')
                and (i.freeform_tags or {}).get(CLUSTER_TAG) == self.cluster_name]
        return sorted(mine, key=lambda i: str(i.time_created), reverse=True)

    def find(self):
        self.all = self.find_all()
        if self.params['state'] == 'absent':
            return self.all[0] if self.all else None
        self.spec.resolve(self.session, self.params['compartment_id'])
        if not self.all:
            return None
        return self.session.call(self.session.compute_management.get_instance_configuration, self.all[0].id)

    def desired(self):
        p = self.params
        cfg = p['shape_config'] or {}
        return dict(shape=p['shape'], image_id=self.spec.image_id, subnet_id=p['subnet_id'],
                    assign_public_ip=p['assign_public_ip'], availability_domain=self.spec.ad,
                    boot_volume_size_in_gbs=self.spec.boot_gb, fault_domain=p['fault_domain'],
                    compute_cluster_id=p['compute_cluster_id'], capacity_reservation_id=p['capacity_reservation_id'] or None,
                    ocpus=cfg.get('ocpus'), memory_in_gbs=cfg.get('memory_in_gbs'), metadata=self.spec.metadata(),
                    freeform_tags=self.node_tags())

    def current(self, res):
        ld = attr(attr(res, 'instance_details'), 'launch_details')
        src, vnic, cfg = attr(ld, 'source_details'), attr(ld, 'create_vnic_details'), attr(ld, 'shape_config')
        have = dict(shape=attr(ld, 'shape'), image_id=attr(src, 'image_id'), subnet_id=attr(vnic, 'subnet_id'),
                    assign_public_ip=attr(vnic, 'assign_public_ip'), availability_domain=attr(ld, 'availability_domain'),
                    boot_volume_size_in_gbs=attr(src, 'boot_volume_size_in_gbs'), fault_domain=attr(ld, 'fault_domain'),
                    compute_cluster_id=attr(ld, 'compute_cluster_id'),
                    capacity_reservation_id=attr(ld, 'capacity_reservation_id'), ocpus=attr(cfg, 'ocpus'),
                    memory_in_gbs=attr(cfg, 'memory_in_gbs'), metadata=attr(ld, 'metadata') or {},
                    freeform_tags=dict((k, (attr(ld, 'freeform_tags') or {}).get(k)) for k in self.node_tags()))
        if not (self.params['image_id'] or self.params['image_name']):
            have['image_id'] = self.spec.image_id  # "newest image of an OS" moves on; keep the configured one
        if not self.params['availability_domain']:
            have['availability_domain'] = self.spec.ad
        return have

    def present(self, res):
        want = self.desired()
        if res is not None:
            have = self.current(res)
            self.diff['before'] = have
            if dict((k, v) for k, v in want.items() if v is not None) == dict((k, v) for k, v in have.items() if v is not None):
                self.diff['after'] = have
                return {self.RESOURCE: self.describe(res)}
        self.diff['after'] = want
        self.changed = True
        result = {'replaced_id': res.id if res is not None else None}
        if self.check_mode:
            result[self.RESOURCE] = dict(want, id=None, display_name=self.name(want))
            return result
        details = CreateInstanceConfigurationDetails(
            compartment_id=self.params['compartment_id'], display_name=self.name(want), freeform_tags=self.tags(),
            defined_tags=self.params['defined_tags'] or None,
            instance_details=ComputeInstanceDetails(instance_type='compute', launch_details=self.spec.configuration_details(
                self.params['compartment_id'], self.node_tags(), self.params['defined_tags'])))
        result[self.RESOURCE] = self.describe(self.session.create(
            self.session.compute_management.create_instance_configuration, details).data)
        return result

    def name(self, want):
        digest = hashlib.sha256(json.dumps(want, sort_keys=True, default=str).encode('utf-8')).hexdigest()
        return '%s-%s' % (self.prefix, digest[:HASH_LENGTH])

    def absent(self, res):
        if not self.all:
            return {self.RESOURCE: None}
        self.changed = True
        self.diff['before'] = {'ids': [i.id for i in self.all]}
        if not self.check_mode:
            for item in self.all:
                self.session.call_response(self.session.compute_management.delete_instance_configuration, item.id)
        return {self.RESOURCE: None}

    def describe(self, res):
        have = self.current(res)
        return dict(id=res.id, display_name=res.display_name, shape=have['shape'], image_id=have['image_id'],
                    subnet_id=have['subnet_id'], availability_domain=have['availability_domain'],
                    boot_volume_size_in_gbs=have['boot_volume_size_in_gbs'],
                    capacity_reservation_id=have['capacity_reservation_id'])


def main():
    spec = _launch.launch_argument_spec()
    spec.update(display_name=dict(type='str'), capacity_reservation_id=dict(type='str'))
    InstanceConfiguration(spec, wait=False, mutually_exclusive=_launch.LAUNCH_MUTUALLY_EXCLUSIVE).run()


if __name__ == '__main__':
    main()
