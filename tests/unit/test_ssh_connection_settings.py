# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SSH host keys: provision.yml's in-memory hosts get the same connection settings as the gpu_nodes
inventory plugin gives (host keys checked against ~/.ocigpu/<cluster>/known_hosts, a new host accepted
once, the jump a ProxyCommand with the same checks and key), and wait_for_ssh tells a refused host key
from a host that does not answer yet. tests/integration/test_host_keys.py runs both against sshd."""
from __future__ import annotations

import pathlib
import shlex

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from tests.unit import _collection_loader
from tests.unit.roles._trust import trust

ROOT = pathlib.Path(__file__).resolve().parents[2]
_collection_loader.install()

from ansible_collections.ocigpu.cluster.plugins.action import wait_for_ssh  # noqa: E402 pylint: disable=wrong-import-position
from ansible_collections.ocigpu.cluster.plugins.inventory import gpu_nodes  # noqa: E402 pylint: disable=wrong-import-position


def _add_host_tasks():
    plays = yaml.safe_load((ROOT / 'playbooks' / 'provision.yml').read_text())
    tasks = {t['name']: t for play in plays for t in play.get('tasks', []) if 'ansible.builtin.add_host' in t}
    assert sorted(tasks) == ['Add the GPU nodes to the in-memory inventory (SSH through the bastion)',
                             'Add the bastion to the in-memory inventory', 'Reach the Slurm controller to drain the nodes that leave']
    return tasks


BASTION_ID, NODE_ID = 'ocid1.instance.oc1..bastion', 'ocid1.instance.oc1..node'


def _render(task, variables, key):
    values = dict(cluster_name='c1', cluster_ssh_user='opc',
                  _bastion={'instance': {'public_ip': '192.0.2.7', 'private_ip': '10.0.0.2', 'id': BASTION_ID}},
                  _resize_bastion={'public_ip': '192.0.2.7', 'private_ip': '10.0.0.2', 'id': BASTION_ID},
                  item={'display_name': 'c1-gpu-1', 'private_ip': '10.0.1.5', 'id': NODE_ID})
    values.update(variables)
    values.update(trust(task['vars']))
    return Templar(loader=DataLoader(), variables=values).template(trust(task['ansible.builtin.add_host'][key]))


@pytest.mark.parametrize('key', [None, '~/.ssh/oci key'])
def test_provision_sets_what_the_inventory_plugin_sets(monkeypatch, tmp_path, key):
    monkeypatch.setenv('HOME', str(tmp_path))
    known = str(tmp_path / '.ocigpu' / 'c1' / 'known_hosts')
    assert gpu_nodes.known_hosts_path('c1') == known
    variables = {'ansible_ssh_private_key_file': key} if key else {}
    tasks = _add_host_tasks()
    nodes = tasks.pop('Add the GPU nodes to the in-memory inventory (SSH through the bastion)')
    assert _render(nodes, variables, 'ocigpu_known_hosts_file') == known
    for bastion in tasks.values():  # the bastion, and the Slurm controller that drains nodes on a resize
        assert _render(bastion, variables, 'ocigpu_known_hosts_file') == known
        bastion_args = _render(bastion, variables, 'ansible_ssh_common_args')
        assert bastion_args == gpu_nodes.ssh_common_args(known, instance_id=BASTION_ID)
        assert shlex.split(bastion_args)[4:] == ['-o', 'HostKeyAlias=' + BASTION_ID]
    node_args = _render(nodes, variables, 'ansible_ssh_common_args')
    assert node_args == gpu_nodes.ssh_common_args(known, 'opc@192.0.2.7', str(tmp_path / '.ssh' / 'oci key') if key else None,
                                                  NODE_ID, BASTION_ID)
    # what ssh gets: every hop checks host keys against the cluster's file, accepting new hosts once,
    # each under its own instance OCID (a new instance on an old address is a new host)
    argv = shlex.split(node_args)
    assert argv[:6] == ['-o', 'UserKnownHostsFile="%s"' % known, '-o', 'StrictHostKeyChecking=accept-new',
                        '-o', 'HostKeyAlias=' + NODE_ID]
    jump = shlex.split(argv[7].split('=', 1)[1])
    assert jump[:7] == ['ssh', '-o', 'UserKnownHostsFile="%s"' % known, '-o', 'StrictHostKeyChecking=accept-new',
                        '-o', 'HostKeyAlias=' + BASTION_ID]
    assert jump[-3:] == ['-W', '%h:%p', 'opc@192.0.2.7']
    assert ('-i' in jump) == bool(key)


def test_a_host_without_an_instance_ocid_is_checked_under_its_address(monkeypatch, tmp_path):
    """No OCID known (an instance record without one): no HostKeyAlias, the key recorded under the address."""
    monkeypatch.setenv('HOME', str(tmp_path))
    known = gpu_nodes.known_hosts_path('c1')
    assert 'HostKeyAlias' not in gpu_nodes.ssh_common_args(known, 'opc@192.0.2.7')
    nodes = _add_host_tasks()['Add the GPU nodes to the in-memory inventory (SSH through the bastion)']
    bare = dict(_bastion={'instance': {'public_ip': '192.0.2.7', 'private_ip': '10.0.0.2'}},
                item={'display_name': 'c1-gpu-1', 'private_ip': '10.0.1.5'})
    assert _render(nodes, bare, 'ansible_ssh_common_args') == gpu_nodes.ssh_common_args(known, 'opc@192.0.2.7')


CHANGED = """Failed to connect to the host via ssh: @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Add correct host key in /home/u/.ocigpu/c1/known_hosts to get rid of this message.
Offending ED25519 key in /home/u/.ocigpu/c1/known_hosts:2
  remove with:
  ssh-keygen -f "/home/u/.ocigpu/c1/known_hosts" -R "10.0.1.5"
Host key for 10.0.1.5 has changed and you have requested strict checking.
Host key verification failed.
"""


def test_a_changed_host_key_is_told_with_the_host_the_file_and_the_fix():
    message = wait_for_ssh.host_key_problem(Exception(CHANGED), '10.0.1.5', '/home/u/.ocigpu/c1/known_hosts')
    assert 'ssh-keygen -R 10.0.1.5 -f /home/u/.ocigpu/c1/known_hosts' in message
    assert 'teardown.yml removes' in message
    assert 'Host key for 10.0.1.5 has changed' in message and '@@@' not in message
    # through the jump it is the bastion's key that was refused: the bastion is named
    jumped = CHANGED.replace('10.0.1.5', '[192.0.2.7]:22')
    assert "ssh-keygen -R '[192.0.2.7]:22' -f" in wait_for_ssh.host_key_problem(Exception(jumped), '10.0.1.5')
    # ssh's plain refusal (no known key, StrictHostKeyChecking=yes): the file comes from the task
    plain = wait_for_ssh.host_key_problem(Exception('Host key verification failed.'), '[10.0.1.5]:2222', '/k h')
    assert "ssh-keygen -R '[10.0.1.5]:2222' -f '/k h'" in plain


@pytest.mark.parametrize('error', [
    'Failed to connect to the host via ssh: ssh: connect to host 10.0.1.5 port 22: Connection refused',
    'Failed to connect to the host via ssh: ssh: connect to host 10.0.1.5 port 22: Connection timed out',
    'Failed to connect to the host via ssh: opc@10.0.1.5: Permission denied (publickey).',
    'Failed to connect to the host via ssh: kex_exchange_identification: Connection closed by remote host',
])
def test_a_host_that_does_not_answer_yet_is_waited_for(error):
    assert wait_for_ssh.host_key_problem(Exception(error), '10.0.1.5') is None


class _Connection:
    def __init__(self, port=None, common_args=''):
        self.port, self.common_args = port, common_args

    def get_option(self, name):
        return {'host': '10.0.1.5', 'port': self.port, 'ssh_args': '-o ControlMaster=auto', 'ssh_common_args': self.common_args,
                'ssh_extra_args': ''}[name]


class _Task:
    args = {'known_hosts_file': '/home/u/.ocigpu/c1/known_hosts'}


def _action(port=None, common_args=''):
    action = wait_for_ssh.ActionModule.__new__(wait_for_ssh.ActionModule)
    action._connection = _Connection(port, common_args)  # pylint: disable=protected-access
    action._task = _Task()  # pylint: disable=protected-access
    return action


def test_the_wait_stops_at_the_first_refused_key_and_goes_on_through_other_failures(monkeypatch):
    monkeypatch.setattr(wait_for_ssh.time, 'sleep', lambda seconds: None)
    attempts = []

    def answers(errors):
        def what(connect_timeout):
            attempts.append(connect_timeout)
            if errors:
                raise Exception(errors.pop(0))  # pylint: disable=broad-exception-raised
        return what

    action = _action()
    action.do_until_success_or_timeout(answers(['Connection refused', 'Connection timed out']), 60, 5, 'ping module test')
    assert len(attempts) == 3
    del attempts[:]
    with pytest.raises(wait_for_ssh.HostKeyRefused) as refused:
        action.do_until_success_or_timeout(answers(['Connection refused', CHANGED, 'never asked']), 1800, 5, 'ping module test')
    assert len(attempts) == 2 and action._host_key_refused  # pylint: disable=protected-access
    assert isinstance(refused.value, wait_for_ssh.TimedOutException)  # the builtin's run() reports it as its msg
    assert _action(2222)._known_hosts_address() == '[10.0.1.5]:2222'  # pylint: disable=protected-access
    assert _action(22)._known_hosts_address() == '10.0.1.5'  # pylint: disable=protected-access


def test_a_refused_key_is_named_by_the_instance_ocid_it_is_recorded_under():
    """With HostKeyAlias (the collection's hosts), ssh records and refuses the key under the instance OCID:
    the fix removes that entry, and the message names the host and its address for people; through the
    jump, the bastion's OCID and the jump's address."""
    known = '/home/u/.ocigpu/c1/known_hosts'
    args = gpu_nodes.ssh_common_args(known, 'opc@192.0.2.7', None, NODE_ID, BASTION_ID)
    action = _action(common_args=args)
    action._inventory_hostname = 'c1-gpu-1'  # pylint: disable=protected-access
    assert action._known_hosts_address() == NODE_ID  # pylint: disable=protected-access
    aliases = action._host_key_aliases()[0]  # pylint: disable=protected-access
    assert aliases == {NODE_ID: 'c1-gpu-1 (10.0.1.5)', BASTION_ID: 'the jump host opc@192.0.2.7'}
    node = wait_for_ssh.host_key_problem(Exception(CHANGED.replace('10.0.1.5', NODE_ID)), NODE_ID, known, aliases)
    assert 'ssh-keygen -R %s -f %s' % (NODE_ID, known) in node
    assert 'c1-gpu-1 (10.0.1.5), known by its instance OCID %s' % NODE_ID in node
    jumped = wait_for_ssh.host_key_problem(Exception(CHANGED.replace('10.0.1.5', BASTION_ID)), NODE_ID, known, aliases)
    assert 'ssh-keygen -R %s -f %s' % (BASTION_ID, known) in jumped and 'opc@192.0.2.7' in jumped
    # ssh's plain refusal: the host's own alias; no alias given, the address as before
    assert 'ssh-keygen -R %s -f' % NODE_ID in wait_for_ssh.host_key_problem(
        Exception('Host key verification failed.'), action._known_hosts_address(), known, aliases)  # pylint: disable=protected-access
    assert _action(common_args=gpu_nodes.ssh_common_args(known))._known_hosts_address() == '10.0.1.5'  # pylint: disable=protected-access
