#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: folders
short_description: Make sure several folders exist with their owner, group and mode, in one task
version_added: 0.2.0
description:
  - Creates every folder of O(folders) that is missing (with its missing parents, which get the
    same owner, group and mode, as M(ansible.builtin.file) gives them) and sets the owner, group and
    mode of each folder that differs.
  - One task and one remote call for a role's set of folders, where a loop over
    M(ansible.builtin.file) makes one call per folder; on an idempotent re-run of a cluster's
    configuration those calls add up.
  - Fails, before changing anything, when a path exists and is not a folder, or is not absolute.
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  folders:
    description:
      - The folders. An item is the folder's absolute path, or a dict with its C(path) and any of
        C(owner), C(group) and C(mode) that differ from O(owner), O(group) and O(mode).
    type: list
    elements: raw
    required: true
  owner:
    description:
      - Owner (name or uid) of every folder that names none.
      - Unset, a new folder belongs to the user the module runs as and an existing one keeps its owner.
    type: str
  group:
    description: Group (name or gid) of every folder that names none. Unset, as for O(owner).
    type: str
  mode:
    description:
      - Permissions of every folder that names none, as for M(ansible.builtin.file) (V('0755'), V(u=rwx,g=rx,o=rx)).
      - Unset, a new folder gets the umask's.
    type: raw
seealso:
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Create the Slurm folders
  ocigpu.cluster.folders:
    folders:
      - /etc/slurm
      - /etc/slurm/prolog.d
      - {path: /var/log/slurm, owner: slurm, group: slurm}
    owner: root
    group: root
    mode: "0755"
"""

RETURN = r"""
created:
  description: Folders created (or, in check mode, that would be), parents first.
  returned: always
  type: list
  elements: str
  sample: [/etc/slurm/prolog.d]
changed_folders:
  description: Folders whose owner, group or mode was set (or would be).
  returned: always
  type: list
  elements: str
  sample: [/var/log/slurm]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._fsattrs import ensure_folders, folder_specs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            folders=dict(type='list', elements='raw', required=True),
            owner=dict(type='str'),
            group=dict(type='str'),
            mode=dict(type='raw'),
        ),
        supports_check_mode=True,
    )
    folders, problems = folder_specs(module.params['folders'], module.params)
    if problems:
        module.fail_json(msg='; '.join(problems), created=[], changed_folders=[])
    created, changed_folders = ensure_folders(module, folders)
    module.exit_json(changed=bool(created or changed_folders), created=created, changed_folders=changed_folders)


if __name__ == '__main__':
    main()
