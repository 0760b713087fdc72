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
alone. Accounts the directory does not name are never touched. Exit status 1 when a conflict was
found or a command failed, 0 otherwise; one line per change on stdout (the journal).

Only the standard library and shadow-utils (useradd, usermod, userdel, groupadd, groupmod).
"""
import argparse
import fcntl
import grp
import json
import os
import pwd
import subprocess
import sys

STATE = '/var/lib/ocigpu-cluster-users/managed.json'
# One run at a time: the timer's and the playbook's would both add the same user.
LOCK = '/run/ocigpu-cluster-users.lock'


def read_directory(path):
    """The directory's groups and users, checked; a missing file is an empty directory."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}, {}
    groups = doc.get('groups') or {}
    users = doc.get('users') or {}
    if not isinstance(groups, dict) or not isinstance(users, dict):
        raise ValueError('%s: groups and users must be objects' % path)
    for name, user in users.items():
        for key in ('uid', 'gid'):
            if not isinstance(user.get(key), int):
                raise ValueError('%s: user %s has no integer %s' % (path, name, key))
    return groups, users


def plan(groups, users, passwd, group_db, managed):
    """What to run to bring the accounts in line with the directory.

    passwd: {name: (uid, gid, home, shell)}; group_db: {name: (gid, [members])}; managed: the names of
    the users and groups this program created. Returns (commands, conflicts, managed after)."""
    commands, conflicts = [], []
    managed = {'users': set(managed.get('users', [])), 'groups': set(managed.get('groups', []))}
    gid_names = {gid: name for name, (gid, _members) in group_db.items()}
    uid_names = {entry[0]: name for name, entry in passwd.items()}
    for name, gid in sorted(groups.items()):
        if name in group_db:
            if group_db[name][0] != gid:
                if name in managed['groups'] and gid not in gid_names:
                    commands.append(['groupmod', '--gid', str(gid), name])
                else:
                    conflicts.append('group %s has gid %d here, %d in the directory' % (name, group_db[name][0], gid))
        elif gid in gid_names:
            conflicts.append('gid %d of group %s is group %s here' % (gid, name, gid_names[gid]))
        else:
            commands.append(['groupadd', '--gid', str(gid), name])
            managed['groups'].add(name)
    for name, user in sorted(users.items()):
        present = user.get('state', 'present') == 'present'
        mine = name in managed['users']
        if not present:
            if name in passwd and mine:
                commands.append(['userdel', name])
            managed['users'].discard(name)
            continue
        uid, gid = user['uid'], user['gid']
        home, shell = user.get('home', '/home/' + name), user.get('shell', '/bin/bash')
        supplementary = sorted(set(user.get('groups', [])))
        if name not in passwd:
            if uid in uid_names:
                conflicts.append('uid %d of user %s is user %s here' % (uid, name, uid_names[uid]))
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
                conflicts.append('user %s has uid %d here, %d in the directory, and was not made by the directory'
                                 % (name, passwd[name][0], uid))
                continue
            # The same account (same uid) made another way, by an earlier run that lost its state for
            # example: the directory keeps it in line from now on.
            managed['users'].add(name)
        have_uid, have_gid, have_home, have_shell = passwd[name]
        have_groups = sorted(g for g, (_gid, members) in group_db.items() if name in members)
        change = []
        if have_uid != uid:
            if uid in uid_names:
                conflicts.append('uid %d of user %s is user %s here' % (uid, name, uid_names[uid]))
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
    return commands, conflicts, {k: sorted(v) for k, v in managed.items()}


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
    args = parser.parse_args(argv)
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
    commands, conflicts, managed = plan(groups, users, passwd, group_db, read_state(args.state))
    failed = False
    for cmd in commands:
        print(('would run: ' if args.check else 'running: ') + ' '.join(cmd), flush=True)
        if not args.check:
            done = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
            if done.returncode != 0:
                failed = True
                print('ocigpu-cluster-users: %s failed: %s' % (cmd[0], done.stdout.strip()), file=sys.stderr)
    for conflict in conflicts:
        print('ocigpu-cluster-users: conflict, left alone: %s' % conflict, file=sys.stderr)
    if not args.check and managed != read_state(args.state):
        write_state(args.state, managed)
    return 1 if failed or conflicts else 0


if __name__ == '__main__':
    sys.exit(main())
