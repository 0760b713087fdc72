# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_report, nccl_health and nccl_toolchain run in-process on recorded outputs and a fake node
(tmp_path folders with stand-in nvidia-smi, nvcc and mpicc programs)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ocigpu.cluster.plugins.modules import nccl_health, nccl_report, nccl_toolchain
from tests.unit.plugins.modules._helpers import fake_toolchain, script

DATA = pathlib.Path(__file__).resolve().parents[2] / 'data' / 'nccl'


def call(module, args, capsys, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    capsys.readouterr()
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def h200_runs(threshold):
    return [{'name': 'gpu-1', 'output': (DATA / 'h200x4_role_node_1g_16g.txt').read_text(),
             'threshold_gbps': threshold, 'args': '-b 1G -e 16G -f 2 -n 50', 'expected_ranks': 4, 'rc': 0}]


def test_report_passes_and_writes_files(tmp_path, capsys):
    result = call(nccl_report, {'runs': h200_runs(330), 'dest': str(tmp_path / 'r'), 'plot': False}, capsys)
    assert not result.get('failed') and result['passed'] and result['changed']
    assert result['runs'][0]['busbw_gbps'] == 365.04 and result['runs'][0]['largest_size'] == 16 * 2 ** 30
    assert sorted(os.listdir(tmp_path / 'r')) == ['report.json', 'report.md']


def test_report_fails_with_the_table(tmp_path, capsys):
    result = call(nccl_report, {'runs': h200_runs(440), 'dest': str(tmp_path / 'r'), 'plot': False}, capsys)
    assert result['failed'] and not result['passed']
    assert result['msg'].startswith('NCCL validation failed:\nrun ')
    assert 'gpu-1  node   4      16 GiB  365.04      440.00     FAIL: busbw 365.04 GB/s at 16 GiB' in result['msg']
    assert (tmp_path / 'r' / 'report.json').is_file()  # written before the play stops


def test_report_check_mode_writes_nothing(tmp_path, capsys):
    result = call(nccl_report, {'runs': h200_runs(440), 'dest': str(tmp_path / 'r'), 'fail_on_gate': False},
                  capsys, check=True)
    assert not result.get('failed') and result['passed'] is False and result['paths'] == {}
    assert not (tmp_path / 'r').exists()


def test_health_module(tmp_path, capsys):
    smi = script(tmp_path / 'bin' / 'nvidia-smi',
                 'for i in 0 1 2 3; do echo "$i, 00000000:0$i:00.0, NVIDIA H200, 0"; done\n')
    args = {'node_name': 'gpu-1', 'expected_gpus': 4, 'check_xid': False, 'nvidia_smi': smi,
            'sysfs_root': str(tmp_path / 'none')}
    ok = call(nccl_health, args, capsys, check=True)
    assert not ok.get('failed') and [c['check'] for c in ok['checks']] == ['gpu_count', 'ecc']
    bad = call(nccl_health, dict(args, expected_gpus=8, expected_hcas=['mlx5_0']), capsys)
    assert bad['failed']
    assert bad['msg'] == ('health check failed on gpu-1: 4 GPUs visible, the shape has 8; '
                          'gpu-1: RDMA ports: mlx5_0 missing')


def test_toolchain_finds_what_is_there(tmp_path, capsys):
    cuda, nccl, mpi, mpicc = fake_toolchain(tmp_path, tmp_path / 'bin', '13.0, V13.0.88', (2, 28, 3))
    args = {'cuda_home': str(cuda), 'nccl_home': str(nccl), 'mpi': 'required', 'mpicc': mpicc}
    result = call(nccl_toolchain, args, capsys, check=True)
    assert not result.get('failed'), result
    assert result['cuda'] == {'home': str(cuda), 'nvcc': str(cuda / 'bin' / 'nvcc'), 'version': '13.0'}
    assert result['nccl'] == {'lib_dir': str(nccl / 'lib'), 'include_dir': str(nccl / 'include'), 'version': '2.28.3'}
    assert result['mpi'] == {'found': True, 'mpicc': mpicc, 'include_dir': str(mpi / 'include'), 'lib_dir': str(mpi / 'lib')}
    assert set(result['launchers']) == {'srun', 'mpirun'}


def test_toolchain_says_what_is_missing(tmp_path, capsys):
    result = call(nccl_toolchain, {'cuda_home': str(tmp_path / 'nocuda'), 'nccl_home': str(tmp_path / 'nonccl'),
                                   'mpi': 'off'}, capsys)
    assert result['failed']
    assert result['msg'] == ('nccl-tests toolchain incomplete: nvcc (CUDA toolkit) not found under %s; '
                             'libnccl.so not found (linker cache, %s); nccl.h not found (install the NCCL '
                             'development package)' % (tmp_path / 'nocuda', tmp_path / 'nonccl'))
