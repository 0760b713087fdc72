#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: network
short_description: The whole network of a GPU cluster - VCN, subnets, gateways, route tables, security lists
version_added: 0.1.0
description:
  - Creates, updates or deletes, as one resource, the network layout of the OCI GPU cluster tutorials -
    a VCN; a public subnet (bastion) and a private subnet (GPU nodes); internet, NAT and service gateways
    (the service gateway reaches "All <region> Services in Oracle Services Network");
    one route table and one security list per subnet.
  - The public security list admits TCP 22 only from O(ssh_source_cidrs) and all protocols from inside the VCN;
    the private one admits all protocols from inside the VCN (MPI and NCCL need every port between nodes);
    egress is open. O(extra_ingress_rules) adds rules.
  - Every part is found by compartment, display name (C(<cluster_name>-vcn), C(-public), C(-private), C(-igw),
    C(-nat), C(-sgw), C(-public-rt), C(-private-rt), C(-public-sl), C(-private-sl)) and the freeform tag
    C(ocigpu-cluster), so a re-run adopts what exists. Missing parts are created, rules and tags are updated in
    place; a changed CIDR or DNS label fails, since OCI cannot change it in place.
  - All CIDRs are checked before any API call - prefixes /16 to /30, subnets inside the VCN, no overlap,
    no host bits - and so are the display names made of O(cluster_name) (at most 255 characters, as OCI requires).
  - O(state=absent) deletes subnets, security lists, route tables, gateways and the VCN, in that order, waiting
    for each.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.TAGS
options:
  wait_timeout:
    description:
      - Seconds to wait for each part to become AVAILABLE (or to be deleted). The module always waits, since each
        part depends on the ones before it. On timeout the task fails and names the part and its last state.
    type: int
    default: 1200
  vcn_cidr:
    description: CIDR of the VCN.
    type: str
    default: 10.0.0.0/16
  public_subnet_cidr:
    description: CIDR of the public (bastion) subnet.
    type: str
    default: 10.0.0.0/24
  private_subnet_cidr:
    description: CIDR of the private (GPU node) subnet. Seed 002 uses C(10.0.2.0/24).
    type: str
    default: 10.0.1.0/24
  dns_label:
    description:
      - DNS label of the VCN (letters and digits, starting with a letter, at most 15).
      - Defaults to the cluster name without other characters. The subnets get C(public) and C(private).
    type: str
  ssh_source_cidrs:
    description:
      - CIDRs allowed to reach TCP 22 in the public subnet. Required with O(state=present); there is no
        default, so the internet (C(0.0.0.0/0)) is open only when written here.
    type: list
    elements: str
  extra_ingress_rules:
    description: More ingress rules.
    type: list
    elements: dict
    default: []
    suboptions:
      subnet:
        description: Security list the rule goes to.
        type: str
        choices: [public, private]
        default: private
      source:
        description: Source CIDR.
        type: str
        required: true
      protocol:
        description: C(all), C(tcp), C(udp), C(icmp) or an IANA protocol number.
        type: str
        default: tcp
      port_min:
        description: First destination port (tcp and udp).
        type: int
      port_max:
        description: Last destination port. Defaults to O(extra_ingress_rules[].port_min).
        type: int
      description:
        description: Text shown in the console.
        type: str
  state:
    description: Whether the network should exist.
    type: str
    choices: [present, absent]
    default: present
requirements:
  - netaddr
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Network of seed 001 (VCN 10.0.0.0/16, public 10.0.0.0/24, private 10.0.1.0/24)
  ocigpu.cluster.network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    ssh_source_cidrs: [203.0.113.0/24]
  register: net

- name: Open the Prometheus port of the private subnet to the bastion subnet
  ocigpu.cluster.network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    ssh_source_cidrs: [203.0.113.0/24]
    extra_ingress_rules:
      - {subnet: private, source: 10.0.0.0/24, protocol: tcp, port_min: 9100}

- name: Delete the network
  ocigpu.cluster.network:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    state: absent
"""

RETURN = r"""
network:
  description: OCIDs of every part (null when absent; null ids for parts check mode would create).
  returned: always
  type: dict
  contains:
    vcn_id: {description: VCN OCID., type: str, returned: success}
    public_subnet_id: {description: Public subnet OCID., type: str, returned: success}
    private_subnet_id: {description: Private subnet OCID., type: str, returned: success}
    internet_gateway_id: {description: Internet gateway OCID., type: str, returned: success}
    nat_gateway_id: {description: NAT gateway OCID., type: str, returned: success}
    service_gateway_id: {description: Service gateway OCID., type: str, returned: success}
    public_route_table_id: {description: Route table OCID of the public subnet., type: str, returned: success}
    private_route_table_id: {description: Route table OCID of the private subnet., type: str, returned: success}
    public_security_list_id: {description: Security list OCID of the public subnet., type: str, returned: success}
    private_security_list_id: {description: Security list OCID of the private subnet., type: str, returned: success}
    private_subnet_domain_name: {description: DNS domain of the private subnet (for the bastion's resolv.conf search)., type: str, returned: success}
    vcn_cidr: {description: VCN CIDR., type: str, returned: success}
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

from ansible_collections.ocigpu.cluster.plugins.module_utils import _network
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError, check_display_names


class Network(OCIModule):

    def validate(self):
        p = self.params
        if p['state'] == 'absent':
            return
        check_display_names('cluster_name', _network.part_names(self.cluster_name))
        self.plan = _network.NetworkPlan(
            vcn_cidr=p['vcn_cidr'], public_cidr=p['public_subnet_cidr'], private_cidr=p['private_subnet_cidr'],
            ssh_cidrs=p['ssh_source_cidrs'], extra_rules=p['extra_ingress_rules'],
            dns_label=p['dns_label'] or _network.default_dns_label(self.cluster_name))
        if p['state'] == 'present' and p['ssh_source_cidrs'] is None:
            raise InputError('ssh_source_cidrs: required with state=present (list the admin CIDRs allowed to reach SSH;'
                             ' write 0.0.0.0/0 to open it to the internet)')

    def execute(self):
        builder = _network.NetworkBuilder(self)
        if self.params['state'] == 'absent':
            self.changed = builder.delete_all()
            return {'network': None}
        return {'network': builder.ensure_all(self.plan)}


def main():
    rule = dict(
        subnet=dict(type='str', choices=['public', 'private'], default='private'),
        source=dict(type='str', required=True),
        protocol=dict(type='str', default='tcp'),
        port_min=dict(type='int'),
        port_max=dict(type='int'),
        description=dict(type='str'),
    )
    Network(dict(
        vcn_cidr=dict(type='str', default='10.0.0.0/16'),
        public_subnet_cidr=dict(type='str', default='10.0.0.0/24'),
        private_subnet_cidr=dict(type='str', default='10.0.1.0/24'),
        dns_label=dict(type='str'),
        ssh_source_cidrs=dict(type='list', elements='str'),
        extra_ingress_rules=dict(type='list', elements='dict', options=rule, default=[]),
        state=dict(type='str', choices=['present', 'absent'], default='present'),
    ), wait='timeout_only').run()


if __name__ == '__main__':
    main()
