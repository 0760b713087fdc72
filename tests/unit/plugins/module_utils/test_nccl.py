# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser, gates and health checks of plugins/module_utils/_nccl.py and the report of the nccl_report module, on
recorded outputs: the seeds' printed tables and the runs of the nccl_tests role on 4x H200
(tests/unit/data/nccl)."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _health as health
from ansible_collections.ocigpu.cluster.plugins.module_utils import _nccl as nccl
from ansible_collections.ocigpu.cluster.plugins.modules import nccl_report

DATA = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'nccl'


def load(name):
    return (DATA / name).read_text(encoding='utf-8')


def parsed(name):
    return nccl.parse_output(load(name))


# --- parser --------------------------------------------------------------------------------

def test_seed000_a100_single_row():
    p = parsed('seed000_a100_8gpu_10g.txt')
    assert len(p['rows']) == 1
    row = p['rows'][0]
    assert row['size'] == 10737418240 and row['count'] == 2684354560
    assert row['type'] == 'float' and row['redop'] == 'sum' and row['root'] == -1
    assert row['out_of_place'] == {'time_us': 80978.0, 'algbw': 132.60, 'busbw': 232.04, 'wrong': 0}
    assert row['in_place'] == {'time_us': 81154.0, 'algbw': 132.31, 'busbw': 231.54, 'wrong': 0}
    assert p['avg_busbw'] == pytest.approx(231.793)
    assert p['out_of_bounds'] == 0
    assert p['params']['ngpus'] == 8 and p['params']['maxbytes'] == 10737418240
    assert [d['rank'] for d in p['devices']] == list(range(8))
    assert p['devices'][0]['gpu'] == 'NVIDIA A100-SXM4-40GB'
    assert p['devices'][0]['bus_id'] == '0000:0f:00'
    assert p['hosts'] == ['a4bae1424041']
    assert p['errors'] == []


def test_seed001_every_row_is_parsed():
    p = parsed('seed001_a100_8gpu_64b_10g.txt')
    sizes = [r['size'] for r in p['rows']]
    assert sizes == [64 * 2 ** i for i in range(28)]  # 64 B .. 8 GiB, one row each
    assert p['rows'][-1]['in_place']['busbw'] == 235.21
    assert p['rows'][21]['out_of_place']['busbw'] == 197.17  # the 128 MiB dip, not only the average


def test_seed001_two_nodes_hosts_and_ranks():
    p = parsed('seed001_a100_2node_16gpu.txt')
    assert p['hosts'] == ['inst-ks8ls-comp', 'inst-6ejzf-comp']
    assert len(p['devices']) == 16
    assert p['params']['ngpus'] == 1
    assert nccl.row_busbw(p['rows'][-1]) == 71.56


def test_seed003_fragment_with_repeated_header():
    """Seed 003 shows only `grep -A2 busbw` of the job log: header lines and one row."""
    p = parsed('seed003_a100_2node_10g_fragment.txt')
    assert len(p['rows']) == 1
    assert nccl.row_busbw(p['rows'][0]) == 224.87
    assert p['devices'] == [] and p['avg_busbw'] is None


def test_h200_run_of_nccl_tests_2_19():
    p = parsed('h200x4_role_node_1g_16g.txt')
    assert p['version'] == '2.19.6' and p['nccl_version'] == 22803
    assert p['collective'] == 'all_reduce_perf'
    assert [r['size'] for r in p['rows']] == [2 ** 30 * 2 ** i for i in range(5)]
    assert p['params']['iters'] == 50
    assert len(p['devices']) == 4 and {d['gpu'] for d in p['devices']} == {'NVIDIA H200'}


def test_rows_need_the_header():
    """Numbers printed before the header (a launcher's noise) are not result rows."""
    text = '1024 256 float sum -1 1 2 3 0 1 2 3 0\n' + load('seed000_a100_8gpu_10g.txt')
    assert len(nccl.parse_output(text)['rows']) == 1


def test_validation_off_and_per_iteration_columns():
    text = '\n'.join([
        '#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ',
        '     1048576        262144     float     sum      -1    40.12   26.14   39.21     N/A    39.90   26.28   39.42     N/A',
        '# size count type redop root time algbw busbw #wrong i_min i_max i_p99 i_cv% time algbw busbw #wrong i_min i_max i_p99 i_cv%',
        ' 2097152 524288 float sum -1 50.0 41.9 62.9 0 49 51 51 1.2 51.0 41.1 61.7 0 50 52 52 1.1',
    ])
    rows = nccl.parse_output(text)['rows']
    assert rows[0]['out_of_place']['wrong'] is None and nccl.row_wrong(rows[0]) is None
    assert rows[1]['out_of_place']['busbw'] == 62.9 and rows[1]['in_place']['busbw'] == 61.7
    assert rows[1]['in_place']['time_us'] == 51.0


def test_error_lines_are_kept():
    text = load('seed000_a100_8gpu_10g.txt') + '\nvm: Test NCCL failure common.cu:1200 \'unhandled system error\'\n'
    p = nccl.parse_output(text)
    assert len(p['errors']) == 1 and 'unhandled system error' in p['errors'][0]


def test_sizes():
    assert nccl.parse_size('1G') == 2 ** 30 and nccl.parse_size('512K') == 512 * 1024 and nccl.parse_size('64') == 64
    with pytest.raises(ValueError):
        nccl.parse_size('1.5G')
    assert nccl.format_size(8589934592) == '8 GiB' and nccl.format_size(1536) == '1.5 KiB'
    assert nccl.format_size(64) == '64 B'
    assert nccl.size_args('-b 1G -e 16G -f 2 -n 50') == (2 ** 30, 16 * 2 ** 30, 2)
    assert nccl.expected_largest_size('-b 64 -e 10G -f 2') == 8 * 2 ** 30
    assert nccl.expected_largest_size('-b 10G -e 10G -f 2') == 10 * 2 ** 30
    assert nccl.expected_largest_size('-n 20') is None


# --- gates ---------------------------------------------------------------------------------

@pytest.mark.parametrize('name, threshold, passed, busbw', [
    ('seed000_a100_8gpu_10g.txt', 185, True, 232.04),          # seed 000: 8x A100
    ('seed000_v100_8gpu_1g.txt', 185, False, 135.50),          # V100 against the A100 gate
    ('seed001_a100_8gpu_64b_10g.txt', 185, True, 235.21),      # seed 001: one node
    ('seed001_a100_2node_16gpu.txt', 185, False, 71.56),       # seed 001: 2 nodes before tuning
    ('seed003_a100_2node_10g_fragment.txt', 185, True, 224.87),  # seed 003: 2 nodes after tuning
    ('h200x4_role_node_1g_16g.txt', 440, False, 365.04),       # 4x H200 against the 8-GPU gate
    ('h200x4_role_node_1g_16g.txt', 330, True, 365.04),
])
def test_gate_on_recorded_runs(name, threshold, passed, busbw):
    verdict = nccl.gate(parsed(name), threshold_gbps=threshold)
    assert verdict['passed'] is passed, verdict
    assert verdict['busbw_gbps'] == busbw
    if not passed:
        assert any('below the threshold %.2f' % threshold in r for r in verdict['reasons'])


def test_gate_uses_the_largest_size_not_the_peak_or_average():
    p = parsed('seed001_a100_8gpu_64b_10g.txt')
    p['rows'][-1]['out_of_place']['busbw'] = 100.0
    p['rows'][-1]['in_place']['busbw'] = 101.0
    verdict = nccl.gate(p, threshold_gbps=185)
    assert not verdict['passed'] and verdict['busbw_gbps'] == 101.0
    assert verdict['peak_busbw_gbps'] == 234.17 and verdict['avg_busbw_gbps'] == pytest.approx(81.112)


def test_gate_fails_without_rows_and_on_exit_status():
    verdict = nccl.gate(nccl.parse_output('mpirun noticed that process rank 3 exited on signal 11\n'), 185, rc=139)
    assert not verdict['passed']
    assert verdict['reasons'][0] == 'exit status 139'
    assert 'no result rows' in verdict['reasons'][1]
    assert any('mpirun noticed' in r for r in verdict['reasons'])


def test_gate_fails_on_wrong_elements_and_out_of_bounds():
    text = load('seed000_a100_8gpu_10g.txt').replace('232.04      0', '232.04      3').replace(
        'Out of bounds values : 0 OK', 'Out of bounds values : 3 FAILED')
    verdict = nccl.gate(nccl.parse_output(text), 185)
    assert not verdict['passed']
    assert 'wrong elements at 10 GiB' in verdict['reasons']
    assert '3 out-of-bounds values' in verdict['reasons']


def test_gate_checks_ranks_and_requested_size():
    p = parsed('seed001_a100_2node_16gpu.txt')
    verdict = nccl.gate(p, None, expected_max_bytes=16 * 2 ** 30, expected_ranks=8)
    assert verdict['reasons'] == ['16 ranks took part, 8 expected', 'largest size 8 GiB is below the requested 16 GiB']
    assert nccl.gate(p, None, expected_max_bytes=nccl.expected_largest_size('-b 64 -e 10G -f 2'),
                     expected_ranks=16)['passed']


def test_gate_without_threshold_checks_errors_only():
    assert nccl.gate(parsed('seed000_v100_8gpu_1g.txt'), None)['passed']


# --- health --------------------------------------------------------------------------------

SMI = ('0, 00000000:0F:00.0, NVIDIA A100-SXM4-40GB, 0\n1, 00000000:15:00.0, NVIDIA A100-SXM4-40GB, 2\n'
       '2, 00000000:51:00.0, NVIDIA A100-SXM4-40GB, [N/A]\n')


def test_nvidia_smi_and_xid_parsing():
    gpus = health.gpu_list(health.parse_gpu_query(SMI))
    assert [g['ecc_uncorrected'] for g in gpus] == [0, 2, None]
    xids = health.find_xids('NVRM: Xid (PCI:0000:0f:00): 79, pid=0, GPU has fallen off the bus.\nother\n')
    assert xids[0]['xid'] == 79 and xids[0]['pci'] == 'PCI:0000:0f:00'


def test_health_failures_name_node_and_reason(tmp_path):
    ib = tmp_path / 'infiniband'
    for dev, state in (('mlx5_0', '4: ACTIVE'), ('mlx5_2', '1: DOWN')):
        port = ib / dev / 'ports' / '1'
        port.mkdir(parents=True)
        (port / 'state').write_text(state + '\n')
        (port / 'phys_state').write_text('5: LinkUp\n')
        (port / 'link_layer').write_text('Ethernet\n')
    checks = nccl.evaluate_health(
        'gpu-1', gpus=health.parse_gpu_query(SMI), expected_gpus=8,
        xids=health.find_xids('NVRM: Xid (PCI:0000:15:00): 48, pid=1'),
        ib_ports=health.read_ib_ports(str(ib)), expected_hcas=['mlx5_0', 'mlx5_2', 'mlx5_6'],
        mounts_text='/dev/sda1 / ext4 rw 0 0\n', scratch_path='/mnt/localdisk')
    failed = {c['check']: c['reason'] for c in checks if c['ok'] is False}
    assert failed == {
        'gpu_count': 'gpu-1: 3 GPUs visible, the shape has 8',
        'ecc': 'gpu-1: GPU 1 (00000000:15:00.0): 2 uncorrected ECC errors',
        'xid': 'gpu-1: XID errors in the kernel log since boot: Xid 48 on PCI:0000:15:00',
        'rdma_links': 'gpu-1: RDMA ports: mlx5_2/1 DOWN; mlx5_6 missing',
        'nvme_scratch': 'gpu-1: NVMe scratch /mnt/localdisk is not mounted',
    }


def test_health_passes_and_unreadable_log_is_not_a_pass():
    mounts = '/dev/mapper/nvme-lv /mnt/localdisk xfs rw,noatime 0 0\n'
    checks = nccl.evaluate_health('gpu-2', gpus=health.parse_gpu_query(SMI.replace(', 2\n', ', 0\n')), expected_gpus=3,
                                  xids=[], xid_log_readable=False, mounts_text=mounts, scratch_path='/mnt/localdisk/')
    by = {c['check']: c for c in checks}
    assert by['gpu_count']['ok'] and by['ecc']['ok'] and by['nvme_scratch']['ok']
    assert 'xfs' in by['nvme_scratch']['reason']
    assert by['xid']['ok'] is None and 'not run' in by['xid']['reason']
    assert 'rdma_links' not in by


def test_health_without_nvidia_smi():
    checks = nccl.evaluate_health('gpu-3', gpus=None, expected_gpus=8)
    assert checks == [{'check': 'gpu_count', 'ok': False, 'reason': 'gpu-3: nvidia-smi did not answer (driver not loaded?)',
                       'short': 'nvidia-smi failed'}]


# --- report --------------------------------------------------------------------------------

def seed001_runs():
    return [
        {'name': 'inst-ks8ls-comp', 'scope': 'node', 'output': load('seed001_a100_8gpu_64b_10g.txt'),
         'threshold_gbps': 185, 'args': '-b 64 -e 10G -f 2', 'expected_ranks': 8},
        {'name': 'cluster', 'scope': 'cluster', 'output': load('seed001_a100_2node_16gpu.txt'),
         'threshold_gbps': 185, 'args': '-b 64 -e 10G -f 2', 'expected_ranks': 16,
         'command': 'mpirun -np 16 ... all_reduce_perf -b 64 -e 10G -f 2 -g 1',
         'env': {'NCCL_IB_HCA': '=mlx5_0,mlx5_2'}},
    ]


def test_summary_table_names_the_run_that_falls_short():
    report = nccl_report.build_report(seed001_runs(), meta={'shape': 'BM.GPU4.8'})
    assert report['passed'] is False
    lines = nccl_report.summary_table(report).splitlines()
    assert lines[0].split() == ['run', 'scope', 'ranks', 'size', 'busbw', 'GB/s', 'threshold', 'result']
    assert lines[2].split()[:7] == ['inst-ks8ls-comp', 'node', '8', '8', 'GiB', '235.21', '185.00'] and lines[2].endswith('PASS')
    assert 'cluster' in lines[3] and '71.56' in lines[3]
    assert lines[3].endswith('FAIL: busbw 71.56 GB/s at 8 GiB is below the threshold 185.00 GB/s')


def test_report_files(tmp_path):
    pytest.importorskip('matplotlib')
    report = nccl_report.build_report(seed001_runs(), meta={'shape': 'BM.GPU4.8'})
    paths, plot_error = nccl_report.write_report(report, str(tmp_path / 'r'))
    assert plot_error is None
    data = json.loads((tmp_path / 'r' / 'report.json').read_text())
    assert data['passed'] is False and data['meta'] == {'shape': 'BM.GPU4.8'}
    assert [r['gate']['passed'] for r in data['runs']] == [True, False]
    assert len(data['runs'][0]['rows']) == 28
    # The raw output travels with the report, so it can be parsed again later.
    assert nccl.parse_output(data['runs'][1]['output'])['rows'] == data['runs'][1]['rows']
    md = (tmp_path / 'r' / 'report.md').read_text()
    assert '| cluster | cluster | 16 | 8 GiB | 71.56 | 185.00 | 71.56 | FAIL: busbw 71.56 GB/s' in md
    assert '| 8 GiB | 2147483648 | float | 225083.0 | 38.16 | 71.56 | 225082.0 | 38.16 | 71.56 | 0 |' in md
    assert '![busbw against message size](busbw.png)' in md
    assert '`NCCL_IB_HCA==mlx5_0,mlx5_2`' in md
    png = (tmp_path / 'r' / 'busbw.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 10000


def test_report_without_matplotlib(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith('matplotlib'):
            raise ImportError('No module named %r' % name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', no_matplotlib)
    paths, plot_error = nccl_report.write_report(nccl_report.build_report(seed001_runs()), str(tmp_path))
    assert 'matplotlib is not installed' in plot_error
    assert set(paths) == {'json', 'md'} and not (tmp_path / 'busbw.png').exists()
    assert 'busbw.png' not in (tmp_path / 'report.md').read_text()


def test_empty_report_does_not_pass():
    assert nccl_report.build_report([])['passed'] is False
