# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every playbook that needs the cluster's hosts (configure.yml, validate.yml, and since issue 45
boot_wait.yml and cluster_user.yml) stops on an inventory that could not be built or holds no cluster
(issue 33): with ansible-core's default settings an inventory source that fails to parse is only a
warning, and every play then runs against no host and exits 0."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, VENV_BIN


def run_playbook(tmp_path, playbook, inventory_name, inventory_text, *args):
    (tmp_path / inventory_name).write_text(inventory_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_RETRY_FILES_ENABLED='0', ANSIBLE_LOCALHOST_WARNING='0')
    cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(tmp_path / inventory_name),
           os.path.join(COLLECTION_PLAYBOOKS, playbook)] + list(args)
    # cwd outside the checkout: ansible-core's defaults, not the repository's ansible.cfg.
    out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    print(out.stdout[-4000:], out.stderr[-3000:])
    return out


# The gpu_nodes plugin cannot build this one: its OCI config file does not exist.
UNBUILT = 'plugin: ocigpu.cluster.gpu_nodes\ncluster: demo\nconfig_file: {missing}\nregion: ap-tokyo-1\n'


@pytest.mark.parametrize('playbook', ['configure.yml', 'validate.yml', 'boot_wait.yml', 'cluster_user.yml'])
def test_an_inventory_that_could_not_be_built_stops_the_run(tmp_path, playbook):
    out = run_playbook(tmp_path, playbook, 'demo.gpu_nodes.yml', UNBUILT.format(missing=tmp_path / 'no-such-config'))
    assert 'Unable to parse' in out.stderr or 'Failed to parse' in out.stderr, 'the plugin did fail to build it'
    assert out.returncode != 0
    assert 'nothing would be' in out.stdout
    recap = [line.split()[0] for line in out.stdout.split('PLAY RECAP', 1)[-1].splitlines() if ': ok=' in line]
    assert recap == ['localhost'], 'only the check ran'


def test_configure_without_gpu_nodes_stops_unless_none_are_wanted(tmp_path):
    inventory = '[bastion]\nctl ansible_connection=local ansible_python_interpreter=%s\n' % sys.executable
    out = run_playbook(tmp_path, 'configure.yml', 'hosts.ini', inventory, '--tags', 'never')
    assert out.returncode != 0
    assert 'The inventory holds no GPU node (group gpu_nodes)' in out.stdout
    # A cluster of the bastion alone (autoscaling, or gpu_node_count 0) passes the check.
    out = run_playbook(tmp_path, 'configure.yml', 'hosts.ini', inventory, '--tags', 'never',
                       '-e', 'gpu_node_count=0')
    assert 'holds no' not in out.stdout
    assert out.returncode == 0


def test_a_node_that_joins_by_itself_needs_no_bastion(tmp_path):
    """The pull of an on-demand or replaced node runs configure.yml against itself alone."""
    inventory = '[gpu_nodes]\ngpu-7 ansible_connection=local ansible_python_interpreter=%s\n' % sys.executable
    out = run_playbook(tmp_path, 'configure.yml', 'inventory.ini', inventory, '--tags', 'never')
    assert 'The inventory holds no bastion' in out.stdout and out.returncode != 0
    out = run_playbook(tmp_path, 'configure.yml', 'inventory.ini', inventory, '--tags', 'never',
                       '-e', 'slurm_conf_server=198.18.121.10:6817')
    assert 'holds no' not in out.stdout
    assert out.returncode == 0


# An inventory that was built but holds other hosts only (a cluster of the wrong name in a static file).
OTHER_HOSTS = '[login]\nlogin-1 ansible_connection=local ansible_python_interpreter=%s\n' % sys.executable


@pytest.mark.parametrize('playbook, pattern', [('boot_wait.yml', 'bastion:gpu_nodes'),
                                               ('cluster_user.yml', 'slurm_controller')])
def test_an_inventory_without_the_clusters_hosts_stops_the_run(tmp_path, playbook, pattern):
    out = run_playbook(tmp_path, playbook, 'hosts.ini', OTHER_HOSTS, '-e', 'cluster_user_name=alice')
    assert out.returncode != 0
    assert 'No host matches %s: nothing would be' % pattern in out.stdout
    recap = [line.split()[0] for line in out.stdout.split('PLAY RECAP', 1)[-1].splitlines() if ': ok=' in line]
    assert recap == ['localhost'], 'only the check ran'


def test_boot_wait_passes_the_check_with_the_clusters_hosts(tmp_path):
    """A bastion alone (autoscaling) or a node alone (the pull) is enough for the check."""
    for group in ('bastion', 'gpu_nodes'):
        inventory = '[%s]\nhost-1 ansible_connection=local ansible_python_interpreter=%s\n' % (group, sys.executable)
        out = run_playbook(tmp_path, 'boot_wait.yml', 'hosts.ini', inventory, '-e', 'boot_wait_timeout=5')
        assert 'No host matches' not in out.stdout
        assert out.returncode == 0
