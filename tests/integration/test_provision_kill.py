# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kill -9 anywhere (issue 16): provision.yml is killed - SIGKILL to its whole process group, modules
included - right after the simulator received a chosen call: inside the network, right after the bastion's
launch, during the node template, right after the cluster network create, while it provisions, and during
a resize up and down. A plain re-run then leaves exactly the expected resources - nothing duplicated,
nothing orphaned - and teardown.yml leaves nothing billable.

The simulator counts each call on arrival; the test polls its counters and sends the kill itself.

The creation points are reached in turn, each by a run that starts from what the run killed before it
left: that run must itself get past the earlier point (adopt what exists, create what is missing) to be
killed at the next one, and what a run duplicated or orphaned stays to the end, where the resources are
counted exactly. The point inside the cluster network's provisioning comes after its create, which a
re-run never repeats, so it starts from an empty compartment, beside the chain."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, admin, playbook, playbook_command, ssh_public_key

pytestmark = pytest.mark.slow

PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')
TEARDOWN = os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml')
CLUSTER = 'kill'
KEY = ssh_public_key()
NETWORK_KINDS = ('vcns', 'subnets', 'internet_gateways', 'nat_gateways', 'service_gateways', 'route_tables',
                 'security_lists')
# (where, the call after which the kill is sent, how many of it), in the order one run reaches them
CREATE_POINTS = [
    ('inside the network (after the first subnet)', 'POST /subnets', 1),
    ("right after the bastion's launch", 'POST /instances', 1),
    ('during the node template', 'POST /instanceConfigurations', 1),
    ('right after the cluster network create', 'POST /clusterNetworks', 1),
]
PROVISIONING_POINT = ('while the cluster network provisions (its work request polled)',
                      'GET /workRequests/{workRequestId}', 2)


def cluster_vars(nodes, **more):
    return dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[KEY],
                gpu_node_count=nodes, gpu_drain=False, **more)


def killed_run(sim, tmp_path, route, count, variables):
    """Start provision.yml, SIGKILL its process group once the simulator has received `count` calls of
    `route`; the run must not have finished first."""
    admin(sim, 'POST', '/calls/reset')
    cmd, env = playbook_command(PROVISION, sim, tmp_path, **variables)
    with open(tmp_path / 'killed.log', 'w') as log:
        proc = subprocess.Popen(cmd, cwd=str(tmp_path), env=env, stdout=log, stderr=subprocess.STDOUT,  # pylint: disable=consider-using-with
                                start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while admin(sim, 'GET', '/calls').get(route, 0) < count:
            assert proc.poll() is None, 'provision.yml ended before %s x%d: %s' % (
                route, count, (tmp_path / 'killed.log').read_text()[-3000:])
            assert time.monotonic() < deadline, 'no %s within 300 s' % route
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def live(sim, kind):
    return [r for r in admin(sim, 'GET', '/state/' + kind) if r.get('lifecycleState') not in ('TERMINATED', 'DELETED')]


def assert_exactly(sim, nodes):
    """One network of the seeds, one bastion, one node template, one cluster network of `nodes` running nodes,
    and no other live instance."""
    counts = dict((kind, len(live(sim, kind))) for kind in NETWORK_KINDS)
    # The VCN's default route table and security list come with it: 1 + the collection's 2 each.
    assert counts == dict(vcns=1, subnets=2, internet_gateways=1, nat_gateways=1, service_gateways=1, route_tables=3,
                          security_lists=3), counts
    instances = live(sim, 'instances')
    assert sorted(i['lifecycleState'] for i in instances) == ['RUNNING'] * (nodes + 1), instances
    assert len([i for i in instances if i['displayName'] == CLUSTER + '-bastion']) == 1
    networks = live(sim, 'cluster_networks')
    assert [(c['displayName'], c['lifecycleState']) for c in networks] == [(CLUSTER + '-cn', 'RUNNING')]
    assert len(admin(sim, 'GET', '/state/instance_configurations')) == 1
    pools = live(sim, 'instance_pools')
    assert len(pools) == 1 and pools[0]['size'] == nodes


def assert_torn_down(sim, tmp_path, where):
    """teardown.yml says nothing billable is left, and no instance, cluster network or network resource lives."""
    down = playbook(TEARDOWN, sim, tmp_path, **cluster_vars(2))
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout'], where
    assert live(sim, 'instances') == [] and live(sim, 'cluster_networks') == [], where
    assert all(live(sim, kind) == [] for kind in NETWORK_KINDS), where


def assert_re_run_leaves_exactly_the_cluster(sim, tmp_path, where):
    """After the kills: a plain re-run succeeds and leaves exactly the cluster, a second one changes nothing,
    and teardown.yml leaves nothing billable."""
    again = playbook(PROVISION, sim, tmp_path, **cluster_vars(2))
    assert again['failed'] == 0, where
    assert_exactly(sim, 2)
    assert playbook(PROVISION, sim, tmp_path, **cluster_vars(2))['changed'] == 0, where
    assert_torn_down(sim, tmp_path, where)


def test_provision_killed_at_each_point_in_turn_then_re_run_leaves_exactly_the_cluster(simulator, tmp_path):
    for _where, route, count in CREATE_POINTS:
        killed_run(simulator, tmp_path, route, count, cluster_vars(2))
    assert_re_run_leaves_exactly_the_cluster(simulator, tmp_path,
                                             'after the kills at %s' % ', '.join(p[1] for p in CREATE_POINTS))


def test_provision_killed_while_the_cluster_network_provisions_then_re_run_leaves_exactly_the_cluster(
        simulator, tmp_path):
    where, route, count = PROVISIONING_POINT
    killed_run(simulator, tmp_path, route, count, cluster_vars(2))
    assert_re_run_leaves_exactly_the_cluster(simulator, tmp_path, where)


def test_resize_killed_up_and_down_then_re_run_leaves_exactly_the_cluster(simulator, tmp_path):
    # During a resize: up (the size update sent), then down (the first of two detaches sent).
    playbook(PROVISION, simulator, tmp_path, **cluster_vars(2))
    killed_run(simulator, tmp_path, 'PUT /clusterNetworks/{clusterNetworkId}', 1, cluster_vars(4))
    playbook(PROVISION, simulator, tmp_path, **cluster_vars(4))
    assert_exactly(simulator, 4)
    nodes = sorted(i['displayName'] for i in live(simulator, 'instances') if i['displayName'] != CLUSTER + '-bastion')
    going = nodes[:2]
    killed_run(simulator, tmp_path, 'POST /instancePools/{instancePoolId}/actions/detachInstance', 1,
               cluster_vars(2, gpu_remove_nodes=going))
    playbook(PROVISION, simulator, tmp_path, **cluster_vars(2, gpu_remove_nodes=going))
    assert_exactly(simulator, 2)
    assert sorted(i['displayName'] for i in live(simulator, 'instances')
                  if i['displayName'] != CLUSTER + '-bastion') == nodes[2:]
    assert playbook(PROVISION, simulator, tmp_path, **cluster_vars(2, gpu_remove_nodes=going))['changed'] == 0

    assert_torn_down(simulator, tmp_path, 'after the resizes')
