# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/slurm's pam_slurm_adopt (tasks/pam_adopt.yml): the PAM file and the pam_access rules each
host gets, rendered by Ansible's templating engine with the role's defaults and vars. The compute
nodes refuse users without a job (no option left at its insecure default), let root, the admin
accounts, the operators' groups and Ansible's own login account through, and the controller keeps
its logins open. molecule/slurm logs in over SSH with and without a job."""

from __future__ import annotations

import pathlib

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit import _collection_loader
from tests.unit.roles._trust import trust
from tests.unit.roles.test_slurm_templates import facts, gpu_node

ROLE = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'slurm'


def host(name, family='Debian', host_facts=None, **overrides):
    """The templar of one host of a controller (bastion) and two GPU nodes."""
    _collection_loader.install()
    loader = DataLoader()
    loader.set_basedir(str(ROLE / 'templates'))
    variables = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / ('%s.yml' % family)).read_text())))
    variables.update(trust(overrides))
    hostvars = {'bastion': {'ansible_facts': facts('bastion', '10.0.0.2', 4, 1, 2, 2, 15000)},
                'gpu-1': gpu_node('gpu-1', '10.0.1.11'), 'gpu-2': gpu_node('gpu-2', '10.0.1.12')}
    variables.update(hostvars=hostvars, inventory_hostname=name, ansible_managed='managed',
                     ansible_facts=host_facts if host_facts is not None else {'user_id': 'root'},
                     groups={'slurm_controller': ['bastion'], 'gpu_nodes': ['gpu-1', 'gpu-2']})
    return Templar(loader=loader, variables=variables)


def render(t, name):
    return t.template(trust_as_template((ROLE / 'templates' / name).read_text()))


def lines(text):
    return [line for line in text.splitlines() if line and not line.startswith('#')]


def value(t, expr):
    return t.template(trust_as_template('{{ %s }}' % expr))


def test_a_compute_node_refuses_users_without_a_job_after_letting_the_exempt_ones_through():
    t = host('gpu-1')
    pam = lines(render(t, 'pam-slurm-adopt.j2'))
    assert pam == [
        'account [success=1 default=ignore] pam_access.so nodefgroup '
        'accessfile=/etc/security/ocigpu-slurm-adopt-access.conf',
        'account required pam_slurm_adopt.so action_no_jobs=deny action_unknown=newest '
        'action_adopt_failure=deny action_generic_failure=deny log_level=info']
    assert lines(render(t, 'pam-slurm-adopt-access.conf.j2')) == ['+:root opc ubuntu:ALL', '-:ALL:ALL']


def test_ansible_login_account_and_operator_groups_are_let_through():
    # Ansible logs in as cloud-user and becomes root with sudo: both names pass, the groups in ().
    t = host('gpu-1', host_facts={'user_id': 'root', 'env': {'SUDO_USER': 'cloud-user'}},
             ansible_user='cloud-user', slurm_pam_adopt_exempt_groups=['operators', 'wheel'])
    assert lines(render(t, 'pam-slurm-adopt-access.conf.j2')) == [
        '+:root opc ubuntu cloud-user (operators) (wheel):ALL', '-:ALL:ALL']
    # Facts gathered without become: the login account is the fact's user.
    t = host('gpu-1', host_facts={'user_id': 'admin2', 'env': {}}, slurm_pam_adopt_exempt_users=[])
    assert lines(render(t, 'pam-slurm-adopt-access.conf.j2'))[0] == '+:root admin2:ALL'


def test_a_node_under_another_slurm_name_tells_pam_slurm_adopt_its_name():
    t = host('gpu-1', slurm_node_name='gpu-7')
    assert lines(render(t, 'pam-slurm-adopt.j2'))[1].endswith(' nodename=gpu-7')


def test_only_compute_nodes_get_it_and_the_switch_turns_it_off():
    assert value(host('gpu-1'), '__slurm_pam_adopt') is True
    assert value(host('bastion'), '__slurm_pam_adopt') is False
    assert value(host('gpu-1', slurm_pam_adopt_enabled=False), '__slurm_pam_adopt') is False
    assert 'libpam-slurm-adopt' in value(host('gpu-1'), '__slurm_packages')
    assert 'libpam-slurm-adopt' not in value(host('bastion'), '__slurm_packages')
    assert 'slurm-pam_slurm' in value(host('gpu-1', 'RedHat'), '__slurm_packages')
    # What configure.yml records (docs/rerun.md): the role's files and sshd's PAM file, on the nodes.
    recorded = value(host('gpu-1', 'RedHat'), '__slurm_manages | ocigpu.cluster.managed_items')['paths']
    assert {'/etc/pam.d/ocigpu-slurm-adopt', '/etc/security/ocigpu-slurm-adopt-access.conf',
            '/etc/pam.d/sshd', '/etc/pam.d/password-auth'} <= set(recorded)
    recorded = value(host('bastion'), '__slurm_manages | ocigpu.cluster.managed_items')['paths']
    assert not [p for p in recorded if 'pam' in p or 'security' in p]


def test_sshd_includes_the_pam_file_only_after_it_is_written():
    # A run that stops in between never leaves sshd including a file that is not there (every login,
    # Ansible's too, would fail).
    names = [task['name'] for task in yaml.safe_load((ROLE / 'tasks' / 'pam_adopt.yml').read_text())]
    write = names.index('Write the pam_slurm_adopt PAM file and its pam_access rules')
    include = names.index("Include pam_slurm_adopt at the end of sshd's account stack")
    assert write < include
    # and the reverse when it is switched off: the include goes first, the files after.
    assert names.index("Take pam_slurm_adopt out of sshd's account stack") < \
        names.index('Remove the pam_slurm_adopt PAM file and its pam_access rules')
