# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ocigpu diag` (roles/node_health/files/ocigpu_diag.py) and the node collector ocigpu-diag-node: a bundle
built from a fake controller and a fake node planted with secrets, through injected runners (no ssh), holds
none of them; an unreachable node is named in the index and the bundle is still made."""
from __future__ import annotations

import datetime
import importlib.machinery
import importlib.util
import io
import json
import os
import stat
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FILES = os.path.join(ROOT, 'roles', 'node_health', 'files')
sys.path.insert(0, FILES)

import ocigpu_diag as diag  # noqa: E402  pylint: disable=wrong-import-position
import ocigpu_redact as redact  # noqa: E402  pylint: disable=wrong-import-position


def _collector():
    loader = importlib.machinery.SourceFileLoader('ocigpu_diag_node', os.path.join(FILES, 'ocigpu-diag-node'))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


NODE = _collector()
MUNGE = 'MUNGEKEYBYTESdeadbeef0123456789'
PEM_BODY = 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7secretPEMbody'
PRIVATE = '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n' % PEM_BODY
TOKEN = 'tok3n-0f-the-join-9a8b7c'
BEARER = 'eyJhbGciOiJSUzI1NiJ9.bearer-secret'
PASS_PHRASE = 'correct horse battery staple'
KEY_FILE = '/root/.oci/oci_api_key_private.pem'
FINGERPRINT = '12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0'
SECRETS = (MUNGE, PEM_BODY, TOKEN, BEARER, PASS_PHRASE, KEY_FILE, FINGERPRINT)

SCONTROL_NODES = (
    'NodeName=gpu-1 Arch=x86_64 NodeAddr=10.0.0.5 NodeHostName=gpu-1 State=IDLE Partitions=gpu\n'
    'NodeName=gpu-2 Arch=x86_64 NodeAddr=10.0.0.6 NodeHostName=gpu-2 State=IDLE Partitions=gpu\n'
    'NodeName=gpu-3 NodeAddr=gpu-3 NodeHostName=gpu-3 State=IDLE+CLOUD+POWERED_DOWN Partitions=gpu\n')


def plant_node(root):
    """A GPU node's tree with a munge key, a private key, a join secret and a token in a log line."""
    for folder in ('etc/munge', 'root/.ssh', 'var/lib/ocigpu-pull', 'var/lib/ocigpu-health/nccl', 'var/log', 'var/lib/ocigpu/roles'):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / 'etc/munge/munge.key').write_text(MUNGE)
    (root / 'root/.ssh/id_ed25519').write_text(PRIVATE)
    (root / 'var/lib/ocigpu-pull/join.json').write_text(json.dumps(dict(token=TOKEN)))
    (root / 'var/lib/ocigpu-pull/pull.json').write_text(json.dumps(dict(name='gpu-1', join_token=TOKEN, munge_key=MUNGE)))
    (root / 'var/lib/ocigpu-health/health.prom').write_text('ocigpu_health_ok{check="gpus"} 1\n')
    (root / 'var/lib/ocigpu-health/munge.key').write_text(MUNGE)
    (root / 'var/lib/ocigpu-health/nccl/report.txt').write_text('all_reduce busbw 181.2 GB/s\n')
    (root / 'var/log/ocigpu-pull.log').write_text('pull: POST /v1/join Authorization: Bearer %s\ntoken=%s\n' % (BEARER, TOKEN))
    (root / 'var/log/cloud-init-output.log').write_text('cloud-init: done\n%s' % PRIVATE)
    (root / 'var/lib/ocigpu/roles/node_health.json').write_text('{}')


def node_runner(argv):
    if argv[0] == 'journalctl':
        return 0, ('2026-11-29T01:00:00+0000 gpu-1 slurmd[12]: started, password=%s\n' % PASS_PHRASE).encode()
    if argv[0] == 'rdma':
        return None, b'No such file or directory'
    return 0, b'{"results": []}\n'


def plant_controller(tmp_path):
    conf = tmp_path / 'etc/slurm'
    conf.mkdir(parents=True)
    (conf / 'slurm.conf').write_text('ClusterName=demo\nAuthType=auth/munge\n')
    (conf / 'slurmdbd.conf').write_text('StoragePass=%s\n' % PASS_PHRASE)
    (conf / 'topology.conf').write_text('SwitchName=s1 Nodes=gpu-[1-2]\n')
    (tmp_path / 'munge.key').write_text(MUNGE)
    (tmp_path / 'diag_ed25519').write_text(PRIVATE)
    state = tmp_path / 'state'
    state.mkdir()
    (state / 'state.json').write_text(json.dumps(dict(nodes={'gpu-1': {'step': 'registered'}})))
    (state / 'heartbeat.json').write_text('{"time": 1}')
    log = tmp_path / 'autoscaler.log'
    log.write_text('2026-11-29 01:00:00,000 12 INFO resume gpu-1: handed to the autoscaler service (request r1; token=%s)\n' % TOKEN)
    scaler = dict(cluster_name='demo', log_file=str(log), state_file=str(state / 'state.json'),
                  auth=dict(auth_type='api_key', key_file=KEY_FILE, pass_phrase=PASS_PHRASE, fingerprint=FINGERPRINT),
                  pull=dict(join_secret=TOKEN))
    (tmp_path / 'autoscaler.json').write_text(json.dumps(scaler))
    (tmp_path / 'slurmctld.log').write_text('[2026-11-29T01:00:01.000] update_node: node gpu-2 reason set to: by hand\n')
    return dict(cluster='demo', autoscaler_config=str(tmp_path / 'autoscaler.json'), slurm_conf_dir=str(conf),
                slurmctld_log=str(tmp_path / 'slurmctld.log'), diag_key=str(tmp_path / 'diag_ed25519'),
                metrics_dir=str(tmp_path / 'metrics'), node_map=str(tmp_path / 'nodes.json'), diag_dir=str(tmp_path / 'out'),
                scontrol='scontrol')


def make_bundle(tmp_path, unreachable=('gpu-2',), argv=()):
    node_root = tmp_path / 'node'
    plant_node(node_root)
    config = plant_controller(tmp_path / 'ctl')
    os.makedirs(config['diag_dir'])
    node_tar = io.BytesIO()
    NODE.collect(root=str(node_root), runner=node_runner).write(node_tar)
    calls = []

    def runner(argv):
        calls.append(argv)
        if argv[0] == 'ssh':
            if any(argv[-2] == 'root@' + addr for addr in ('10.0.0.6',)) and 'gpu-2' in unreachable:
                return 255, b'', 'ssh: connect to host 10.0.0.6 port 22: Connection timed out\n'
            return 0, node_tar.getvalue(), ''
        if argv[:3] == ['scontrol', '-o', 'show']:
            return 0, SCONTROL_NODES.encode(), ''
        if argv[0] == 'journalctl':
            return 0, b'2026-11-29T01:00:00+0000 ctl python3[1]: sweep: gpu-1 idle, never checked\n', ''
        return 0, ('output of %s, secret=%s\n' % (' '.join(argv), PASS_PHRASE)).encode(), ''
    err, out = io.StringIO(), io.StringIO()
    status = diag.main(list(argv), config, runner=runner, now=datetime.datetime(2026, 11, 29, 1, 2, 3), err=err, out=out)
    assert status == 0
    path = out.getvalue().splitlines()[-1]
    return path, err.getvalue(), calls


def members(path):
    with tarfile.open(path) as tar:
        return dict((info.name, tar.extractfile(info).read()) for info in tar.getmembers() if info.isfile())


def test_the_bundle_holds_no_secret(tmp_path):
    path, progress, calls = make_bundle(tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    found = members(path)
    top = 'ocigpu-diag-demo-20261129-010203/'
    for name in ('INDEX.txt', 'index.json', 'controller/autoscaler.json', 'controller/slurm/slurm.conf', 'controller/events.txt',
                 'controller/autoscaler-state.json', 'nodes/gpu-1/files/var/lib/ocigpu-health/nccl/report.txt',
                 'nodes/gpu-1/files/var/lib/ocigpu-pull/pull.json', 'nodes/gpu-1/journal/slurmd.txt', 'nodes/gpu-1/MANIFEST.txt'):
        assert top + name in found, name
    for name, data in found.items():
        for secret in SECRETS:
            assert secret.encode() not in data, (secret, name)
        assert b'munge.key' not in name.encode() and not name.endswith(('join.json', 'id_ed25519', 'diag_ed25519'))
    assert 'slurm/slurmdbd.conf' not in ' '.join(found)
    assert b'all_reduce busbw 181.2' in found[top + 'nodes/gpu-1/files/var/lib/ocigpu-health/nccl/report.txt']
    assert b'left out files/var/lib/ocigpu-health/munge.key: a secret by its name' in found[top + 'nodes/gpu-1/MANIFEST.txt']
    ssh = [argv for argv in calls if argv[0] == 'ssh']
    assert sorted(argv[-2] for argv in ssh) == ['root@10.0.0.5', 'root@10.0.0.6']  # gpu-3 is powered down
    assert ssh[0][:3] == ['ssh', '-i', str(tmp_path / 'ctl' / 'diag_ed25519')] and 'BatchMode=yes' in ssh[0]
    assert 'diag: gpu-1 (10.0.0.5): ' in progress and ' files, ' in progress


def test_an_output_folder_that_does_not_exist_is_made_roots_alone(tmp_path):
    """diagnose.yml names a folder of its own (/var/tmp/ocigpu-diag), absent on the first run."""
    folder = tmp_path / 'out' / 'ocigpu-diag'
    path, _progress, _calls = make_bundle(tmp_path, argv=['--output', str(folder)])
    assert os.path.dirname(path) == str(folder) and stat.S_IMODE(os.stat(str(folder)).st_mode) == 0o700


def test_the_grep_finds_secrets_with_redaction_off(tmp_path, monkeypatch):
    """The check above would catch a leak: with scrubbing and the name rule off, the secrets are in the bundle."""
    monkeypatch.setattr(redact, 'scrub', lambda text: text)
    monkeypatch.setattr(redact, 'never_taken', lambda path: False)
    monkeypatch.setattr(redact, 'redact_config', lambda value: value)
    path, _progress, _calls = make_bundle(tmp_path)
    blob = b''.join(members(path).values())
    for secret in SECRETS:
        assert secret.encode() in blob, secret


def test_an_unreachable_node_is_named_and_the_bundle_made(tmp_path):
    path, progress, _calls = make_bundle(tmp_path)
    found = members(path)
    index = found['ocigpu-diag-demo-20261129-010203/INDEX.txt'].decode()
    assert 'gpu-2            10.0.0.6        unreachable: ssh: connect to host 10.0.0.6 port 22: Connection timed out' in index
    assert 'gpu-1            10.0.0.5        collected: ' in index
    entries = json.loads(found['ocigpu-diag-demo-20261129-010203/index.json'])['nodes']
    assert [(e['name'], e['result']) for e in entries] == [('gpu-1', 'collected'), ('gpu-2', 'unreachable')]
    assert 'diag: gpu-2: unreachable: ssh: connect to host 10.0.0.6 port 22: Connection timed out' in progress
    assert not any(name.startswith('ocigpu-diag-demo-20261129-010203/nodes/gpu-2/') for name in found)


@pytest.mark.parametrize('text, secret', [
    ('"token": "abc123"', 'abc123'),
    ("munge_key: 'xyz'", 'xyz'),
    ('PASSWORD=hunter2 next', 'hunter2'),
    ('curl -H "Authorization: Bearer abc.def"', 'abc.def'),
    ('--pass-phrase s3cr3t', 's3cr3t'),
    ('key_file = /home/opc/.oci/key.pem', '/home/opc/.oci/key.pem'),
    ('-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----', 'MIIB'),
])
def test_scrub(text, secret):
    assert secret not in redact.scrub(text)
    assert '<redacted>' in redact.scrub(text)


def test_names_never_taken():
    for name in ('/etc/munge/munge.key', '/root/.ssh/id_rsa', '/etc/ocigpu-health/diag_ed25519', 'x/join.json', 'oci_api_key.pem',
                 'server.key'):
        assert redact.never_taken(name), name
    for name in ('/etc/ocigpu-health/diag_ed25519.pub', 'health.prom', 'pull.json', 'slurm.conf'):
        assert not redact.never_taken(name), name
