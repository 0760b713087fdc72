#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: services
short_description: Make sure several systemd units run (or not) and start at boot (or not), in one task
version_added: 0.4.0
description:
  - Reads the state of every unit of O(services) with one C(systemctl show), then enables, disables,
    starts and stops only the units that differ, in the order given.
  - One task and one remote call for a role's set of services, where M(ansible.builtin.service) makes
    one call per service; on an idempotent re-run of a cluster's configuration those calls add up.
  - Fails, before changing anything, when an item is not right or a unit is not known to systemd. In
    check mode a unit that is not known yet (its package would be installed by an earlier task) is
    reported as one that would be started and enabled, with a warning.
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
  services:
    description:
      - The units, each a dict with its C(name) (C(munge) stands for C(munge.service)) and any of
        C(state) (V(started) or V(stopped)) and C(enabled) (V(true) or V(false)). A field left out is
        left as it is.
    type: list
    elements: dict
    required: true
  daemon_reload:
    description:
      - Run C(systemctl daemon-reload) before reading the units. Not counted as a change; not run in
        check mode.
      - Without it the module still reloads, and counts it as a change, when systemd says that a unit of
        O(services) has unit files or drop-ins changed on disk since it loaded them (C(NeedDaemonReload)),
        so that a start or a restart uses what is on disk.
    type: bool
    default: false
notes:
  - A unit counts as running when it is C(active), C(activating) or C(reloading), and as enabled when
    C(systemctl is-enabled) would say so (C(enabled), C(enabled-runtime), C(static), C(indirect),
    C(generated), C(alias), C(linked)). Starting or enabling a C(masked) unit is an error.
seealso:
  - module: ansible.builtin.systemd_service
"""

EXAMPLES = r"""
- name: Start munge and slurmd and enable them at boot
  ocigpu.cluster.services:
    services:
      - {name: munge, state: started, enabled: true}
      - {name: slurmd, state: started, enabled: true}
    # Only when a drop-in changed in this run.
    daemon_reload: "{{ slurm_files.changed_files | select('search', '\\.service\\.d/') | list | length > 0 }}"
"""

RETURN = r"""
started:
  description: Units started (or, in check mode, that would be), in the order given.
  returned: always
  type: list
  elements: str
  sample: [slurmd]
stopped:
  description: Units stopped (or that would be).
  returned: always
  type: list
  elements: str
enabled:
  description: Units enabled at boot (or that would be).
  returned: always
  type: list
  elements: str
disabled:
  description: Units disabled at boot (or that would be).
  returned: always
  type: list
  elements: str
missing:
  description: Units that systemd does not know (check mode only; a real run fails on them).
  returned: always
  type: list
  elements: str
  sample: [slurmd]
daemon_reloaded:
  description: Whether systemd reloaded its units because a unit of O(services) needed it (or, in check mode, would).
  returned: always
  type: bool
status:
  description: Each unit's C(ActiveState) and C(UnitFileState) as read before any change.
  returned: always
  type: dict
  sample: {munge: {active_state: active, unit_file_state: enabled}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._items import item_problem

FIELDS = ('name', 'state', 'enabled')
RUNNING = ('active', 'activating', 'reloading')
ENABLED = ('enabled', 'enabled-runtime', 'static', 'indirect', 'generated', 'alias', 'linked')


def _specs(items):
    """The items checked: (specs, problems)."""
    specs, problems = [], []
    for item in items:
        problem = item_problem(item, 'name', FIELDS)
        if problem:
            problems.append(problem)
            continue
        name = item['name']
        state, enabled = item.get('state'), item.get('enabled')
        if state not in (None, 'started', 'stopped'):
            problems.append('%s: state must be started or stopped, got %s' % (name, state))
            continue
        if enabled is not None and not isinstance(enabled, bool):
            problems.append('%s: enabled must be true or false, got %r' % (name, enabled))
            continue
        specs.append({'name': name, 'state': state, 'enabled': enabled})
    return specs, problems


def _parse_show(text, count):
    """`systemctl show` output for `count` units: one dict of properties per unit, in order."""
    units, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, sep, value = line.partition('=')
        if sep:
            current[key] = value
    if current:
        units.append(current)
    return units if len(units) == count else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            services=dict(type='list', elements='dict', required=True),
            daemon_reload=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    result = dict(changed=False, started=[], stopped=[], enabled=[], disabled=[], missing=[], daemon_reloaded=False,
                  status={})
    specs, problems = _specs(module.params['services'])
    if problems:
        module.fail_json(msg='; '.join(problems), **result)
    systemctl = module.get_bin_path('systemctl', required=True)

    def run(*args):
        rc, out, err = module.run_command([systemctl] + list(args))
        if rc != 0:
            module.fail_json(msg='systemctl %s failed (rc %d): %s' % (' '.join(args), rc, (err or out).strip()),
                             **result)
        return out

    if module.params['daemon_reload'] and not module.check_mode:
        run('daemon-reload')
    names = [spec['name'] for spec in specs]

    def show():
        shown = _parse_show(run('show', '--property=LoadState,ActiveState,UnitFileState,NeedDaemonReload', '--',
                                *names), len(names))
        if shown is None:
            module.fail_json(msg='could not read the state of %s from systemctl show' % ', '.join(names), **result)
        return shown

    shown = show()
    if any(props.get('NeedDaemonReload') == 'yes' for props in shown):
        result['daemon_reloaded'] = True
        if not module.check_mode:
            run('daemon-reload')
            shown = show()

    plan, missing = [], []
    for spec, props in zip(specs, shown):
        name, active, file_state = spec['name'], props.get('ActiveState', ''), props.get('UnitFileState', '')
        result['status'][name] = {'active_state': active, 'unit_file_state': file_state}
        if props.get('LoadState') == 'not-found':
            missing.append(name)
        elif props.get('LoadState') == 'masked' and (spec['state'] == 'started' or spec['enabled']):
            problems.append('%s is masked' % name)
        plan.append((spec, active, file_state))
    if missing and not module.check_mode:
        problems.append('systemd knows no unit %s' % ', '.join(missing))
    if problems:
        module.fail_json(msg='; '.join(problems), **result)
    result['missing'] = missing
    if missing:
        module.warn('Check mode: no unit %s yet; reported as it would be after the install.' % ', '.join(missing))

    for spec, active, file_state in plan:
        name = spec['name']
        if spec['enabled'] is True and file_state not in ENABLED:
            result['enabled'].append(name)
            if not module.check_mode:
                run('enable', '--', name)
        elif spec['enabled'] is False and file_state in ('enabled', 'enabled-runtime', 'linked'):
            result['disabled'].append(name)
            if not module.check_mode:
                run('disable', '--', name)
        if spec['state'] == 'started' and active not in RUNNING:
            result['started'].append(name)
            if not module.check_mode:
                run('start', '--', name)
        elif spec['state'] == 'stopped' and active in RUNNING + ('deactivating',):
            result['stopped'].append(name)
            if not module.check_mode:
                run('stop', '--', name)

    result['changed'] = any(result[key] for key in ('started', 'stopped', 'enabled', 'disabled', 'daemon_reloaded'))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
