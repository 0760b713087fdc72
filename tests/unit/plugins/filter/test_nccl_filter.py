# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_parse filter, and the 4x H200 proof: the role's recorded runs agree with the direct
all_reduce_perf run of the same call within 2 % at every size."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.ocigpu.cluster.plugins.filter.nccl import FilterModule

DATA = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'nccl'
parse = FilterModule().filters()['nccl_parse']


def direct_busbw(text):
    """busbw per size read straight from the columns (sizes in column 1, busbw in 8 and 12)."""
    out = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) >= 13 and t[0].isdigit():
            out[int(t[0])] = max(float(t[7]), float(t[11]))
    return out


def test_filter_is_registered_and_parses():
    p = parse((DATA / 'seed000_a100_8gpu_10g.txt').read_text())
    assert p['rows'][0]['out_of_place']['busbw'] == 232.04


@pytest.mark.parametrize('name', ['h200x4_role_node_1g_16g.txt', 'h200x4_role_node_shape_gate_1g_16g.txt',
                                  'h200x4_role_mpirun_4ranks_1g_16g.txt'])
def test_h200_role_runs_match_the_direct_run(name):
    direct = direct_busbw((DATA / 'h200x4_direct_1g_16g.txt').read_text())
    rows = parse((DATA / name).read_text())['rows']
    assert sorted(direct) == [r['size'] for r in rows]
    for row in rows:
        role = max(row['out_of_place']['busbw'], row['in_place']['busbw'])
        assert abs(role - direct[row['size']]) / direct[row['size']] <= 0.02, (row['size'], role, direct[row['size']])
    # The reference figure for 4x H200 with NVLink multicast off: 365 GB/s at 8 GiB.
    at_8g = [r for r in rows if r['size'] == 8 * 2 ** 30][0]
    assert max(at_8g['out_of_place']['busbw'], at_8g['in_place']['busbw']) == pytest.approx(365, rel=0.02)


gate = FilterModule().filters()['nccl_gate']


def test_nccl_gate_judges_one_run_by_the_report_rules():
    text = (DATA / 'h200x4_role_node_1g_16g.txt').read_text()
    passed = gate(text, threshold_gbps=352, args='-b 1G -e 16G -f 2', expected_ranks=4, rc=0)
    assert passed['passed'] and passed['reason'] == '' and passed['busbw_gbps'] == 365.04
    assert passed['size_bytes'] == passed['largest_size'] == 16 * 2 ** 30 and passed['threshold_gbps'] == 352.0
    assert passed['errors'] == []
    short = gate(text, threshold_gbps=396, args='-b 1G -e 16G -f 2', expected_ranks=4)
    assert not short['passed'] and short['reason'] == 'busbw 365.04 GB/s at 16 GiB is below the threshold 396.00 GB/s'
    wrong = gate(text, args='-b 1G -e 32G -f 2', expected_ranks=8, rc=1)
    assert wrong['reasons'] == ['exit status 1', '4 ranks took part, 8 expected',
                                'largest size 16 GiB is below the requested 32 GiB']
    crashed = gate('Segmentation fault', rc=139)
    assert crashed['reason'] == (
        'exit status 139; no result rows in the output (the run did not complete); error: Segmentation fault')
    assert crashed['errors'] == ['Segmentation fault'] and crashed['busbw_gbps'] is None and crashed['size_bytes'] is None
    # A run stopped by timeout(1): that one reason, whatever it printed; without timeout, only its exit status.
    for rc in (124, 137):
        hung = gate(text, threshold_gbps=352, args='-b 1G -e 16G -f 2', expected_ranks=4, rc=rc, timeout=300)
        assert not hung['passed'] and hung['reasons'] == ['did not finish within 300 s']
        assert hung['reason'] == 'did not finish within 300 s'
    assert gate(text, threshold_gbps=352, rc=124)['reasons'] == ['exit status 124']
    assert gate(text, threshold_gbps=352, args='-b 1G -e 16G -f 2', expected_ranks=4, rc=0, timeout=300)['passed']
