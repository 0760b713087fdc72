# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Clients, authentication and retries for every OCI call this collection makes.

One place owns the plumbing, so modules, the inventory plugin and the autoscaler stay small. It imports
nothing from Ansible (the controller's package runs it without ansible-core); the options that feed it,
auth_argument_spec() and wait_argument_spec(), are in _module.py.

- build_config(params) -> (config, signer) and create_client(client_cls, params): API key from
  the OCI config file (its signer made once per process and key), instance principal or security token.
- OCISession(params, retrier=None): cached clients plus call() / list_all() / create(), which retry
  every call (lists included, page by page) with capped, decorrelated-jitter backoff (Retrier). The SDK's own
  retries and its process-wide circuit breaker are switched off on our clients: the breaker
  opens after 10 throttled calls and then fails every call instantly for 30 s, which turns a
  429 storm that this loop would ride out into a hard failure.
- ThrottledRetrier(retrier): a 429 uses up no attempt; it pauses every call of its operation (OCI
  throttles per operation) with one jittered pause shared by the threads, until api_retry_max_seconds.
  Every session has one; the threads that share a session share its pauses.
- create() sends one opc-retry-token on every attempt of a create, so a create whose response
  was lost (a 500 or a dropped connection after the server acted) is answered with the same
  resource, never a second one.
- service_error_message(exc): OCI's words for an error that ends a module; for a call refused for want
  of a policy (403, 404 NotAuthorizedOrNotFound) also the statement most likely missing, by the
  operation's resource family (docs/iam.md), and for a 401 what to check in the authentication.
- CLOCK: sleep and monotonic time, replaced by tests with the simulator's clock.
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
import uuid

try:
    import oci
    from oci.circuit_breaker import NoCircuitBreakerStrategy
    from oci.exceptions import ServiceError
    from oci.retry import NoneRetryStrategy
    HAS_OCI = True
    OCI_IMPORT_ERROR = None
except ImportError:
    HAS_OCI = False
    OCI_IMPORT_ERROR = traceback.format_exc()

    class ServiceError(Exception):  # pylint: disable=function-redefined
        """Stand-in so `except ServiceError` works when oci is missing (we fail earlier)."""

try:
    import requests.exceptions as _requests_exc
    _TRANSPORT_ERRORS = (_requests_exc.ConnectionError, _requests_exc.Timeout)
except ImportError:
    _TRANSPORT_ERRORS = ()

AUTH_TYPES = ('api_key', 'instance_principal', 'security_token')

# Retried: throttling, server errors (not 501), and the 409s OCI uses for "busy, try again".
_RETRY_409_CODES = ('IncorrectState', 'Conflict', 'LockConflict')


class Clock(object):
    """Time source for retries and waiters; tests put the simulator clock here."""

    def __init__(self):
        self.sleep = time.sleep
        self.monotonic = time.monotonic


CLOCK = Clock()


class OCIConfigError(Exception):
    """Authentication or configuration that cannot work; the message names the option."""


def build_config(params):
    """Return (config dict, signer or None) for the auth options in params."""
    if not HAS_OCI:
        raise OCIConfigError('the oci Python SDK is required')
    auth_type = params.get('auth_type') or 'api_key'
    region = params.get('region')
    if auth_type == 'instance_principal':
        try:
            signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
        except Exception as exc:  # metadata service unreachable, no dynamic group, ...
            raise OCIConfigError('auth_type=instance_principal: cannot get a token from the '
                                 'instance metadata service: %s' % exc)
        return {'region': region or signer.region}, signer

    config_file = params.get('config_file') or oci.config.DEFAULT_LOCATION
    profile = params.get('config_profile') or oci.config.DEFAULT_PROFILE
    try:
        config = oci.config.from_file(file_location=config_file, profile_name=profile)
    except oci.exceptions.ConfigFileNotFound:
        raise OCIConfigError('config_file: OCI config file %s not found' % config_file)
    except oci.exceptions.ProfileNotFound:
        raise OCIConfigError('config_profile: profile %s not found in %s' % (profile, config_file))
    except (oci.exceptions.InvalidConfig, oci.exceptions.InvalidKeyFilePath) as exc:  # the latter: no key_file
        raise OCIConfigError('config_file: %s profile %s is invalid: %s' % (config_file, profile, exc))
    if region:
        config['region'] = region
    signer = None
    if auth_type == 'security_token':
        token_file = config.get('security_token_file')
        if not token_file:
            raise OCIConfigError('auth_type=security_token: profile %s of %s has no security_token_file'
                                 % (profile, config_file))
        try:
            with open(os.path.expanduser(token_file)) as f:
                token = f.read().strip()
            key = oci.signer.load_private_key_from_file(config['key_file'], config.get('pass_phrase'))
        except (IOError, OSError, KeyError) as exc:
            raise OCIConfigError('auth_type=security_token: %s' % exc)
        signer = oci.auth.signers.SecurityTokenSigner(token, key)
    else:
        try:
            oci.config.validate_config(config)
        except oci.exceptions.InvalidConfig as exc:
            raise OCIConfigError('config_file: %s profile %s is invalid: %s' % (config_file, profile, exc))
        signer = api_key_signer(config)
    if not config.get('region'):
        raise OCIConfigError('region: not set and not in profile %s of %s' % (profile, config_file))
    return config, signer


_SIGNERS, _SIGNERS_LOCK = {}, threading.Lock()


def api_key_signer(config):
    """An API key profile's signer, one per process and key (a client made from the config loads and checks
    the RSA key again, about 0.1 s of CPU each); a changed key file (inode, size, time) is read again."""
    try:
        st = None if config.get('key_content') else os.stat(os.path.expanduser(config.get('key_file') or ''))
        ident = tuple(config.get(k) for k in ('tenancy', 'user', 'fingerprint', 'key_file', 'pass_phrase', 'key_content')) \
            + (st and (st.st_ino, st.st_size, st.st_mtime_ns),)
        with _SIGNERS_LOCK:
            if ident not in _SIGNERS:
                _SIGNERS[ident] = oci.signer.Signer.from_config(config)
            return _SIGNERS[ident]
    except (IOError, OSError, ValueError, oci.exceptions.ClientError) as exc:
        raise OCIConfigError('config_file: the API key %s cannot be used: %s' % (config.get('key_file'), exc))


def client_kwargs(params, signer=None):
    kwargs = dict(retry_strategy=NoneRetryStrategy(),
                  circuit_breaker_strategy=NoCircuitBreakerStrategy(),
                  timeout=(10, 120))
    if signer is not None:
        kwargs['signer'] = signer
    if params.get('service_endpoint'):
        kwargs['service_endpoint'] = params['service_endpoint']
    return kwargs


def create_client(client_cls, params, config_and_signer=None):
    config, signer = config_and_signer or build_config(params)
    return client_cls(config, **client_kwargs(params, signer))


def is_retryable(exc):
    if isinstance(exc, ServiceError):
        # A stock-out (out of host capacity, a full capacity reservation) is an answer, not a transient fault:
        # retrying only delays the failure (and the move to another capacity source). Imported here: _capacity
        # imports _resource, which imports this module.
        from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import is_stock_out  # pylint: disable=import-outside-toplevel
        if is_stock_out(exc.message):
            return False
        if exc.status == 429 or (exc.status >= 500 and exc.status != 501):
            return True
        if exc.status == 409 and exc.code in _RETRY_409_CODES:
            return True
        return exc.status == -1  # the SDK's code for a request that never got an answer
    if HAS_OCI and isinstance(exc, (oci.exceptions.RequestException, oci.exceptions.ConnectTimeout)):
        return True
    return isinstance(exc, _TRANSPORT_ERRORS)


class Retrier(object):
    """Capped exponential backoff with decorrelated jitter (AWS architecture blog formula)."""

    def __init__(self, attempts=8, max_seconds=600, base=1.0, cap=30.0, clock=None):
        self.attempts = max(1, attempts)
        self.max_seconds = max_seconds
        self.base = base
        self.cap = cap
        self.clock = clock or CLOCK
        self.retries = 0  # total retries made, for results and tests

    def call(self, fn, *args, **kwargs):
        start = self.clock.monotonic()
        delay = self.base
        attempt = 1
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if not is_retryable(exc) or attempt >= self.attempts:
                    raise
                delay = min(self.cap, random.uniform(self.base, delay * 3))
                retry_after = retry_after_seconds(exc)
                if retry_after:
                    delay = max(delay, min(retry_after, self.cap))
                if self.clock.monotonic() - start + delay > self.max_seconds:
                    raise
                self.retries += 1
                attempt += 1
                self.clock.sleep(delay)


class _Throttled(Exception):
    """A 429 answer carried through the wrapped Retrier, which does not retry it."""

    def __init__(self, answer):
        super().__init__(str(answer))
        self.answer = answer


class _Pause(object):
    """The throttling pause of one operation: its length, when it ends, its round of throttled answers."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.resume_at = 0  # on the retrier's clock
        self.round = 0
        self.sleeping = threading.Lock()


class ThrottledRetrier(object):
    """``retrier`` (a Retrier) with 429s ridden out; safe to share among the threads of a process.

    A throttled answer pauses every call of its operation (the called function's ``__name__``: OCI throttles
    per operation, so a throttled list_instances does not stall get_work_request; with ``per_operation=False``
    one pause holds every call). The pause is shared, so a burst of threads does not come back all at once
    into the same limit: decorrelated jitter from ``retrier.base`` up to ``retrier.cap``, at least the
    answer's Retry-After, grown once per round of throttled answers and back to the base after an answer
    that is not throttled. It uses up none of the call's attempts: the call is tried again until
    ``retrier.max_seconds`` from its start have passed, then its last 429 is raised. Every other failure is
    retried by ``retrier`` as before. ``retries`` counts both kinds, ``throttled`` the 429s."""

    def __init__(self, retrier, per_operation=True):
        self.retrier = retrier
        self.clock = retrier.clock
        self.per_operation = per_operation
        self.throttled = 0  # 429 answers ridden out, for results and tests
        self._lock = threading.Lock()
        self._pauses = {}

    @property
    def retries(self):
        return self.retrier.retries + self.throttled

    def _wait(self, pause):
        """Until the pause is over. One thread sleeps it; the others queue behind that one (so a
        simulated clock advances once, not once per thread) and then find it over."""
        while pause.resume_at > self.clock.monotonic():
            with pause.sleeping:
                left = pause.resume_at - self.clock.monotonic()
                if left > 0:
                    self.clock.sleep(left)

    def _throttled_answer(self, pause, sent_in_round, answer):
        """Record a 429 of a request sent in round ``sent_in_round``; the pause grows once per round."""
        with self._lock:
            self.throttled += 1
            if sent_in_round == pause.round:
                pause.round += 1
                pause.seconds = min(self.retrier.cap, random.uniform(self.retrier.base, pause.seconds * 3))
                seconds = max(pause.seconds, min(retry_after_seconds(answer), self.retrier.cap))
                pause.resume_at = max(pause.resume_at, self.clock.monotonic() + seconds)
            return pause.resume_at

    def call(self, fn, *args, **kwargs):
        start = self.clock.monotonic()
        key = getattr(fn, '__name__', '') if self.per_operation else ''
        pause = self._pauses.get(key) or self._pauses.setdefault(key, _Pause(self.retrier.base))

        def once():
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if getattr(exc, 'status', None) == 429:
                    raise _Throttled(exc)
                raise

        while True:
            self._wait(pause)
            sent_in_round = pause.round
            try:
                result = self.retrier.call(once)
            except _Throttled as throttled:
                resume_at = self._throttled_answer(pause, sent_in_round, throttled.answer)
                if max(resume_at, self.clock.monotonic()) - start >= self.retrier.max_seconds:
                    raise throttled.answer
                continue
            pause.seconds = self.retrier.base
            return result


def throttled_retrier(params, per_operation=True):
    """A ThrottledRetrier with the attempts and time budget of the options api_retries, api_retry_max_seconds."""
    return ThrottledRetrier(Retrier(attempts=params.get('api_retries') or 8,
                                    max_seconds=params.get('api_retry_max_seconds') or 600), per_operation)


def retry_after_seconds(exc):
    """The Retry-After header of an OCI error, in seconds (0 without one)."""
    headers = getattr(exc, 'headers', None) or {}
    try:
        return float(headers.get('retry-after') or headers.get('Retry-After') or 0)
    except (TypeError, ValueError):
        return 0


def new_retry_token():
    return uuid.uuid4().hex[:30]


class OCISession(object):
    """Clients for one set of auth options, and retried calls through them: through ``retrier`` where given,
    else through a ThrottledRetrier of the session's own."""

    def __init__(self, params, retrier=None):
        self.params = params
        self._config = None
        self._clients = {}
        self.retrier = retrier or throttled_retrier(params)

    @property
    def config(self):
        if self._config is None:
            self._config = build_config(self.params)
        return self._config[0]

    def client(self, client_cls):
        if client_cls not in self._clients:
            self.config  # pylint: disable=pointless-statement
            self._clients[client_cls] = create_client(client_cls, self.params, self._config)
        return self._clients[client_cls]

    @property
    def compute(self):
        return self.client(oci.core.ComputeClient)

    @property
    def compute_management(self):
        return self.client(oci.core.ComputeManagementClient)

    @property
    def network(self):
        return self.client(oci.core.VirtualNetworkClient)

    @property
    def blockstorage(self):
        return self.client(oci.core.BlockstorageClient)

    @property
    def file_storage(self):
        return self.client(oci.file_storage.FileStorageClient)

    @property
    def identity(self):
        return self.client(oci.identity.IdentityClient)

    @property
    def work_requests(self):
        return self.client(oci.work_requests.WorkRequestClient)

    def call(self, fn, *args, **kwargs):
        """One API call, retried; returns response.data."""
        return self.retrier.call(fn, *args, **kwargs).data

    def call_response(self, fn, *args, **kwargs):
        return self.retrier.call(fn, *args, **kwargs)

    def create(self, fn, *args, **kwargs):
        """A create call: one opc-retry-token for all its attempts. Returns the response."""
        kwargs.setdefault('opc_retry_token', new_retry_token())
        return self.retrier.call(fn, *args, **kwargs)

    def get_or_none(self, fn, *args, **kwargs):
        """GET that maps 404 to None."""
        try:
            return self.call(fn, *args, **kwargs)
        except ServiceError as exc:
            if exc.status == 404:
                return None
            raise

    def list_all(self, fn, *args, **kwargs):
        """Every item of a paginated list; each page is retried on its own."""
        items = []
        page = None
        while True:
            if page:
                kwargs['page'] = page
            response = self.retrier.call(fn, *args, **kwargs)
            data = response.data
            items.extend(data.items if hasattr(data, 'items') and not isinstance(data, list) else data)
            page = response.headers.get('opc-next-page')
            if not page:
                return items


def to_dict(model):
    if model is None:
        return None
    return oci.util.to_dict(model)


# What a refused call most likely lacks: the operator's policy statement for the resource family that
# the call's operation names (docs/iam.md lists them per feature). First match wins, so the
# compute-management nouns come before the instance's. Operations not listed get a general hint.
_LAUNCH = ('manage instance-family', 'use virtual-network-family', 'use volume-family')
_POLICY_BY_NOUN = (
    (('cluster_network', 'instance_configuration', 'instance_pool'), ('manage compute-management-family',)),
    (('file_system', 'mount_target', 'export'), ('manage file-family',)),
    (('vcn', 'subnet', 'gateway', 'route_table', 'security_list', 'vnic', 'private_ip', 'service'),
     ('manage virtual-network-family',)),
    (('instance', 'image', 'shape'), ('manage instance-family',)),
)
_LAUNCHING = ('launch_instance', 'create_cluster_network', 'update_cluster_network')
IAM_DOC = 'docs/iam.md of the collection'


def _names(operation, noun):
    """Whether the operation name (create_vcn, list_file_systems) holds the noun (vcn, file_system)."""
    words, parts = operation.split('_'), noun.split('_')
    for i in range(len(words) - len(parts) + 1):
        window = words[i:i + len(parts)]
        if window[:-1] == parts[:-1] and window[-1] in (parts[-1], parts[-1] + 's'):
            return True
    return False


def missing_statements(operation):
    """The policy statements (verb and resource type) an operation most likely needs, or ()."""
    operation = operation or ''
    for nouns, statements in _POLICY_BY_NOUN:
        if any(_names(operation, noun) for noun in nouns):
            if operation in _LAUNCHING:  # the instances it launches need the launch rights too
                return tuple(dict.fromkeys(statements + _LAUNCH))
            return statements
    return ()


def authorization_hint(exc):
    """For a call OCI refused (401, 403, or 404 NotAuthorizedOrNotFound): what is likely missing, in a
    sentence; None for any other error."""
    status, code, operation = exc.status, exc.code, getattr(exc, 'operation_name', None) or ''
    if status == 401:
        return ('OCI did not authenticate the request: check the user, tenancy, fingerprint and key_file of the '
                'OCI config profile (or the instance principal), and this machine\'s clock')
    if not (status == 403 or (status == 404 and code == 'NotAuthorizedOrNotFound')):
        return None
    statements = missing_statements(operation)
    if statements:
        wanted = '; '.join('"Allow group <your group> to %s in compartment <the cluster\'s compartment>"' % s
                           for s in statements)
        missing = 'the statement%s most likely missing: %s' % ('' if len(statements) == 1 else 's', wanted)
    else:
        missing = 'a policy statement that allows %s (%s)' % (operation or 'this call', getattr(exc, 'target_service', None) or 'OCI')
    return ('%s refused: either what it names does not exist (check the OCIDs and the region), or your group '
            'lacks %s. %s lists every statement the collection needs' % (operation or 'the call', missing, IAM_DOC))


def service_error_message(exc):
    """One message for an OCI error that ends a module: OCI's own words, then what is likely missing."""
    message = 'OCI API error: %s' % (exc.message,)
    hint = authorization_hint(exc)
    return '%s (%s %s). %s.' % (message, exc.status, exc.code, hint) if hint else message


def service_error_details(exc):
    """Fields of a ServiceError worth returning to the user."""
    return dict(status=exc.status, code=exc.code,
                opc_request_id=(exc.headers or {}).get('opc-request-id'),
                operation=getattr(exc, 'operation_name', None))
