# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""RDMA addressing filters."""
from __future__ import annotations

import ipaddress
import itertools

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.rdma import (
    FilterModule, rdma_address, rdma_addresses, rdma_collisions, rdma_netmask)


def test_seed_scheme_on_a_24():
    # seed 001: 192.168.<i>.<last octet of the primary IP>/24
    assert rdma_address('10.0.1.23', 0, '10.0.1.0/24') == '192.168.0.23/24'
    assert rdma_address('10.0.1.23', 15, '10.0.1.0/24') == '192.168.15.23/24'
    assert rdma_addresses('10.0.2.5', 16, '10.0.2.0/24') == ['192.168.%d.5/24' % i for i in range(16)]
    # no private subnet given: the same scheme
    assert rdma_address('10.0.1.23', 3) == '192.168.3.23/24'


def test_smaller_subnets_keep_the_last_octet():
    assert rdma_address('10.0.1.200', 2, '10.0.1.192/26') == '192.168.2.200/24'


def test_larger_subnets_use_the_offset_in_the_subnet():
    # a /22: each interface gets a /22, host part = offset of the node in the private subnet
    assert rdma_address('10.0.4.5', 0, '10.0.4.0/22') == '192.168.0.5/22'
    assert rdma_address('10.0.5.5', 0, '10.0.4.0/22') == '192.168.1.5/22'
    assert rdma_address('10.0.5.5', 3, '10.0.4.0/22', '172.16.0.0/16') == '172.16.13.5/22'


@pytest.mark.parametrize('subnet', ['10.0.1.0/24', '10.0.4.0/22', '10.0.1.128/25'])
def test_no_two_nodes_of_a_subnet_collide(subnet):
    net = ipaddress.ip_network(subnet)
    hosts = list(net.hosts())
    seen = {}
    for ip in hosts:
        for i in range(8):
            addr = rdma_address(str(ip), i, subnet, '10.128.0.0/9')
            assert addr.split('/')[0] not in seen, (ip, i, seen.get(addr.split('/')[0]))
            seen[addr.split('/')[0]] = (ip, i)
            iface = ipaddress.ip_interface(addr)
            # never the network or broadcast address of its interface subnet
            assert iface.ip not in (iface.network.network_address, iface.network.broadcast_address)


def test_the_test_prefix_from_the_contracts():
    assert rdma_address('198.18.30.11', 15, '198.18.30.0/24', '198.18.64.0/18') == '198.18.79.11/24'


@pytest.mark.parametrize('args,match', [
    (('10.0.1.5', 16, '10.0.1.0/24', '192.168.0.0/20'), 'holds 16 subnets of /24'),
    (('10.0.1.5', 0, '10.0.2.0/24'), 'not in the private subnet'),
    (('10.0.1.5', 0, '10.0.0.0/16', '192.168.0.0/20'), 'smaller than one /16'),
    (('not-an-ip', 0), 'not an IPv4 address'),
    (('10.0.1.5', -1), '>= 0'),
    (('10.0.1.5', 'x'), 'not an integer'),
    (('10.0.1.5', 0, None, '192.168.0.1/16'), 'not an IPv4 network'),
])
def test_bad_input_is_an_error(args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        rdma_address(*args)


def test_collisions_name_the_hosts():
    hostmap = {
        'gpu-2': ['192.168.0.5/24', '192.168.1.5/24'],
        'gpu-1': ['192.168.0.5/24', '192.168.1.5/24'],
        'gpu-3': ['192.168.0.6/24'],
    }
    assert rdma_collisions(hostmap) == [
        {'address': '192.168.0.5', 'hosts': ['gpu-1', 'gpu-2']},
        {'address': '192.168.1.5', 'hosts': ['gpu-1', 'gpu-2']},
    ]
    assert rdma_collisions({'a': ['192.168.0.1/24'], 'b': [], 'c': None}) == []
    with pytest.raises(AnsibleFilterError):
        rdma_collisions(['a'])


def test_a_cluster_of_nodes_has_no_collision():
    hostmap = {'gpu-%d' % n: rdma_addresses('10.0.1.%d' % n, 16, '10.0.1.0/24') for n in range(2, 200)}
    assert rdma_collisions(hostmap) == []
    total = list(itertools.chain.from_iterable(hostmap.values()))
    assert len(total) == len(set(total)) == 198 * 16


def test_netmask_and_registration():
    assert rdma_netmask('192.168.3.23/24') == '255.255.255.0'
    assert rdma_netmask('172.16.12.5/22') == '255.255.252.0'
    with pytest.raises(AnsibleFilterError):
        rdma_netmask('nope')
    assert set(FilterModule().filters()) == {'rdma_address', 'rdma_addresses', 'rdma_collisions', 'rdma_netmask'}
