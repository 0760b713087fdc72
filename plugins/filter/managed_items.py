# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: managed_items
short_description: The items of a role's declaration that the role's record observes on a node
version_added: 0.4.0
description:
  - Each role declares once, as C(__<role>_manages) in its C(vars/main.yml), what it manages on a node
    (docs/adding-a-role.md). The role's tasks read the declaration to install, write and start those
    items, and C(configure.yml) gives this filter's answer to M(ocigpu.cluster.role_records), which
    records them at the end of a run and compares them before a re-run skips the role.
  - Returns a dict with the lists C(paths), C(units), C(packages), C(users), C(sysctls) and C(mounts).
    C(paths) holds the C(dest) of every item of C(files) and C(templates) (and of lists named
    C(<group>_files) or C(<group>_templates), which a role uses where groups of files notify different
    handlers) and the declaration's own C(paths) (what the role changes in place, such as a block in
    C(/etc/hosts)). C(units) likewise takes C(<group>_units) too.
  - C(folders) are not recorded. The record of a folder covers every entry of its tree, and the roles'
    folders hold what changes by itself (logs, spools) and other roles' files. A folder that must be
    watched whole goes in C(paths).
  - Items with C(enabled) false are left out (the role neither writes nor removes them on this host).
    Items with C(state=absent) stay, and the record sees that they are absent.
  - Keys the record does not observe (C(firewall_ports), C(handler), C(src), C(mode), ...) are ignored.
options:
  _input:
    description: The declaration, C(__<role>_manages).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Record what the rdma_exporter role manages
  ocigpu.cluster.role_records:
    state: record
    roles:
      rdma_exporter: "{{ __rdma_exporter_manages | ocigpu.cluster.managed_items }}"
"""

RETURN = r"""
_value:
  description: The items, by kind.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.ocigpu.cluster.plugins.filter.enabled_items import is_enabled

KINDS = ('paths', 'units', 'packages', 'users', 'sysctls', 'mounts')


def _names(items, key, what):
    names = []
    for item in items or []:
        if not is_enabled(item):
            continue
        if isinstance(item, dict):
            if key not in item:
                raise AnsibleFilterError('managed_items: an item of %s has no %s: %r' % (what, key, item))
            names.append(str(item[key]))
        else:
            names.append(str(item))
    return names


def managed_items(declaration):
    if not isinstance(declaration, dict):
        raise AnsibleFilterError('managed_items expects a dict (__<role>_manages), got %s' % type(declaration).__name__)
    found = dict((kind, []) for kind in KINDS)
    for key in sorted(declaration):
        if key in ('files', 'templates') or key.endswith(('_files', '_templates')):
            found['paths'].extend(_names(declaration[key], 'dest', key))
        elif key == 'units' or key.endswith('_units'):
            found['units'].extend(_names(declaration[key], 'name', key))
    found['paths'].extend(_names(declaration.get('paths'), 'path', 'paths'))
    for kind in KINDS[2:]:
        found[kind] = _names(declaration.get(kind), 'name', kind)
    for kind in KINDS:
        seen = set()
        found[kind] = [name for name in found[kind] if not (name in seen or seen.add(name))]
    return found


class FilterModule(object):
    def filters(self):
        return {'managed_items': managed_items}
