# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Owner, group and mode of the items of the folders and files modules: the module's defaults filled
in, names checked against the host, and the dict that AnsibleModule's attribute setters take; and the
folders both modules make sure of (checked items, then created or given their attributes)."""
from __future__ import annotations

import grp
import os
import pwd

from ansible_collections.ocigpu.cluster.plugins.module_utils._items import unknown_keys

ATTRS = ('owner', 'group', 'mode')


def item_attrs(item, params):
    """owner, group and mode of one item, each from the item or else the module's option; owner and group
    as text (a uid or gid may come as a number from YAML)."""
    attrs = dict((key, item.get(key) if item.get(key) is not None else params.get(key)) for key in ATTRS)
    for key in ('owner', 'group'):
        if attrs[key] is not None:
            attrs[key] = str(attrs[key])
    return attrs


def unknown_ids(path, attrs):
    """Problems with an item's owner and group: names that this host does not know."""
    problems = []
    for key, lookup, kind in (('owner', pwd.getpwnam, 'user'), ('group', grp.getgrnam, 'group')):
        value = attrs.get(key)
        if value is None or value.isdigit():
            continue
        try:
            lookup(value)
        except KeyError:
            problems.append('%s: no %s named %s on this host' % (path, kind, value))
    return problems


def fs_attrs(path, attrs):
    """The dict for AnsibleModule.set_fs_attributes_if_different. No SELinux field is set: each stays as
    it is (what ansible.builtin.file does without se* options)."""
    return {'path': path, 'owner': attrs.get('owner'), 'group': attrs.get('group'), 'mode': attrs.get('mode'),
            'secontext': [None, None, None, None], 'attributes': None}


FOLDER_FIELDS = ('path', 'owner', 'group', 'mode')


def folder_specs(items, params):
    """The folders to make sure of, each a dict of path, owner, group and mode (params' owner, group and
    mode filled in), and the problems of the items that are not right, this host's unknown owners and
    groups and paths that are relative or not folders among them."""
    specs, problems = [], []
    for item in items:
        if isinstance(item, str):
            item = {'path': item}
        if not isinstance(item, dict) or not isinstance(item.get('path'), str):
            problems.append('%r is neither a path nor a dict with a path' % (item,))
            continue
        problem = unknown_keys(item['path'], item, FOLDER_FIELDS)
        if problem:
            problems.append(problem)
            continue
        spec = item_attrs(item, params)
        spec['path'] = item['path']
        if not os.path.isabs(spec['path']):
            problems.append('%s is not an absolute path' % spec['path'])
            continue
        if os.path.lexists(spec['path']) and not os.path.isdir(spec['path']):
            problems.append('%s exists and is not a folder' % spec['path'])
            continue
        problems.extend(unknown_ids(spec['path'], spec))
        spec['path'] = os.path.normpath(spec['path'])
        specs.append(spec)
    return specs, problems


def _missing_chain(path):
    """The missing folders from the first missing ancestor down to path."""
    chain = []
    while path and not os.path.lexists(path):
        chain.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return list(reversed(chain))


def ensure_folders(module, specs):
    """Create the missing folders (parents get the folder's owner, group and mode, as ansible.builtin.file
    gives them) and set the attributes of the others; in check mode only say so. (created, changed)."""
    created, changed = [], []
    for spec in specs:
        path = spec['path']
        for folder in _missing_chain(path):
            if folder in created:
                continue
            created.append(folder)
            if module.check_mode:
                continue
            try:
                os.mkdir(folder)
            except OSError as exc:
                module.fail_json(msg='cannot create %s: %s' % (folder, exc), created=created, changed_folders=changed)
            module.set_fs_attributes_if_different(fs_attrs(folder, spec), True)
        if path in created:
            continue
        if module.set_fs_attributes_if_different(fs_attrs(path, spec), False):
            changed.append(path)
    return created, changed
