# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side (all of it) of ocigpu.cluster.cluster_settings: the extra vars (-e, -e @cluster.yml)
checked against the cluster settings' schema (playbooks/vars/cluster_schema.yml) before a playbook
changes anything."""
from __future__ import annotations

import difflib
import glob
import os

import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.errors import ArgumentValueError
from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars

from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _capacity_sources as _capacity
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError

COLLECTION_ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCHEMA = os.path.join(COLLECTION_ROOT, 'playbooks', 'vars', 'cluster_schema.yml')
ROLE_SPECS = os.path.join(COLLECTION_ROOT, 'roles', '*', 'meta', 'argument_specs.yml')
# The modules' own option names, which belong in a task, not in the cluster settings.
MODULE_OPTIONS = {
    'config_file': 'oci_config_file',
    'config_profile': 'oci_config_profile',
    'auth_type': 'oci_auth_type',
    'region': 'oci_region',
    'service_endpoint': 'oci_service_endpoint',
    'wait_timeout': 'oci_wait_timeout',
}
# The schema keys that the validator understands; the rest (description) is documentation.
SPEC_KEYS = ('type', 'elements', 'choices', 'default')
OWN_VARS = 'ocigpu_own_vars'
# Ansible's own variables, and those AWX and Automation Controller add to every job's extra vars
# (awx_job_id, tower_user_name...).
PREFIXES = ('ansible_', 'awx_', 'tower_')


def load_yaml(path):
    with open(path, encoding='utf-8') as handle:
        return yaml.safe_load(handle) or {}


def load_schema(path=SCHEMA):
    """The schema's two parts: the cluster settings (options) and the collection's other variables."""
    schema = load_yaml(path)
    return schema.get('options') or {}, schema.get('collection_vars') or {}


def role_options(pattern=ROLE_SPECS):
    """Every option of every entry point of the collection's roles: users override role defaults with -e."""
    names = set()
    for path in glob.glob(pattern):
        for entry_point in (load_yaml(path).get('argument_specs') or {}).values():
            names.update((entry_point or {}).get('options') or {})
    return names


def is_template(value):
    """Whether a value is, or holds, a Jinja template or a vaulted string: checked where it is used, after templating."""
    if type(value).__name__ in ('EncryptedString', 'AnsibleVaultEncryptedUnicode'):
        return True
    if isinstance(value, str):
        return '{{' in value or '{%' in value
    if isinstance(value, dict):
        return any(is_template(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(is_template(v) for v in value)
    return False


def wanted(spec):
    """'int', 'list of str' ...: what a key takes, for messages."""
    kind = spec.get('type', 'str')
    return '%s of %s' % (kind, spec['elements']) if spec.get('elements') else kind


def shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'


def suggestion(name, known):
    """' did you mean X?' for the nearest known key, or ''."""
    if name in MODULE_OPTIONS:
        return '; did you mean %s? (%s is the modules\' option name)' % (MODULE_OPTIONS[name], name)
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return '; did you mean %s?' % near[0] if near else ''


def capacity_sources_problem(name, value):
    """The problem with gpu_capacity_sources beyond its type (a list of dicts), or None: each source is
    checked as the playbooks will read it (plugin_utils/_capacity_sources.normalize_sources), so that a misspelt key
    inside a source, a bad name or OCID is refused here too; the schema's argument-spec form has no
    place for a list's own keys."""
    try:
        _capacity.normalize_sources(value, None, option=name)
    except InputError as exc:
        text = str(exc)
        unknown = [k for item in value if isinstance(item, dict) for k in item if k not in _capacity.KEYS]
        near = difflib.get_close_matches(str(unknown[0]), _capacity.KEYS, n=1, cutoff=0.6) if len(unknown) == 1 else []
        return text + ('; did you mean %s?' % near[0] if near and 'unknown key' in text else '')
    return None


# Keys whose values take more than their type: the check of each, after the type's.
VALUE_CHECKS = {'gpu_capacity_sources': capacity_sources_problem}


def check_value(name, value, spec):
    """The problem with one key's value, or None."""
    if value is None or is_template(value):
        return None
    option = dict((k, v) for k, v in spec.items() if k in SPEC_KEYS and k != 'default')
    result = ArgumentSpecValidator({name: option}).validate({name: value})
    if not result.error_messages:
        return VALUE_CHECKS[name](name, value) if name in VALUE_CHECKS and isinstance(value, list) else None
    error = result.errors.errors[0]
    if isinstance(error, ArgumentValueError) and spec.get('choices'):
        return '%s: %s is not one of %s' % (name, shown(value), ', '.join(repr(c) for c in spec['choices']))
    return '%s: %s is not a %s' % (name, shown(value), wanted(spec))


def check(extra_vars, settings, collection_vars, roles):
    """The problems of the extra vars, one line each (an empty list when there is none)."""
    specs = dict(collection_vars, **settings)
    known = set(specs) | set(roles)
    own = extra_vars.get(OWN_VARS) or []
    problems = []
    if OWN_VARS in extra_vars:
        problem = check_value(OWN_VARS, own, specs[OWN_VARS])
        if problem:
            problems.append(problem)
            own = []
        elif isinstance(own, str) and not is_template(own):
            # A list given as text (-e ocigpu_own_vars=a,b), as Ansible reads it.
            own = [part.strip() for part in own.split(',')]
    for name in sorted(extra_vars, key=str):
        if not isinstance(name, str):
            problems.append('%s: a key must be a name' % shown(name))
        elif name in specs:
            if name != OWN_VARS:
                problem = check_value(name, extra_vars[name], specs[name])
                if problem:
                    problems.append(problem)
        elif name in roles or name.startswith(PREFIXES) or (not is_template(own) and name in own):
            continue
        else:
            problems.append('%s: unknown key%s' % (name, suggestion(name, known)))
    return problems


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset()

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        extra_vars = load_extra_vars(self._loader)
        settings, collection_vars = load_schema()
        problems = check(extra_vars, settings, collection_vars, role_options())
        given = sorted(name for name in extra_vars if name in settings)
        result.update(changed=False, problems=problems, settings=given)
        if problems:
            result.update(failed=True, msg='cluster settings: %d problem%s in the extra vars (-e), found before anything ran '
                          '(the keys: docs/quickstart.md; the roles\' options: their pages): %s' % (
                              len(problems), '' if len(problems) == 1 else 's',
                              ' '.join('(%d) %s' % (n, text) for n, text in enumerate(problems, 1))))
        return result
