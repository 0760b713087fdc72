#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: wait_for_ssh
short_description: Wait until a host answers, and stop at once when SSH refuses its host key
version_added: 0.4.0
description:
  - Runs on the controller only (an action plugin). Waits as C(ansible.builtin.wait_for_connection)
    does - a new connection and the ping module, tried again until they work or O(timeout) has passed.
  - Stops at the first attempt where ssh refuses the host's key (C(REMOTE HOST IDENTIFICATION HAS
    CHANGED), C(Host key verification failed)), since waiting does not change that answer, and fails
    with a message that names the host, the known_hosts file and the command that removes the old key
    (C(ssh-keygen -R <host> -f <file>)). C(boot_wait.yml) uses it, so that a refused key is reported in
    seconds, not after C(boot_wait_timeout).
  - Where the connection's ssh arguments set C(-o HostKeyAlias=<name>), as the collection's hosts do with
    their instance OCID, ssh records and refuses the key under that name; the command names it
    (C(ssh-keygen -R <instance OCID> -f <file>)) and the message adds the host's inventory name and address.
  - Through a jump, the host named is the one whose key ssh refused, the bastion's (its OCID, and the
    jump's C(user@address)) when it is the jump that failed.
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    support: none
    details: Skipped in check mode, as C(ansible.builtin.wait_for_connection) is.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  timeout:
    description: Seconds to wait in all.
    type: int
    default: 600
  connect_timeout:
    description: Seconds to wait for one connection.
    type: int
    default: 5
  sleep:
    description: Seconds between two attempts.
    type: int
    default: 1
  delay:
    description: Seconds to wait before the first attempt.
    type: int
    default: 0
  known_hosts_file:
    description:
      - The known_hosts file the connection checks host keys against, named in the message and in its
        C(ssh-keygen -R) command. C(boot_wait.yml) passes the host's C(ocigpu_known_hosts_file).
      - Default - the file named in ssh's own message.
    type: path
seealso:
  - module: ansible.builtin.wait_for_connection
"""

EXAMPLES = r"""
- name: Wait until the host answers SSH
  ocigpu.cluster.wait_for_ssh:
    timeout: 1800
    known_hosts_file: "{{ ocigpu_known_hosts_file | default(omit) }}"
  register: answered
"""

RETURN = r"""
elapsed:
  description: Seconds the wait took.
  returned: always
  type: int
  sample: 23
host_key_refused:
  description: Present (V(true)) when the wait stopped because ssh refused the host key.
  returned: when ssh refused the host key
  type: bool
  sample: true
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            timeout=dict(type='int', default=600),
            connect_timeout=dict(type='int', default=5),
            sleep=dict(type='int', default=1),
            delay=dict(type='int', default=0),
            known_hosts_file=dict(type='path'),
        ),
        supports_check_mode=False,
    )
    module.fail_json(msg='ocigpu.cluster.wait_for_ssh runs on the controller through its action plugin only.')


if __name__ == '__main__':
    main()
