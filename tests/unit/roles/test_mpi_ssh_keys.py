# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/mpi_ssh tasks/key.yml run by ansible-playbook on this machine (the Ansible controller's side):
one key pair per user of mpi_ssh_users in a per-user folder (~/.ocigpu/<cluster>, mode 0700), never
where ansible-playbook runs; a key found where earlier versions kept it (beside the lock file) is moved,
as root's key when root was its only user, else aside; handed keys (the pull path) must cover every user.
Issue 45: root shares no key with any other account."""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAY = '''
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: ocigpu.cluster.mpi_ssh
        tasks_from: key
    - ansible.builtin.copy:
        content: "{{ __mpi_ssh_keys | to_json }}"
        dest: "%s"
      no_log: true
'''


def run_key(tmp_path, **extra):
    """key.yml with HOME and the working folder in tmp_path; (ansible-playbook's output, __mpi_ssh_keys or None)."""
    home, work, out = tmp_path / 'home', tmp_path / 'work', tmp_path / 'keys.json'
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    if out.exists():
        out.unlink()
    (tmp_path / 'play.yml').write_text(PLAY % out)
    (tmp_path / 'vars.json').write_text(json.dumps(dict(dict(cluster_name='tokyo'), **extra)))
    env = dict(os.environ, HOME=str(home), PWD=str(work), ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'),
               ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_HOME=str(tmp_path / 'ansible'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', 'ansible_python_interpreter=%s' % sys.executable, '-e', '@' + str(tmp_path / 'vars.json'),
                           str(tmp_path / 'play.yml')], cwd=str(work), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    return proc.stdout, (json.loads(out.read_text()) if proc.returncode == 0 else None)


def keygen(path):
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'old', '-f', str(path)], check=True)
    return path.read_text(), (pathlib.Path(str(path) + '.pub')).read_text().strip()


def test_each_user_has_a_key_pair_of_their_own_in_a_private_folder(tmp_path):
    log, keys = run_key(tmp_path, mpi_ssh_users=['root', 'usera', 'userb'])
    assert keys is not None, log
    folder = tmp_path / 'home' / '.ocigpu' / 'tokyo'
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(keys) == ['root', 'usera', 'userb']
    # no two users share a key: a listed user's private key opens no other account, root's above all
    assert len(set(k['private'] for k in keys.values())) == 3 and len(set(k['public'] for k in keys.values())) == 3
    for user in keys:
        private = folder / (user + '.mpi_ed25519')
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
        assert keys[user]['private'] == private.read_text()
        assert keys[user]['public'].split()[:2] == (folder / (user + '.mpi_ed25519.pub')).read_text().split()[:2]
    # nothing where ansible-playbook runs (beside the lock file the user commits)
    assert list((tmp_path / 'work').iterdir()) == []
    # a second run keeps every key
    again = run_key(tmp_path, mpi_ssh_users=['root', 'usera', 'userb'])[1]
    assert again == keys


def test_the_old_key_of_root_alone_is_moved_and_kept_as_roots(tmp_path):
    (tmp_path / 'work').mkdir()
    private, public = keygen(tmp_path / 'work' / 'tokyo.mpi_ed25519')
    log, keys = run_key(tmp_path, mpi_ssh_users=['root'])
    assert keys is not None, log
    assert keys['root'] == dict(private=private, public=public)  # not re-keyed
    assert list((tmp_path / 'work').iterdir()) == []  # moved, not copied
    assert 'Moved the cluster\'s MPI key from %s' % (tmp_path / 'work' / 'tokyo.mpi_ed25519') in log
    assert 'It is root\'s key now' in log


def test_the_old_key_shared_with_other_users_is_put_aside_and_root_gets_a_new_one(tmp_path):
    (tmp_path / 'work').mkdir()
    (tmp_path / 'work' / 'locks').mkdir()
    private, _public = keygen(tmp_path / 'work' / 'locks' / 'tokyo.mpi_ed25519')
    log, keys = run_key(tmp_path, mpi_ssh_users=['root', 'usera'], ocigpu_lock_file='locks/tokyo.lock.yml')
    assert keys is not None, log
    assert private not in [k['private'] for k in keys.values()]
    folder = tmp_path / 'home' / '.ocigpu' / 'tokyo'
    assert (folder / 'shared-before.mpi_ed25519').read_text() == private
    assert list((tmp_path / 'work' / 'locks').iterdir()) == []
    assert 'kept aside, unused' in log


def test_handed_keys_must_cover_every_user(tmp_path):
    pair = dict(private='-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n',
                public='ssh-ed25519 AAAAx ocigpu.cluster mpi_ssh')
    log, keys = run_key(tmp_path, mpi_ssh_users=['root'], mpi_ssh_keys=dict(root=pair, usera=pair))
    assert keys == dict(root=pair), log  # only the listed users' keys are taken
    log, keys = run_key(tmp_path, mpi_ssh_users=['root', 'usera'], mpi_ssh_keys=dict(root=pair))
    assert keys is None and 'mpi_ssh_keys has no key pair (private and public) for usera' in log
    assert not (tmp_path / 'home' / '.ocigpu').exists()  # nothing made on this machine on the pull path


def test_a_user_name_that_is_not_a_name_is_refused(tmp_path):
    log, keys = run_key(tmp_path, mpi_ssh_users=['root', '../../etc/x'])
    assert keys is None and 'mpi_ssh_users must be user names' in log


def test_the_pull_server_keeps_the_keys_of_the_on_demand_nodes_users(tmp_path):
    """slurm_autoscaler's pull.yml: the users are the on-demand nodes' (node_vars_file, then the extra
    node variables), else the controller's mpi_ssh_users, else root."""
    import yaml
    tasks = yaml.safe_load((ROOT / 'roles' / 'slurm_autoscaler' / 'tasks' / 'pull.yml').read_text())
    task = [t for t in tasks if t.get('name') == 'Find the users whose MPI key pairs the pull server hands out'][0]
    out = tmp_path / 'users.json'
    (tmp_path / 'play.yml').write_text(yaml.safe_dump([dict(hosts='localhost', gather_facts=False, tasks=[
        task, {'ansible.builtin.copy': dict(content='{{ __slurm_autoscaler_mpi_users | to_json }}', dest=str(out))}])]))
    (tmp_path / 'node-vars.yml').write_text('enroot_nvcr_api_key: x\nmpi_ssh_users: [root, usera]\n')
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_HOME=str(tmp_path / 'ansible'))

    def users(**extra):
        extra = dict(dict(slurm_autoscaler_pull_mpi_key=True, slurm_autoscaler_pull_node_vars={},
                          slurm_autoscaler_pull_node_vars_file=''), **extra)
        (tmp_path / 'vars.json').write_text(json.dumps(extra))
        proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                               '-e', 'ansible_python_interpreter=%s' % sys.executable, '-e', '@' + str(tmp_path / 'vars.json'),
                               str(tmp_path / 'play.yml')], env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(out.read_text())
    assert users() == ['root']
    assert users(mpi_ssh_users=['root', 'opc']) == ['root', 'opc']
    assert users(slurm_autoscaler_pull_node_vars_file=str(tmp_path / 'node-vars.yml')) == ['root', 'usera']
    assert users(slurm_autoscaler_pull_node_vars_file=str(tmp_path / 'node-vars.yml'),
                 slurm_autoscaler_pull_node_vars=dict(mpi_ssh_users=['root', 'userb'])) == ['root', 'userb']
