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
    # One label per instance that came up (the 10, and the failed pull's node once more).
    assert up['PUT /instances/{instanceId}'] <= 1.1
    # Each of the 11 instances is read once by its label and its VNIC once by the service (the address for
    # Slurm); the pull server reads both again for each of the 11 joins and the one failure report.
    assert up['GET /instances/{instanceId}'] <= 2.5
    assert up['GET /vnics/{vnicId}'] <= 2.5
    # One create per job, one more per stock-out (two) and per failed pull (one).
    assert burst['cluster_networks_created'] + burst['stockouts'] <= burst['jobs'] + 3
    assert up['POST /clusterNetworks'] * 10 <= burst['jobs'] + 3
    assert burst['oci_calls_up'] <= 20 * 10
    down = burst['oci_calls_per_node_down']
    # The release: the cluster networks still up are terminated, each once.
    assert down.get('DELETE /clusterNetworks/{clusterNetworkId}', 0) * 10 <= burst['jobs']


def test_slurm_is_told_each_address_once_and_reconfigured_in_batches(burst):
    calls = burst['scontrol_calls']
    # One address per node that came up: the 10, and the failed pull's node again.
    assert calls['nodeaddr'] <= 11
    # topology.conf is rewritten for each group that came up, slurmctld reconfigured at most once per rewrite.
    assert burst['topology_rewrites'] >= 1
    assert 1 <= burst['reconfigures'] <= burst['topology_rewrites']
    # A job told its later start once per failed resume (two stock-outs, one failed pull), and once more when
    # hosts are freed; a refusal ("no longer pending") is not tried again and again.
    assert calls.get('jobid starttime', 0) <= 4
    assert burst['scontrol_total'] <= 40
