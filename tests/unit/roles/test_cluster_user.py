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


def _policy_args(tmp_path):
    """The program's settings as the role passes them (vars/main.yml), with this machine's shells."""
    shells = tmp_path / 'shells'
    shells.write_text('# a comment\n/bin/sh\n/bin/bash\n')
    return ['--first-uid', '10001', '--privilege-group', 'privilege', '--privilege-gid', '9876',
            '--home-root', '/mnt/home', '--shells', str(shells)]


def test_the_command_line_reads_the_file_and_changes_nothing_in_check_mode(tmp_path, capsys):
    directory = tmp_path / 'users.json'
    state = tmp_path / 'state' / 'managed.json'
    name = 'ocigpu-test-no-such-user'
    entry = dict(ALICE, uid=59998, home='/mnt/home/' + name)
    directory.write_text(json.dumps({'groups': GROUPS, 'users': {name: entry}}))
    args = [str(directory), '--state', str(state), '--check'] + _policy_args(tmp_path)
    assert prog.main(args) == 0
    out = capsys.readouterr().out
    assert 'would run: useradd --no-create-home --uid 59998 --gid 9876' in out and out.rstrip().endswith(name)
    assert not state.exists()
    # gid 0 (root's group) is refused, with one line naming the entry and why; nothing runs for it.
    directory.write_text(json.dumps({'groups': GROUPS, 'users': {name: dict(entry, gid=0)}}))
    assert prog.main(args) == 1
    out, err = capsys.readouterr()
    assert 'useradd' not in out
    assert err.splitlines() == ['ocigpu-cluster-users: refused user %s: gid 0 is neither the privilege group (9876) '
                                "nor the user's own group" % name]
    # A missing directory is an empty one; an entry without integer ids is refused, and the rest applied.
    assert prog.main([str(tmp_path / 'none.json')] + args[1:]) == 0
    other = dict(entry, uid=59997, home='/mnt/home/ocigpu-test-other')
    directory.write_text(json.dumps({'groups': GROUPS, 'users': {name: {'uid': 'x'}, 'ocigpu-test-other': other}}))
    assert prog.main(args) == 1
    out, err = capsys.readouterr()
    assert 'no integer uid' in err and 'useradd --no-create-home --uid 59997' in out
    # A broken file is an error, and nothing runs.
    directory.write_text('{"users": [')
    assert prog.main(args) == 1
    assert 'cannot read the directory' in capsys.readouterr().err


def test_a_directory_that_others_may_write_is_not_read(tmp_path, capsys):
    """The file and its folder belong to the program's user (root) and no one else may write them:
    with root squash, a file a GPU node's root made belongs to nobody, and is not read."""
    folder = tmp_path / 'ocigpu'
    folder.mkdir(mode=0o755)
    directory = folder / 'users.json'
    directory.write_text(json.dumps({'groups': {}, 'users': {}}))
    args = [str(directory), '--state', str(tmp_path / 'state.json'), '--check'] + _policy_args(tmp_path)
    directory.chmod(0o644)
    assert prog.main(args) == 0
    for path, mode in ((directory, 0o666), (folder, 0o777)):
        path.chmod(mode)
        assert prog.main(args) == 1
        assert 'no others may write it' in capsys.readouterr().err
        path.chmod(0o644 if path == directory else 0o755)


# Every host checks every entry before applying it: root on one node, which can write the shared home
# unless the export squashes root, must not be able to give itself root on the others.

def _refused(problems, what):
    return [p for p in problems if p.startswith('refused %s:' % what)]


def test_gid_0_is_refused_and_the_rest_applied():
    eve = dict(ALICE, uid=10099, gid=0, home='/mnt/home/eve')
    commands, problems, managed = prog.plan(GROUPS, {'alice': ALICE, 'eve': eve}, BASE_PASSWD, BASE_GROUPS, {})
    assert not [c for c in commands if 'eve' in c]
    assert ['useradd', '--no-create-home', '--uid', '10001', '--gid', '9876', '--home-dir', '/mnt/home/alice',
            '--shell', '/bin/bash', 'alice'] in commands
    assert len(_refused(problems, 'user eve')) == 1 and 'gid 0' in problems[0]
    assert managed['users'] == ['alice']


@pytest.mark.parametrize('groups', [['disk'], ['wheel'], ['privilege', 'wheel'], ['munge'], ['root']])
def test_groups_outside_the_directory_are_refused(groups):
    passwd = dict(BASE_PASSWD, alice=(10001, 9876, '/mnt/home/alice', '/bin/bash'))
    local_groups = dict(BASE_GROUPS, privilege=(9876, []), disk=(6, []), wheel=(10, []), munge=(985, []))
    commands, problems, managed = prog.plan(GROUPS, {'alice': dict(ALICE, groups=groups)}, passwd, local_groups,
                                            {'users': ['alice']})
    assert commands == []
    assert len(_refused(problems, 'user alice')) == 1 and 'not among the directory' in problems[0]


@pytest.mark.parametrize('name, gid', [('wheel', 10), ('disk', 6), ('root', 0), ('privilege', 0), ('privilege', 10050),
                                       ('docker', 10050)])
def test_the_directory_cannot_define_system_groups_or_move_the_privilege_group(name, gid):
    local_groups = dict(BASE_GROUPS, privilege=(9876, []), wheel=(10, []), disk=(6, []), docker=(10050, []))
    alice = dict(ALICE, groups=[name])
    commands, problems, managed = prog.plan({'privilege': 9876, name: gid} if name != 'privilege' else {name: gid},
                                            {'alice': alice}, BASE_PASSWD, local_groups, {})
    assert not [c for c in commands if c[0] in ('groupadd', 'groupmod')]
    # refused, or (docker: a group of this host in the range that the directory did not make) left alone
    assert _refused(problems, 'group %s' % name) or 'group docker has gid 10050 here and was not made' in problems[0]
    assert name not in managed['groups']
    # alice, who names it, is refused too, unless it is the privilege group (whose gid the hosts set).
    assert bool([c for c in commands if c[0] == 'useradd']) is (name == 'privilege')


@pytest.mark.parametrize('name, uid', [('root', 0), ('opc', 1000)])
def test_system_accounts_are_never_adopted(name, uid):
    entry = dict(ALICE, uid=uid, gid=9876, home='/mnt/home/' + name)
    commands, problems, managed = prog.plan(GROUPS, {name: entry}, BASE_PASSWD, BASE_GROUPS, {})
    assert not [c for c in commands if name in c]
    assert _refused(problems, 'user ' + name) and name not in managed['users']
    # not removed either, even where a record from an earlier version names it
    commands, problems, managed = prog.plan(GROUPS, {name: dict(entry, state='absent')}, BASE_PASSWD, BASE_GROUPS,
                                            {'users': [name]})
    assert ['userdel', name] not in commands and name not in managed['users']


def test_an_account_in_the_range_made_another_way_is_not_adopted():
    """An account with the directory's uid is taken over only when its home is already the one the
    directory gives (an account this program made, whose record was lost)."""
    svc = dict(ALICE, uid=10005, home='/mnt/home/svc')
    passwd = dict(BASE_PASSWD, svc=(10005, 10005, '/srv/svc', '/sbin/nologin'))
    commands, problems, managed = prog.plan(GROUPS, {'svc': svc}, passwd, BASE_GROUPS, {})
    assert not [c for c in commands if 'svc' in c] and 'svc' not in managed['users']
    assert problems and 'was not made by the directory' in problems[-1]
    passwd = dict(BASE_PASSWD, svc=(10005, 9876, '/mnt/home/svc', '/bin/sh'))
    commands, problems, managed = prog.plan(GROUPS, {'svc': svc}, passwd, BASE_GROUPS, {})
    assert 'svc' in managed['users'] and ['usermod', '--shell', '/bin/bash', 'svc'] in commands


@pytest.mark.parametrize('home', ['/', '/root', '/home/opc', '/mnt/home', '/mnt/home/', '/mnt/home/bob',
                                  '/mnt/home/../root', '/mnt/home/eve/..', '/mnt/homeeve', 'mnt/home/eve'])
def test_a_home_outside_the_shared_home_is_refused(home):
    eve = dict(ALICE, uid=10099, home=home)
    commands, problems, managed = prog.plan(GROUPS, {'eve': eve}, BASE_PASSWD, BASE_GROUPS, {})
    assert not [c for c in commands if 'eve' in c]
    assert _refused(problems, 'user eve') and 'home' in problems[0]


@pytest.mark.parametrize('name', ['eve\n', 'Eve', '-eve', 'e ve', 'eve$', '', 'e' * 33, '1eve'])
def test_a_name_that_is_not_a_user_name_is_refused(name):
    eve = dict(ALICE, uid=10099, home='/mnt/home/' + name)
    commands, problems, managed = prog.plan(GROUPS, {name: eve}, BASE_PASSWD, BASE_GROUPS, {})
    assert [c[0] for c in commands] == ['groupadd']
    assert problems == ['refused user %r: not a user name' % name]


@pytest.mark.parametrize('entry, why', [
    ({'uid': 100}, 'uid 100 is outside the cluster\'s range 10001-59999'),
    ({'uid': 60000}, 'uid 60000 is outside'),
    ({'uid': True}, 'no integer uid'),
    ({'gid': 10002}, 'gid 10002 is neither'),
    ({'shell': '/tmp/sh'}, 'shell /tmp/sh is not in /etc/shells'),
    ({'state': 'gone'}, "state 'gone'"),
    ({'groups': 'wheel'}, 'groups'),
])
def test_each_refusal_says_why(entry, why):
    commands, problems, managed = prog.plan(GROUPS, {'eve': dict(ALICE, home='/mnt/home/eve', **entry)}, BASE_PASSWD,
                                            BASE_GROUPS, {})
    assert not [c for c in commands if 'eve' in c]
    assert len(problems) == 1 and problems[0].startswith('refused user eve: ' + why), problems


def test_the_privilege_gid_is_only_the_privilege_groups():
    """A host whose gid 9876 is another group's: a user of the privilege group is refused there, not
    made a member of that group."""
    taken = dict(BASE_GROUPS, docker=(9876, []))
    commands, problems, managed = prog.plan(GROUPS, {'alice': ALICE}, BASE_PASSWD, taken, {})
    assert commands == [] and problems[0] == 'gid 9876 of group privilege is group docker here'
    assert problems[1].startswith('refused user alice: gid 9876 is neither the privilege group')


def test_a_personal_group_of_the_directory_is_allowed():
    groups = {'privilege': 9876, 'carol': 10002}
    carol = dict(ALICE, uid=10002, gid=10002, home='/mnt/home/carol')
    alice = dict(ALICE, groups=['carol', 'privilege'])
    commands, problems, managed = prog.plan(groups, {'alice': alice, 'carol': carol}, BASE_PASSWD, BASE_GROUPS, {})
    assert problems == []
    assert ['groupadd', '--gid', '10002', 'carol'] in commands
    assert commands[-2][-3:] == ['--groups', 'carol,privilege', 'alice'] and commands[-1][-1] == 'carol'


# The playbook's decision (tasks/user.yml, "Decide the user's entry"), rendered as Ansible renders it:
# the entry it writes, and what refuses the change before anything is written.

ROLE = ROOT / 'roles' / 'cluster_user'
CONTROLLER = {'root': ['x', '0', '0', '', '/root', '/bin/bash'], 'opc': ['x', '1000', '1000', '', '/home/opc', '/bin/bash'],
              'nobody': ['x', '65534', '65534', '', '/nonexistent', '/usr/sbin/nologin']}
CONTROLLER_GROUPS = {'root': ['x', '0', ''], 'wheel': ['x', '10', 'opc'], 'disk': ['x', '6', ''], 'opc': ['x', '1000', ''],
                     'privilege': ['x', '9876', '']}
SHELLS = '# /etc/shells: valid login shells\n/bin/sh\n/bin/bash\n/usr/bin/sh\n/usr/bin/bash\n'


def decide(directory=None, passwd=None, **user):
    task = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'user.yml').read_text()) if t['name'] == "Decide the user's entry")
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(task['vars']))
    values['__cluster_user_directory_file'] = (
        {'content': base64.b64encode(json.dumps(directory).encode()).decode()} if directory is not None else {})
    values['ansible_facts'] = {'getent_passwd': passwd if passwd is not None else CONTROLLER,
                               'getent_group': CONTROLLER_GROUPS}
    values['__cluster_user_shells_file'] = {'content': base64.b64encode(SHELLS.encode()).decode()}
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
    # and by an account of the controller (which is below the cluster's range too)
    got = decide(None, cluster_user_name='bob', cluster_user_uid=1000, cluster_user_ssh_key='ssh-ed25519 AAAA bob')
    assert got['refusals'] == ["uid 1000 is outside the cluster's range 10001-59999 (cluster_user_first_uid)",
                               'uid 1000 is taken by opc']


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


KEY = {'cluster_user_ssh_key': 'ssh-ed25519 AAAA k'}


@pytest.mark.parametrize('user, refusals', [
    # opc with its own uid: every host would move the image's admin account to the shared home.
    ({'cluster_user_name': 'opc', 'cluster_user_uid': 1000},
     ['the name opc is reserved', 'the name opc is an account of the controller (uid 1000)',
      'the name opc is a group of the controller (gid 1000)', "uid 1000 is outside the cluster's range 10001-59999"]),
    ({'cluster_user_name': 'root'}, ['the name root is reserved', 'the name root is an account of the controller (uid 0)',
                                     'the name root is a group of the controller (gid 0)']),
    ({'cluster_user_name': 'zoe', 'cluster_user_uid': 60000}, ["uid 60000 is outside the cluster's range"]),
    ({'cluster_user_name': 'slurm'}, ['the name slurm is reserved (root, opc, slurm, munge, nobody and privilege are never']),
    ({'cluster_user_name': 'munge'}, ['the name munge is reserved']),
    # a user named as the privilege group would rewrite its gid with a personal group
    ({'cluster_user_name': 'privilege', 'cluster_user_privileged': False}, ['the name privilege is reserved']),
    ({'cluster_user_name': 'svc'}, ['the name svc is an account of the controller (uid 10050) that the directory did not']),
    ({'cluster_user_name': 'wheel'}, ['the name wheel is a group of the controller (gid 10)']),
    ({'cluster_user_name': 'zoe', 'cluster_user_uid': 5000}, ["uid 5000 is outside the cluster's range 10001-59999"]),
    ({'cluster_user_name': 'zoe', 'cluster_user_shell': '/usr/sbin/nologin'},
     ["shell /usr/sbin/nologin is not in the controller's /etc/shells"]),
])
def test_system_names_low_uids_and_other_shells_are_refused(user, refusals):
    passwd = dict(CONTROLLER, svc=['x', '10050', '10050', '', '/srv', '/bin/bash'])
    got = decide({'groups': {'privilege': 9876}, 'users': {'alice': ALICE}}, passwd, **dict(KEY, **user))
    assert len(got['refusals']) == len(refusals), got['refusals']
    assert all(have.startswith(want) for have, want in zip(got['refusals'], refusals)), got['refusals']


def test_groups_the_directory_holds_outside_the_range_are_not_offered():
    """A directory written before the hosts checked it may hold wheel: the playbook offers it no more."""
    got = decide({'groups': {'privilege': 9876, 'wheel': 10}, 'users': {}}, cluster_user_name='zoe',
                 cluster_user_groups=['wheel'], **KEY)
    assert got['refusals'] == ['unknown groups: wheel (the directory has privilege)']


def _user_settings_hold(**user):
    """The first task of tasks/user.yml (the settings' checks), rendered as Ansible renders it."""
    task = yaml.safe_load((ROLE / 'tasks' / 'user.yml').read_text())[0]['ansible.builtin.assert']
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(user)
    templar = Templar(loader=DataLoader(), variables=values)
    # as the assert module evaluates them: conditionals, not {{ }} templates (they read "\\" apart)
    return all(templar.evaluate_conditional(trust_as_template(that)) for that in task['that'])


@pytest.mark.parametrize('name, ok', [('alice', True), ('alice\n', False), ('alice\nroot', False), ('Alice', False),
                                      ('-alice', False), ('a' * 33, False)])
def test_a_name_ending_in_a_newline_is_not_a_name(name, ok):
    assert _user_settings_hold(cluster_user_name=name, vcn_cidr='10.0.0.0/16') is ok


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


def test_every_host_runs_the_program_with_the_roles_limits():
    """The limits come from the role's settings on each host, never from the directory file."""
    values = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    values.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    values.update(cluster_user_first_uid=20001, shared_home_path='/home/shared/')
    args = Templar(loader=DataLoader(), variables=values).template(trust_as_template('{{ __cluster_user_program_args }}'))
    assert args == '--first-uid 20001 --privilege-group privilege --privilege-gid 9876 --home-root /home/shared'
    for unit in ((ROLE / 'templates' / 'ocigpu-cluster-users.service.j2').read_text(),
                 (ROLE / 'tasks' / 'apply.yml').read_text()):
        assert '{{ __cluster_user_program_args }} {{ cluster_user_directory }}' in unit


def _bad_paths(stats, uid=10001):
    """The home's paths that "Refuse a home whose paths are links or someone else's" names."""
    task = next(t for t in yaml.safe_load((ROLE / 'tasks' / 'user.yml').read_text())
                if t['name'] == "Refuse a home whose paths are links or someone else's")
    values = trust(task['vars'])
    values['__cluster_user_paths'] = {'results': [{'stat': dict({'exists': True, 'islnk': False, 'uid': uid}, **st)}
                                                  if st is not None else {'stat': {'exists': False}} for st in stats]}
    values['__cluster_user_entry'] = {'uid': uid, 'home': '/mnt/home/alice'}
    templar = Templar(loader=DataLoader(), variables=values)
    assert templar.evaluate_conditional(trust_as_template(task['ansible.builtin.assert']['that'])) is (
        templar.template(trust_as_template('{{ __cluster_user_bad_paths }}')) == [])
    return templar.template(trust_as_template('{{ __cluster_user_bad_paths }}'))


def test_a_home_path_replaced_with_a_link_is_refused_before_root_writes_there():
    """alice's ~/.ssh as a link to /root/.ssh would have root give her root's keys folder."""
    ok = [{'path': '/mnt/home/alice'}, {'path': '/mnt/home/alice/.ssh'}, None, None, None, None]
    assert _bad_paths(ok) == []
    assert _bad_paths([None] * 6) == []  # a new user: nothing there yet
    linked = [ok[0], {'path': '/mnt/home/alice/.ssh', 'islnk': True}] + ok[2:]
    assert _bad_paths(linked) == ['/mnt/home/alice/.ssh']
    foreign = ok[:2] + [{'path': '/mnt/home/alice/.ssh/authorized_keys', 'uid': 0}] + ok[3:]
    assert _bad_paths(foreign) == ['/mnt/home/alice/.ssh/authorized_keys']
