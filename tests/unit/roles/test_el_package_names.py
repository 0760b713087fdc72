# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The package names every role's EL path installs, rendered from its vars/RedHat.yml with the facts
of Oracle Linux 8 and 9. No Oracle Linux image can be had here: these are the names checked against
public package lists (docs/testing.md, "EL paths never executed here"), and a change to one of them
has to change this table too, with its source."""
from __future__ import annotations

import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit.roles._trust import trust

ROLES = pathlib.Path(__file__).resolve().parents[3] / 'roles'

# role: {variable: {major: names}}; one entry where both versions agree.
EXPECTED = {
    'containerd_rootless': {
        '__containerd_rootless_base_packages': {
            8: ['shadow-utils', 'dbus-daemon', 'util-linux', 'iptables', 'libseccomp'],
            # EL9 has no package named iptables; iptables-nft holds the commands.
            9: ['shadow-utils', 'dbus-daemon', 'util-linux', 'iptables-nft', 'libseccomp'],
        },
        '__containerd_rootless_distro_packages': {0: {'slirp4netns': 'slirp4netns'}},
    },
    'firewall': {'__firewall_packages': {0: ['firewalld', 'python3-firewall']}},
    # EL needs nothing before NVIDIA's repository file (Debian needs ca-certificates for its https source).
    'nvidia_container_toolkit': {'__nvidia_container_toolkit_repo_packages': {0: []}},
    'pyxis': {'__pyxis_build_packages': {0: ['gcc', 'make', 'slurm-devel']}},
    'rdma_exporter': {
        # EL8's python3 is the package python36; python3-prometheus_client is EPEL's (8 and 9).
        '__rdma_exporter_packages': {8: ['python36', 'python3-prometheus_client'],
                                     9: ['python3', 'python3-prometheus_client']},
    },
    'rdma_network': {
        '__rdma_network_packages': {8: ['NetworkManager', 'iproute', 'network-scripts'],
                                    9: ['NetworkManager', 'iproute']},
    },
    'slurm': {
        '__slurm_packages_munge': {0: ['munge']},
        '__slurm_packages_common': {0: ['slurm']},
        '__slurm_packages_controller': {0: ['slurm-slurmctld']},
        '__slurm_packages_compute': {0: ['slurm-slurmd']},
        '__slurm_packages_dbd': {0: ['slurm-slurmdbd', 'mariadb-server', 'python3-PyMySQL']},
        '__slurm_packages_devel': {0: ['slurm-devel']},
        # Slurm's slurm.spec (and Fedora's, which EPEL builds) puts pam_slurm_adopt.so in slurm-pam_slurm.
        '__slurm_packages_pam_adopt': {0: ['slurm-pam_slurm']},
    },
    'slurm_autoscaler': {
        '__slurm_autoscaler_packages': {8: ['python36', 'python3-pip', 'python3-packaging', 'openssl'],
                                        9: ['python3', 'python3-pip', 'python3-packaging', 'openssl']},
    },
}


def render(role, variable, major):
    variables = trust(yaml.safe_load((ROLES / role / 'vars' / 'RedHat.yml').read_text()))
    variables['ansible_facts'] = {'distribution': 'OracleLinux', 'distribution_major_version': str(major),
                                  'os_family': 'RedHat', 'architecture': 'x86_64'}
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template('{{ %s }}' % variable))


@pytest.mark.parametrize('major', [8, 9], ids=['OL8', 'OL9'])
@pytest.mark.parametrize('role, variable', [(r, v) for r, table in EXPECTED.items() for v in table])
def test_el_package_names(role, variable, major):
    table = EXPECTED[role][variable]
    assert render(role, variable, major) == table.get(major, table.get(0))


def test_every_package_list_of_the_el_vars_is_in_the_table():
    """A new package variable in a vars/RedHat.yml must be checked and added above."""
    for path in sorted(ROLES.glob('*/vars/RedHat.yml')):
        role = path.parent.parent.name
        names = {k for k in yaml.safe_load(path.read_text()) if 'packages' in k}
        assert names <= set(EXPECTED.get(role, {})), f'{role}: {sorted(names - set(EXPECTED.get(role, {})))}'
