# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_oci.py without a server: retry policy, retry tokens, auth option errors."""
from __future__ import annotations

import pytest
from oci.exceptions import ServiceError

from ansible_collections.ocigpu.cluster.plugins.module_utils import _module, _oci


class FakeClock(object):
    def __init__(self):
        self.t = 0.0
        self.sleeps = []

    def sleep(self, s):
        self.sleeps.append(s)
        self.t += s

    def monotonic(self):
        return self.t


class Resp(object):
    def __init__(self, data, headers=None):
        self.data = data
        self.headers = headers or {}


def flaky(errors, result='ok'):
    calls = []

    def fn(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return Resp(result)
    fn.calls = calls
    return fn


def err(status, code='X'):
    return ServiceError(status, code, {'opc-request-id': 'req1'}, 'boom')


@pytest.mark.parametrize('status,code', [(429, 'TooManyRequests'), (500, 'InternalServerError'),
                                         (503, 'ServiceUnavailable'), (409, 'IncorrectState')])
def test_retryable_errors_are_retried_with_capped_jittered_backoff(status, code):
    clock = FakeClock()
    fn = flaky([err(status, code)] * 5)
    r = _oci.Retrier(attempts=8, clock=clock)
    assert r.call(fn).data == 'ok'
    assert len(fn.calls) == 6 and r.retries == 5
    assert all(1.0 <= s <= 30.0 for s in clock.sleeps)


@pytest.mark.parametrize('status,code', [(400, 'InvalidParameter'), (404, 'NotAuthorizedOrNotFound'),
                                         (501, 'NotImplemented'), (409, 'Conflict409Other'), (401, 'NotAuthenticated')])
def test_client_errors_are_not_retried(status, code):
    fn = flaky([err(status, code)])
    with pytest.raises(ServiceError):
        _oci.Retrier(clock=FakeClock()).call(fn)
    assert len(fn.calls) == 1


def test_gives_up_after_attempts_and_time_budget():
    clock = FakeClock()
    fn = flaky([err(429)] * 100)
    with pytest.raises(ServiceError):
        _oci.Retrier(attempts=4, clock=clock).call(fn)
    assert len(fn.calls) == 4
    clock = FakeClock()
    fn = flaky([err(429)] * 100)
    with pytest.raises(ServiceError):
        _oci.Retrier(attempts=100, max_seconds=60, clock=clock).call(fn)
    assert clock.t <= 60


def test_backoff_grows_to_the_cap_at_the_top_of_its_jitter(monkeypatch):
    # decorrelated jitter draws from [base, 3 * previous]; at the top of each draw the delay
    # triples until the cap, so a growing series and the cap are both checked without chance
    monkeypatch.setattr(_oci.random, 'uniform', lambda low, high: high)
    clock = FakeClock()
    _oci.Retrier(attempts=30, max_seconds=10000, clock=clock).call(flaky([err(429)] * 6))
    assert clock.sleeps == [3.0, 9.0, 27.0, 30.0, 30.0, 30.0]


def test_backoff_draws_stay_between_base_and_three_times_the_last(monkeypatch):
    draws = []

    def uniform(low, high):
        draws.append((low, high))
        return (low + high) / 2

    monkeypatch.setattr(_oci.random, 'uniform', uniform)
    clock = FakeClock()
    _oci.Retrier(attempts=30, max_seconds=10000, clock=clock).call(flaky([err(429)] * 25))
    assert len(clock.sleeps) == 25 and max(clock.sleeps) == 30.0 and min(clock.sleeps) >= 1.0
    previous = 1.0
    for (low, high), slept in zip(draws, clock.sleeps):
        assert low == 1.0 and high == previous * 3
        previous = slept


def test_create_sends_one_retry_token_on_every_attempt(monkeypatch):
    monkeypatch.setattr(_oci, 'CLOCK', FakeClock())
    session = _oci.OCISession({'api_retries': 5})
    fn = flaky([err(500), err(503)])
    session.create(fn, 'details')
    tokens = {c['opc_retry_token'] for c in fn.calls}
    assert len(fn.calls) == 3 and len(tokens) == 1 and len(tokens.pop()) == 30


def test_list_all_follows_pages_and_retries_each_page(monkeypatch):
    monkeypatch.setattr(_oci, 'CLOCK', FakeClock())
    pages = {None: (['a', 'b'], 'p2'), 'p2': (['c'], 'p3'), 'p3': (['d'], None)}
    seen = []

    def fn(compartment_id, page=None):
        seen.append(page)
        if page == 'p2' and seen.count('p2') == 1:
            raise err(429)
        items, nxt = pages[page]
        return Resp(items, {'opc-next-page': nxt} if nxt else {})
    assert _oci.OCISession({}).list_all(fn, 'c1') == ['a', 'b', 'c', 'd']
    assert seen == [None, 'p2', 'p2', 'p3']


def test_missing_config_file_names_the_option(tmp_path):
    with pytest.raises(_oci.OCIConfigError, match='^config_file: .*not found'):
        _oci.build_config({'config_file': str(tmp_path / 'nope')})


def test_missing_profile_names_the_option(tmp_path):
    cfg = tmp_path / 'config'
    cfg.write_text('[DEFAULT]\nuser=ocid1.user.oc1..a\n')
    with pytest.raises(_oci.OCIConfigError, match='^config_profile: profile OTHER not found'):
        _oci.build_config({'config_file': str(cfg), 'config_profile': 'OTHER'})


def test_env_fallbacks(monkeypatch):
    spec = _module.auth_argument_spec()
    assert spec['service_endpoint']['fallback'][1] == ['OCIGPU_SERVICE_ENDPOINT']
    assert spec['config_file']['fallback'][1] == ['OCI_CONFIG_FILE']
    assert spec['config_profile']['fallback'][1] == ['OCI_CONFIG_PROFILE']


def test_clients_have_no_sdk_retry_and_no_circuit_breaker(tmp_path):
    from tests.unit.plugins.module_utils._keys import write_config
    cfg = write_config(tmp_path)
    import oci
    c = _oci.create_client(oci.core.ComputeClient, {'config_file': cfg, 'service_endpoint': 'http://127.0.0.1:9'})
    assert c.base_client.endpoint == 'http://127.0.0.1:9/20160918'
    assert isinstance(c.retry_strategy, oci.retry.NoneRetryStrategy)
    assert isinstance(c.base_client.circuit_breaker_strategy, oci.circuit_breaker.NoCircuitBreakerStrategy)


def test_security_token_auth_builds_a_token_signer(tmp_path):
    import oci
    from tests.unit.plugins.module_utils._keys import write_config
    cfg = write_config(tmp_path)
    token = tmp_path / 'token'
    token.write_text('header.payload.signature\n')
    with open(cfg, 'a') as f:
        f.write('security_token_file=%s\n' % token)
    config, signer = _oci.build_config({'config_file': cfg, 'auth_type': 'security_token', 'region': 'us-ashburn-1'})
    assert isinstance(signer, oci.auth.signers.SecurityTokenSigner) and config['region'] == 'us-ashburn-1'


def test_security_token_auth_without_token_file_names_the_option(tmp_path):
    from tests.unit.plugins.module_utils._keys import write_config
    with pytest.raises(_oci.OCIConfigError, match='^auth_type=security_token: .*no security_token_file'):
        _oci.build_config({'config_file': write_config(tmp_path), 'auth_type': 'security_token'})


def test_out_of_capacity_is_not_retried():
    fn = flaky([ServiceError(500, 'InternalError', {}, 'Out of host capacity.')])
    with pytest.raises(ServiceError):
        _oci.Retrier(clock=FakeClock()).call(fn)
    assert len(fn.calls) == 1


def test_an_api_key_is_loaded_once_for_all_sessions_and_again_when_it_changes(tmp_path, monkeypatch):
    import oci
    from tests.unit.plugins.module_utils._keys import write_config
    cfg = write_config(tmp_path)
    loads = []
    real = oci.signer.load_private_key_from_file
    monkeypatch.setattr(oci.signer, 'load_private_key_from_file', lambda *a, **kw: loads.append(a) or real(*a, **kw))
    params = {'config_file': cfg, 'service_endpoint': 'http://127.0.0.1:9'}
    first = _oci.OCISession(params)
    clients = [first.compute, first.compute_management, first.network, _oci.OCISession(params).identity]
    assert len(loads) == 1
    assert len(set(id(c.base_client.signer) for c in clients)) == 1
    # A new key in the same file (key rotation) is read again.
    write_config(tmp_path)
    _oci.OCISession(params).compute  # pylint: disable=expression-not-assigned
    assert len(loads) == 2


def test_an_api_key_that_cannot_be_read_names_the_file(tmp_path):
    from tests.unit.plugins.module_utils._keys import write_config
    cfg = write_config(tmp_path)
    (tmp_path / 'key.pem').unlink()
    with pytest.raises(_oci.OCIConfigError, match=r"^config_file: .* profile DEFAULT is invalid: .*key_file's value .*key\.pem"):
        _oci.OCISession({'config_file': cfg}).compute  # pylint: disable=expression-not-assigned
    (tmp_path / 'key.pem').write_text('not a key\n')
    with pytest.raises(_oci.OCIConfigError, match=r'^config_file: the API key .*key\.pem cannot be used'):
        _oci.OCISession({'config_file': cfg}).compute  # pylint: disable=expression-not-assigned
