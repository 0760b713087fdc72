# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ocigpu.cluster.role_records: the roles' fingerprints (docs/rerun.md).

A role's fingerprint is a hash of everything that decides what the role does on a host:
- the role's files and the collection's code it uses or ships (plugin_utils/_role_code: the plugins
  it names, the roles it includes, the files it takes from outside its folder, and the Python files
  these import), the playbook that runs the task, the versions of the installed collections (the
  on-demand nodes' pull bundle carries them) and the files named in the task's files option (a
  variables file read on the nodes);
- every variable of the host, rendered (inventory, group and extra vars, play vars, role defaults;
  those named like secrets hashed slowly, see SECRET), except Ansible's own, the observations listed
  in OBSERVATIONS and the names that start with an underscore: the playbook's registered results, and
  the roles' derived variables (__x), which are made from the role's files and from these inputs;
- the facts the roles read (FACTS, NODE_FACTS; tests/unit check that the roles read no others), and the
  inventory's groups, hence the cluster's members.
A role's output on one host may depend on another host's variables and facts (slurm.conf lists every
node); configure.yml therefore skips a role only when it is current on every host, and each host's
fingerprint covers its own variables and facts.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _role_code

COLLECTION_ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))

# Facts from setup that the roles read; the others (uptime, free memory, mounts...) change by themselves.
FACTS = ('architecture', 'distribution', 'distribution_major_version', 'distribution_version', 'fqdn',
         'hostname', 'memtotal_mb', 'os_family', 'processor_count', 'processor_cores', 'processor_vcpus',
         'service_mgr')
DEFAULT_IPV4 = ('address', 'interface', 'netmask', 'network', 'gateway')
# Facts that roles set for themselves while they run (never an input of the next run).
ROLE_SET_FACTS = ('getent_group', 'getent_passwd', 'services')
# Parts of node_facts (ocigpu_node) that describe the machine, not what the roles made of it: the disks'
# signatures and mounts and the RDMA ports' state change as the roles run, and IMDS may answer or not.
NODE_FACTS = ('shape', 'shape_source', 'shape_facts', 'instance', 'primary', 'gpus')
NVME_DISK_KEYS = ('by_id', 'size_bytes', 'model', 'serial')
RDMA_KEYS = ('interfaces', 'expected', 'source', 'agent')
RDMA_DEVICE_KEYS = ('name', 'netdev', 'pci', 'pci_id', 'driver', 'link_layer')
# Variables that steer how a run works, not what a role leaves: the installed packages (read this run,
# they change as roles install), the node's time zone (common sets it), and the switch that runs
# every role anyway (docs/rerun.md).
OBSERVATIONS = ('ocigpu_installed_packages', 'ocigpu_timezone', 'configure_skip_unchanged')
# Ansible's magic variables (those not named ansible_*), left out as a whole; the host's identity and
# groups are inputs of their own.
MAGIC = ('environment', 'group_names', 'groups', 'hostvars', 'inventory_dir', 'inventory_file',
         'inventory_hostname', 'inventory_hostname_short', 'omit', 'play_hosts', 'playbook_dir',
         'role_name', 'role_names', 'role_path', 'role_uuid', 'vars')


# Variables that hold secrets: their hash is slow to compute (PBKDF2), so that a hash seen in a log
# with -v, or in a record, does not let anyone test guesses of a weak password quickly.
SECRET = re.compile(r'(password|passphrase|secret|token|api_key|private_key|munge_key|_b64$)(?!.*_(path|file|dir)$)')
SECRET_ROUNDS = 100000


def _digest(data):
    return hashlib.sha256(data).hexdigest()[:16]


def value_digest(value):
    """A short hash of a value, the same for equal values whatever the order of dict keys."""
    return _digest(json.dumps(value, sort_keys=True, default=repr).encode('utf-8'))


def secret_digest(name, value):
    """A short, slow hash of a secret value (salted with its name)."""
    data = json.dumps(value, sort_keys=True, default=repr).encode('utf-8')
    return hashlib.pbkdf2_hmac('sha256', data, b'ocigpu.cluster role_records ' + name.encode('utf-8'),
                               SECRET_ROUNDS).hex()[:16]


tree_digest = _role_code.tree_digest


def fact_inputs(facts):
    """The facts that are inputs, by name (fact:NAME)."""
    facts = facts or {}
    picked = dict(('fact:' + key, facts.get(key)) for key in FACTS)
    ipv4 = facts.get('default_ipv4') or {}
    picked['fact:default_ipv4'] = dict((key, ipv4.get(key)) for key in DEFAULT_IPV4)
    node = facts.get('ocigpu_node') or {}
    for key in NODE_FACTS:
        picked['fact:ocigpu_node.' + key] = node.get(key)
    nvme = node.get('nvme') or {}
    picked['fact:ocigpu_node.nvme'] = {
        'disks': [dict((key, disk.get(key)) for key in NVME_DISK_KEYS) for disk in nvme.get('disks') or []],
        'boot_disks': nvme.get('boot_disks'),
    }
    rdma = node.get('rdma') or {}
    picked['fact:ocigpu_node.rdma'] = dict((key, rdma.get(key)) for key in RDMA_KEYS)
    picked['fact:ocigpu_node.rdma']['devices'] = [
        dict((key, dev.get(key)) for key in RDMA_DEVICE_KEYS) for dev in rdma.get('devices') or []]
    return picked


def is_input_var(name):
    """Whether a variable counts, by its rendered value. Not Ansible's own, nor the observations, nor
    the names that start with an underscore: registered results (_x), and the roles' derived variables
    (__x), which are made from the role's files and from inputs (a unit test checks that they use no
    lookup); rendering those would cost more than all the rest (slurm's walk every host)."""
    return not (name.startswith('ansible_') or name.startswith('_') or name in MAGIC or name in OBSERVATIONS)


def collection_versions(paths):
    """{namespace.name: version} of the collections installed under paths (the first found wins)."""
    found = {}
    for top in paths:
        for manifest in sorted(glob.glob(os.path.join(top, 'ansible_collections', '*', '*', 'MANIFEST.json'))):
            try:
                with open(manifest) as handle:
                    info = json.load(handle).get('collection_info', {})
            except (OSError, ValueError):
                continue
            found.setdefault('%s.%s' % (info.get('namespace'), info.get('name')), info.get('version'))
    return found


def code_inputs(root, roles):
    """The hashes of each role's files (role:<role>) and of the collection's code it uses or ships
    (role:<role>:<path>, a file or folder of the collection), for the collection at root."""
    inputs = {}
    code = _role_code.Collection(root)
    for role in roles:
        if not os.path.isdir(os.path.join(root, 'roles', role)):
            inputs['role:' + role] = 'missing'
            continue
        inputs['role:' + role] = code.digest('roles/' + role)
        for path in code.role_code(role):
            inputs['role:%s:%s' % (role, path)] = code.digest(path)
    return inputs


def role_of(name):
    """The role whose files or code an input is (role:<role> and role:<role>:<path>), else None."""
    return name.split(':')[1] if name.startswith('role:') else None


def fingerprints(roles, inputs):
    """Each role's fingerprint: its own files' and code's hashes, and every input that is not another
    role's."""
    shared = sorted((name, digest) for name, digest in inputs.items() if not name.startswith('role:'))
    prints = {}
    for role in roles:
        own = sorted((name, digest) for name, digest in inputs.items() if role_of(name) == role)
        prints[role] = value_digest([own, shared])
    return prints


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = False

    def _render(self, value):
        try:
            return self._templar.template(value)
        except Exception as exc:  # an undefined variable, a lookup that fails: the same next run too
            return '!%s' % type(exc).__name__

    def _inputs(self, roles, files, task_vars):
        inputs = code_inputs(COLLECTION_ROOT, roles)
        playbook = (self._task.get_path() or '').rpartition(':')[0]
        inputs['code:playbook'] = tree_digest(playbook) if os.path.isfile(playbook) else 'unknown'
        inputs['code:collections'] = value_digest(collection_versions(AnsibleCollectionConfig.collection_paths))
        for path in files:
            inputs['file:' + path] = tree_digest(path) if os.path.isfile(path) else 'missing'
        inputs['host'] = value_digest(task_vars.get('inventory_hostname'))
        inputs['groups'] = value_digest(dict((g, sorted(h)) for g, h in (task_vars.get('groups') or {}).items()))
        for name, value in fact_inputs(self._render(task_vars.get('ansible_facts') or {})).items():
            inputs[name] = value_digest(value)
        # Facts that modules returned are also variables of their own name: the projection above
        # stands for all facts.
        facts = set(task_vars.get('ansible_facts') or {})
        for name in task_vars:
            if is_input_var(name) and name not in facts:
                value = self._render(task_vars[name])
                inputs['var:' + name] = secret_digest(name, value) if SECRET.search(name) else value_digest(value)
        return inputs

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # not used
        args = dict(self._task.args)
        if args.get('state', 'verify') == 'verify':
            roles = args.get('roles')
            if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
                result.update(failed=True, msg='With state=verify, roles must be a list of role names')
                return result
            files = args.pop('files', None) or []
            if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
                result.update(failed=True, msg='files must be a list of paths on the controller')
                return result
            try:
                compare = boolean(args.pop('compare', True), strict=True)
            except TypeError:
                result.update(failed=True, msg='compare must be a boolean')
                return result
            try:
                inputs = self._inputs(roles, files, task_vars)
            except ValueError as exc:  # a role's declaration of its code (__<role>_code)
                result.update(failed=True, msg=str(exc))
                return result
            prints = fingerprints(roles, inputs)
            if compare:
                args.update(roles=prints, inputs=inputs)
                result.update(self._execute_module(module_name='ocigpu.cluster.role_records', module_args=args,
                                                   task_vars=task_vars))
            else:
                # Every role runs anyway: the fingerprints are for the record at the end; no remote call.
                result.update(changed=False, current=[], stale=list(roles), recorded=[],
                              reasons=dict((role, 'not compared (compare=false): every role runs') for role in roles))
            result.update(fingerprints=prints, inputs=inputs)
            return result
        result.update(self._execute_module(module_name='ocigpu.cluster.role_records', module_args=args,
                                           task_vars=task_vars))
        return result
