# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""firewall: the ports roles declare are open to their sources only (Slurm's and the pull server's
to the VCN, the exporter's to the VCN and the admin networks), as rich rules of the public zone;
the role's own expression (tasks/zones.yml) rendered over the roles' real declarations."""
from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit import _collection_loader
from tests.unit.roles._trust import trust

_collection_loader.install()  # the role's filter by its full name, ocigpu.cluster.firewall_openings
from ansible_collections.ocigpu.cluster.plugins.filter.firewall_openings import firewall_openings  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'firewall'
VCN = '10.0.0.0/16'


def rule(port, source=VCN, family='ipv4'):
    number, proto = port.split('/')
    return 'rule family="%s" source address="%s" port port="%s" protocol="%s" accept' % (family, source, number, proto)


def _set_fact(name):
    tasks = yaml.safe_load((ROLE / 'tasks' / 'zones.yml').read_text())
    for task in tasks:
        facts = task.get('ansible.builtin.set_fact') or {}
        if name in facts:
            return facts[name]
    raise AssertionError('tasks/zones.yml sets no %s' % name)


def _render(expression, **variables):
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(variables)
    values['vars'] = values  # Ansible's magic variable of every variable, which the role reads
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(expression))


def _declarations():
    """The real declarations' firewall keys (rendered the way the roles' defaults make them)."""
    slurm = yaml.safe_load((ROOT / 'roles' / 'slurm' / 'defaults' / 'main.yml').read_text())
    exporter = yaml.safe_load((ROOT / 'roles' / 'rdma_exporter' / 'vars' / 'main.yml').read_text())
    autoscaler = yaml.safe_load((ROOT / 'roles' / 'slurm_autoscaler' / 'vars' / 'main.yml').read_text())
    slurm_decl = yaml.safe_load((ROOT / 'roles' / 'slurm' / 'vars' / 'main.yml').read_text())['__slurm_manages']
    pick = ('firewall_ports', 'firewall_from', 'firewall_imds_users')
    return {
        '__slurm_manages': trust({k: v for k, v in slurm_decl.items() if k in pick}),
        '__rdma_exporter_manages': trust({k: v for k, v in exporter['__rdma_exporter_manages'].items() if k in pick}),
        '__slurm_autoscaler_manages': trust({k: v for k, v in autoscaler['__slurm_autoscaler_manages'].items()
                                            if k in pick}),
        '__common_manages': {'packages': ['sudo']},
        'slurm_firewall_ports': trust(slurm['slurm_firewall_ports']),
        'slurm_slurmctld_port': 6817, 'slurm_slurmd_port': 6818, 'slurm_slurmdbd_port': 6819,
        'slurm_srun_port_range': '60001-63000',
        'rdma_exporter_firewall_ports': ['9879/tcp'],
        'slurm_autoscaler_pull_port': 8740, 'slurm_autoscaler_pull_enabled': True, 'slurm_autoscaler_user': 'slurm',
    }


def test_the_controllers_ports_open_to_the_vcn_only():
    """Issue 45, review F8: before, every declared port was opened in the public zone to every source."""
    openings = _render(_set_fact('__firewall_openings'), vcn_cidr=VCN, firewall_admin_cidrs=['192.0.2.0/24'],
                       **_declarations())
    assert openings['ports'] == [] and openings['unlimited'] == []
    assert sorted(openings['rich_rules']) == sorted(
        [rule(p) for p in ('6817/tcp', '6818/tcp', '6819/tcp', '60001-63000/tcp', '8740/tcp', '9879/tcp')]
        + [rule('9879/tcp', '192.0.2.0/24')])


def test_the_vcn_comes_from_configure_when_the_cluster_vars_are_not_extra_vars():
    openings = _render(_set_fact('__firewall_openings'), ocigpu_vcn_cidr='10.1.0.0/16', **_declarations())
    assert rule('6817/tcp', '10.1.0.0/16') in openings['rich_rules'] and openings['ports'] == []


def test_without_the_vcn_the_ports_stay_open_to_all_and_the_role_says_so():
    openings = _render(_set_fact('__firewall_openings'), firewall_extra_ports=['9100/tcp'], **_declarations())
    assert openings['rich_rules'] == []
    assert openings['ports'][0] == '9100/tcp' and '6817/tcp' in openings['ports'] and '9879/tcp' in openings['ports']
    assert '9100/tcp' not in openings['unlimited'] and '8740/tcp' in openings['unlimited']
    assert any(t.get('name', '').startswith('Say which ports are open to every source')
               for t in yaml.safe_load((ROLE / 'tasks' / 'zones.yml').read_text()))


def test_collect_role_ports_off_opens_the_extra_ports_alone():
    openings = _render(_set_fact('__firewall_openings'), vcn_cidr=VCN, firewall_collect_role_ports=False,
                       firewall_extra_ports=['9100/tcp'], **_declarations())
    assert openings == {'ports': ['9100/tcp'], 'rich_rules': [], 'unlimited': []}


def test_the_public_zone_is_declared_with_the_rules():
    tasks = yaml.safe_load((ROLE / 'tasks' / 'apply.yml').read_text())
    zones = [t['ocigpu.cluster.firewalld_zones'] for t in tasks if 'ocigpu.cluster.firewalld_zones' in t][0]['zones']
    public = [z for z in zones if z['name'] == 'public'][0]
    assert public['rich_rules'] == '{{ __firewall_openings.rich_rules }}' and public['ports'] == '{{ __firewall_ports }}'


# ------------------------------------------------------------------- the filter


def test_filter_audiences():
    declarations = [{'firewall_ports': ['6817/tcp']}, {'firewall_ports': ['9879/tcp'], 'firewall_from': 'admin'},
                    {'firewall_ports': ['443/tcp'], 'firewall_from': 'any'}, {'packages': ['x']}, 'not a dict']
    out = firewall_openings(declarations, cluster=['10.0.0.5/16', 'fd00:1::/64'], admin=['192.0.2.7/32'],
                            extra_ports=['9100/tcp'])
    assert out['ports'] == ['9100/tcp', '443/tcp'] and out['unlimited'] == []
    assert out['rich_rules'] == [
        rule('6817/tcp'), rule('6817/tcp', 'fd00:1::/64', 'ipv6'),
        rule('9879/tcp'), rule('9879/tcp', 'fd00:1::/64', 'ipv6'), rule('9879/tcp', '192.0.2.7/32'),
    ]


def test_filter_duplicates_once():
    out = firewall_openings([{'firewall_ports': ['6817/tcp', '6817/tcp']}, {'firewall_ports': ['6817/tcp']}],
                            cluster=[VCN, VCN])
    assert out['rich_rules'] == [rule('6817/tcp')]


@pytest.mark.parametrize('declarations, kwargs, message', [
    ([{'firewall_ports': ['6817']}], {'cluster': [VCN]}, "firewall port '6817'"),
    ([{'firewall_ports': ['70000/tcp']}], {'cluster': [VCN]}, "firewall port '70000/tcp'"),
    ([{'firewall_ports': ['6817/tcp'], 'firewall_from': 'everyone'}], {'cluster': [VCN]}, "firewall_from 'everyone'"),
    ([], {'cluster': ['10.0.0.0/33']}, "cluster network '10.0.0.0/33'"),
    ([], {'cluster': [VCN], 'admin': ['bastion']}, "admin network 'bastion'"),
    ({'firewall_ports': []}, {}, 'expects a list'),
])
def test_filter_refuses(declarations, kwargs, message):
    with pytest.raises(AnsibleError, match=message.replace('(', r'\(')):
        firewall_openings(declarations, **kwargs)
