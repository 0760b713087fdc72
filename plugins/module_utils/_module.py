# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The Ansible side of the OCI modules: the one file of module_utils that imports Ansible.

Everything else in module_utils (the OCI core: _oci, _resource, _waiters, _launch, ...) imports nothing from
Ansible, so the controller's package runs it without ansible-core. A module imports from here:

- auth_argument_spec() / wait_argument_spec() / tag_argument_spec(): the shared options (documented in
  the ocigpu.cluster.oci doc fragment); the auth options fall back to OCI's environment variables.
- OCIModule: AnsibleModule with those options, `missing_required_lib` when the SDK is absent, a lazily
  built OCISession, one waiter, and error translation: an input error, an OCI ServiceError, a failed or
  timed-out wait each end in one fail_json with details.
- ResourceModule adds the state machine: find (compartment + display name + freeform tag
  `ocigpu-cluster`), then create / update / delete / nothing. A subclass declares what is special
  about its resource:

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

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    InputError, attr, check_cluster_name, cluster_tags, compare)
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitError, Waiter


def auth_argument_spec():
    return dict(
        config_file=dict(type='path', fallback=(env_fallback, ['OCI_CONFIG_FILE'])),
        config_profile=dict(type='str', fallback=(env_fallback, ['OCI_CONFIG_PROFILE'])),
        auth_type=dict(type='str', choices=list(_oci.AUTH_TYPES), default='api_key',
                       fallback=(env_fallback, ['OCI_ANSIBLE_AUTH_TYPE'])),
        region=dict(type='str', fallback=(env_fallback, ['OCI_REGION'])),
        service_endpoint=dict(type='str', fallback=(env_fallback, ['OCIGPU_SERVICE_ENDPOINT'])),
        api_retries=dict(type='int', default=8),
        api_retry_max_seconds=dict(type='int', default=600),
    )


def wait_argument_spec(timeout=1200):
    return dict(
        wait=dict(type='bool', default=True),
        wait_timeout=dict(type='int', default=timeout),
    )


def tag_argument_spec():
    return dict(
        cluster_name=dict(type='str', required=True),
        compartment_id=dict(type='str', required=True),
        freeform_tags=dict(type='dict', default={}),
        defined_tags=dict(type='dict', default={}),
    )


class OCIModule(object):
    """AnsibleModule with the collection's auth options, session, waiter and error handling."""

    WAIT_TIMEOUT = 1200

    def __init__(self, argument_spec, wait=True, tags=True, **kwargs):
        self.tagged = bool(tags)
        spec = auth_argument_spec()
        if wait:
            spec.update(wait_argument_spec(self.WAIT_TIMEOUT))
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
