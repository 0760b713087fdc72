# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Owner, group and mode of the items of the folders and files modules: the module's defaults filled
in, names checked against the host, and the dict that AnsibleModule's attribute setters take."""
from __future__ import annotations

import grp
import pwd

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
