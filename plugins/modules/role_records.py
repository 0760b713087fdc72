#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: role_records
short_description: Tell which roles have nothing to do on a node, and record what a role left there
version_added: 0.4.0
description:
  - With O(state=verify) (read-only), tells for each role of O(roles) whether the node still has what the
    role's last run left there, and whether the role's inputs are the same as then. C(configure.yml)
    skips a role on every host when it is current on every host (docs/rerun.md).
  - With O(state=record), writes, for each role of O(roles), its fingerprint and what the node has now
    of the items the role declares (files and folders with content, mode and owner; systemd units'
    active and enabled state; package versions; accounts; live kernel settings; mounts).
  - The controller side computes the fingerprints for O(state=verify) - a hash of the role's files,
    the collection's code the role uses or ships (the plugins it names, the roles it includes, the
    files it takes from outside its folder and the Python files these import), the playbook, the
    host's variables (rendered), the facts the roles read and the inventory's groups - and returns them with the names and hashes of the inputs
    (RV(fingerprints), RV(inputs)), for the record at the end of the run.
author:
  - ocigpu.cluster maintainers (@ocigpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  state:
    description:
      - V(verify) compares; V(record) writes.
    type: str
    choices: [verify, record]
    default: verify
  roles:
    description:
      - With O(state=verify), the names of the roles to check (the controller side turns them into
        fingerprints).
      - With O(state=record), a dict of role name to the items the role declares, each a list of
        strings - C(paths), C(units), C(packages), C(users), C(sysctls) and C(mounts).
    type: raw
    required: true
  compare:
    description:
      - With O(state=verify), whether to compare on the node. V(false) makes no remote call and returns
        every role of O(roles) as stale, with its fingerprint for the record (C(configure.yml) passes
        V(false) with C(configure_skip_unchanged=false), when every role runs anyway). Handled on the
        controller; the module never sees it.
    type: bool
    default: true
  files:
    description:
      - With O(state=verify), files on the controller whose content is an input too (a variables file
        that the nodes read). Handled on the controller; the module never sees it.
    type: list
    elements: path
  fingerprints:
    description:
      - With O(state=record), each role's fingerprint (RV(fingerprints) of the verify result).
    type: dict
  inputs:
    description:
      - The inputs' names and hashes (RV(inputs) of the verify result), kept in each record so that a
        later verify can say which inputs changed.
      - Set by the controller side for O(state=verify).
    type: dict
  path:
    description:
      - The folder of the records (mode 0700, records 0600, root's).
    type: path
    default: /var/lib/ocigpu/roles
notes:
  - A record holds hashes, never the content of a file or variable.
  - Not detected - changes the items cannot express, such as firewall rules changed at runtime only,
    user-level systemd units or kernel modules; docs/rerun.md lists them per role.
    C(-e configure_skip_unchanged=false) runs every role whatever the records say.
seealso:
  - module: ocigpu.cluster.node_facts
"""

EXAMPLES = r"""
- name: Tell which roles have nothing to do here
  ocigpu.cluster.role_records:
    roles: [common, slurm]
  register: records

- name: Record what slurm left on this node
  ocigpu.cluster.role_records:
    state: record
    inputs: "{{ records.inputs }}"
    fingerprints: "{{ records.fingerprints }}"
    roles:
      slurm:
        paths: [/etc/slurm/slurm.conf, /etc/munge/munge.key]
        units: [munge.service, slurmctld.service]
        packages: [slurm-wlm, munge]
"""

RETURN = r"""
current:
  description: The roles whose record matches (verify).
  returned: always
  type: list
  elements: str
  sample: [common, slurm]
stale:
  description: The roles that must run here (verify); RV(reasons) says why.
  returned: always
  type: list
  elements: str
reasons:
  description: Why each stale role must run - no record, which inputs changed, or what differs on the node.
  returned: always
  type: dict
  sample: {slurm: "on the node: paths /etc/slurm/slurm.conf"}
fingerprints:
  description: Each role's fingerprint (verify, controller side).
  returned: always
  type: dict
inputs:
  description: The inputs' names and hashes (verify, controller side).
  returned: always
  type: dict
recorded:
  description: The roles whose record was written or would be (record); a record equal to the old one is not written.
  returned: always
  type: list
  elements: str
"""

import json
import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ocigpu.cluster.plugins.module_utils import _records

ROLE_NAME = re.compile(r'^[a-z][a-z0-9_]*$')


def _read(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _write(path, data):
    """Write JSON atomically (0600); whether the file changed."""
    if _read(path) == data:
        return False
    folder = os.path.dirname(path)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-')
    try:
        with os.fdopen(handle, 'w') as out:
            json.dump(data, out, sort_keys=True, indent=1)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def relevant(inputs, role):
    """The inputs of one role: everything but the other roles' files and code (role:<role>, and
    role:<role>:<path> for the collection's code it uses)."""
    return dict((name, digest) for name, digest in inputs.items()
                if not name.startswith('role:') or name.split(':')[1] == role)


def verify(module, folder, fingerprints, inputs):
    current, stale, reasons = [], [], {}
    for role in sorted(fingerprints):
        record = _read(os.path.join(folder, role + '.json'))
        if not isinstance(record, dict) or 'observed' not in record:
            reasons[role] = 'no record of an earlier run'
        elif record.get('fingerprint') != fingerprints[role]:
            reasons[role] = 'inputs changed: %s' % (
                _records.changed_inputs(record.get('inputs') or {}, relevant(inputs, role)) or 'the role or its code')
        else:
            items, problems = _records.declared(record.get('items'))
            diff = 'the record cannot be read (%s)' % '; '.join(problems) if problems else \
                _records.differences(record['observed'], _records.observe(module, items))
            if diff:
                reasons[role] = 'on the node: %s' % diff
        (stale if role in reasons else current).append(role)
    return current, stale, reasons


def record(module, folder, roles, fingerprints, inputs):
    problems, plans = [], {}
    for role, spec in sorted(roles.items()):
        fingerprint = fingerprints.get(role)
        if not isinstance(fingerprint, str) or not fingerprint:
            problems.append('%s: no fingerprint (fingerprints, from the verify result)' % role)
            continue
        items, item_problems = _records.declared(spec)
        problems.extend('%s: %s' % (role, p) for p in item_problems)
        plans[role] = (fingerprint, items)
    if problems:
        module.fail_json(msg='Cannot record: %s' % '; '.join(problems))
    recorded = []
    if not module.check_mode and not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
    for role, (fingerprint, items) in sorted(plans.items()):
        data = {'fingerprint': fingerprint, 'inputs': relevant(inputs, role), 'items': items,
                'observed': _records.observe(module, items)}
        path = os.path.join(folder, role + '.json')
        if _read(path) == data:
            continue
        recorded.append(role)
        if not module.check_mode:
            _write(path, data)
    return recorded


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['verify', 'record'], default='verify'),
            roles=dict(type='raw', required=True),
            inputs=dict(type='dict'),
            files=dict(type='list', elements='path'),
            compare=dict(type='bool', default=True),
            fingerprints=dict(type='dict'),
            path=dict(type='path', default='/var/lib/ocigpu/roles'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    roles = params['roles']
    if not isinstance(roles, dict):
        module.fail_json(msg='roles must be a dict of role name to %s'
                         % ('fingerprint (the controller side makes it)' if params['state'] == 'verify' else 'what to record'))
    bad = sorted(name for name in roles if not isinstance(name, str) or not ROLE_NAME.match(name))
    if bad:
        module.fail_json(msg='Not role names: %s' % ', '.join(map(str, bad)))
    result = dict(changed=False, current=[], stale=[], reasons={}, recorded=[], fingerprints={}, inputs={})
    if params['state'] == 'verify':
        if not all(isinstance(v, str) and v for v in roles.values()):
            module.fail_json(msg='With state=verify, each role needs a fingerprint (the controller side makes it)')
        current, stale, reasons = verify(module, params['path'], roles, params['inputs'] or {})
        result.update(current=current, stale=stale, reasons=reasons)
    else:
        recorded = record(module, params['path'], roles, params['fingerprints'] or {}, params['inputs'] or {})
        result.update(changed=bool(recorded), recorded=recorded)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
