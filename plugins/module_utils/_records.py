# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role records: what a role left on a node, so that a re-run of configure.yml can tell, in one call,
whether anything it manages changed since (the role_records module; docs/rerun.md).

A record holds the role's fingerprint (its inputs, computed on the controller) and an observation of
the items the role declares (__<role>_manages, through the managed_items filter): files and folders, systemd units, packages, accounts,
kernel settings and mounts. observe() reads them (units and packages through _observe); differences()
compares two observations.
"""
from __future__ import annotations

import hashlib
import os
import pwd
import stat

from ansible_collections.ocigpu.cluster.plugins.module_utils import _observe

KINDS = ('paths', 'units', 'packages', 'users', 'sysctls', 'mounts')
# At most this many names in one reason; the rest are counted.
SHOWN = 5


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 16), b''):
            digest.update(block)
    return digest.hexdigest()


def _entry(path):
    """One file system entry: kind, mode, owner and, for a file, its content's hash; None when missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    attrs = '%04o:%d:%d' % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    if stat.S_ISLNK(st.st_mode):
        return 'link:' + os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return 'dir:' + attrs
    if stat.S_ISREG(st.st_mode):
        return 'file:%s:%s' % (attrs, _sha256(path))
    return 'other:' + attrs


def observe_paths(paths):
    """Each path (~user/ for a home), and every entry of a folder's tree (not following links), keyed by
    its path."""
    seen = {}
    for path in paths:
        path = os.path.normpath(os.path.expanduser(path))
        seen[path] = _entry(path)
        if seen[path] is None or not seen[path].startswith('dir:'):
            continue
        for top, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(top, name)
                seen[full] = _entry(full)
    return seen


def observe_users(users):
    seen = {}
    for name in users:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            seen[name] = None
            continue
        seen[name] = '%d:%d:%s:%s' % (entry.pw_uid, entry.pw_gid, entry.pw_dir, entry.pw_shell)
    return seen


def observe_sysctls(names, proc='/proc/sys'):
    seen = {}
    for name in names:
        try:
            with open(os.path.join(proc, name.replace('.', '/'))) as handle:
                seen[name] = ' '.join(handle.read().split())
        except OSError:
            seen[name] = None
    return seen


def parse_mountinfo(text):
    """/proc/self/mountinfo: {mount point: 'source fstype'}; the last mount on a point wins."""
    mounts = {}
    for line in text.splitlines():
        left, _sep, right = line.partition(' - ')
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 2:
            point = fields[4].replace('\\040', ' ')
            mounts[point] = '%s %s' % (tail[1], tail[0])
    return mounts


def observe_mounts(points, mountinfo='/proc/self/mountinfo'):
    if not points:
        return {}
    with open(mountinfo) as handle:
        mounts = parse_mountinfo(handle.read())
    return dict((point, mounts.get(os.path.normpath(point))) for point in points)


def declared(items):
    """The declared items, each kind a sorted list of unique non-empty strings; problems for bad input."""
    items = items or {}
    problems, clean = [], {}
    if not isinstance(items, dict):
        return {}, ['the items must be a dict of %s, got %s' % (', '.join(KINDS), type(items).__name__)]
    unknown = sorted(set(items) - set(KINDS))
    if unknown:
        problems.append('unknown kinds %s (known: %s)' % (', '.join(unknown), ', '.join(KINDS)))
    for kind in KINDS:
        values = items.get(kind) or []
        if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
            problems.append('%s must be a list of non-empty strings' % kind)
            continue
        starts = {'paths': ('/', '~'), 'mounts': ('/',)}.get(kind, ('',))
        relative = [v for v in values if not v.startswith(starts)]
        if relative:
            problems.append('%s must be absolute paths: %s' % (kind, ', '.join(relative)))
            continue
        clean[kind] = sorted(set(v.strip() for v in values))
    return clean, problems


def observe(module, items):
    """What the node has now for the declared items (see declared())."""
    return {
        'paths': observe_paths(items.get('paths', [])),
        'units': _observe.unit_states(module, items.get('units', [])),
        'packages': _observe.package_versions(module, items.get('packages', [])),
        'users': observe_users(items.get('users', [])),
        'sysctls': observe_sysctls(items.get('sysctls', [])),
        'mounts': observe_mounts(items.get('mounts', [])),
    }


def _names(names):
    names = sorted(names)
    shown = ', '.join(names[:SHOWN])
    return shown + (' and %d more' % (len(names) - SHOWN) if len(names) > SHOWN else '')


def differences(recorded, now):
    """What differs between two observations, one phrase per kind ('' when nothing does)."""
    phrases = []
    for kind in KINDS:
        old, new = recorded.get(kind) or {}, now.get(kind) or {}
        changed = [name for name in set(old) | set(new) if old.get(name) != new.get(name)]
        if changed:
            phrases.append('%s %s' % (kind, _names(changed)))
    return '; '.join(phrases)


def changed_inputs(recorded, now):
    """The names of the inputs (variables, facts, code) that differ between two input maps."""
    return _names(name for name in set(recorded) | set(now) if recorded.get(name) != now.get(name))
