# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seed 001 end to end on the simulator process: ansible-playbook provisions the network, bastion,
instance configuration and a 2-node BM.GPU4.8 cluster network, a second run changes nothing, and the
teardown playbook leaves nothing billable - checked through the SDK, not through our own modules."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import oci
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = os.path.join(ROOT, 'tests', 'integration', 'provision')
VENV_BIN = os.path.dirname(sys.executable)

pytestmark = pytest.mark.slow


@pytest.fixture
def simulator(tmp_path):
    proc = subprocess.Popen([sys.executable, '-m', 'tests.ocisim', '--port', '0', '--scale', '0.01',
                             '--write-config', str(tmp_path / 'oci' / 'config')],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        yield info
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def playbook(name, sim, tmp_path, check=False, **extra_vars):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'),
               OCI_CONFIG_FILE=sim['config_file'], OCI_CONFIG_PROFILE=sim['profile'], OCI_REGION=sim['region'],
               OCIGPU_SERVICE_ENDPOINT=sim['endpoint'], ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_CALLBACKS_ENABLED='ansible.posix.profile_tasks')
    cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', os.path.join(PLAYBOOKS, name),
           '-e', json.dumps(dict(compartment_id=sim['compartment_id'], **extra_vars))] + (['--check'] if check else [])
    # cwd outside the checkout: the repository's ansible.cfg (callbacks, fact cache) stays out of it.
    out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600, check=False)
    print(out.stdout[-4000:], out.stderr[-2000:])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    recap = re.search(r'localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', out.stdout)
    return dict(ok=int(recap.group(1)), changed=int(recap.group(2)), failed=int(recap.group(4)))


def clients(sim):
    config = oci.config.from_file(sim['config_file'], sim['profile'])
    kw = dict(service_endpoint=sim['endpoint'])
    return (oci.core.ComputeClient(config, **kw), oci.core.ComputeManagementClient(config, **kw),
            oci.core.VirtualNetworkClient(config, **kw))


def everything(sim):
    compute, cm, vn = clients(sim)
    comp = sim['compartment_id']
    lst = oci.pagination.list_call_get_all_results
    return dict(
        instances=[i for i in lst(compute.list_instances, comp).data if i.lifecycle_state != 'TERMINATED'],
        cluster_networks=[c for c in lst(cm.list_cluster_networks, comp).data if c.lifecycle_state != 'TERMINATED'],
        instance_configurations=lst(cm.list_instance_configurations, comp).data,
        vcns=[v for v in lst(vn.list_vcns, comp).data if v.lifecycle_state != 'TERMINATED'],
    )


def test_seed001_provision_rerun_teardown(simulator, tmp_path):
    key = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    compute, _cm, _vn = clients(simulator)
    ad = sorted(a.name for a in oci.identity.IdentityClient(
        oci.config.from_file(simulator['config_file']), service_endpoint=simulator['endpoint'])
        .list_availability_domains(simulator['compartment_id']).data)[0]
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
