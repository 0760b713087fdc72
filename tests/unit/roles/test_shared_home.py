# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""shared_home: the NFS client it installs on each OS family, the input it refuses, and the mount
options it writes (molecule/node_vm mounts a real export with them)."""
from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit.roles._trust import trust

ROLE = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'shared_home'


def _render(expression, **variables):
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    values.update(variables)
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(expression))


# Oracle Linux and RHEL: nfs-utils from the base repositories (Oracle's HPC stack installs it with yum
# there); Debian and Ubuntu: nfs-common.
@pytest.mark.parametrize('family, packages', [('RedHat', ['nfs-utils']), ('Debian', ['nfs-common'])])
def test_the_nfs_client_of_each_os_family(family, packages):
    assert _render('{{ __shared_home_manages.packages }}', ansible_facts={'os_family': family}) == packages


def test_the_declaration_records_the_mount_and_its_fstab_line():
    manages = _render('{{ __shared_home_manages }}', ansible_facts={'os_family': 'Debian'}, shared_home_path='/mnt/home')
    assert manages['mounts'] == [{'name': '/mnt/home'}] and manages['paths'] == [{'path': '/etc/fstab'}]


def _check(**variables):
    """The role's first task, its assertions rendered with these variables."""
    task = yaml.safe_load((ROLE / 'tasks' / 'main.yml').read_text())[0]['ansible.builtin.assert']
    variables.setdefault('ansible_facts', {'os_family': 'Debian'})
    return all(_render('{{ %s }}' % that, **variables) for that in task['that'])


@pytest.mark.parametrize('source, path, ok', [
    ('10.0.1.7:/home', '/mnt/home', True),
    ('nfs.lab.example:/export/home', '/home/shared', True),
    ('10.0.1.7:home', '/mnt/home', False),         # a relative export path
    ('/home', '/mnt/home', False),                 # no server
    ('10.0.1.7:/home', 'mnt/home', False),         # a relative mount point
    ('10.0.1.7:/home', '/', False),                # over the root
    ('10.0.1.7:/home', '//', False),
    ('10.0.1.7:/my home', '/mnt/home', False),     # a space would break the fstab line
])
def test_bad_input_is_refused_before_any_change(source, path, ok):
    assert _check(shared_home_source=source, shared_home_path=path) is ok


def test_an_os_it_does_not_know_is_refused():
    assert _check(shared_home_source='10.0.1.7:/home', shared_home_path='/mnt/home',
                  ansible_facts={'os_family': 'Suse'}) is False


def test_the_default_options_are_oracles_for_file_storage():
    options = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())['shared_home_mount_options']
    joined = ','.join(options)
    assert joined.startswith('vers=3,') and re.search(r'(^|,)rsize=1048576,wsize=1048576(,|$)', joined)
    # nolock keeps locks on each client: the kernel reports local_lock=all whatever the list says.
    assert 'nolock' in options and 'local_lock=all' in options and '_netdev' in options and 'bg' in options
