# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The module base and the present/absent state machine every resource module runs on.

OCIModule: the shared argument spec (auth, wait, cluster tag), `missing_required_lib` when the
SDK is absent, a lazily built OCISession, one waiter, and error translation: an input error,
an OCI ServiceError, a failed or timed-out wait each end in one fail_json with details.

ResourceModule adds the state machine: find (compartment + display name + freeform tag
`ocigpu-cluster`), then create / update / delete / nothing. A subclass declares what is
special about its resource:

    RESOURCE       result key and name in messages ('vcn', 'instance', ...)
    UPDATABLE      attributes that an update call can change; any other difference fails
    validate()     input checks, run before any API call that changes something
    find()         the live resource (SDK model or dict) or None
    desired()      the comparable attributes wanted
    current(res)   the same attributes read from the live resource
    create() / update(res, changes) / delete(res)
    describe(res)  the dict returned to the user

Check mode runs find() and the comparison, predicts the result, and calls nothing that
mutates. With --diff the result carries before/after of the compared attributes.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import (
    DEAD_STATES, WaitError, Waiter)

CLUSTER_TAG = 'ocigpu-cluster'
# OCI's own limits on names and tags (the API refuses longer ones with 400 InvalidParameter).
MAX_DISPLAY_NAME = 255
MAX_TAG_VALUE = 256


class InputError(Exception):
    """Invalid user input. The message starts with the option's name."""


def _shown(text, width=40):
    return repr(text if len(text) <= width else text[:width] + '...')


def cluster_name_problem(name):
    """Why OCI (or the collection's tag lookup) cannot take this cluster name, or None.

    Every resource is found again by the freeform tag ocigpu-cluster=<cluster_name>: an empty name
    would tag, and find, everything that is tagged with an empty value.
    """
    if not (name or '').strip():
        return 'empty; name the cluster (it names and tags every resource, e.g. gpu1)'
    if len(name) > MAX_TAG_VALUE:
        return '%d characters; it is the value of the freeform tag %s, and OCI takes at most %d' % (
            len(name), CLUSTER_TAG, MAX_TAG_VALUE)
    return None


def check_cluster_name(name, option='cluster_name'):
    problem = cluster_name_problem(name)
    if problem:
        raise InputError('%s: %s' % (option, problem))


def check_display_names(option, names):
    """Every display name a module would send is 1 to 255 characters, as OCI requires.

    option is the module option the names come from (display_name, or cluster_name for names made of it).
    """
    for name in names:
        if not name:
            raise InputError('%s: empty; OCI display names are 1 to %d characters' % (option, MAX_DISPLAY_NAME))
        if len(name) > MAX_DISPLAY_NAME:
            raise InputError('%s: makes the display name %s, %d characters long; OCI takes at most %d' % (
                option, _shown(name), len(name), MAX_DISPLAY_NAME))


def tag_argument_spec():
    return dict(
        cluster_name=dict(type='str', required=True),
        compartment_id=dict(type='str', required=True),
        freeform_tags=dict(type='dict', default={}),
        defined_tags=dict(type='dict', default={}),
    )


def cluster_tags(cluster_name, extra=None):
    tags = dict(extra or {})
    tags[CLUSTER_TAG] = cluster_name
    return tags


def attr(res, name, default=None):
    """Read an attribute from an SDK model or a dict."""
    if res is None:
        return default
    if isinstance(res, dict):
        return res.get(name, default)
    return getattr(res, name, default)


def is_live(res):
    return attr(res, 'lifecycle_state') not in DEAD_STATES


def pick_tagged(items, display_name, cluster_name, what):
    """The one live item with this display name and cluster tag, or None.

    More than one is an error: the collection never makes two, so a second one was made by hand
    and the module must not guess which to manage.
    """
    found = [i for i in items
             if is_live(i) and attr(i, 'display_name') == display_name
             and (attr(i, 'freeform_tags') or {}).get(CLUSTER_TAG) == cluster_name]
    if len(found) > 1:
        raise InputError('%s: %d live resources named %s carry the tag %s=%s (%s); remove the extra ones' % (
            what, len(found), display_name, CLUSTER_TAG, cluster_name, ', '.join(attr(i, 'id') for i in found)))
    return found[0] if found else None


def current_with_tags(res, desired):
    """The desired keys read from res; tags only as far as the desired tags go.

    OCI and tag defaults add tags of their own (Oracle-Tags.CreatedBy, ...), which are not a
    difference worth an update.
    """
    current = {}
    for key, want in desired.items():
        have = attr(res, key)
        if key == 'freeform_tags' and isinstance(want, dict):
            have = dict((k, (have or {}).get(k)) for k in want)
        elif key == 'defined_tags' and isinstance(want, dict):
            have = dict((ns, dict((k, ((have or {}).get(ns) or {}).get(k)) for k in keys))
                        for ns, keys in want.items())
        current[key] = have
    return current


def compare(desired, current, updatable):
    """Return (changes, blocked): attributes to update, and changed attributes that cannot be."""
    changes = {}
    blocked = []
    for key, want in desired.items():
        if want is None:
            continue
        have = current.get(key)
        if _normalise(want) != _normalise(have):
            if key in updatable:
                changes[key] = want
            else:
                blocked.append(key)
    return changes, sorted(blocked)


def _normalise(value):
    if isinstance(value, dict):
        return dict((k, _normalise(v)) for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


class OCIModule(object):
    """AnsibleModule with the collection's auth options, session, waiter and error handling."""

    WAIT_TIMEOUT = 1200

    def __init__(self, argument_spec, wait=True, tags=True, **kwargs):
        self.tagged = bool(tags)
        spec = _oci.auth_argument_spec()
        if wait:
            spec.update(_oci.wait_argument_spec(self.WAIT_TIMEOUT))
            if wait == 'timeout_only':  # the module always waits; only the time limit is an option
                del spec['wait']
        if tags:
            spec.update(tag_argument_spec())
        spec.update(argument_spec)
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **kwargs)
        if not _oci.HAS_OCI:
            self.module.fail_json(msg=missing_required_lib('oci'), exception=_oci.OCI_IMPORT_ERROR)
        self.params = self.module.params
        self.check_mode = self.module.check_mode
        self.changed = False
        self.diff = {'before': {}, 'after': {}}
        self._session = None
        self._waiter = None

    @property
    def session(self):
        if self._session is None:
            self._session = _oci.OCISession(self.params)
            self._session.config  # pylint: disable=pointless-statement
        return self._session

    @property
    def waiter(self):
        if self._waiter is None:
            self._waiter = Waiter(self.session, timeout=self.params.get('wait_timeout') or self.WAIT_TIMEOUT)
        return self._waiter

    @property
    def cluster_name(self):
        return self.params.get('cluster_name')

    def tags(self):
        return cluster_tags(self.params.get('cluster_name'), self.params.get('freeform_tags'))

    def fail(self, msg, **details):
        self.module.fail_json(msg=msg, changed=self.changed, **details)

    # The options that _launch.check_early checks before validate() and before any call: None is every one
    # it knows (the OCID options of _launch.OCID_OPTIONS, availability_domain), a tuple only those.
    EARLY_CHECKS = None

    def check_early(self):
        # _launch imports this file, so it is imported here.
        from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch  # pylint: disable=import-outside-toplevel
        _launch.check_early(self.params, lambda: self.params.get('region') or self.session.config.get('region'),
                            self.EARLY_CHECKS)

    def validate(self):
        """Input checks; raise InputError. Runs before any API call that changes something."""

    def execute(self):
        raise NotImplementedError

    def run(self):
        try:
            if self.tagged:
                check_cluster_name(self.params['cluster_name'])
            self.check_early()
            self.validate()
            result = self.execute() or {}
        except InputError as exc:
            self.fail(str(exc))
        except _oci.OCIConfigError as exc:
            self.fail(str(exc))
        except WaitError as exc:
            self.fail(exc.message, **exc.details)
        except _oci.ServiceError as exc:
            self.fail(_oci.service_error_message(exc), **_oci.service_error_details(exc))
        if self._waiter is not None and self._waiter.last:
            result['last_wait'] = self._waiter.last
        if self.module._diff:
            result['diff'] = self.diff
        self.module.exit_json(changed=self.changed, **result)


class ResourceModule(OCIModule):
    RESOURCE = 'resource'
    UPDATABLE = ()

    def __init__(self, argument_spec, **kwargs):
        argument_spec = dict(argument_spec)
        argument_spec.setdefault('state', dict(type='str', choices=['present', 'absent'], default='present'))
        super(ResourceModule, self).__init__(argument_spec, **kwargs)

    # Hooks -------------------------------------------------------------------------------
    def find(self):
        raise NotImplementedError

    def desired(self):
        return {}

    def current(self, res):
        return dict((k, attr(res, k)) for k in self.desired())

    def create(self):
        raise NotImplementedError

    def update(self, res, changes):
        raise NotImplementedError

    def delete(self, res):
        raise NotImplementedError

    def describe(self, res):
        return _oci.to_dict(res) if res is not None and not isinstance(res, dict) else res

    def predict(self):
        """What check mode returns for a resource that would be created."""
        return dict(self.desired(), id=None, lifecycle_state=None)

    def blocked_message(self, blocked):
        return ('%s: cannot change %s of an existing %s (%s); OCI cannot update %s in place. '
                'Delete it (state=absent) and run again, or keep the old value.' % (
                    ', '.join(blocked), 'it' if len(blocked) == 1 else 'them', self.RESOURCE,
                    attr(self.existing, 'id'), 'this attribute' if len(blocked) == 1 else 'these attributes'))

    # State machine -----------------------------------------------------------------------
    def execute(self):
        self.existing = self.find()
        if self.params['state'] == 'absent':
            return self.absent(self.existing)
        return self.present(self.existing)

    def present(self, res):
        want = self.desired()
        if res is None:
            self.diff['after'] = want
            self.changed = True
            if self.check_mode:
                return {self.RESOURCE: self.predict()}
            res = self.create()
            return {self.RESOURCE: self.describe(res)}
        have = self.current(res)
        self.diff['before'] = have
        changes, blocked = compare(want, have, self.UPDATABLE)
        if blocked:
            raise InputError(self.blocked_message(blocked))
        self.diff['after'] = dict(have, **changes)
        if not changes:
            return {self.RESOURCE: self.describe(res)}
        self.changed = True
        if self.check_mode:
            predicted = self.describe(res)
            predicted.update(changes)
            return {self.RESOURCE: predicted}
        res = self.update(res, changes)
        return {self.RESOURCE: self.describe(res)}

    def absent(self, res):
        if res is None:
            return {self.RESOURCE: None}
        described = self.describe(res)
        self.diff['before'] = described
        self.changed = True
        if not self.check_mode:
            self.delete(res)
        return {self.RESOURCE: described}
