# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""RDMA addressing: the address of RDMA interface i on a node, and collisions across nodes.

The scheme (documented in rdma_address.yml and docs/roles/rdma_network.md):

* private subnet /24 or smaller (the seeds' 10.0.1.0/24): interface i gets 192.168.<i>.<y>/24,
  y being the last octet of the node's primary IP - exactly seed 001's cloud-init;
* private subnet larger than /24 (say a /22): each interface gets a subnet of the private subnet's
  size inside the RDMA CIDR, and the node's offset inside the private subnet as host part, so two
  nodes of one subnet can never share an address (Oracle's HPC stack numbers nodes the same way).
"""

from __future__ import annotations

import ipaddress

from ansible.errors import AnsibleFilterError

DEFAULT_RDMA_CIDR = '192.168.0.0/16'


def _per_interface_prefixlen(private_subnet):
    if not private_subnet:
        return 24
    try:
        net = ipaddress.ip_network(str(private_subnet), strict=False)
    except ValueError as exc:
        raise AnsibleFilterError('rdma_address: private_subnet %r is not a CIDR: %s' % (private_subnet, exc))
    if net.version != 4:
        raise AnsibleFilterError('rdma_address: private_subnet must be IPv4, got %s' % private_subnet)
    return min(net.prefixlen, 24)


def rdma_address(primary_ip, index, private_subnet=None, rdma_cidr=DEFAULT_RDMA_CIDR):
    """'<address>/<prefixlen>' of RDMA interface `index` on the node whose primary IP is given."""
    try:
        ip = ipaddress.IPv4Address(str(primary_ip).split('/', maxsplit=1)[0])
    except ValueError as exc:
        raise AnsibleFilterError('rdma_address: primary IP %r is not an IPv4 address: %s' % (primary_ip, exc))
    try:
        index = int(index)
    except (TypeError, ValueError):
        raise AnsibleFilterError('rdma_address: interface index %r is not an integer' % (index,))
    if index < 0:
        raise AnsibleFilterError('rdma_address: interface index must be >= 0, got %d' % index)
    try:
        cidr = ipaddress.IPv4Network(str(rdma_cidr), strict=True)
    except ValueError as exc:
        raise AnsibleFilterError('rdma_address: rdma_cidr %r is not an IPv4 network: %s' % (rdma_cidr, exc))
    if private_subnet:
        private = ipaddress.ip_network(str(private_subnet), strict=False)
        if ip not in private:
            raise AnsibleFilterError('rdma_address: primary IP %s is not in the private subnet %s'
                                     % (ip, private_subnet))
    prefixlen = _per_interface_prefixlen(private_subnet)
    if cidr.prefixlen > prefixlen:
        raise AnsibleFilterError('rdma_address: rdma_cidr %s is smaller than one /%d interface subnet'
                                 % (cidr, prefixlen))
    size = 2 ** (32 - prefixlen)
    available = 2 ** (prefixlen - cidr.prefixlen)
    if index >= available:
        raise AnsibleFilterError('rdma_address: rdma_cidr %s holds %d subnets of /%d, too few for interface index %d'
                                 % (cidr, available, prefixlen, index))
    offset = int(ip) & (size - 1)
    address = ipaddress.IPv4Address(int(cidr.network_address) + index * size + offset)
    return '%s/%d' % (address, prefixlen)


def rdma_addresses(primary_ip, count, private_subnet=None, rdma_cidr=DEFAULT_RDMA_CIDR):
    """The addresses of interfaces 0..count-1."""
    return [rdma_address(primary_ip, i, private_subnet, rdma_cidr) for i in range(int(count))]


def rdma_collisions(hostmap):
    """Addresses held by more than one host.

    hostmap: {host: [address or address/prefixlen, ...]}. Returns a sorted list of
    {'address': ..., 'hosts': [host, host, ...]}; empty when all addresses are unique.
    """
    if not isinstance(hostmap, dict):
        raise AnsibleFilterError('rdma_collisions expects a dict of host -> list of addresses')
    owners = {}
    for host in sorted(hostmap):
        for addr in hostmap[host] or []:
            key = str(addr).split('/', maxsplit=1)[0]
            owners.setdefault(key, [])
            if host not in owners[key]:
                owners[key].append(host)
    ordered = sorted(owners.items(), key=lambda kv: ipaddress.IPv4Address(kv[0]))
    return [{'address': a, 'hosts': h} for a, h in ordered if len(h) > 1]


def rdma_netmask(address):
    """Dotted netmask of 'a.b.c.d/n' (for ifcfg NETMASK=)."""
    try:
        return str(ipaddress.IPv4Interface(str(address)).netmask)
    except ValueError as exc:
        raise AnsibleFilterError('rdma_netmask: %r is not an IPv4 address with prefix: %s' % (address, exc))


class FilterModule(object):
    def filters(self):
        return {
            'rdma_address': rdma_address,
            'rdma_addresses': rdma_addresses,
            'rdma_collisions': rdma_collisions,
            'rdma_netmask': rdma_netmask,
        }
