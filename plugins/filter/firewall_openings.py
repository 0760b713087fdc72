# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: firewall_openings
short_description: The public zone's ports and rich rules for the ports that roles declare, each open to its sources only
version_added: 0.4.0
description:
  - Each role declares the ports it listens on as C(firewall_ports) in its declaration
    (C(__<role>_manages), docs/adding-a-role.md), and whom they are for as C(firewall_from) -
    C(cluster) (the default; the cluster's networks, O(cluster)), C(admin) (the cluster's networks and
    the admin networks, O(admin)), or C(any) (every source).
  - Returns the ports open to every source (for the zone's C(ports)) and one rich rule per port and
    source network (for its C(rich_rules)), written as firewalld lists them, so that
    M(ocigpu.cluster.firewalld_zones) finds them in place on a re-run.
  - Where the cluster's networks are not known (O(cluster) empty), a port for C(cluster) or C(admin)
    cannot be limited; it is open to every source, as before this option, and listed in C(unlimited)
    for the role to say so.
options:
  _input:
    description: The role declarations in scope (dicts; those without C(firewall_ports) open nothing).
    type: list
    elements: dict
    required: true
  cluster:
    description: The cluster's networks (the VCN CIDR), IPv4 or IPv6.
    type: list
    elements: str
    default: []
  admin:
    description: The admin networks, which reach the C(admin) ports too.
    type: list
    elements: str
    default: []
  extra_ports:
    description: More ports, open to every source.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Work out what the public zone opens
  ansible.builtin.set_fact:
    __openings: >-
      {{ query('ansible.builtin.varnames', '^__.+_manages$') | map('extract', vars)
         | ocigpu.cluster.firewall_openings(cluster=['10.0.0.0/16'], admin=['192.0.2.0/24']) }}
"""

RETURN = r"""
_value:
  description: What the public zone opens.
  type: dict
  contains:
    ports:
      description: Ports open to every source, C(PORT/PROTO) or C(LOW-HIGH/PROTO).
      type: list
      elements: str
    rich_rules:
      description: One rule per limited port and source network.
      type: list
      elements: str
      sample: ['rule family="ipv4" source address="10.0.0.0/16" port port="6817" protocol="tcp" accept']
    unlimited:
      description: Ports declared for C(cluster) or C(admin) but open to every source, the cluster's networks not being known.
      type: list
      elements: str
"""

import ipaddress
import re

from ansible.errors import AnsibleFilterError

AUDIENCES = ('cluster', 'admin', 'any')
_PORT = re.compile(r'^(\d{1,5})(?:-(\d{1,5}))?/(tcp|udp|sctp|dccp)$')


def _unique(items):
    return [item for i, item in enumerate(items) if item not in items[:i]]


def _port(port):
    port = str(port).strip()
    match = _PORT.match(port)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2) or match.group(1)) <= 65535:
        raise AnsibleFilterError('firewall port %r is not PORT/PROTO or LOW-HIGH/PROTO (1-65535, PROTO one of '
                                 'tcp, udp, sctp, dccp)' % port)
    return port


def _networks(cidrs, what):
    networks = []
    for cidr in cidrs or []:
        try:
            networks.append(ipaddress.ip_network(str(cidr).strip(), strict=False))
        except ValueError:
            raise AnsibleFilterError('%s network %r is not an IPv4 or IPv6 address or network' % (what, cidr))
    return _unique(networks)


def rich_rule(network, port):
    """The rule that opens port (PORT/PROTO) to network, as firewall-cmd --list-rich-rules prints it."""
    number, proto = port.split('/')
    return 'rule family="%s" source address="%s" port port="%s" protocol="%s" accept' % (
        'ipv%d' % network.version, network, number, proto)


def firewall_openings(declarations, cluster=None, admin=None, extra_ports=None):
    if not isinstance(declarations, (list, tuple)):
        raise AnsibleFilterError('firewall_openings expects a list of role declarations, got %s'
                                 % type(declarations).__name__)
    cluster = _networks(cluster, 'cluster')
    sources = {'cluster': cluster, 'admin': _unique(cluster + _networks(admin, 'admin')), 'any': []}
    ports = [_port(p) for p in extra_ports or []]
    rules, unlimited = [], []
    for declaration in declarations:
        if not isinstance(declaration, dict) or not declaration.get('firewall_ports'):
            continue
        audience = declaration.get('firewall_from') or 'cluster'
        if audience not in AUDIENCES:
            raise AnsibleFilterError('firewall_from %r is not one of %s' % (audience, ', '.join(AUDIENCES)))
        for port in [_port(p) for p in declaration['firewall_ports']]:
            if audience == 'any':
                ports.append(port)
            elif not cluster:
                ports.append(port)
                unlimited.append(port)
            else:
                rules.extend(rich_rule(network, port) for network in sources[audience])
    return {'ports': _unique(ports), 'rich_rules': _unique(rules), 'unlimited': _unique(unlimited)}


class FilterModule(object):
    def filters(self):
        return {'firewall_openings': firewall_openings}
