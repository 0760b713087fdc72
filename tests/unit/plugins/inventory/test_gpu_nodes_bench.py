# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's logic at a tiny scale: `ansible-inventory --list` in a subprocess against the
simulator as a server (end to end), checked against the simulator's truth, cold then warm cache,
and the call count equal to the formula that has no per-instance term."""

from __future__ import annotations

from tests.perf import inventory_bench as bench


def test_ansible_inventory_cli_end_to_end_cold_and_warm(tmp_path):
    params = dict(compartments=2, instances=60, gpu_nodes=6, clusters=2, latency=0.002)
    result = bench.measure('tiny', str(tmp_path), params=params)  # raises if the inventory != truth
    assert result['gpu_nodes'] == 6 and result['hosts'] == 8
    # root + ocigpu-test + 2 compartments; per cluster 2 subnets, 1 cluster network, 1 bastion VNIC
    assert result['cold_calls'] == result['expected_calls'] == bench.expected_calls(4, 2)
    assert result['warm_calls'] == 0
    assert result['cold_plugin'] is not None and result['warm_plugin'] is not None
    text = bench.report([result], baseline=1.0)
    assert 'tiny' in text and 'reproduce:' in text
