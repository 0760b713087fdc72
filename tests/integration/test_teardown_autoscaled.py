# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's provision and teardown playbooks with a cluster network that the Slurm autoscaler made
in between: teardown terminates it (and its nodes) before it deletes the node template the autoscaler
launches from, names it in its output, and leaves nothing billable - checked through the SDK."""
from __future__ import annotations

import os

import oci
import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ocigpu_control import scaler as _autoscale
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import Waiter
from tests.integration._helpers import COLLECTION_PLAYBOOKS, clients, everything, playbook, ssh_public_key

pytestmark = pytest.mark.slow

CLUSTER = 'tdn'
PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')
TEARDOWN = os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml')


def autoscaler(sim, tmp_path):
    """The autoscaler as the slurm_autoscaler role configures it on the controller: the cluster's node
    template and private subnet, found here through the SDK by their display names."""
    _compute, cm, vn = clients(sim)
    comp = sim['compartment_id']
    lst = oci.pagination.list_call_get_all_results
    template, = [t for t in lst(cm.list_instance_configurations, comp).data
                 if t.display_name.startswith(CLUSTER + '-gpu-template-')]  # <name>-<content hash>
    subnet, = [s for s in lst(vn.list_subnets, comp).data if s.display_name == CLUSTER + '-private']
    ad = cm.get_instance_configuration(template.id).data.instance_details.launch_details.availability_domain
    config = _autoscale.check_config(dict(
        cluster_name=CLUSTER, compartment_id=comp, availability_domain=ad, subnet_id=subnet.id,
        instance_configuration_id=template.id, nodes='gpu-[1-4]',
        auth=dict(auth_type='api_key', config_file=sim['config_file'], config_profile=sim['profile'],
                  region=sim['region'], service_endpoint=sim['endpoint']),
        state_file=str(tmp_path / 'autoscaler' / 'state.json'), log_file=str(tmp_path / 'autoscaler' / 'log'),
        wait_timeout=300))
    session = _oci.OCISession(dict(config['auth']))
    # The simulator runs in real time here (durations scaled by 0.01): poll it often.
    return _autoscale.Autoscaler(config, session=session, waiter=Waiter(session, timeout=300, initial=0.2, cap=1.0))


def test_teardown_terminates_the_autoscalers_cluster_networks(simulator, tmp_path):
    variables = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[ssh_public_key()],
                     gpu_node_count=2)
    playbook(PROVISION, simulator, tmp_path, **variables)
    provisioned = everything(simulator)
    assert [c.display_name for c in provisioned['cluster_networks']] == [CLUSTER + '-cn']

    mapping = autoscaler(simulator, tmp_path).resume('gpu-[1-2]')
    assert [m['name'] for m in mapping] == ['gpu-1', 'gpu-2']
    scaled = [c for c in everything(simulator)['cluster_networks'] if c.display_name != CLUSTER + '-cn']
    assert [(c.display_name, c.lifecycle_state, c.freeform_tags) for c in scaled] == [
        (CLUSTER + '-gpu-1-2', 'RUNNING',
         {'ocigpu-cluster': CLUSTER, 'ocigpu-slurm-nodes': 'gpu-[1-2]', 'ocigpu-autoscaler': 'true'})]
    autoscaled_nodes = {m['id'] for m in mapping}
    assert autoscaled_nodes <= {i.id for i in everything(simulator)['instances']}

    # --check predicts both cluster networks' removal and changes nothing.
    predicted = playbook(TEARDOWN, simulator, tmp_path, check=True, cluster_name=CLUSTER)
    assert 'would remove 1 cluster network(s) of the Slurm autoscaler: %s-gpu-1-2 (%s, Slurm nodes gpu-[1-2])' % (
        CLUSTER, scaled[0].id) in predicted['stdout']
    still = everything(simulator)
    assert len(still['cluster_networks']) == 2 and autoscaled_nodes <= {i.id for i in still['instances']}

    down = playbook(TEARDOWN, simulator, tmp_path, cluster_name=CLUSTER)
    assert 'removed 1 cluster network(s) of the Slurm autoscaler: %s-gpu-1-2 (%s, Slurm nodes gpu-[1-2])' % (
        CLUSTER, scaled[0].id) in down['stdout']
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout']  # cluster_info: billable == 0
    left = everything(simulator)
    assert left == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[]), left

    again = playbook(TEARDOWN, simulator, tmp_path, cluster_name=CLUSTER)
    assert again['changed'] == 0
    assert 'removed no cluster network of the Slurm autoscaler' in again['stdout']
