# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where validate.yml builds nccl-tests (nccl_toolchain's build option): on the host when its
toolchain is complete, else in a container image through enroot; the module runs in-process on a
fake node (tmp_path folders with stand-in nvcc, mpicc and enroot programs, PATH pointed at them)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ocigpu.cluster.plugins.modules import nccl_toolchain
from tests.unit.plugins.modules._helpers import fake_toolchain, script

IMAGE = 'nvcr.io#nvidia/tensorflow:24.06-tf2-py3'


def call(args, capsys):
    capsys.readouterr()
    with patch_module_args(dict(args, _ansible_check_mode=True)):
        with pytest.raises(SystemExit):
            nccl_toolchain.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node with CUDA, NCCL (lib and header) and Open MPI under tmp_path, and enroot on the PATH;
    each test takes away what it needs gone."""
    bin_dir = tmp_path / 'bin'
    cuda, nccl = fake_toolchain(tmp_path, bin_dir, '12.8, V12.8.93', (2, 27, 7))[:2]
    script(bin_dir / 'enroot', 'exit 0\n')
    monkeypatch.setenv('PATH', str(bin_dir))
    return {'root': tmp_path, 'args': {'cuda_home': str(cuda), 'nccl_home': str(nccl), 'mpi': 'auto', 'build': 'auto',
                                       'container_image': IMAGE}}


def test_auto_builds_on_a_complete_host(node, capsys):
    result = call(node['args'], capsys)
    assert not result.get('failed'), result
    assert result['build'] == {'where': 'host', 'missing': [], 'image': None, 'enroot': None,
                               'reason': 'on the host (CUDA 12.8, NCCL 2.27.7)'}
    assert result['mpi']['found']


@pytest.mark.parametrize('gone, missing', [
    ('nvcc', ['nvcc']),
    ('nccl.h', ['nccl.h']),
    ('mpicc', ['mpicc']),
    ('all', ['nvcc', 'libnccl.so', 'nccl.h', 'mpicc']),
])
def test_auto_builds_in_the_container_naming_what_the_host_lacks(node, capsys, gone, missing):
    root = node['root']
    if gone in ('nvcc', 'all'):
        (root / 'cuda' / 'bin' / 'nvcc').unlink()
    if gone in ('nccl.h', 'all'):
        (root / 'nccl' / 'include' / 'nccl.h').unlink()
    if gone == 'all':
        (root / 'nccl' / 'lib' / 'libnccl.so.2').unlink()
    if gone in ('mpicc', 'all'):
        (root / 'bin' / 'mpicc').unlink()
    result = call(node['args'], capsys)
    assert not result.get('failed'), result
    build = result['build']
    assert (build['where'], build['missing'], build['image']) == ('container', missing, IMAGE)
    assert build['enroot'] == str(root / 'bin' / 'enroot')
    assert build['reason'] == 'in the container %s (the host lacks %s)' % (IMAGE, ', '.join(missing))


def test_mpi_off_keeps_a_host_without_mpi_on_the_host(node, capsys):
    (node['root'] / 'bin' / 'mpicc').unlink()
    result = call(dict(node['args'], mpi='off'), capsys)
    assert result['build']['where'] == 'host' and not result['mpi']['found']


def test_host_mode_is_the_old_behaviour(node, capsys):
    """build: host builds without MPI when mpicc is missing (single-node runs), and fails on a missing
    header with the same message as before the build option existed."""
    (node['root'] / 'bin' / 'mpicc').unlink()
    result = call(dict(node['args'], build='host'), capsys)
    assert result['build']['where'] == 'host' and not result['mpi']['found']
    (node['root'] / 'nccl' / 'include' / 'nccl.h').unlink()
    result = call(dict(node['args'], build='host'), capsys)
    assert result['failed']
    assert result['msg'] == 'nccl-tests toolchain incomplete: nccl.h not found (install the NCCL development package)'


def test_container_mode_builds_in_the_container_whatever_the_host_has(node, capsys):
    result = call(dict(node['args'], build='container'), capsys)
    assert result['build']['where'] == 'container' and result['build']['missing'] == []
    assert result['build']['reason'] == 'in the container %s (nccl_tests_build: container)' % IMAGE


def test_container_mode_without_an_image_fails_first(node, capsys, monkeypatch):
    # The toolchain is not even looked for: no nvcc is run.
    monkeypatch.setattr(nccl_toolchain, '_find_cuda', lambda *a: pytest.fail('looked for CUDA'))
    result = call(dict(node['args'], build='container', container_image=''), capsys)
    assert result['failed']
    assert result['msg'] == ('nccl-tests is to be built in a container (nccl_tests_build: container) but no image is set: '
                             'set nccl_tests_build_image (or nccl_tests_container_image), for example '
                             'nvcr.io#nvidia/tensorflow:24.06-tf2-py3')


def test_auto_without_an_image_says_what_is_missing(node, capsys):
    (node['root'] / 'cuda' / 'bin' / 'nvcc').unlink()
    (node['root'] / 'bin' / 'mpicc').unlink()
    result = call(dict(node['args'], container_image=''), capsys)
    assert result['failed']
    assert result['msg'] == ('nccl-tests toolchain incomplete on the host (missing: nvcc, mpicc) and no container image to '
                             'build in: install them on the node, or set nccl_tests_build_image (or '
                             'nccl_tests_container_image) to an NGC image that has them')


def test_a_container_build_without_enroot_fails(node, capsys):
    (node['root'] / 'bin' / 'enroot').unlink()
    (node['root'] / 'nccl' / 'include' / 'nccl.h').unlink()
    result = call(node['args'], capsys)
    assert result['failed']
    assert result['msg'] == ('nccl-tests is to be built in the container %s (the host lacks nccl.h), but enroot is not on '
                             'the node: install it (the enroot role) or set nccl_tests_build: host' % IMAGE)
