# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/cluster_user/files/ocigpu_cluster_users.py: what it runs to bring a host's accounts in line
with the cluster's directory, and what it refuses (the plan), and its command line against a
directory file with the commands it would run (--check)."""

from __future__ import annotations

import base64
import fcntl
import importlib.util
import json
import pathlib
import threading

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit.roles._trust import trust

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / 'roles' / 'cluster_user' / 'files' / 'ocigpu_cluster_users.py'

spec = importlib.util.spec_from_file_location('ocigpu_cluster_users', SCRIPT)
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)

GROUPS = {'privilege': 9876}
ALICE = {'uid': 10001, 'gid': 9876, 'groups': [], 'home': '/mnt/home/alice', 'shell': '/bin/bash', 'state': 'present'}
BASE_PASSWD = {'root': (0, 0, '/root', '/bin/bash'), 'opc': (1000, 1000, '/home/opc', '/bin/bash')}
BASE_GROUPS = {'root': (0, []), 'opc': (1000, [])}


def test_a_new_host_gets_the_group_and_the_user():
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': ALICE}, BASE_PASSWD, BASE_GROUPS, {})
    assert commands == [
        ['groupadd', '--gid', '9876', 'privilege'],
        ['useradd', '--no-create-home', '--uid', '10001', '--gid', '9876', '--home-dir', '/mnt/home/alice',
         '--shell', '/bin/bash', 'alice'],
    ]
    assert conflicts == []
    assert managed == {'users': ['alice'], 'groups': ['privilege']}


def test_a_host_in_line_runs_nothing():
    passwd = dict(BASE_PASSWD, alice=(10001, 9876, '/mnt/home/alice', '/bin/bash'))
    groups = dict(BASE_GROUPS, privilege=(9876, []))
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': ALICE}, passwd, groups, {'users': ['alice']})
    assert (commands, conflicts) == ([], [])


def test_a_changed_user_is_brought_in_line():
    passwd = dict(BASE_PASSWD, alice=(10001, 10001, '/mnt/home/alice', '/bin/sh'))
    groups = dict(BASE_GROUPS, privilege=(9876, []), alice=(10001, []), video=(44, ['alice']))
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': ALICE}, passwd, groups, {'users': ['alice']})
    assert commands == [['usermod', '--gid', '9876', '--shell', '/bin/bash', '--groups', '', 'alice']]
    assert conflicts == []


def test_a_removed_user_loses_the_account_only_where_the_directory_made_it():
    gone = dict(ALICE, state='absent')
    passwd = dict(BASE_PASSWD, alice=(10001, 9876, '/mnt/home/alice', '/bin/bash'))
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': gone}, passwd, BASE_GROUPS, {'users': ['alice']})
    assert ['userdel', 'alice'] in commands  # never -r: the home stays
    assert 'alice' not in managed['users']
    # The same name made by someone else on this host is not the directory's to remove.
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': gone}, passwd, BASE_GROUPS, {})
    assert ['userdel', 'alice'] not in commands and conflicts == []


def test_ids_held_by_other_names_are_conflicts_left_alone():
    # uid 10001 is a local account of another name: alice is not made.
    passwd = dict(BASE_PASSWD, svc=(10001, 10001, '/srv', '/usr/sbin/nologin'))
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': ALICE}, passwd, BASE_GROUPS, {})
    assert not [c for c in commands if c[0] == 'useradd']
    assert conflicts == ['uid 10001 of user alice is user svc here']
    assert 'alice' not in managed['users']
    # A local alice with another uid, not made by the directory, is left as it is.
    passwd = dict(BASE_PASSWD, alice=(2000, 2000, '/home/alice', '/bin/bash'))
    commands, conflicts, managed = prog.plan(GROUPS, {'alice': ALICE}, passwd, dict(BASE_GROUPS, privilege=(9876, [])), {})
    assert commands == [] and 'user alice has uid 2000 here, 10001 in the directory' in conflicts[0]
    # The privilege gid held by another group.
    commands, conflicts, managed = prog.plan(GROUPS, {}, BASE_PASSWD, dict(BASE_GROUPS, docker=(9876, [])), {})
    assert commands == [] and conflicts == ['gid 9876 of group privilege is group docker here']


def test_the_command_line_reads_the_file_and_changes_nothing_in_check_mode(tmp_path, capsys):
    directory = tmp_path / 'users.json'
    state = tmp_path / 'state' / 'managed.json'
    name = 'ocigpu-test-no-such-user'
    directory.write_text(json.dumps({'groups': {}, 'users': {name: dict(ALICE, uid=59998, gid=0, home='/nonexistent')}}))
    assert prog.main([str(directory), '--state', str(state), '--check']) == 0
    out = capsys.readouterr().out
    assert 'would run: useradd --no-create-home --uid 59998 --gid 0' in out and out.rstrip().endswith(name)
    assert not state.exists()
    # A missing directory is an empty one; a broken one is an error, and nothing runs.
    assert prog.main([str(tmp_path / 'none.json'), '--state', str(state), '--check']) == 0
    directory.write_text(json.dumps({'users': {name: {'uid': 'x'}}}))
    assert prog.main([str(directory), '--state', str(state), '--check']) == 1
    assert 'no integer uid' in capsys.readouterr().err


# The playbook's decision (tasks/user.yml, "Decide the user's entry"), rendered as Ansible renders it:
# the entry it writes, and what refuses the change before anything is written.

ROLE = ROOT / 'roles' / 'cluster_user'
CONTROLLER = {'root': ['x', '0', '0', '', '/root', '/bin/bash'], 'opc': ['x', '1000', '1000', '', '/home/opc', '/bin/bash'],
              'nobody': ['x', '65534', '65534', '', '/nonexistent', '/usr/sbin/nologin']}


def decide(directory=None, passwd=None, **user):
    task = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'user.yml').read_text()) if t['name'] == "Decide the user's entry")
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(task['vars']))
    values['__cluster_user_directory_file'] = (
        {'content': base64.b64encode(json.dumps(directory).encode()).decode()} if directory is not None else {})
    values['ansible_facts'] = {'getent_passwd': passwd if passwd is not None else CONTROLLER}
    values.update(user)
    templar = Templar(loader=DataLoader(), variables=values)
    facts = task['ansible.builtin.set_fact']
    return {k.replace('__cluster_user_', ''): templar.template(trust_as_template(v)) for k, v in facts.items()}


def test_the_first_user_gets_the_first_uid_and_the_privilege_group():
    got = decide(cluster_user_name='alice', cluster_user_ssh_key='ssh-ed25519 AAAA alice')
    assert got['refusals'] == []
    assert got['entry'] == {'uid': 10001, 'gid': 9876, 'groups': [], 'home': '/mnt/home/alice',
                            'shell': '/bin/bash', 'state': 'present'}
    assert got['directory']['groups'] == {'privilege': 9876}


def test_the_next_uid_is_above_every_uid_in_use_below_60000():
    directory = {'groups': {'privilege': 9876}, 'users': {'alice': dict(ALICE, uid=10001)}}
    passwd = dict(CONTROLLER, svc=['x', '10007', '10007', '', '/srv', '/bin/false'])
    got = decide(directory, passwd, cluster_user_name='bob', cluster_user_ssh_key='ssh-ed25519 AAAA bob')
    assert got['entry']['uid'] == 10008 and got['refusals'] == []


def test_a_taken_uid_is_refused():
    directory = {'groups': {'privilege': 9876}, 'users': {'alice': ALICE}}
    got = decide(directory, cluster_user_name='bob', cluster_user_uid=10001, cluster_user_ssh_key='ssh-ed25519 AAAA bob')
    assert got['refusals'] == ['uid 10001 is taken by alice']
    # by a removed user too: a new user never gets the files of a kept home
    directory['users']['alice'] = dict(ALICE, state='absent')
    got = decide(directory, cluster_user_name='bob', cluster_user_uid=10001, cluster_user_ssh_key='ssh-ed25519 AAAA bob')
    assert got['refusals'] == ['uid 10001 is taken by alice']
    # and by an account of the controller
    got = decide(None, cluster_user_name='bob', cluster_user_uid=1000, cluster_user_ssh_key='ssh-ed25519 AAAA bob')
    assert got['refusals'] == ['uid 1000 is taken by opc']


@pytest.mark.parametrize('user, refusal', [
    ({'cluster_user_name': 'alice', 'cluster_user_uid': 10005}, 'user alice has uid 10001; a uid does not change'),
    ({'cluster_user_name': 'zoe', 'cluster_user_state': 'absent'}, 'no user zoe to remove'),
    ({'cluster_user_name': 'zoe'}, 'a new user needs cluster_user_ssh_key'),
    ({'cluster_user_name': 'zoe', 'cluster_user_ssh_key': 'ssh-ed25519 AAAA z', 'cluster_user_groups': ['wheel']},
     'unknown groups: wheel'),
])
def test_changes_that_are_refused(user, refusal):
    got = decide({'groups': {'privilege': 9876}, 'users': {'alice': ALICE}}, **user)
    assert len(got['refusals']) == 1 and got['refusals'][0].startswith(refusal)


def test_a_user_outside_privilege_gets_a_personal_group_and_removal_keeps_the_uid():
    got = decide(None, cluster_user_name='carol', cluster_user_privileged=False, cluster_user_ssh_key='ssh-ed25519 AAAA c')
    assert got['entry']['gid'] == got['entry']['uid'] == 10001
    assert got['directory']['groups'] == {'privilege': 9876, 'carol': 10001}
    got = decide(got['directory'], cluster_user_name='carol', cluster_user_state='absent')
    assert got['refusals'] == [] and got['directory']['users']['carol']['state'] == 'absent'
    assert got['directory']['users']['carol']['uid'] == 10001


@pytest.mark.parametrize('cluster_vars, group', [({'cluster_users': True}, 'privilege'), ({}, ''),
                                                 ({'cluster_users': True, 'cluster_user_privilege_group': 'gpu'}, 'gpu')])
def test_enroot_is_the_privilege_groups_with_cluster_users(cluster_vars, group):
    defaults = trust(yaml.safe_load((ROOT / 'roles' / 'enroot' / 'defaults' / 'main.yml').read_text()))
    templar = Templar(loader=DataLoader(), variables=dict(defaults, **cluster_vars))
    assert templar.template(trust_as_template('{{ enroot_allowed_group }}')) == group


def test_runs_wait_for_each_other(tmp_path):
    """The timer's run and the playbook's once both added the same user ("user already exists"): a
    run waits for the lock that another holds."""
    directory = tmp_path / 'users.json'
    directory.write_text(json.dumps({'groups': {}, 'users': {}}))
    lock_path = tmp_path / 'lock'
    result = []
    with open(lock_path, 'w') as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = threading.Thread(target=lambda: result.append(
            prog.main([str(directory), '--state', str(tmp_path / 'state.json'), '--lock', str(lock_path)])))
        run.start()
        run.join(0.5)
        assert run.is_alive() and result == []
    run.join(5)
    assert result == [0]


@pytest.mark.parametrize('cluster_vars, options', [
    ({'vcn_cidr': '10.0.0.0/16'}, 'from="10.0.0.0/16",no-agent-forwarding,no-port-forwarding,no-X11-forwarding'),
    ({'vcn_cidr': '10.0.0.0/16', 'cluster_user_mpi_networks': ['10.0.1.0/24', '10.0.2.0/24']},
     'from="10.0.1.0/24,10.0.2.0/24",no-agent-forwarding,no-port-forwarding,no-X11-forwarding'),
    ({'cluster_user_mpi_networks': []}, 'no-agent-forwarding,no-port-forwarding,no-X11-forwarding'),
])
def test_the_mpi_key_is_accepted_from_the_clusters_network_only(cluster_vars, options):
    """The MPI key lies in the shared home: authorized_keys takes it from the VCN only (from=)."""
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    values.update(cluster_vars)
    templar = Templar(loader=DataLoader(), variables=values)
    assert templar.template(trust_as_template('{{ __cluster_user_mpi_options }}')) == options
