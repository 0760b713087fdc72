# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burst benchmark (tests/perf/burst_bench.py) at 10 nodes: the real service, programs and pull server
against the simulator throttling per operation, with a stock-out of each kind and a failed pull. Bounds on
what the burst costs (OCI calls per node, scontrol calls, reconfigures), none on time."""
from __future__ import annotations

import os

import pytest

from tests.perf import burst_bench

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason='a join comes from a privileged source port (root)')]


@pytest.fixture(scope='module')
def burst(tmp_path_factory):
    _args, figs = burst_bench.measure([
        '--nodes', '10', '--provision-s', '3', '--terminate-s', '2', '--spread', '0', '--configure-s', '0.5',
        '--stockouts', '1', '--short', '1', '--pull-failures', '1', '--backoff', '1,1,1', '--suspend-time', '2',
        '--suspend-timeout', '2', '--limit', '240', '--release-limit', '120', '--work', str(tmp_path_factory.mktemp('burst'))])
    return figs[0]


def test_every_node_joins_and_nothing_is_left(burst):
    assert burst['joined'] == 10 and burst['gave_up'] == 0
    assert burst['nodes_left_down'] == [] and burst['billable_left'] == 0
    # 3 jobs (one of 8 nodes, two of 1): each resumed by one program run, more after a stock-out or the failed pull.
    assert burst['jobs'] == 3 and burst['resume_programs'] >= 3
    assert burst['pull_failure_reports'] == 1 and burst['work_requests_failed'] == 1


def test_oci_calls_grow_by_a_small_constant_per_node(burst):
    up = burst['oci_calls_per_node_up']
    # One label per instance that came up (the 10, and the failed pull's node once more), written from the
    # listing of instances: no read before it.
    assert up['PUT /instances/{instanceId}'] <= 1.1
    # No instance or VNIC is read on its own: the service (addresses for Slurm, labels, hosts) and the pull
    # server (each join's check) read shared listings of the compartment, at most one of each kind per join
    # or per job.
    assert up.get('GET /instances/{instanceId}', 0) <= 0.2 and up.get('GET /vnics/{vnicId}', 0) <= 0.2
    for listing in ('GET /instances', 'GET /vnicAttachments', 'GET /privateIps', 'GET /computeHosts'):
        assert up.get(listing, 0) <= 1.5, listing
    # One create per job, one more per stock-out (two) and per failed pull (one).
    assert burst['cluster_networks_created'] + burst['stockouts'] <= burst['jobs'] + 3
    assert up['POST /clusterNetworks'] * 10 <= burst['jobs'] + 3
    assert burst['oci_calls_up'] <= 12 * 10
    down = burst['oci_calls_per_node_down']
    # The release: the cluster networks still up are terminated, each once.
    assert down.get('DELETE /clusterNetworks/{clusterNetworkId}', 0) * 10 <= burst['jobs']


def test_slurm_is_told_each_address_once_and_reconfigured_in_batches(burst):
    calls = burst['scontrol_calls']
    # One `scontrol update` with the addresses of all its nodes per job that came up, and one more for a job
    # whose resume failed (two stock-outs, one failed pull).
    assert calls['nodeaddr'] <= burst['jobs'] + 3
    # topology.conf is rendered once per batch of placements, twice when placements come while the batch's
    # reconfigure waits for booting nodes; one reconfigure follows each batch, and none is left unread by
    # slurmctld (no rewrite after the last reconfigure).
    assert 1 <= burst['reconfigures'] <= burst['jobs'] + 3
    assert burst['topology_rewrites'] <= 2 * burst['reconfigures']
    assert burst['rewrites_not_reconfigured'] == 0
    # A job told its later start once per failed resume (two stock-outs, one failed pull), and after each of
    # the two stock-outs at most once more when hosts are freed (never once it has resumed); a refusal ("no
    # longer pending") is not tried again and again.
    assert calls.get('jobid starttime', 0) <= 5
    assert burst['scontrol_total'] <= 40
