# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""firewall: the instance metadata service for root and the accounts that need it (issue 45,
review F5). The role's own expressions and template, rendered; molecule/firewall loads the rules and
tries them as root, a service account and another user."""
from __future__ import annotations

import pathlib
import re

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit import _collection_loader
from tests.unit.roles._trust import trust

_collection_loader.install()

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'firewall'

# ansible.builtin.getent's answer: name -> [password, uid, gid, gecos, home, shell].
PASSWD = {
    'root': ['x', '0', '0', 'root', '/root', '/bin/bash'],
    'slurm': ['x', '64030', '64030', '', '/nonexistent', '/usr/sbin/nologin'],
    'oracle-cloud-agent': ['x', '996', '993', 'Oracle Cloud Agent Service User', '/var/lib/oracle-cloud-agent',
                           '/usr/sbin/nologin'],
    'ocarun': ['x', '994', '993', 'Oracle Cloud Agent Runcommand Service User', '/var/lib/ocarun', '/usr/sbin/nologin'],
    'alice': ['x', '2001', '2001', '', '/mnt/home/alice', '/bin/bash'],
}


def _tasks():
    return yaml.safe_load((ROLE / 'tasks' / 'imds.yml').read_text())


def _values(**variables):
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    values.update(variables)
    values['vars'] = values
    return values


def _render(expression, values):
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(expression))


def _allowed(**variables):
    """The role's set_fact for the allowed accounts and uids, rendered as on a host with PASSWD."""
    task = [t for t in _tasks() if 'ansible.builtin.set_fact' in t][0]
    values = _values(ansible_facts={'getent_passwd': PASSWD}, **variables)
    values.update(trust(task['vars']))
    facts = task['ansible.builtin.set_fact']
    return (_render(facts['__firewall_imds_allowed'], values), _render(facts['__firewall_imds_uids'], values))


def test_root_and_the_agents_accounts_that_exist_by_default():
    names, uids = _allowed()
    # oracle-cloud-agent-updater is not on this host: skipped, no error.
    assert names == ['root', 'oracle-cloud-agent', 'ocarun'] and uids == [0, 994, 996]


def test_the_autoscalers_account_comes_from_its_declaration():
    names, uids = _allowed(__slurm_autoscaler_manages=trust({'firewall_imds_users': ['{{ slurm_autoscaler_user }}']}),
                           slurm_autoscaler_user='slurm', __common_manages={'packages': ['sudo']})
    assert 'slurm' in names and uids == [0, 994, 996, 64030]
    autoscaler = yaml.safe_load((ROOT / 'roles' / 'slurm_autoscaler' / 'vars' / 'main.yml').read_text())
    assert autoscaler['__slurm_autoscaler_manages']['firewall_imds_users'] == ['{{ slurm_autoscaler_user }}']


def test_root_stays_whatever_the_list():
    names, uids = _allowed(firewall_imds_users=['alice', 'nobody-here'])
    assert names == ['root', 'alice'] and uids == [0, 2001]


def _nft(uids, names=('root',)):
    values = _values(__firewall_imds_uids=uids, __firewall_imds_allowed=list(names),
                     ansible_managed='Ansible managed')
    return _render((ROLE / 'templates' / 'imds.nft.j2').read_text(), values)


def test_the_rules_refuse_every_other_account_on_port_80_of_both_addresses():
    text = _nft([0, 64030], ['root', 'slurm'])
    rules = [line.strip() for line in text.splitlines() if 'reject' in line and not line.lstrip().startswith('#')]
    assert rules == [
        'ip daddr 169.254.169.254 tcp dport 80 ct state new meta skuid != { 0, 64030 } counter '
        'reject with icmpx type admin-prohibited',
        'ip6 daddr fd00:c1::a9fe:a9fe tcp dport 80 ct state new meta skuid != { 0, 64030 } counter '
        'reject with icmpx type admin-prohibited',
    ]
    # One transaction that replaces the table whole (nft -f): a re-load leaves no old rule behind.
    assert re.search(r'^table inet ocigpu_imds\ndelete table inet ocigpu_imds\ntable inet ocigpu_imds \{$', text, re.M)
    # DNS and NTP answer at the same address: untouched.
    assert 'dport 53' not in text and 'dport 123' not in text and 'udp' not in text.split('table inet')[1]


def test_the_unit_loads_the_rules_before_the_network():
    values = _values(ansible_managed='Ansible managed')
    unit = _render((ROLE / 'templates' / 'ocigpu-imds.service.j2').read_text(), values)
    assert 'ExecStart=/usr/sbin/nft -f /etc/ocigpu-imds.nft' in unit
    assert 'Before=network-pre.target' in unit and 'RemainAfterExit=yes' in unit
    assert 'ExecStop=/usr/sbin/nft delete table inet ocigpu_imds' in unit


def test_switch_check_mode_and_the_record():
    tasks = _tasks()
    by_name = dict((t['name'], t) for t in tasks)
    # Written only when restricted; removed when not.
    assert all('firewall_imds_restricted | bool' in str(t.get('when')) for t in tasks)
    removal = [t for t in tasks if t.get('ansible.builtin.file', {}).get('state') == 'absent'][0]
    assert removal['when'] == 'not (firewall_imds_restricted | bool)'
    # Check mode on a fresh host: no unit to start, no table to list.
    start = by_name['Load the rules now and at every boot']
    assert 'not (ansible_check_mode and __firewall_imds_unit_file is changed)' in start['when']
    assert by_name['Check that the metadata service\'s table is loaded']['check_mode'] is False
    # What configure.yml records for the role: the rules and the unit.
    manages = _render('{{ __firewall_manages }}', _values(firewall_mode='enabled',
                                                          __firewall_packages=['firewalld']))
    assert '/etc/ocigpu-imds.nft' in manages['paths'] and '/etc/systemd/system/ocigpu-imds.service' in manages['paths']
    assert 'nftables' in manages['packages']
    off = _render('{{ __firewall_manages.packages }}', _values(firewall_mode='disabled', firewall_imds_restricted=False,
                                                               __firewall_packages=['firewalld']))
    assert off == []
    main = yaml.safe_load((ROLE / 'tasks' / 'main.yml').read_text())
    assert [t for t in main if t.get('ansible.builtin.import_tasks') == 'imds.yml'][0].get('when') is None
