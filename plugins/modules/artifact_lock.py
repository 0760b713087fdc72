#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: artifact_lock
short_description: Decide the sha256 of each file a role downloads, and keep it in the cluster's lock file
version_added: 0.4.0
description:
  - Runs on the controller only (an action plugin). For each item of O(artifacts), decides the sha256
    that every node must get, in this order - the lock file; the user's setting (RV(sources) C(setting));
    the role's table of verified sums (C(table)); the upstream's published checksum file, fetched from
    O(artifacts[].sums_url) (C(checksum file)); and, where the upstream publishes none, the sha256 of a
    first download on the controller (C(first download), with a warning).
  - Writes what it decided to O(lock_file) at once, before any node downloads, so that every node of
    this run and every later one (pushed, pulled, autoscaled, replaced) is held to the same bytes.
  - Stops, with both sums, when a setting or the table disagrees with the lock file.
  - No builtin does this - C(ansible.builtin.get_url) checks one file against one sum on a node, but
    keeps no record shared by the nodes of a cluster (docs/artifacts.md).
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    details: Decides the sums (fetching checksum files) but writes nothing.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  lock_file:
    description:
      - The lock file on the controller (YAML), relative to where C(ansible-playbook) runs. Created
        when absent; its folder must exist and be writable (both checked before anything is downloaded).
      - The module never writes over a file it did not write. Its lock files start with the line
        C(# ocigpu.cluster lock file); a file at that path without it is taken only when it holds the
        C(artifacts) mapping and nothing else, or nothing at all. Any other file (C(cluster.yml), a README)
        is refused with its path and left as it is.
      - Default - the variable C(ocigpu_lock_file), else C(<cluster>.lock.yml), the cluster named by the
        gpu_nodes inventory (C(ocigpu_cluster)) or by C(cluster_name).
    type: path
  strict:
    description:
      - Accept only a sum from the lock file, a setting or the role's table; refuse checksum files and
        first downloads.
      - Default - the variable C(ocigpu_artifacts_strict), else V(false).
    type: bool
  artifacts:
    description:
      - The files, each a dict.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The lock file's key, e.g. C(containerd/2.2.0/containerd-2.2.0-linux-amd64.tar.gz).
        type: str
        required: true
      url:
        description: Where the nodes download it from.
        type: str
        required: true
      sha256:
        description: The user's sum, empty when none.
        type: str
      setting:
        description: The name of the user's setting, for messages.
        type: str
      known:
        description: The role's verified sum, empty when none.
        type: str
      sums_url:
        description: The upstream's checksum file for it, empty when the upstream publishes none.
        type: str
notes:
  - The first download (no checksum file upstream) is trust on first use; strict mode refuses it.
seealso:
  - module: ansible.builtin.get_url
"""

EXAMPLES = r"""
- name: Decide the sha256 of the pyxis source archive
  ocigpu.cluster.artifact_lock:
    artifacts:
      - name: pyxis/0.24.0/v0.24.0.tar.gz
        url: https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz
        known: 9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4
  register: sums
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
sums:
  description: The sha256 each node must get, by name.
  returned: success
  type: dict
sources:
  description: Where each sum came from - C(lock), C(setting), C(table), C(checksum file) or C(first download).
  returned: success
  type: dict
locked:
  description: The names this run added to the lock file (or would, in check mode).
  returned: success
  type: list
  elements: str
lock_file:
  description: The lock file's absolute path.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            lock_file=dict(type='path'),
            strict=dict(type='bool'),
            artifacts=dict(type='list', elements='dict', required=True, options=dict(
                name=dict(type='str', required=True),
                url=dict(type='str', required=True),
                sha256=dict(type='str'),
                setting=dict(type='str'),
                known=dict(type='str'),
                sums_url=dict(type='str'),
            )),
        ),
        supports_check_mode=True,
    )
    module.fail_json(msg='ocigpu.cluster.artifact_lock runs on the controller through its action plugin only.')


if __name__ == '__main__':
    main()
