# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pull path: the controller's join decision against the simulator, the pinned TLS channel,
and the node's whole pull with the configure run captured."""
from __future__ import annotations

import base64
import contextlib
import errno
import io
import json
import os
import socket
import ssl
import subprocess
import tarfile
import time
from types import SimpleNamespace

import pytest

import importlib.util
import pathlib

from ocigpu_control import scaler as _autoscale
from ocigpu_control import pull_server as _pull

# The simulator and autoscaler configuration fixtures of the autoscaler tests.
from .test_autoscale import config, sim  # noqa: F401 pylint: disable=unused-import

# The node's program: a standalone script (standard library only) that the user_data installs.
_PROGRAM = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'slurm_autoscaler' / 'files' / 'ocigpu_pull.py'
_spec = importlib.util.spec_from_file_location('ocigpu_pull', str(_PROGRAM))
ocigpu_pull = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ocigpu_pull)

MUNGE = os.urandom(1024)
# Stand-ins for the MPI key pairs, one per user (the mpi_ssh role's, kept by slurm_autoscaler for the pull server).
MPI_PRIVATE = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n'
MPI_PUBLIC = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMpi ocigpu.cluster mpi_ssh'
MPI_USER_PRIVATE = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAB\n-----END OPENSSH PRIVATE KEY-----\n'
MPI_USER_PUBLIC = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUsr ocigpu.cluster mpi_ssh'
MPI_KEYS = dict(root=dict(private=MPI_PRIVATE, public=MPI_PUBLIC), usera=dict(private=MPI_USER_PRIVATE, public=MPI_USER_PUBLIC))


@pytest.fixture(scope='module')
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp('tls')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                    '-subj', '/CN=ocigpu-test', '-days', '1', '-keyout', str(d / 'key.pem'), '-out', str(d / 'cert.pem')],
                   check=True, capture_output=True)
    der = subprocess.run(['openssl', 'x509', '-in', str(d / 'cert.pem'), '-outform', 'DER'],
                         check=True, capture_output=True).stdout
    return SimpleNamespace(cert=str(d / 'cert.pem'), key=str(d / 'key.pem'), sha256=ocigpu_pull.fingerprint(der))


def make_bundle(path, node_vars='slurm_cluster_name: as\n', **settings):
    with tarfile.open(path, 'w:gz') as tar:
        for name, text in (('pull.json', json.dumps(dict(dict(ansible_core='ansible-core==2.19.14', skip_tags=['nvme_scratch']),
                                                         **settings))),
                           ('node-vars.yml', node_vars),
                           ('collections/ansible_collections/ocigpu/cluster/MANIFEST.json', '{}')):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture
def pull_config(config, tls, tmp_path):  # noqa: F811
    (tmp_path / 'munge.key').write_bytes(MUNGE)
    (tmp_path / 'mpi_ed25519').mkdir()
    for user, pair in MPI_KEYS.items():
        (tmp_path / 'mpi_ed25519' / user).write_text(pair['private'])
        (tmp_path / 'mpi_ed25519' / (user + '.pub')).write_text(pair['public'] + '\n')
    cfg = dict(config)
    cfg['pull'] = dict(listen='127.0.0.1', port=0, cert=tls.cert, key=tls.key, bundle=make_bundle(tmp_path / 'b.tar.gz'),
                       munge_key=str(tmp_path / 'munge.key'), mpi_key=str(tmp_path / 'mpi_ed25519'), conf_server='10.0.0.2:6817',
                       server='10.0.0.2:8740', cert_sha256=tls.sha256)
    return cfg


def instance_ip(sim, instance_id):  # noqa: F811
    stored = sim.state.get(instance_id)
    return sim.state.vnics[sim.state.vnic_attachments[stored['_attachments'][0]]['vnicId']]['privateIp']


# The join decision --------------------------------------------------------------------------------

def test_resume_tags_each_node_with_the_pull_server_and_certificate(sim, pull_config, tls):  # noqa: F811
    mapping = _autoscale.Autoscaler(pull_config).resume('gpu-[1-2]')
    for m in mapping:
        tags = sim.state.get(m['id'])['freeformTags']
        assert tags['ocigpu-slurm-node'] == m['name']
        assert tags['ocigpu-pull-server'] == '10.0.0.2:8740' and tags['ocigpu-pull-cert'] == tls.sha256
    # what the node reads back: exactly the three tags the pull waits for
    found = ocigpu_pull.read_tags(dict(freeformTags=sim.state.get(mapping[0]['id'])['freeformTags']))
    assert found == ('gpu-1', '10.0.0.2:8740', tls.sha256)


def test_join_gives_the_munge_key_only_to_the_tagged_instance_at_its_own_address(sim, pull_config):  # noqa: F811
    mapping = _autoscale.Autoscaler(pull_config).resume('gpu-[1-2]')
    enroller = _pull.Enroller(pull_config)
    one, two = mapping
    singles = [sim.calls[r] for r in ('GET /instances/{instanceId}', 'GET /vnics/{vnicId}')]
    answer = enroller.join(one['id'], 'gpu-1', one['private_ip'])
    # Decided from listings of the compartment started after the request, not from reads of the one instance.
    assert [sim.calls[r] for r in ('GET /instances/{instanceId}', 'GET /vnics/{vnicId}')] == singles
    assert enroller.listings.made == {'instances': 1, 'vnic_attachments': 1, str(('private_ips', pull_config['subnet_id'])): 1}
    assert base64.b64decode(answer['munge_key_b64']) == MUNGE and answer['conf_server'] == '10.0.0.2:6817'
    # each user's MPI key pair comes with it (never in the bundle), no shared one; a controller that names none hands none
    assert answer['mpi_keys'] == MPI_KEYS and 'mpi_private_key' not in answer
    without = dict(pull_config, pull=dict(pull_config['pull'], mpi_key=''))
    assert 'mpi_keys' not in _pull.Enroller(without).join(one['id'], 'gpu-1', one['private_ip'])
    refusals = [
        ((one['id'], 'gpu-1', two['private_ip']), 'the request comes from %s' % two['private_ip']),
        ((one['id'], 'gpu-2', one['private_ip']), "carries Slurm name 'gpu-1', not 'gpu-2'"),
        ((one['id'], 'gpu-99', one['private_ip']), 'not among this cluster'),
        (('ocid1.instance.oc1..nosuch', 'gpu-1', one['private_ip']), 'does not exist'),
        (('not-an-ocid', 'gpu-1', one['private_ip']), 'is not an instance OCID'),
    ]
    for args, reason in refusals:
        with pytest.raises(_pull.JoinRefused) as err:
            enroller.join(*args)
        assert reason in err.value.reason, args
    # another cluster's instance with the same Slurm name is refused
    other = dict(pull_config, cluster_name='other')
    with pytest.raises(_pull.JoinRefused, match='is not tagged ocigpu-cluster=other'):
        _pull.Enroller(other).join(one['id'], 'gpu-1', one['private_ip'])
    # a terminated node no longer joins
    _autoscale.Autoscaler(pull_config).suspend('gpu-[1-2]')
    with pytest.raises(_pull.JoinRefused, match='not RUNNING|does not exist'):
        enroller.join(one['id'], 'gpu-1', one['private_ip'])


def test_a_policy_without_the_listing_of_private_ips_still_checks_the_address(sim, pull_config):  # noqa: F811
    one, two = _autoscale.Autoscaler(pull_config).resume('gpu-[1-2]')
    sim.faults.add('GET /privateIps', status=404, code='NotAuthorizedOrNotFound')
    enroller = _pull.Enroller(pull_config)
    vnics = sim.calls['GET /vnics/{vnicId}']
    assert enroller.join(one['id'], 'gpu-1', one['private_ip'])['name'] == 'gpu-1'
    assert sim.calls['GET /vnics/{vnicId}'] == vnics + 1  # read on its own
    with pytest.raises(_pull.JoinRefused, match='the request comes from %s' % two['private_ip']):
        enroller.join(one['id'], 'gpu-1', two['private_ip'])


# The channel -------------------------------------------------------------------------------------

class FakeEnroller(object):
    def __init__(self):
        self.calls = []

    def join(self, instance_id, name, client_ip):
        self.calls.append((instance_id, name, client_ip))
        if name != 'gpu-1':
            raise _pull.JoinRefused(403, 'name %r is not among this cluster\'s Slurm nodes' % name)
        return dict(name=name, conf_server='10.0.0.2:6817', munge_key_b64=base64.b64encode(MUNGE).decode(),
                    mpi_keys=MPI_KEYS)

    def failed(self, instance_id, name, client_ip, message):
        self.calls.append(('failed', instance_id, name, client_ip, message))
        return dict(name=name, request='r1', message=message)


@pytest.fixture
def server(pull_config):
    enroller = FakeEnroller()
    srv = _pull.make_server(pull_config, enroller=enroller)
    _pull.serve_in_thread(srv)
    yield SimpleNamespace(address='127.0.0.1:%d' % srv.server_address[1], enroller=enroller, bundle=pull_config['pull']['bundle'])
    srv.shutdown()
    srv.server_close()


def test_pinned_channel_serves_the_bundle_and_the_join(server, tls, tmp_path):
    ctl = ocigpu_pull.Controller(server.address, tls.sha256, timeout=10)
    out = ctl.request('GET', '/v1/bundle', out=str(tmp_path / 'got.tar.gz'))
    assert open(out, 'rb').read() == open(server.bundle, 'rb').read()
    answer = ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..x', name='gpu-1'), privileged=True)
    assert base64.b64decode(answer['munge_key_b64']) == MUNGE
    assert server.enroller.calls == [('ocid1.instance.oc1..x', 'gpu-1', '127.0.0.1')]
    with pytest.raises(ocigpu_pull.PullError, match="403 name 'gpu-7' is not among"):
        ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..x', name='gpu-7'), privileged=True)
    # any process on the node can reach the server; only root (a port below 1024) gets the key
    with pytest.raises(ocigpu_pull.PullError, match='403 a join must come from a privileged source port'):
        ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..x', name='gpu-1'))
    assert len(server.enroller.calls) == 2


def test_a_controller_with_another_certificate_is_refused_before_any_request(server, tls):
    wrong = 'ab' * 32
    with pytest.raises(ocigpu_pull.PullError, match='not the pinned %s: refusing' % wrong):
        ocigpu_pull.Controller(server.address, wrong, timeout=10).request('GET', '/v1/bundle', out=os.devnull)
    assert server.enroller.calls == []


# A client that holds its connection (sends nothing, or a byte at a time) --------------------------

def open_tls(address, privileged=False, handshake=True):
    """A raw connection to the server: TCP only (handshake=False), or TLS without the pin."""
    host, port = address.rsplit(':', 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    for source in (range(1023, 599, -1) if privileged else ()):
        try:
            sock.bind(('127.0.0.1', source))
            break
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
    sock.connect((host, int(port)))
    if not handshake:
        return sock
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context.wrap_socket(sock)


def answer_of(sock):
    data = b''
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


@contextlib.contextmanager
def pull_server(pull_config, **settings):
    """A server with the test's own limits; the connections the test opened (held) are closed before
    it stops, so that a server whose accept loop a client holds still stops."""
    enroller = FakeEnroller()
    srv = _pull.make_server(dict(pull_config, pull=dict(pull_config['pull'], **settings)), enroller=enroller)
    _pull.serve_in_thread(srv)
    held = []
    try:
        yield SimpleNamespace(enroller=enroller, address='127.0.0.1:%d' % srv.server_address[1], held=held)
    finally:
        for sock in held:
            sock.close()
        srv.shutdown()
        srv.server_close()


def test_idle_and_trickling_connections_do_not_stall_the_other_clients(pull_config, tls, tmp_path):
    """Before the fix the handshake ran in the accept loop: one idle TCP connection stalled every client."""
    with pull_server(pull_config) as srv:
        srv.held.extend(open_tls(srv.address, handshake=False) for dummy in range(3))  # TCP only: no ClientHello
        slow = open_tls(srv.address)  # a finished handshake, then a request a byte at a time
        srv.held.append(slow)
        slow.sendall(b'GE')
        ctl = ocigpu_pull.Controller(srv.address, tls.sha256, timeout=5)
        started = time.monotonic()
        out = ctl.request('GET', '/v1/bundle', out=str(tmp_path / 'got.tar.gz'))
        answer = ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..x', name='gpu-1'),
                             privileged=True)
        assert time.monotonic() - started < 3
        assert open(out, 'rb').read() == open(pull_config['pull']['bundle'], 'rb').read()
        assert base64.b64decode(answer['munge_key_b64']) == MUNGE


def test_a_connection_that_never_finishes_its_request_is_cut_off_and_extra_ones_closed(pull_config, tls):
    with pull_server(pull_config, timeout=1.5, max_connections=2) as srv:
        slow = open_tls(srv.address)
        idle = open_tls(srv.address, handshake=False)
        # The cap: a third connection is closed at once, not queued behind the two.
        started = time.monotonic()
        extra = open_tls(srv.address, handshake=False)
        srv.held.extend([slow, idle, extra])
        assert answer_of(extra) == b'' and time.monotonic() - started < 1
        # A byte every 0.25 s never finishes the request: the connection's time runs out all the same.
        started, closed = time.monotonic(), False
        for byte in b'GET /v1/health HTTP/1.0\r\n':
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.25)
        assert closed or answer_of(slow) == b''
        assert time.monotonic() - started < 4
        assert answer_of(idle) == b''  # no handshake within the time either
        # The slots are free again.
        ctl = ocigpu_pull.Controller(srv.address, tls.sha256, timeout=5)
        assert ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..x', name='gpu-1'),
                           privileged=True)['name'] == 'gpu-1'


@pytest.mark.parametrize('length, status', [('-1', 400), ('abc', 400), (None, 411), ('5000', 413)])
def test_a_post_must_say_its_size_within_the_limit(pull_config, length, status):
    """Before the fix Content-Length -1 read the body to its end, past the 4096-byte limit."""
    with pull_server(pull_config) as srv:
        body = json.dumps(dict(instance_id='ocid1.instance.oc1..x', name='gpu-1', pad='x' * 5000)).encode()
        sock = open_tls(srv.address, privileged=True)
        srv.held.append(sock)
        head = b'POST /v1/join HTTP/1.0\r\nContent-Type: application/json\r\n'
        if length is not None:
            head += b'Content-Length: %s\r\n' % length.encode()
        sock.sendall(head + b'\r\n' + body)  # the old code read on, past the limit, to the end
        answer = answer_of(sock)
        assert answer.split(b' ', 2)[1] == str(status).encode(), answer
        assert srv.enroller.calls == []


def test_bundle_members_that_leave_the_folder_are_refused(tmp_path):
    bad = tmp_path / 'bad.tar.gz'
    with tarfile.open(bad, 'w:gz') as tar:
        info = tarfile.TarInfo('../escape')
        info.size = 1
        tar.addfile(info, io.BytesIO(b'x'))
    with pytest.raises(ocigpu_pull.PullError, match='leaves'):
        ocigpu_pull.safe_extract(str(bad), str(tmp_path / 'out'))
    assert not (tmp_path / 'escape').exists()


# The whole pull, with the configure run captured ---------------------------------------------------

def opts_for(tmp_path, **kw):
    base = dict(imds_url='http://imds.invalid/opc/v2', wait=30, poll=1, prefix=str(tmp_path / 'prefix'),
                state_dir=str(tmp_path / 'state'), log_file=str(tmp_path / 'pull.log'), timeout=10,
                manifest=str(tmp_path / 'baked.json'))  # not this machine's /etc/ocigpu/baked.json
    base.update(kw)
    os.makedirs(base['prefix'], exist_ok=True)
    return SimpleNamespace(**base)


def tagged(server, tls):
    """The instance document of a node that the resume program tagged."""
    return dict(id='ocid1.instance.oc1..x', freeformTags={
        'ocigpu-slurm-node': 'gpu-1', 'ocigpu-pull-server': server.address, 'ocigpu-pull-cert': tls.sha256})


def failing_run(label, task, message, runs=None):
    """A playbook run of the pull (configure, or the active check) that fails at task with message,
    written to the pull's log as ansible-playbook writes it."""
    def run(argv, bundle, log_, log_file):
        if runs is not None:
            runs.append(argv)
        log_('%s: %s', label, ' '.join(argv))
        with open(log_file, 'a') as f:
            f.write('TASK [%s] ***\nfatal: [gpu-1]: FAILED! => %s\nPLAY RECAP ***\n'
                    % (task, json.dumps(dict(changed=False, msg=message))))
        return 2
    return run


def test_pull_joins_then_runs_configure_with_the_key_in_a_private_file(server, tls, tmp_path):
    doc = tagged(server, tls)
    seen = {}

    def configure(argv, bundle, log, log_file):
        secrets = argv[argv.index('-e', argv.index('-e') + 1) + 1][1:]
        seen['argv'], seen['mode'] = argv, oct(os.stat(secrets).st_mode & 0o777)
        seen['secrets'] = json.load(open(secrets))
        seen['inventory'] = open(os.path.join(bundle, 'inventory.ini')).read()
        seen['local'] = json.load(open([a[1:] for a in argv if a.endswith('local-vars.json')][0]))
        seen['bundle'] = bundle
        return 0

    log = ocigpu_pull.Log(str(tmp_path / 'pull.log'))
    started = []

    def start(log):
        started.append(seen.get('argv') is not None)  # after the roles ran
        return 0
    rc, timings = ocigpu_pull.pull(opts_for(tmp_path), log, fetch_imds=lambda url: doc,
                                   venv_fn=lambda prefix, settings, log: '/venv', configure_fn=configure, start_fn=start)
    assert rc == 0 and started == [True]
    assert seen['argv'][:2] == ['/venv/bin/ansible-playbook', 'ocigpu.cluster.configure']
    # the node is itself: no SSH wait (boot_wait.yml's play), the settings' skips after it
    assert seen['argv'][seen['argv'].index('--skip-tags') + 1] == 'boot_wait,nvme_scratch'
    assert seen['mode'] == '0o600'
    assert seen['secrets'] == dict(slurm_munge_key_b64=base64.b64encode(MUNGE).decode(), slurm_conf_server='10.0.0.2:6817',
                                   slurm_node_name='gpu-1', mpi_ssh_keys=MPI_KEYS)
    # neither secret reaches the log
    logged = open(str(tmp_path / 'pull.log')).read()
    assert 'OPENSSH PRIVATE KEY' not in logged and base64.b64encode(MUNGE).decode() not in logged
    assert seen['inventory'].startswith('[gpu_nodes]\ngpu-1 ansible_connection=local')
    # the key does not outlive the run, and the IMDS override reaches node_facts
    assert not os.path.exists(str(tmp_path / 'prefix' / 'join.json'))
    assert any(a.endswith('local-vars.json') for a in seen['argv'])
    # the cluster's lock file travels in the bundle and holds this node to the cluster's bytes
    assert seen['local']['ocigpu_lock_file'] == os.path.join(seen['bundle'], 'ocigpu.lock.yml')
    assert seen['local']['ocigpu_artifacts_strict'] is False
    assert set(timings) >= {'wait_tags', 'cloud_init', 'fetch_bundle', 'join', 'ansible', 'configure', 'slurmd_start', 'total'}
    text = open(str(tmp_path / 'pull.log')).read()
    assert 'Slurm name gpu-1' in text and 'gpu-1 configured in' in text


def test_a_node_that_never_gets_its_tags_gives_up_and_says_so(tmp_path):
    now = [0.0]
    log = ocigpu_pull.Log(str(tmp_path / 'pull.log'), clock=lambda: now[0])
    found, doc = ocigpu_pull.wait_for_tags('http://imds.invalid/opc/v2', 30, 10, log,
                                           fetch=lambda url: dict(freeformTags={'ocigpu-slurm-node': 'gpu-1'}),
                                           sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0])
    assert found is None and now[0] >= 30
    assert 'tags ocigpu-pull-server, ocigpu-pull-cert not set yet' in open(str(tmp_path / 'pull.log')).read()
    rc, _t = ocigpu_pull.pull(opts_for(tmp_path, wait=0), log, fetch_imds=lambda url: dict(freeformTags={}))
    assert rc == ocigpu_pull.EXIT_NO_TAGS
    assert 'not an on-demand node' in open(str(tmp_path / 'pull.log')).read()


def test_the_tags_are_looked_for_every_second_for_a_minute_then_every_five(tmp_path):
    now, slept = [0.0], []
    log = ocigpu_pull.Log(str(tmp_path / 'pull.log'), clock=lambda: now[0])

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
    found, _doc = ocigpu_pull.wait_for_tags('http://imds.invalid/opc/v2', 90, 1, log, fetch=lambda url: {},
                                            sleep=sleep, clock=lambda: now[0])
    assert found is None
    assert slept[:60] == [1] * 60 and set(slept[60:]) == {5} and now[0] >= 90


def test_configure_failure_is_reported_and_the_key_removed(server, tls, tmp_path):
    doc = tagged(server, tls)
    log = ocigpu_pull.Log(str(tmp_path / 'pull.log'))
    started = []
    rc, _t = ocigpu_pull.pull(opts_for(tmp_path), log, fetch_imds=lambda url: doc,
                              venv_fn=lambda prefix, settings, log: '/venv', configure_fn=lambda *a: 2,
                              start_fn=lambda log: started.append(1) or 0)
    assert rc == 1 and not os.path.exists(str(tmp_path / 'prefix' / 'join.json'))
    assert started == []  # a half-configured node never registers
    assert 'configure failed (exit 2)' in open(str(tmp_path / 'pull.log')).read()


def test_the_pull_waits_for_cloud_init_and_says_how_it_ended(tmp_path):
    log = ocigpu_pull.Log(str(tmp_path / 'pull.log'))
    calls = []

    def run_ending(rc, out=b''):
        def run(argv, **kwargs):
            calls.append((argv, kwargs.get('timeout')))
            return subprocess.CompletedProcess(argv, rc, out)
        return run
    # no cloud-init on the image: nothing to wait for, nothing run
    assert ocigpu_pull.wait_for_cloud_init(log, run=run_ending(0), which=lambda name: None) is None
    assert calls == []

    def found(name):
        return '/usr/bin/' + name
    assert ocigpu_pull.wait_for_cloud_init(log, timeout=900, run=run_ending(0), which=found) is None
    assert calls == [(['/usr/bin/cloud-init', 'status', '--wait'], 900)]
    # finished with errors (1, and 2 for recoverable ones): said, and the pull goes on, as boot_wait.yml does
    assert ocigpu_pull.wait_for_cloud_init(log, run=run_ending(2), which=found) is None
    assert 'cloud-init finished with errors' in open(str(tmp_path / 'pull.log')).read()
    # any other status, or a wait that runs out, stops the pull with the reason
    assert ocigpu_pull.wait_for_cloud_init(log, run=run_ending(3, b'status: error\n'), which=found) == \
        'cloud-init status failed (rc 3): status: error'

    def hangs(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs['timeout'])
    assert ocigpu_pull.wait_for_cloud_init(log, timeout=5, run=hangs, which=found) == 'cloud-init still running after 5 s'


def test_a_node_whose_cloud_init_failed_is_not_configured_and_the_controller_is_told(server, tls, tmp_path):
    doc = tagged(server, tls)
    opts = opts_for(tmp_path)
    ran = []
    rc, _t = ocigpu_pull.pull(opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: doc,
                              venv_fn=lambda prefix, settings, log: ran.append('venv') or '/venv',
                              configure_fn=lambda *a: ran.append('configure') or 0, start_fn=lambda log: ran.append('slurmd') or 0,
                              cloud_init_fn=lambda log: 'cloud-init still running after 1800 s')
    assert rc == 1 and ran == []
    assert server.enroller.calls[-1] == ('failed', 'ocid1.instance.oc1..x', 'gpu-1', '127.0.0.1',
                                         'cloud-init still running after 1800 s')
    assert 'cloud-init still running after 1800 s; slurmd stays stopped' in open(opts.log_file).read()


def test_a_failed_pull_tells_the_controller_which_task_failed(server, tls, tmp_path):
    doc = tagged(server, tls)
    opts = opts_for(tmp_path)
    log = ocigpu_pull.Log(opts.log_file)
    configure = failing_run('configure', 'ocigpu.cluster.enroot : Fetch the packages', 'sha256 mismatch: got 00, want 11')
    rc, _t = ocigpu_pull.pull(opts, log, fetch_imds=lambda url: doc, venv_fn=lambda prefix, settings, log: '/venv',
                              configure_fn=configure, start_fn=lambda log: 0)
    assert rc == 1
    assert server.enroller.calls[-1] == (
        'failed', 'ocid1.instance.oc1..x', 'gpu-1', '127.0.0.1',
        'configure failed (exit 2): ocigpu.cluster.enroot : Fetch the packages: sha256 mismatch: got 00, want 11')
    assert 'told the controller; it hands gpu-1 back to Slurm' in open(opts.log_file).read()


def test_a_failure_report_is_checked_like_a_join_and_becomes_a_request(sim, pull_config, tmp_path):  # noqa: F811
    from ocigpu_control import service as _autoscale_service
    one, = _autoscale.Autoscaler(pull_config).resume('gpu-1')
    enroller = _pull.Enroller(pull_config)
    with pytest.raises(_pull.JoinRefused, match='carries Slurm name'):
        enroller.failed(one['id'], 'gpu-2', one['private_ip'], 'x')
    assert _autoscale_service.Service(pull_config, None, None).waiting() == []
    answer = enroller.failed(one['id'], 'gpu-1', one['private_ip'], 'configure failed:\n  boom ' + 'x' * 400)
    (rid, path), = _autoscale_service.Service(pull_config, None, None).waiting()
    request = json.load(open(path))
    assert answer == dict(name='gpu-1', request=rid, message=request['message'])
    assert (request['action'], request['nodes'], request['instance_id']) == ('pull_failed', 'gpu-1', one['id'])
    assert request['message'].startswith('configure failed: boom x') and len(request['message']) == 300


def test_a_node_that_fails_its_health_checks_never_starts_slurmd_and_says_why(server, tls, tmp_path):
    doc = tagged(server, tls)
    opts = opts_for(tmp_path)
    program = tmp_path / 'ocigpu-healthcheck'
    program.write_text('#!/bin/sh\necho "ok gpu_count 8 GPUs"\necho "FAIL rdma_links mlx5_3 down"\nexit 1\n')
    program.chmod(0o755)
    started = []
    rc, timings = ocigpu_pull.pull(
        opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: doc, venv_fn=lambda prefix, settings, log: '/venv',
        configure_fn=lambda *a: 0, start_fn=lambda log: started.append(1) or 0,
        check_fn=lambda log: ocigpu_pull.run_health_checks(log, program=str(program)))
    assert rc == 1 and started == [] and 'checks' in timings
    assert server.enroller.calls[-1][-1] == 'health checks failed: rdma_links mlx5_3 down'
    # Passing checks (or none installed) let slurmd start.
    program.write_text('#!/bin/sh\necho "ok gpu_count 8 GPUs"\n')
    log = ocigpu_pull.Log(opts.log_file)
    assert ocigpu_pull.run_health_checks(log, program=str(program)) == (0, '')
    assert ocigpu_pull.run_health_checks(log, program=str(tmp_path / 'none')) == (0, '')


def test_a_node_without_a_new_enough_python_installs_one_then_makes_the_venv(tmp_path):
    """Oracle Linux 9's python3 is 3.9: the pull installs python3.12 with dnf, then uses it."""
    found = iter([None, '/usr/bin/python3.12'])
    ran = []

    def run(argv, **kw):
        ran.append(argv)
        if argv[1:3] == ['-m', 'venv']:
            os.makedirs(argv[3])
        return SimpleNamespace(returncode=0, stdout=b'')
    lines = []
    venv = ocigpu_pull.make_venv(str(tmp_path), dict(ansible_core='ansible-core==2.19.14', pip_args=['--no-index'],
                                                     mitogen='mitogen==0.3.54'),
                                 lambda *a: lines.append(a[0] % a[1:]), run=run, find=lambda: next(found),
                                 install=lambda log: ocigpu_pull.install_python(
                                 log, run=run, which=lambda tool: '/usr/bin/dnf' if tool == 'dnf' else None))
    assert ran[0] == ['dnf', '-y', 'install', 'python3.12', 'python3.12-pip']
    assert ran[1] == ['/usr/bin/python3.12', '-m', 'venv', venv]
    assert ran[2][-3:] == ['--no-index', 'ansible-core==2.19.14', 'mitogen==0.3.54']
    assert (tmp_path / 'venv' / '.ocigpu-ansible-core').read_text() == 'ansible-core==2.19.14 mitogen==0.3.54\n'
    # nothing to install with and no Python: a clear error, no traceback
    with pytest.raises(ocigpu_pull.PullError, match='no Python 3.11 or newer'):
        ocigpu_pull.make_venv(str(tmp_path / 'x'), {}, lambda *a: None, run=run, find=lambda: None,
                              install=lambda log: False)


def test_join_without_an_mpi_key_leaves_the_mpi_ssh_role_out():
    answer = dict(munge_key_b64='a2V5', conf_server='10.0.0.2:6817')
    assert ocigpu_pull.join_vars(answer, 'gpu-3') == dict(slurm_munge_key_b64='a2V5', slurm_conf_server='10.0.0.2:6817',
                                                          slurm_node_name='gpu-3', configure_mpi_ssh=False)
    answer.update(mpi_keys=MPI_KEYS)
    assert ocigpu_pull.join_vars(answer, 'gpu-3')['mpi_ssh_keys'] == MPI_KEYS


def test_with_the_active_check_a_node_that_falls_short_never_starts_slurmd_and_says_why(server, tls, tmp_path):
    make_bundle(server.bundle, active_check=dict(playbook='ocigpu.cluster.validate'))
    doc = tagged(server, tls)
    opts = opts_for(tmp_path)
    runs, started = [], []
    active = failing_run('active check', 'ocigpu.cluster.nccl_tests : Fail the nodes that fell short',
                         'gpu-1 failed the active NCCL check: all_reduce busbw 120.5 GB/s below 148.0 GB/s', runs)
    rc, timings = ocigpu_pull.pull(opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: doc,
                                   venv_fn=lambda prefix, settings, log: '/venv', configure_fn=lambda *a: 0,
                                   start_fn=lambda log: started.append(1) or 0, check_fn=lambda log: (0, ''),
                                   active_fn=active)
    assert rc == 1 and started == [] and 'active_check' in timings
    argv, = runs
    assert argv[:2] == ['/venv/bin/ansible-playbook', 'ocigpu.cluster.validate']
    assert argv[argv.index('--tags') + 1] == 'health' and 'nccl_tests_fail_on_gate=true' in argv
    # the configure run's strategy (that venv has no Mitogen: Ansible's own)
    assert 'validate_health_strategy=linear' in argv
    assert 'validate_health_strategy=ocigpu.cluster.mitogen_linear' in ocigpu_pull.active_check_command(
        '/venv', '/b', {'active_check': {}}, [], strategy=ocigpu_pull.MITOGEN_STRATEGY)
    # the node's variables, never the join's secrets (removed after configure)
    assert any(a.endswith('node-vars.yml') for a in argv) and not any(a.endswith('join.json') for a in argv)
    assert server.enroller.calls[-1][-1] == (
        'active NCCL check failed: ocigpu.cluster.nccl_tests : Fail the nodes that fell short: '
        'gpu-1 failed the active NCCL check: all_reduce busbw 120.5 GB/s below 148.0 GB/s')
    # A node that passes starts slurmd after the check.
    rc, _t = ocigpu_pull.pull(opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: doc,
                              venv_fn=lambda prefix, settings, log: '/venv', configure_fn=lambda *a: 0,
                              start_fn=lambda log: started.append(len(runs)) or 0, check_fn=lambda log: (0, ''),
                              active_fn=lambda argv, *a: runs.append(argv) or 0)
    assert rc == 0 and started == [2]
    # Without the setting no active check runs.
    make_bundle(server.bundle)
    rc, _t = ocigpu_pull.pull(opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: doc,
                              venv_fn=lambda prefix, settings, log: '/venv', configure_fn=lambda *a: 0,
                              start_fn=lambda log: 0, check_fn=lambda log: (0, ''),
                              active_fn=lambda argv, *a: runs.append(argv) or 0)
    assert rc == 0 and len(runs) == 2
