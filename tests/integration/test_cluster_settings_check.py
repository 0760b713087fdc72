# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's provision.yml against the simulator process: a misspelt key in the cluster settings
stops the run at its first task (ocigpu.cluster.cluster_settings), in check mode too, before any call
to OCI; the same settings spelt right pass that task."""
from __future__ import annotations

import os

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, admin, playbook, ssh_public_key

pytestmark = pytest.mark.slow

PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')


def settings(**changes):
    base = dict(cluster_name='spelling', ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[ssh_public_key()],
                gpu_drain=False)
    base.update(changes)
    return base


def test_a_misspelt_key_stops_provision_before_any_oci_call(simulator, tmp_path):
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(PROVISION, simulator, tmp_path, check=True, fail=True,
                   **settings(gpu_node_cont=16, auth_type='instance_principal'))['stdout']
    assert 'gpu_node_cont: unknown key; did you mean gpu_node_count?' in out
    assert 'auth_type: unknown key; did you mean oci_auth_type?' in out
    assert 'cluster settings: 2 problems' in out
    # The run stopped at its first task: no other task, and not one call to the API.
    assert 'Check the cluster vars before anything changes' not in out and 'preflight' not in out.lower()
    assert sum(admin(simulator, 'GET', '/calls').values()) == 0, admin(simulator, 'GET', '/calls')

    passed = playbook(PROVISION, simulator, tmp_path, check=True, **settings(gpu_node_count=1))['stdout']
    assert 'Check the cluster settings (the extra vars) before anything else' in passed
    assert 'Check the whole plan against OCI' in passed
