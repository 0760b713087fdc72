# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seed 001 end to end on the simulator process: ansible-playbook provisions the network, bastion,
instance configuration and a 2-node BM.GPU4.8 cluster network, a second run changes nothing, and the
teardown playbook leaves nothing billable - checked through the SDK, not through our own modules."""
from __future__ import annotations

import json

import pytest

from tests.integration._helpers import everything, first_availability_domain, playbook, ssh_public_key

pytestmark = pytest.mark.slow


def test_seed001_provision_rerun_teardown(simulator, tmp_path):
    key = ssh_public_key()
    ad = first_availability_domain(simulator)
    variables = dict(ssh_public_key=key, admin_cidrs=['203.0.113.0/24'], availability_domain=ad,
                     result_file=str(tmp_path / 'built.json'))

    # --check on the empty compartment predicts every resource and creates none.
    predicted = playbook('provision.yml', simulator, tmp_path, check=True, **variables)
    assert predicted['changed'] == 4
    assert everything(simulator) == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[])

    first = playbook('provision.yml', simulator, tmp_path, **variables)
    assert first['changed'] >= 4
    built = json.loads((tmp_path / 'built.json').read_text())
    state = everything(simulator)
    running = [i for i in state['instances'] if i.lifecycle_state == 'RUNNING']
    assert sorted(i.shape for i in running) == ['BM.GPU4.8', 'BM.GPU4.8', 'VM.Optimized3.Flex']
    assert [c.lifecycle_state for c in state['cluster_networks']] == ['RUNNING']
    assert len(state['vcns']) == 1 and state['vcns'][0].cidr_block == '10.0.0.0/16'
    assert {n['id'] for n in built['cluster_network']['nodes']} == {i.id for i in running if i.shape == 'BM.GPU4.8'}

    second = playbook('provision.yml', simulator, tmp_path, **variables)
    assert second['changed'] == 0 and second['failed'] == 0
    again = everything(simulator)
    assert sorted(i.id for i in again['instances']) == sorted(i.id for i in state['instances'])

    down = playbook('teardown.yml', simulator, tmp_path)
    assert down['changed'] == 4
    left = everything(simulator)
    assert left == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[]), left
    assert playbook('teardown.yml', simulator, tmp_path)['changed'] == 0
