# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/rdma_network templates rendered as Ansible renders them, against seed 001's text.

data/seed001_ifcfg_runcmd.txt holds seed 001's cloud-init lines that write the 16 ifcfg files
(echo ... >> ifcfg-enp12s0f0, then sed copies for the other 15 interfaces). The test runs those
lines in a small shell emulation and compares every file with the role's template byte for byte. The EL7/EL8
ifcfg path cannot run live on these Debian test machines; this is its test.
"""
from __future__ import annotations

import configparser
import pathlib
import re

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import combine

from ansible_collections.ocigpu.cluster.plugins.filter.rdma import FilterModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._shapes import get_shape

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'rdma_network'
SEED_LINES = pathlib.Path(__file__).parent / 'data' / 'seed001_ifcfg_runcmd.txt'
SEED_DOC = pathlib.Path('/work/shared/seeds/001_602589ccfdf16a76.txt')
GPU4 = get_shape('BM.GPU4.8')


def env():
    e = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                           loader=jinja2.FileSystemLoader(str(ROLE / 'templates')))
    for name, func in FilterModule().filters().items():
        e.filters['ocigpu.cluster.' + name] = func
    e.filters['combine'] = combine
    return e


def render(template, **variables):
    variables.setdefault('ansible_managed', 'Ansible managed')
    return env().get_template(template).render(**variables)


def run_seed(last_octet):
    """Run seed 001's RDMA lines (echo > / >>, sed > and sed -i, ifup) on an in-memory file system;
    `ifconfig enp45s0f0 | ...` prints the primary IP's last octet. Returns {interface: file text}."""
    files = {}
    prefix = '/etc/sysconfig/network-scripts/'
    for line in SEED_LINES.read_text().splitlines():
        line = line.strip()[2:]  # drop the YAML list marker
        m = re.match(r'^echo "(.*)" (>>?) %s(\S+)$' % prefix, line)
        if m:
            body = re.sub(r'`ifconfig enp45s0f0[^`]*`', str(last_octet), m.group(1)).replace('\\"', '"')
            name = m.group(3)
            files[name] = (body + '\n') if m.group(2) == '>' else files[name] + body + '\n'
            continue
        m = re.match(r"^sed 's/([^/]*)/([^/]*)/g' %s(\S+) > %s(\S+)$" % (prefix, prefix), line)
        if m:
            files[m.group(4)] = files[m.group(3)].replace(m.group(1), m.group(2))
            continue
        m = re.match(r"^sed -i 's/([^/]*)/([^/]*)/g' %s(\S+)$" % prefix, line)
        if m:
            files[m.group(3)] = files[m.group(3)].replace(m.group(1), m.group(2))
            continue
        assert re.match(r'^ifup \S+$', line), 'unexpected seed line: %s' % line
    return {name[len('ifcfg-'):]: text for name, text in files.items()}


def seed_file(index, interface, last_octet):
    return run_seed(last_octet)[interface]


def test_the_seed_lines_are_the_seeds():
    if not SEED_DOC.exists():
        print('LOUD SKIP: %s is not on this machine; the fixture is checked against it where it is' % SEED_DOC)
        pytest.skip('seed document not present')
    assert SEED_LINES.read_text() in SEED_DOC.read_text()


@pytest.mark.parametrize('last_octet', [2, 23, 254])
def test_ifcfg_files_are_exactly_the_seeds(last_octet):
    addresses = FilterModule().filters()['rdma_addresses']('10.0.1.%d' % last_octet, 16, '10.0.1.0/24')
    assert len(GPU4['rdma_interfaces']) == 16
    seed = run_seed(last_octet)
    # the seed writes files for exactly the shape table's 16 interfaces
    assert sorted(seed) == sorted(GPU4['rdma_interfaces'])
    for index, interface in enumerate(GPU4['rdma_interfaces']):
        # rdma_network_mtu: 0 leaves the MTU alone, as the seed does
        mine = render('ifcfg.j2', __rdma_network_if=interface, __rdma_network_addr=addresses[index],
                      rdma_network_mtu=0)
        assert mine == seed[interface], interface


def test_ifcfg_with_the_default_mtu_adds_one_line():
    mine = render('ifcfg.j2', __rdma_network_if='enp209s0f1', __rdma_network_addr='192.168.15.7/24',
                  rdma_network_mtu=4220)
    assert mine == seed_file(15, 'enp209s0f1', 7) + 'MTU="4220"\n'
    assert 'BOOTPROTO="none"' in mine and 'NM_CONTROLLED="no"' in mine and 'DEFROUTE="no"' in mine


def test_ifcfg_on_a_wide_subnet_writes_the_wide_netmask():
    mine = render('ifcfg.j2', __rdma_network_if='rdma3', __rdma_network_addr='172.16.13.5/22', rdma_network_mtu=4220)
    assert 'IPADDR=172.16.13.5\nNETMASK=255.255.252.0\n' in mine


def test_keyfile():
    text = render('keyfile.j2', __rdma_network_if='enp12s0f1', __rdma_network_idx=1,
                  __rdma_network_addr='192.168.1.23/24', rdma_network_mtu=4220)
    kf = configparser.ConfigParser(interpolation=None)
    kf.read_string(text)
    assert dict(kf['connection']) == {'id': 'rdma-enp12s0f1', 'type': 'ethernet', 'interface-name': 'enp12s0f1',
                                      'autoconnect': 'true'}
    assert kf['ethernet']['mtu'] == '4220'
    assert dict(kf['ipv4']) == {'method': 'manual', 'address1': '192.168.1.23/24', 'never-default': 'true',
                                'ignore-auto-dns': 'true', 'ignore-auto-routes': 'true'}
    assert kf['ipv6']['method'] == 'disabled'
    no_mtu = render('keyfile.j2', __rdma_network_if='x', __rdma_network_idx=0, __rdma_network_addr='1.2.3.4/24',
                    rdma_network_mtu=0)
    assert 'mtu=' not in no_mtu


def test_sysctl_file():
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    text = render('sysctl.conf.j2', __rdma_network_interfaces=GPU4['rdma_interfaces'],
                  rdma_network_sysctls=defaults['rdma_network_sysctls'])
    lines = [line for line in text.splitlines() if line and not line.startswith('#')]
    assert len(lines) == 48
    assert 'net.ipv4.conf.enp12s0f0.rp_filter = 2' in lines
    assert 'net.ipv4.conf.enp209s0f1.arp_ignore = 2' in lines
    assert 'net.ipv4.conf.enp76s0f1.arp_announce = 1' in lines


def _nccl_expression():
    tasks = yaml.safe_load((ROLE / 'tasks' / 'nccl.yml').read_text())
    return tasks[0]['ansible.builtin.set_fact']['__rdma_network_nccl']


def _nccl(shape, **overrides):
    expr = _nccl_expression()
    variables = dict(rdma_network_nccl_ib_hca='', rdma_network_nccl_extra={})
    variables.update(overrides)
    variables['__rdma_network_shape'] = shape
    value = env().from_string(expr.strip()).render(**variables)
    return yaml.safe_load(value.replace("'", '"')) if value.strip() else {}


def test_nccl_conf_for_the_shape():
    nccl = _nccl(GPU4)
    assert nccl['NCCL_IB_HCA'] == '=' + ','.join(GPU4['hcas'])
    assert nccl['NCCL_IB_GID_INDEX'] == '3' and nccl['NCCL_IB_QPS_PER_CONNECTION'] == '4'
    text = render('nccl.conf.j2', __rdma_network_nccl=nccl, ansible_facts={'ocigpu_node': {'shape': 'BM.GPU4.8'}})
    assert 'NCCL_IB_HCA==mlx5_0,mlx5_2,mlx5_6,mlx5_8,mlx5_10,mlx5_12,mlx5_14,mlx5_16,mlx5_1,mlx5_3,mlx5_7,mlx5_9,' \
           'mlx5_11,mlx5_13,mlx5_15,mlx5_17\n' in text
    assert 'NCCL_IB_TC=41\n' in text


def test_nccl_conf_overrides_and_shapes_without_rdma():
    nccl = _nccl(GPU4, rdma_network_nccl_ib_hca='mlx5_0', rdma_network_nccl_extra={'NCCL_DEBUG': 'WARN'})
    assert nccl['NCCL_IB_HCA'] == 'mlx5_0' and nccl['NCCL_DEBUG'] == 'WARN'
    assert _nccl(get_shape('BM.GPU3.8')) == {}
