# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Apply the cluster's directory of users to this host's accounts (ocigpu.cluster, role cluster_user).

The directory is one JSON file on the shared home, written by playbooks/cluster_user.yml:

    {"groups": {"privilege": 9876, "bob": 10002},
     "users": {"alice": {"uid": 10001, "gid": 9876, "groups": [], "home": "/mnt/home/alice",
                         "shell": "/bin/bash", "state": "present"}, ...}}

This program runs at boot before slurmd (so a node that joins later knows every user before its
first job), every few seconds from a timer, and when the playbook asks. It creates each present
user and group with the directory's ids, brings a changed one in line, and removes an account marked
absent (never its home), but only one that it created itself (listed in STATE): an account of the
same name that it did not create, or an id held by another name, is a conflict it reports and leaves
alone. Accounts the directory does not name are never touched.

The file is written by the controller alone, but it lies on a share that other hosts mount: every
entry is checked here before it is applied (check_groups, check_user), against this host's settings
(Policy, from the role) and never against the file itself. A name is a user name; ids are in the
cluster's range (the privilege group's gid aside); a user's groups are the privilege group and the
directory's own groups; the home is <home root>/<name>; the shell is in /etc/shells; an existing
account is taken over only when it has the directory's uid in the range and its home already (one
this program made, whose record was lost). A bad entry is refused with one line that names it and
says why; the rest is applied. The file and its folder must belong to this program's user (root)
and be writable by no one else, or nothing is read.

Exit status 1 when an entry was refused, a conflict found or a command failed, 0 otherwise; one line
per change on stdout (the journal), one per refusal or conflict on stderr.

Only the standard library and shadow-utils (useradd, usermod, userdel, groupadd, groupmod).
"""
import argparse
import collections
import fcntl
import grp
import json
import os
import pwd
import re
import stat
import subprocess
import sys

STATE = '/var/lib/ocigpu-cluster-users/managed.json'
# One run at a time: the timer's and the playbook's would both add the same user.
LOCK = '/run/ocigpu-cluster-users.lock'


# A user or group name: what useradd takes on every distribution (fullmatch: "$" would take a
# trailing newline).
NAME = re.compile(r'[a-z_][a-z0-9_-]{0,31}')
# The highest id the cluster gives out (60000 and above: nobody, and distributions' own).
LAST_ID = 59999
# What this host allows, from the role's settings (vars/main.yml passes them), never from the file.
Policy = collections.namedtuple('Policy', 'first_id privilege_group privilege_gid home_root shells')
DEFAULT_SHELLS = frozenset(('/bin/sh', '/bin/bash', '/usr/bin/sh', '/usr/bin/bash'))
DEFAULT_POLICY = Policy(10001, 'privilege', 9876, '/mnt/home', DEFAULT_SHELLS)


def check_owner(path, st):
    """The file (st: its stat) and its folder belong to this program's user (root) and no one else may
    write them: a file that another host's root made on a share that squashes root belongs to nobody."""
    for each, each_st in ((path, st), (os.path.dirname(os.path.abspath(path)), None)):
        each_st = each_st or os.stat(each)
        if each_st.st_uid != os.geteuid() or each_st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ValueError('%s has owner uid %d and mode %04o: it must belong to uid %d, and no others may write it'
                             % (each, each_st.st_uid, stat.S_IMODE(each_st.st_mode), os.geteuid()))


def read_directory(path):
    """The directory's groups and users, as objects (the entries are checked by plan); a missing file
    is an empty directory."""
    try:
        with open(path) as f:
            check_owner(path, os.fstat(f.fileno()))
            doc = json.load(f)
    except FileNotFoundError:
        return {}, {}
    if not isinstance(doc, dict):
        raise ValueError('%s: not an object' % path)
    groups = doc.get('groups') or {}
    users = doc.get('users') or {}
    if not isinstance(groups, dict) or not isinstance(users, dict):
        raise ValueError('%s: groups and users must be objects' % path)
    return groups, users


def read_shells(path='/etc/shells'):
    try:
        with open(path) as f:
            return frozenset(line.strip() for line in f if line.strip().startswith('/'))
    except FileNotFoundError:
        return frozenset()


def _shown(name):
    """A name as a journal line shows it: quoted when it is not a name (a newline stays visible)."""
    return name if isinstance(name, str) and NAME.fullmatch(name) else repr(name)


def _is_id(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _in_range(policy, value):
    return _is_id(value) and policy.first_id <= value <= LAST_ID


def check_group(policy, name, gid):
    """Why the directory's group may not be applied (None: it may)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return 'not a group name'
    if not _is_id(gid):
        return 'no integer gid'
    if name == policy.privilege_group:
        if gid != policy.privilege_gid:
            return 'gid %d is not the privilege group\'s (%d on this host)' % (gid, policy.privilege_gid)
    elif not _in_range(policy, gid):
        return 'gid %d is outside the cluster\'s range %d-%d' % (gid, policy.first_id, LAST_ID)
    return None


def check_user(policy, name, user, allowed_groups):
    """Why the directory's user may not be applied (None: it may). allowed_groups: {name: gid} of the
    groups a user may be in (the privilege group and the directory's groups that passed)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return 'not a user name'
    if not isinstance(user, dict):
        return 'not an object'
    if name == policy.privilege_group:
        return 'the privilege group\'s name'
    if user.get('state', 'present') not in ('present', 'absent'):
        return 'state %r is neither present nor absent' % (user.get('state'),)
    uid = user.get('uid')
    if not _is_id(uid):
        return 'no integer uid'
    if not _in_range(policy, uid):
        return 'uid %d is outside the cluster\'s range %d-%d' % (uid, policy.first_id, LAST_ID)
    if user.get('state', 'present') == 'absent':
        return None
    gid = user.get('gid')
    if not _is_id(gid):
        return 'no integer gid'
    if gid not in (allowed_groups.get(policy.privilege_group), allowed_groups.get(name)):
        return 'gid %d is neither the privilege group (%d) nor the user\'s own group' % (gid, policy.privilege_gid)
    groups = user.get('groups', [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        return 'groups is not a list of names'
    foreign = sorted(set(groups) - set(allowed_groups))
    if foreign:
        return 'groups %s are not among the directory\'s (%s)' % (', '.join(foreign), ', '.join(sorted(allowed_groups)))
    home = user.get('home', '/home/' + name)
    if home != '%s/%s' % (policy.home_root.rstrip('/'), name):
        return 'home %s is not %s/%s on the shared home' % (home, policy.home_root.rstrip('/'), name)
    shell = user.get('shell', '/bin/bash')
    if not isinstance(shell, str) or shell not in policy.shells:
        return 'shell %s is not in /etc/shells' % (shell,)
    return None


def plan(groups, users, passwd, group_db, managed, policy=DEFAULT_POLICY):
    """What to run to bring the accounts in line with the directory.

    passwd: {name: (uid, gid, home, shell)}; group_db: {name: (gid, [members])}; managed: the names of
    the users and groups this program created. Returns (commands, problems, managed after): problems
    are the refused entries ("refused user eve: why") and the conflicts, one line each."""
    commands, problems = [], []
    managed = {'users': set(managed.get('users', [])), 'groups': set(managed.get('groups', []))}
    gid_names = {gid: name for name, (gid, _members) in group_db.items()}
    uid_names = {entry[0]: name for name, entry in passwd.items()}
    # The groups a user may be in: the privilege group (the role makes it on every host) and the
    # directory's groups that pass and are, or will be, this program's. A privilege group that this
    # host has with another gid, or whose gid another group holds, is none of them.
    allowed = {}
    if group_db.get(policy.privilege_group, (None,))[0] == policy.privilege_gid:
        allowed[policy.privilege_group] = policy.privilege_gid
    for name, gid in sorted(groups.items()):
        why = check_group(policy, name, gid)
        if why:
            problems.append('refused group %s: %s' % (_shown(name), why))
            continue
        if name in group_db:
            have = group_db[name][0]
            mine = name in managed['groups'] and _in_range(policy, have)
            if name == policy.privilege_group:
                if have != gid:
                    problems.append('group %s has gid %d here, %d in the directory' % (name, have, gid))
                continue
            if not mine and not _personal_group_made_here(policy, name, gid, users.get(name), passwd):
                problems.append('group %s has gid %d here and was not made by the directory: left alone' % (name, have))
                continue
            if have != gid:
                if gid in gid_names:
                    problems.append('group %s has gid %d here, %d in the directory' % (name, have, gid))
                    continue
                commands.append(['groupmod', '--gid', str(gid), name])
            managed['groups'].add(name)
        elif gid in gid_names:
            problems.append('gid %d of group %s is group %s here' % (gid, name, gid_names[gid]))
            continue
        else:
            commands.append(['groupadd', '--gid', str(gid), name])
            managed['groups'].add(name)
        allowed[name] = gid
    for name, user in sorted(users.items()):
        why = check_user(policy, name, user, allowed)
        if why:
            problems.append('refused user %s: %s' % (_shown(name), why))
            continue
        present = user.get('state', 'present') == 'present'
        # Only an account in the cluster's range is ever the directory's (a record from an earlier
        # version may name root or opc: they stay as they are).
        mine = name in managed['users'] and (name not in passwd or _in_range(policy, passwd[name][0]))
        if not present:
            if name in passwd and mine:
                commands.append(['userdel', name])
            managed['users'].discard(name)
            continue
        uid, gid = user['uid'], user['gid']
        home, shell = user['home'], user.get('shell', '/bin/bash')
        supplementary = sorted(set(user.get('groups', [])))
        if name not in passwd:
            if uid in uid_names:
                problems.append('uid %d of user %s is user %s here' % (uid, name, uid_names[uid]))
                continue
            cmd = ['useradd', '--no-create-home', '--uid', str(uid), '--gid', str(gid), '--home-dir', home,
                   '--shell', shell]
            if supplementary:
                cmd += ['--groups', ','.join(supplementary)]
            commands.append(cmd + [name])
            managed['users'].add(name)
            continue
        if not mine:
            if passwd[name][0] != uid:
                problems.append('user %s has uid %d here, %d in the directory, and was not made by the directory'
                                % (name, passwd[name][0], uid))
                continue
            if passwd[name][2] != home:
                problems.append('user %s (uid %d) has home %s here and was not made by the directory: left alone'
                                % (name, uid, passwd[name][2]))
                continue
            # The directory's uid (in the cluster's range) and its home on the shared home: an account
            # this program made, whose record was lost. The directory keeps it in line from now on.
            managed['users'].add(name)
        have_uid, have_gid, have_home, have_shell = passwd[name]
        have_groups = sorted(g for g, (_gid, members) in group_db.items() if name in members)
        change = []
        if have_uid != uid:
            if uid in uid_names:
                problems.append('uid %d of user %s is user %s here' % (uid, name, uid_names[uid]))
                continue
            change += ['--uid', str(uid)]
        if have_gid != gid:
            change += ['--gid', str(gid)]
        if have_home != home:
            change += ['--home', home]
        if have_shell != shell:
            change += ['--shell', shell]
        if have_groups != supplementary:
            change += ['--groups', ','.join(supplementary)]
        if change:
            commands.append(['usermod'] + change + [name])
    # A record from an earlier version may name an account outside the range (root, opc): it is not
    # the directory's.
    managed['users'] = set(n for n in managed['users'] if n not in passwd or _in_range(policy, passwd[n][0]))
    managed['groups'] = set(n for n in managed['groups'] if n not in group_db or _in_range(policy, group_db[n][0]))
    return commands, problems, {k: sorted(v) for k, v in managed.items()}


def _personal_group_made_here(policy, name, gid, user, passwd):
    """A group not in the record that this program made all the same, by a run that lost its record:
    the personal group of the directory's user of that name, whose account here has the group's gid as
    its uid and gid, in the cluster's range, and its home on the shared home."""
    home = '%s/%s' % (policy.home_root.rstrip('/'), name)
    return (_in_range(policy, gid) and isinstance(user, dict) and user.get('uid') == gid and user.get('home') == home
            and passwd.get(name, (None, None, None))[:3] == (gid, gid, home))


def local_accounts():
    passwd = {p.pw_name: (p.pw_uid, p.pw_gid, p.pw_dir, p.pw_shell) for p in pwd.getpwall()}
    group_db = {g.gr_name: (g.gr_gid, list(g.gr_mem)) for g in grp.getgrall()}
    return passwd, group_db


def read_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


def write_state(path, state):
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(state, f, sort_keys=True)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('directory', help='the directory file on the shared home')
    parser.add_argument('--state', default=STATE, help='where the names this program created are kept')
    parser.add_argument('--check', action='store_true', help='print what would change; change nothing')
    parser.add_argument('--lock', default=LOCK, help='the lock file that keeps runs one at a time')
    parser.add_argument('--first-uid', type=int, default=DEFAULT_POLICY.first_id,
                        help='the lowest uid and gid of the cluster\'s range (the highest is %d)' % LAST_ID)
    parser.add_argument('--privilege-group', default=DEFAULT_POLICY.privilege_group, help='the privilege group')
    parser.add_argument('--privilege-gid', type=int, default=DEFAULT_POLICY.privilege_gid, help='its gid')
    parser.add_argument('--home-root', default=DEFAULT_POLICY.home_root, help='where the homes are (the shared home)')
    parser.add_argument('--shells', default='/etc/shells', help='the login shells a user may have')
    args = parser.parse_args(argv)
    args.policy = Policy(args.first_uid, args.privilege_group, args.privilege_gid, args.home_root,
                         read_shells(args.shells))
    if args.check:
        return apply(args)
    with open(args.lock, 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return apply(args)


def apply(args):
    """Read the directory and the accounts, and bring them in line (under the lock, but in --check)."""
    try:
        groups, users = read_directory(args.directory)
    except (OSError, ValueError) as e:
        print('ocigpu-cluster-users: cannot read the directory: %s' % e, file=sys.stderr)
        return 1
    passwd, group_db = local_accounts()
    commands, problems, managed = plan(groups, users, passwd, group_db, read_state(args.state), args.policy)
    failed = False
    for cmd in commands:
        print(('would run: ' if args.check else 'running: ') + ' '.join(cmd), flush=True)
        if not args.check:
            done = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if done.returncode != 0:
                failed = True
                print('ocigpu-cluster-users: %s failed: %s' % (cmd[0], done.stdout.strip()), file=sys.stderr)
    for problem in problems:
        shown = problem if problem.startswith('refused ') else 'conflict, left alone: ' + problem
        print('ocigpu-cluster-users: %s' % shown, file=sys.stderr)
    if not args.check and managed != read_state(args.state):
        write_state(args.state, managed)
    return 1 if failed or problems else 0


if __name__ == '__main__':
    sys.exit(main())
