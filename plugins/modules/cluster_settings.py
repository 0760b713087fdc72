#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_settings
short_description: Check the extra vars of a run (the cluster settings) before anything changes
version_added: 0.4.0
description:
  - Runs on the controller only (an action plugin), first in every playbook of the collection that takes
    the cluster settings (C(-e @cluster.yml)). Reads the run's extra vars (every C(-e) option, files
    included) and checks them against the cluster settings' schema, C(playbooks/vars/cluster_schema.yml).
  - Refuses a key that is not a cluster setting, not an option of one of the collection's roles
    (C(roles/*/meta/argument_specs.yml)), not named C(ansible_*) (nor C(awx_*) or C(tower_*), which AWX and
    Automation Controller add to a job's extra vars) and not listed in the extra var
    C(ocigpu_own_vars), naming the nearest known key (C(gpu_node_cont) - did you mean C(gpu_node_count)?).
    The modules' option names C(config_file), C(config_profile), C(auth_type), C(region) and
    C(service_endpoint) are refused with their cluster settings' names (C(oci_auth_type) and so on).
  - Refuses a cluster setting of the wrong type, or not one of its choices. A value that is a Jinja
    template or vaulted is checked where it is used, after templating. The roles' options are checked
    by the roles' argument specs.
  - Whether the required keys are there is checked by the playbook that needs them (C(provision.yml)).
  - Lists every problem in one message, one numbered item each, and in RV(problems).
  - Takes no options.
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    details: Reads only; runs the same in check mode.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options: {}
notes:
  - Reads the extra vars only. Variables from the inventory, group_vars or a play are not checked here.
seealso:
  - module: ansible.builtin.validate_argument_spec
"""

EXAMPLES = r"""
- name: Check the cluster settings before anything changes
  ocigpu.cluster.cluster_settings: {}
"""

RETURN = r"""
problems:
  description: One line for each problem found (empty when none).
  returned: always
  type: list
  elements: str
  sample: ['gpu_node_cont: unknown key; did you mean gpu_node_count?']
settings:
  description: The names of the cluster settings that the extra vars hold.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(), supports_check_mode=True)
    module.fail_json(msg='ocigpu.cluster.cluster_settings runs on the controller through its action plugin only.')


if __name__ == '__main__':
    main()
