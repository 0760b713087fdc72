# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: enabled_items
short_description: The items of a list of a role's declaration that apply on this host
version_added: 0.4.0
description:
  - A role's declaration (C(__<role>_manages), docs/adding-a-role.md) marks an item that applies on some
    hosts only with C(enabled), set from a condition (for example whether the host is the controller).
  - Returns the items whose C(enabled) is missing or true, in their order. C(rejectattr) cannot do
    this in Jinja alone, as it fails on the items that have no C(enabled).
  - The same items, and only those, are the ones M(ocigpu.cluster.role_records) records
    (the R(managed_items filter,ansible_collections.ocigpu.cluster.managed_items_filter) leaves out the others).
options:
  _input:
    description: A list of dicts or strings (a string always applies).
    type: list
    elements: raw
    required: true
"""

EXAMPLES = r"""
- name: Write the Slurm files that apply on this host
  ansible.builtin.template:
    src: "{{ item.src }}"
    dest: "{{ item.dest }}"
    mode: "0644"
  loop: "{{ __slurm_manages.templates | ocigpu.cluster.enabled_items }}"
"""

RETURN = r"""
_value:
  description: The items that apply.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleFilterError


def is_enabled(item):
    if not isinstance(item, dict):
        return True
    value = item.get('enabled', True)
    if isinstance(value, str):
        return value.strip().lower() not in ('false', 'no', '0', '')
    return bool(value)


def enabled_items(items):
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        raise AnsibleFilterError('enabled_items expects a list, got %s' % type(items).__name__)
    return [item for item in items if is_enabled(item)]


class FilterModule(object):
    def filters(self):
        return {'enabled_items': enabled_items}
