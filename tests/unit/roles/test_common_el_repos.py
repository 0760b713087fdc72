# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/common: which Oracle Linux repositories the role enables and which packages define them,
rendered with Ansible's own templating over the role's defaults, its vars and the facts of an
Oracle Linux 8 or 9 node (and of hosts the role does not know the repositories of).

No Oracle Linux image can be had on these machines, so this is what stands in for a run: the exact
repository ids and package names the tasks would hand to dnf, the conditions that choose the tasks,
and the order (the repositories are enabled before any package is installed)."""
from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.ocigpu.cluster.plugins.filter.managed_items import managed_items
from tests.unit.roles._trust import trust

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'common'


def _load(path):
    return yaml.safe_load(path.read_text())


def facts(distribution, major, os_family='RedHat'):
    return {'distribution': distribution, 'distribution_major_version': str(major), 'os_family': os_family}


OL8 = facts('OracleLinux', 8)
OL9 = facts('OracleLinux', 9)


def templar(host_facts, check_mode=False, **overrides):
    variables = {}
    variables.update(trust(_load(ROLE / 'defaults' / 'main.yml')))
    variables.update(trust(_load(ROLE / 'vars' / 'main.yml')))
    variables.update(overrides)
    variables['ansible_facts'] = host_facts
    variables['ansible_check_mode'] = check_mode
    return Templar(loader=DataLoader(), variables=variables)


def render(t, expression):
    return t.template(trust_as_template('{{ ' + expression + ' }}'))


def record(t):
    """What configure.yml records for the role: its declaration through the managed_items filter."""
    return managed_items(render(t, '__common_manages'))


def true(t, condition):
    return bool(t.evaluate_conditional(trust_as_template(condition)))


def el_tasks():
    return _load(ROLE / 'tasks' / 'el_repos.yml')


def task_using(module):
    found = [task for task in el_tasks() if module in task]
    assert len(found) == 1, module
    return found[0]


def import_task():
    found = [task for task in _load(ROLE / 'tasks' / 'main.yml')
             if task.get('ansible.builtin.import_tasks') == 'el_repos.yml']
    assert len(found) == 1
    return found[0]


def imported(t):
    """The import's conditions, as Ansible applies them to every task of el_repos.yml."""
    whens = import_task()['when']
    return all(true(t, w) for w in ([whens] if isinstance(whens, str) else whens))


def decisions(t):
    install = task_using('ansible.builtin.dnf')
    enable = task_using('community.general.dnf_config_manager')
    return {
        'packages': render(t, install['ansible.builtin.dnf']['name'].strip()[2:-2]),
        'repos': render(t, enable['community.general.dnf_config_manager']['name'].strip()[2:-2]),
    }


@pytest.mark.parametrize('host, expected', [
    (OL8, {'packages': ['dnf-plugins-core', 'oracle-epel-release-el8', 'oraclelinux-release-el8'],
           'repos': ['ol8_developer_EPEL', 'ol8_codeready_builder']}),
    (OL9, {'packages': ['dnf-plugins-core', 'oracle-epel-release-el9', 'oraclelinux-release-el9'],
           'repos': ['ol9_developer_EPEL', 'ol9_codeready_builder']}),
], ids=['OL8', 'OL9'])
def test_oracle_linux_gets_oracles_epel_and_codeready_builder(host, expected):
    t = templar(host)
    assert imported(t)
    assert decisions(t) == expected
    refuse = task_using('ansible.builtin.fail')
    assert not true(t, refuse['when'])


def test_a_site_can_ask_for_epel_alone():
    t = templar(OL9, common_el_repos=['epel'])
    assert decisions(t) == {'packages': ['dnf-plugins-core', 'oracle-epel-release-el9'],
                            'repos': ['ol9_developer_EPEL']}


@pytest.mark.parametrize('overrides', [{'common_el_repos_enabled': False}, {'common_el_repos': []}],
                         ids=['opted-out', 'no-repos'])
def test_a_site_with_its_own_mirrors_opts_out(overrides):
    t = templar(OL9, **overrides)
    assert not imported(t)
    recorded = record(t)
    assert recorded['packages'] == ['sudo', 'tzdata']
    assert not [p for p in recorded['paths'] if p.startswith('/etc/yum.repos.d/')]


def test_debian_hosts_do_not_import_the_tasks():
    t = templar(facts('Debian', 13, os_family='Debian'))
    assert not imported(t)
    assert record(t)['packages'] == ['sudo', 'tzdata']


@pytest.mark.parametrize('host', [facts('RedHat', 9), facts('Rocky', 9), facts('AlmaLinux', 8),
                                  facts('OracleLinux', 10)], ids=['RHEL9', 'Rocky9', 'Alma8', 'OL10'])
def test_el_hosts_whose_repositories_the_role_does_not_know_stop_with_a_message(host):
    t = templar(host)
    assert imported(t)
    refuse = task_using('ansible.builtin.fail')
    assert true(t, refuse['when'])
    message = t.template(trust_as_template(refuse['ansible.builtin.fail']['msg']))
    assert host['distribution'] in message and 'common_el_repos_enabled' in message
    # The fail task comes first: nothing is installed on such a host.
    assert el_tasks().index(refuse) == 0


def test_the_repositories_are_enabled_before_any_package_is_installed():
    tasks = _load(ROLE / 'tasks' / 'main.yml')
    first_install = next(i for i, task in enumerate(tasks)
                         if {'ansible.builtin.package', 'ansible.builtin.apt', 'ansible.builtin.dnf'} & set(task))
    assert tasks.index(import_task()) < first_install
    names = [next(iter(set(task) & {'ansible.builtin.fail', 'ansible.builtin.dnf', 'community.general.dnf_config_manager'}))
             for task in el_tasks()]
    assert names == ['ansible.builtin.fail', 'ansible.builtin.dnf', 'community.general.dnf_config_manager']
    assert task_using('community.general.dnf_config_manager')['community.general.dnf_config_manager']['state'] == 'enabled'
    assert set(import_task()['tags']) == {'common', 'common_el_repos'}


def test_check_mode_on_a_fresh_host_does_not_ask_dnf_about_repositories_not_yet_defined():
    enable = task_using('community.general.dnf_config_manager')
    fresh = templar(OL9, check_mode=True, __common_el_release={'changed': True})
    assert not true(fresh, enable['when'])
    for check_mode, changed in ((True, False), (False, True), (False, False)):
        t = templar(OL9, check_mode=check_mode, __common_el_release={'changed': changed})
        assert true(t, enable['when'])


@pytest.mark.parametrize('host, major', [(OL8, 8), (OL9, 9)], ids=['OL8', 'OL9'])
def test_the_record_holds_the_release_packages_and_the_repository_files(host, major):
    recorded = record(templar(host))
    assert recorded['packages'] == ['sudo', 'tzdata', 'dnf-plugins-core',
                                    'oracle-epel-release-el%d' % major, 'oraclelinux-release-el%d' % major]
    assert [p for p in recorded['paths'] if p.startswith('/etc/yum.repos.d/')] == [
        '/etc/yum.repos.d/oracle-epel-ol%d.repo' % major, '/etc/yum.repos.d/oracle-linux-ol%d.repo' % major]


def test_the_collection_asks_for_a_community_general_with_dnf_config_manager():
    # community.general.dnf_config_manager appeared in community.general 8.2.0.
    galaxy = _load(ROOT / 'galaxy.yml')
    assert galaxy['dependencies']['community.general'] == '>=8.2.0'
    requirements = {c['name']: c['version'] for c in _load(ROOT / 'requirements.yml')['collections']}
    assert requirements['community.general'] == '>=8.2.0'
