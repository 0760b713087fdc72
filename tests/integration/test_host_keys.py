# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SSH host keys with the collection's connection settings, against real sshd processes on 127.0.0.1
(the bastion) and 127.0.0.2 (a GPU node, reached through the bastion), with no ansible.cfg (an
installed collection, as in CI or AWX) and ssh in batch mode (no prompt can be answered):

- a first run accepts the new hosts' keys once and records them in the cluster's known_hosts file,
  each under its instance OCID (HostKeyAlias), not its address;
- a new instance (another OCID) on the node's address with another host key (a released private IP
  given to an autoscaled or replacement node) is a new host: accepted, with no manual step;
- the same instance (same OCID) answering with another host key makes boot_wait.yml fail in seconds,
  not after boot_wait_timeout, naming the host, the file and the command that removes the old entry
  (by OCID); after that command, the next run accepts the new key.

Needs root (the sshd processes log in as root), unshare(1) and an OpenSSH sshd: /usr/sbin/sshd or
the one OCIGPU_TEST_SSHD names. Each sshd runs in a mount namespace of its own, where /etc/passwd has
sshd's privilege separation user and /run a private tmpfs: nothing of this machine is changed."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
import yaml

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, VENV_BIN, playbook_command
from tests.unit import _collection_loader

# tests/infra/sshd.sh (run by host.sh, so by make test) unpacks one into the cache.
_CACHE = os.environ.get('OCIGPU_CACHE') or os.path.join(
    os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'ocigpu-cluster')
SSHD = os.environ.get('OCIGPU_TEST_SSHD') or next(
    (p for p in ('/usr/sbin/sshd', os.path.join(_CACHE, 'sshd', 'sshd')) if os.path.exists(p)), '/usr/sbin/sshd')
BASTION, NODE = '127.0.0.1', '127.0.0.2'
# The instance OCIDs the inventory gives the hosts (the gpu_nodes plugin's oci_instance_id).
BASTION_ID, NODE_ID, NEW_NODE_ID = ('ocid1.instance.oc1.test.bastion', 'ocid1.instance.oc1.test.node1',
                                    'ocid1.instance.oc1.test.node2')

needs_sshd = pytest.mark.skipif(
    not (os.path.exists(SSHD) and shutil.which('unshare') and shutil.which('ssh-keygen') and os.geteuid() == 0),
    reason='needs root, unshare and an sshd (/usr/sbin/sshd, tests/infra/sshd.sh or OCIGPU_TEST_SSHD)')


def _ssh_common_args(*args, **kwargs):
    """The inventory plugin's own connection settings (plugins/inventory/gpu_nodes.py)."""
    _collection_loader.install()
    from ansible_collections.ocigpu.cluster.plugins.inventory import gpu_nodes
    return gpu_nodes.ssh_common_args(*args, **kwargs)


def _free_port(address):
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


class Sshd:
    """An sshd on address:port with a host key of its own, accepting the client key for root."""

    def __init__(self, work, name, address):
        self.work, self.name, self.address = work, name, address
        self.port = _free_port(address)
        self.proc = None

    def start(self, host_key):
        config = self.work / ('%s.sshd_config' % self.name)
        config.write_text('\n'.join([
            'ListenAddress %s:%d' % (self.address, self.port), 'HostKey %s' % host_key,
            'AuthorizedKeysFile %s' % (self.work / 'authorized_keys'), 'StrictModes no', 'UsePAM no', 'PidFile none',
            'PermitRootLogin prohibit-password', 'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
            'AllowTcpForwarding yes', 'Subsystem sftp internal-sftp', '']))
        inner = ('mount --bind "$1" /etc/passwd && mount -t tmpfs -o mode=755 tmpfs /run && mkdir -m 755 /run/sshd '
                 '&& exec "$2" -D -e -f "$3"')
        log = open(self.work / ('%s.log' % self.name), 'ab')  # pylint: disable=consider-using-with
        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', inner, 'sh',
             str(self.work / 'passwd'), SSHD, str(config)], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.address, self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, (self.work / ('%s.log' % self.name)).read_text()
                time.sleep(0.1)
        raise AssertionError('sshd %s did not listen' % self.name)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def stand(tmp_path):
    """The bastion's and the node's sshd, keys and an inventory with the collection's settings."""
    for name in ('client', 'bastion_key', 'node_key_1', 'node_key_2'):
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', str(tmp_path / name)], check=True)
    shutil.copy(tmp_path / 'client.pub', tmp_path / 'authorized_keys')
    passwd = open('/etc/passwd', encoding='utf-8').read()
    if not re.search(r'^sshd:', passwd, re.M):
        passwd += 'sshd:x:64998:65534::/run/sshd:/usr/sbin/nologin\n'
    (tmp_path / 'passwd').write_text(passwd)
    bastion, node = Sshd(tmp_path, 'bastion', BASTION), Sshd(tmp_path, 'node', NODE)
    bastion.start(tmp_path / 'bastion_key')
    node.start(tmp_path / 'node_key_1')
    # Where the inventory plugin puts it by default: ~/.ocigpu/<cluster>/known_hosts (HOME is the test's).
    known_hosts = tmp_path / 'home' / '.ocigpu' / 'hk' / 'known_hosts'
    key = str(tmp_path / 'client')
    common = dict(ansible_user='root', ansible_ssh_private_key_file=key, ansible_remote_tmp=str(tmp_path / 'remote'),
                  ansible_python_interpreter=sys.executable, ocigpu_known_hosts_file=str(known_hosts))

    def write_inventory(node_id):
        """hosts.yml, the node being the instance node_id (the bastion always BASTION_ID)."""
        inventory = dict(all=dict(children=dict(
            bastion=dict(hosts={'hk-bastion': dict(
                common, ansible_host=BASTION, ansible_port=bastion.port,
                ansible_ssh_common_args=_ssh_common_args(str(known_hosts), instance_id=BASTION_ID))}),
            gpu_nodes=dict(hosts={'hk-gpu-1': dict(
                common, ansible_host=NODE, ansible_port=node.port,
                # ssh://user@host:port: the jump to a bastion on a port of its own
                ansible_ssh_common_args=_ssh_common_args(str(known_hosts), 'ssh://root@%s:%d' % (BASTION, bastion.port), key,
                                                         instance_id=node_id, jump_instance_id=BASTION_ID))}))))
        (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(inventory))

    write_inventory(NODE_ID)
    try:
        yield dict(tmp=tmp_path, bastion=bastion, node=node, known_hosts=known_hosts, write_inventory=write_inventory)
    finally:
        node.stop()
        bastion.stop()


def boot_wait(stand, timeout=120):
    """boot_wait.yml against the stand, as an installed collection runs it: (CompletedProcess, seconds)."""
    tmp = stand['tmp']
    env = dict(os.environ, HOME=str(tmp / 'home'), ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'),
               ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0', ANSIBLE_LOCALHOST_WARNING='0',
               # No prompt can be answered, and no connection of an earlier run is reused.
               ANSIBLE_SSH_ARGS='-o ControlMaster=no -o BatchMode=yes -o ConnectTimeout=5')
    env.pop('ANSIBLE_HOST_KEY_CHECKING', None)
    env.pop('ANSIBLE_CONFIG', None)
    cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(tmp / 'hosts.yml'),
           os.path.join(COLLECTION_PLAYBOOKS, 'boot_wait.yml'), '-e', 'boot_wait_timeout=%d' % timeout]
    started = time.monotonic()
    # cwd outside the checkout: the repository's ansible.cfg stays out of it.
    out = subprocess.run(cmd, cwd=str(tmp), env=env, capture_output=True, text=True, timeout=timeout + 120, check=False)
    print(out.stdout[-8000:], out.stderr[-3000:])
    return out, time.monotonic() - started


def recorded(known_hosts, host):
    return subprocess.run(['ssh-keygen', '-F', host, '-f', str(known_hosts)], capture_output=True, text=True,
                          check=False).stdout


def public_key(stand, name):
    return (stand['tmp'] / ('%s.pub' % name)).read_text().split()[1]


@needs_sshd
def test_a_new_instance_on_a_released_address_is_accepted_without_a_manual_step(stand):
    """OCI gives a terminated instance's private IP to later instances (the autoscaler's, a replacement):
    one on the node's address, with a key of its own, is a new host (its own OCID), accepted once."""
    known_hosts, node = stand['known_hosts'], stand['node']
    out = boot_wait(stand)[0]
    assert out.returncode == 0, out.stdout[-3000:]
    # Recorded under the instance OCIDs, not the addresses.
    assert public_key(stand, 'node_key_1') in recorded(known_hosts, NODE_ID)
    assert public_key(stand, 'bastion_key') in recorded(known_hosts, BASTION_ID)
    assert not recorded(known_hosts, '[%s]:%d' % (NODE, node.port))
    assert known_hosts.parent.stat().st_mode & 0o077 == 0

    # The node's instance is gone; a new one answers on its address with another host key.
    node.stop()
    node.start(stand['tmp'] / 'node_key_2')
    stand['write_inventory'](NEW_NODE_ID)
    out = boot_wait(stand)[0]
    assert out.returncode == 0, out.stdout[-3000:]
    assert public_key(stand, 'node_key_2') in recorded(known_hosts, NEW_NODE_ID)
    # The old instance's entry is left as it was (teardown.yml removes the file).
    assert public_key(stand, 'node_key_1') in recorded(known_hosts, NODE_ID)


@needs_sshd
def test_the_same_instance_with_a_changed_key_is_reported_at_once_with_the_fix(stand):
    known_hosts, node = stand['known_hosts'], stand['node']

    # First run: both keys accepted (no prompt, no host_key_checking = False) and recorded.
    out = boot_wait(stand)[0]
    assert out.returncode == 0, out.stdout[-3000:]
    assert public_key(stand, 'node_key_1') in recorded(known_hosts, NODE_ID)

    # The same instance (same OCID) answers with another host key.
    node.stop()
    node.start(stand['tmp'] / 'node_key_2')
    out, seconds = boot_wait(stand, timeout=300)
    assert out.returncode != 0
    # At its first answer, not after boot_wait_timeout (300 s here, 1800 s by default).
    assert seconds < 60, seconds
    failed = [line for line in out.stdout.splitlines() if line.startswith('fatal: [hk-gpu-1]')]
    assert failed, out.stdout[-3000:]
    message = out.stdout[out.stdout.index(failed[0]):]
    fix = 'ssh-keygen -R %s -f %s' % (NODE_ID, known_hosts)
    assert fix in message, message[:3000]
    # For people: the host's name and address beside the OCID.
    assert 'hk-gpu-1 (%s:%d), known by its instance OCID %s' % (NODE, node.port, NODE_ID) in message, message[:3000]
    assert 'teardown.yml removes' in message
    assert 'hk-gpu-1: SSH refused its host key' in message
    assert '1 of 2 hosts are not ready' in message
    # Never silently accepted: the old key is still the one recorded.
    assert public_key(stand, 'node_key_1') in recorded(known_hosts, NODE_ID)

    # The fix as given, then a run that accepts the node's new key.
    subprocess.run(fix, shell=True, check=True, capture_output=True)
    out = boot_wait(stand)[0]
    assert out.returncode == 0, out.stdout[-3000:]
    assert public_key(stand, 'node_key_2') in recorded(known_hosts, NODE_ID)


@needs_sshd
def test_a_changed_bastion_key_names_the_bastion(stand):
    """Through the jump, the key refused is the bastion's: the message names the bastion's OCID, for
    the node too."""
    out = boot_wait(stand)[0]
    assert out.returncode == 0, out.stdout[-3000:]
    bastion = stand['bastion']
    bastion.stop()
    bastion.start(stand['tmp'] / 'node_key_2')
    out, seconds = boot_wait(stand, timeout=300)
    assert out.returncode != 0 and seconds < 60, seconds
    entry = 'ssh-keygen -R %s -f %s' % (BASTION_ID, stand['known_hosts'])
    for host in ('hk-bastion', 'hk-gpu-1'):
        failed = [line for line in out.stdout.splitlines() if line.startswith('fatal: [%s]' % host)]
        assert failed and entry in failed[0], (host, out.stdout[-3000:])


def test_teardown_forgets_the_clusters_host_keys_and_check_mode_says_so(simulator, tmp_path):
    """teardown.yml removes ~/.ocigpu/<cluster>/known_hosts (and ssh-keygen's .old) once the hosts are
    gone, leaves the MPI keys beside it, and --check predicts it without removing anything."""
    folder = tmp_path / 'home' / '.ocigpu' / 'hkt'
    folder.mkdir(parents=True)
    for name in ('known_hosts', 'known_hosts.old', 'root.mpi_ed25519'):
        (folder / name).write_text('kept until teardown\n')

    def teardown(check):
        cmd, env = playbook_command(os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml'), simulator, tmp_path,
                                    check=check, cluster_name='hkt')
        env['HOME'] = str(tmp_path / 'home')
        out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600, check=False)
        print(out.stdout[-4000:], out.stderr[-2000:])
        assert out.returncode == 0, out.stdout[-4000:]
        return out.stdout.split('TASK [Forget the SSH host keys', 1)[1].split('\nTASK [', 1)[0]

    predicted = teardown(check=True)
    assert re.search(r'^changed: \[localhost\] => \(item=known_hosts\)', predicted, re.M), predicted
    assert (folder / 'known_hosts').exists()
    teardown(check=False)
    assert sorted(p.name for p in folder.iterdir()) == ['root.mpi_ed25519']
    assert 'changed' not in teardown(check=False)
