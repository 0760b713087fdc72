# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's lock file of downloaded artifacts (plugins/plugin_utils/_artifacts.py)."""

from __future__ import annotations

import hashlib
import http.server
import threading

import pytest

from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _artifacts as art

A = 'a' * 64
B = 'b' * 64
C = 'c' * 64


def item(name='x/1.0/x.tgz', url='https://example.invalid/x.tgz', **kw):
    return art.normalize([dict(name=name, url=url, **kw)])


def no_net(*_):
    raise AssertionError('no network call expected')


def test_order_setting_table_checksum_file_first_download():
    items = art.normalize([
        dict(name='s', url='u/s', sha256=A, known=B, sums_url='u/SUMS'),
        dict(name='t', url='u/t', known=B, sums_url='u/SUMS'),
        dict(name='f', url='u/f', sums_url='u/SUMS'),
        dict(name='d', url='u/d'),
    ])
    sums, sources, new, warnings = art.resolve(items, {}, fetch=lambda url, f: C, download=lambda url: A)
    assert sums == {'s': A, 't': B, 'f': C, 'd': A}
    assert sources == {'s': 'setting', 't': 'table', 'f': 'checksum file', 'd': 'first download'}
    assert set(new) == {'s', 't', 'f', 'd'} and new['f']['source'] == 'u/SUMS'
    assert len(warnings) == 1 and 'publishes no checksum file' in warnings[0]


def test_the_lock_wins_and_makes_no_call():
    lock = {'x/1.0/x.tgz': {'sha256': A, 'source': 'checksum file', 'locked': '2026-01-01T00:00:00Z'}}
    sums, sources, new, _warnings = art.resolve(item(sums_url='u/SUMS'), lock, fetch=no_net, download=no_net)
    assert sums == {'x/1.0/x.tgz': A} and sources == {'x/1.0/x.tgz': 'lock'} and not new


@pytest.mark.parametrize('kw, what', [({'sha256': B, 'setting': 'enroot_package_sha256'}, 'enroot_package_sha256'),
                                      ({'known': B}, "role's table")])
def test_a_sum_that_disagrees_with_the_lock_stops(kw, what):
    lock = {'x/1.0/x.tgz': {'sha256': A, 'source': 'setting'}}
    with pytest.raises(art.ArtifactError) as err:
        art.resolve(item(**kw), lock, fetch=no_net, download=no_net)
    assert what in str(err.value) and A in str(err.value) and B in str(err.value)
    assert 'Remove the entry' in str(err.value)


def test_a_setting_over_the_table_is_no_conflict_on_a_re_run():
    lock = {'x/1.0/x.tgz': {'sha256': A, 'source': 'setting'}}
    sums, sources, _new, _warnings = art.resolve(item(sha256=A, known=B), lock, fetch=no_net, download=no_net)
    assert sums == {'x/1.0/x.tgz': A} and sources == {'x/1.0/x.tgz': 'lock'}


def test_strict_refuses_checksum_files_and_first_downloads_but_not_pins_or_locks():
    with pytest.raises(art.ArtifactError, match='strict mode'):
        art.resolve(item(sums_url='u/SUMS'), {}, strict=True, fetch=no_net, download=no_net)
    with pytest.raises(art.ArtifactError, match='strict mode'):
        art.resolve(item(), {}, strict=True, fetch=no_net, download=no_net)
    assert art.resolve(item(known=B), {}, strict=True, fetch=no_net, download=no_net)[0] == {'x/1.0/x.tgz': B}
    lock = {'x/1.0/x.tgz': {'sha256': A}}
    assert art.resolve(item(), lock, strict=True, fetch=no_net, download=no_net)[0] == {'x/1.0/x.tgz': A}


@pytest.mark.parametrize('text, filename, expected', [
    ('%s  containerd-2.2.0-linux-amd64.tar.gz\n' % A, 'containerd-2.2.0-linux-amd64.tar.gz', A),  # <file>.sha256sum
    ('%s  runc.arm64\n%s  runc.amd64\n' % (B, A), 'runc.amd64', A),                               # runc.sha256sum
    ('%s *./dist/x.tgz\n%s  other\n' % (A, B), 'x.tgz', A),                                       # binary mode, a path
    ('%s\n' % A, 'x.tgz', A),                                                                     # a bare sum
    ('%s  other.tgz\n' % A, 'x.tgz', None),
    ('not a sum  x.tgz\n', 'x.tgz', None),
])
def test_parse_sums(text, filename, expected):
    assert art.parse_sums(text, filename) == expected


@pytest.mark.parametrize('bad, match', [
    ([{'name': 'x'}], 'needs a name and a url'),
    ([{'name': 'x', 'url': 'u', 'sha256': 'abc'}], 'is not a sha256'),
    ([{'name': 'x', 'url': 'u', 'colour': 1}], 'unknown keys colour'),
    ([{'name': 'x', 'url': 'u'}, {'name': 'x', 'url': 'v'}], 'listed twice'),
    ('x', 'must be a list'),
])
def test_bad_input(bad, match):
    with pytest.raises(art.ArtifactError, match=match):
        art.normalize(bad)


def test_lock_file_round_trip_and_a_later_node_uses_it(tmp_path):
    path = str(tmp_path / 'demo.lock.yml')
    calls = []
    sums, sources, added, _warnings = art.lock_artifacts(
        path, item(sums_url='u/SUMS'), fetch=lambda url, f: calls.append(url) or A)
    assert added == ['x/1.0/x.tgz'] and calls == ['u/SUMS'] and sources['x/1.0/x.tgz'] == 'checksum file'
    text = open(path).read()
    assert text.startswith('# ocigpu.cluster lock file') and A in text
    # A later run (another node, a pulled one) gets the locked sum with no call, even if upstream changed.
    sums2, sources2, added2, _warnings = art.lock_artifacts(path, item(sums_url='u/SUMS'), fetch=no_net, download=no_net)
    assert sums2 == sums and sources2 == {'x/1.0/x.tgz': 'lock'} and added2 == []
    # Check mode decides but writes nothing.
    art.lock_artifacts(path, item(name='y/1/y.tgz', known=B), write=False)
    assert 'y/1/y.tgz' not in art.read_lock(path)


def test_a_broken_lock_file_is_refused(tmp_path):
    path = tmp_path / 'bad.lock.yml'
    path.write_text('artifacts:\n  x: {sha256: nope}\n')
    with pytest.raises(art.ArtifactError, match='no valid sha256'):
        art.read_lock(str(path))


def test_fetch_and_download_over_http(tmp_path):
    payload = b'release bytes\n'
    (tmp_path / 'x.tgz').write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    (tmp_path / 'SHA256SUMS').write_text('%s  x.tgz\n%s  y.tgz\n' % (digest, B))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(tmp_path), **kw)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = 'http://127.0.0.1:%d' % server.server_address[1]
        assert art.fetch_sum(base + '/SHA256SUMS', 'x.tgz') == digest
        assert art.download_sum(base + '/x.tgz') == digest
        with pytest.raises(art.ArtifactError, match='lists no sha256 for z.tgz'):
            art.fetch_sum(base + '/SHA256SUMS', 'z.tgz')
        with pytest.raises(art.ArtifactError, match='cannot fetch'):
            art.fetch_sum(base + '/missing', 'x.tgz')
    finally:
        server.shutdown()
