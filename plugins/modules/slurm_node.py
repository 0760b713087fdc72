#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_node
short_description: Read, drain or resume one Slurm node for a check that owns its drains
version_added: 0.3.0
description:
  - Reads a node's state and drain reason with C(scontrol show node), and drains or resumes it with C(scontrol update).
  - A caller owns the drains whose reason starts with O(owner) (for example C(ocigpu-nccl:)). It drains a node that is
    not drained, or drained by itself with another reason; it resumes only a node it drained. A drain made by a
    person or by another owner is never changed. This is the rule of C(ocigpu-healthcheck) too.
  - Without C(scontrol) on the host (Slurm not installed), it changes nothing and says so in RV(msg).
  - Runs on the Slurm controller, or any host where C(scontrol) reaches it.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  name:
    description: The Slurm node name.
    type: str
    required: true
  state:
    description:
      - C(read) reads only. C(drained) drains the node with O(reason) unless someone else drained it.
        C(resumed) resumes the node if O(owner) drained it.
    type: str
    choices: [read, drained, resumed]
    default: read
  owner:
    description: The start of the drain reasons this caller owns. Required with O(state=drained) or O(state=resumed).
    type: str
  reason:
    description: The drain reason, starting with O(owner). Required with O(state=drained). Longer than 200 characters,
      it is cut there.
    type: str
  scontrol:
    description: The scontrol program.
    type: str
    default: scontrol
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Hold the node while the active check runs
  ocigpu.cluster.slurm_node:
    name: gpu-1
    state: drained
    owner: "ocigpu-nccl:"
    reason: "ocigpu-nccl: active NCCL check running"
  delegate_to: "{{ groups['slurm_controller'][0] }}"

- name: Give it back when it passed
  ocigpu.cluster.slurm_node:
    name: gpu-1
    state: resumed
    owner: "ocigpu-nccl:"
  delegate_to: "{{ groups['slurm_controller'][0] }}"
"""

RETURN = r"""
slurm:
  description: Whether scontrol was found.
  returned: always
  type: bool
node:
  description: The node as Slurm showed it before any change; null when Slurm is absent or does not know it.
  returned: always
  type: dict
  contains:
    name: {description: The node name., type: str}
    addr: {description: Its NodeAddr., type: str}
    state: {description: "Its state, for example C(IDLE+DRAIN).", type: str}
    reason: {description: "Its drain reason without the C([user@time]) suffix, empty when none.", type: str}
    gres: {version_added: 0.4.0, description: "Its generic resources (C(Gres)), for example C(gpu:a100:8(S:0-1)); C((null)) or empty when none.", type: str}
    partitions: {version_added: 0.4.0, description: "Its partitions (C(Partitions)), comma-separated; empty when it is in none.", type: str}
    busy: {description: "Whether it runs jobs (C(ALLOCATED), C(MIXED) or C(COMPLETING)).", type: bool}
    drained: {description: Whether it is drained or draining., type: bool}
action:
  description: C(drain), C(resume), or null when nothing was (or, in check mode, would be) done.
  returned: always
  type: str
msg:
  description: What was done, and why, for a person.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.module_utils._health import clip_reason
from ansible_collections.ocigpu.cluster.plugins.module_utils._slurm import Scontrol, SlurmError, slurm_action


def node_result(node):
    """What RV(node) holds."""
    return None if node is None else dict(node.as_dict(), busy=node.busy, drained=node.drain)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', required=True),
            state=dict(type='str', choices=['read', 'drained', 'resumed'], default='read'),
            owner=dict(type='str'),
            reason=dict(type='str'),
            scontrol=dict(type='str', default='scontrol'),
        ),
        required_if=[('state', 'drained', ('owner', 'reason')), ('state', 'resumed', ('owner',))],
        supports_check_mode=True,
    )
    p = module.params
    if p['owner'] is not None and not p['owner'].strip():
        module.fail_json(msg='owner: empty; give the start of the drain reasons this caller owns, e.g. "ocigpu-nccl:"')
    reason = clip_reason(p['reason'].strip()) if p['reason'] else ''
    if p['state'] == 'drained' and not reason.startswith(p['owner']):
        module.fail_json(msg='reason: %r does not start with its owner %r' % (reason, p['owner']))
    scontrol = module.get_bin_path(p['scontrol']) if '/' not in p['scontrol'] else p['scontrol']
    if not scontrol:
        module.exit_json(changed=False, slurm=False, node=None, action=None,
                         msg='Slurm is not installed (no %s), nothing done' % p['scontrol'])
    slurm = Scontrol(module.run_command, scontrol)
    try:
        node = slurm.node(p['name'])
    except SlurmError as exc:
        module.fail_json(msg=str(exc))
    if p['state'] == 'read':
        module.exit_json(changed=False, slurm=True, node=node_result(node), action=None,
                         msg='%s: %s' % (p['name'], 'unknown to slurmctld' if node is None else node.state))
    action, message = slurm_action(p['owner'], node, p['state'] == 'drained', reason)
    if action and not module.check_mode:
        rc, text = slurm.apply(p['name'], action, reason)
        if rc != 0:
            module.fail_json(msg='scontrol update NodeName=%s State=%s failed (rc %d): %s'
                             % (p['name'], action.upper(), rc, text), node=node_result(node))
    module.exit_json(changed=bool(action), slurm=True, node=node_result(node), action=action,
                     msg='%s %s%s' % (p['name'], message, ' (check mode)' if action and module.check_mode else ''))


if __name__ == '__main__':
    main()
