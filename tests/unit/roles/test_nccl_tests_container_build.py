# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nccl_tests: the command lines of a container build rendered from the role's defaults and
vars (what enroot and srun get), the host build's paths unchanged, and the program that runs a
container build rendered and run against a stand-in enroot that prints what it was given. Nothing is
pulled from a registry here (no network): the import command is checked as text."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit.roles._trust import trust

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'nccl_tests'
IMAGE = 'nvcr.io#nvidia/tensorflow:24.06-tf2-py3'
# sha1 of IMAGE, first 12 hex digits: the container build's folder and container name.
ID = '15886269cf4e'


def templar(where, **overrides):
    variables = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    variables.update(trust(overrides))
    variables.update(
        __nccl_tests_toolchain={'build': {'where': where}, 'mpi': {'found': where == 'host'}, 'launchers': {'srun': '/usr/bin/srun'},
                                'cuda': {'home': '/usr/local/cuda', 'nvcc': '/usr/local/cuda/bin/nvcc'}},
        __nccl_tests_gpus=8, __nccl_tests_size_args='-b 1G -e 16G -f 2', __nccl_tests_run_hosts=['gpu-1', 'gpu-2'],
        hostvars={'gpu-1': {'ansible_facts': {'hostname': 'gpu-1'}}, 'gpu-2': {'ansible_facts': {'hostname': 'gpu-2'}}},
        ansible_managed='managed', role_path=str(ROLE))
    loader = DataLoader()
    loader.set_basedir(str(ROLE / 'templates'))
    return Templar(loader=loader, variables=variables)


def value(t, name):
    return t.template(trust_as_template('{{ %s }}' % name))


def test_the_container_build_commands():
    t = templar('container')
    folder = '/opt/nccl-tests/2.19.6/container-%s' % ID
    assert value(t, '__nccl_tests_container_id') == ID
    assert value(t, '__nccl_tests_enroot_import_argv') == [
        'enroot', 'import', '--output', folder + '/image.sqsh', 'docker://' + IMAGE]
    assert value(t, '__nccl_tests_enroot_create_argv') == [
        'enroot', 'create', '--name', 'nccl-tests-2.19.6-' + ID, folder + '/image.sqsh']
    # The seeds' make line (000, 003), run in the container with the install folder at the same path.
    make = value(t, "__nccl_tests_container_make + ['BUILDDIR=' + __nccl_tests_build_mpi_dir, 'MPI=1']")
    assert make == [
        'enroot', 'start', '--rw', '--mount', '/opt/nccl-tests:/opt/nccl-tests:none:x-create=dir,bind', 'nccl-tests-2.19.6-' + ID,
        'make', '-C', '/opt/nccl-tests/2.19.6/nccl-tests-2.19.6', '-j', '8',
        'CUDA_HOME=/usr/local/cuda', 'NCCL_HOME=/usr/lib/x86_64-linux-gnu', 'MPI_HOME=/usr/local/mpi',
        'BUILDDIR=%s/build-mpi' % folder, 'MPI=1']
    assert value(t, '__nccl_tests_program') == folder + '/all_reduce_perf'
    # Across nodes: srun with pyxis and the image file this node imported, the container's MPI build.
    assert value(t, '__nccl_tests_launch_argv') == [
        'srun', '--mpi=pmi2', '--nodes', '2', '--ntasks-per-node', '8', '--nodelist', 'gpu-1,gpu-2',
        '--container-image', folder + '/image.sqsh', '--container-mounts', '/opt/nccl-tests:/opt/nccl-tests',
        folder + '/build-mpi/all_reduce_perf', '-b', '1G', '-e', '16G', '-f', '2', '-g', '1']
    assert value(t, '__nccl_tests_multi_ok') is True
    # mpirun would be the host's, not the image's: no multi-node run of a container build through it.
    assert templar('container', nccl_tests_launcher='mpirun').template(trust_as_template('{{ __nccl_tests_multi_ok }}')) is False


def test_the_multi_node_image_is_the_build_image_when_set():
    t = templar('container', nccl_tests_container_image='nvcr.io#nvidia/pytorch:24.10-py3')
    assert value(t, '__nccl_tests_build_image') == 'nvcr.io#nvidia/pytorch:24.10-py3'
    assert value(t, '__nccl_tests_enroot_import_argv')[-1] == 'docker://nvcr.io#nvidia/pytorch:24.10-py3'
    assert value(t, '__nccl_tests_container_id') != ID


def test_a_host_build_keeps_its_paths_and_launch():
    t = templar('host')
    assert value(t, '__nccl_tests_build_dir') == '/opt/nccl-tests/2.19.6/build'
    assert value(t, '__nccl_tests_build_mpi_dir') == '/opt/nccl-tests/2.19.6/build-mpi'
    assert value(t, '__nccl_tests_program') == '/opt/nccl-tests/2.19.6/build/all_reduce_perf'
    argv = value(t, '__nccl_tests_launch_argv')
    assert '--container-image' not in argv and argv[-9] == '/opt/nccl-tests/2.19.6/build-mpi/all_reduce_perf'
    # No decision made (a play that sets the toolchain itself, tests/integration/test_nccl_pairs.py): host.
    t = templar('host')
    t.available_variables = dict(t.available_variables, __nccl_tests_toolchain={'mpi': {'found': True}, 'launchers': {}})
    assert value(t, '__nccl_tests_built_in') == 'host' and value(t, '__nccl_tests_multi_ok') is True


def test_the_program_runs_the_build_in_the_container(tmp_path):
    text = templar('container').template(trust_as_template((ROLE / 'templates' / 'all_reduce_perf-container.sh.j2').read_text()))
    program = tmp_path / 'all_reduce_perf'
    program.write_text(text)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    (tmp_path / 'bin').mkdir()
    enroot = tmp_path / 'bin' / 'enroot'
    enroot.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    enroot.chmod(enroot.stat().st_mode | stat.S_IXUSR)
    env = {'PATH': '%s:/usr/bin:/bin' % (tmp_path / 'bin'), 'NCCL_IB_HCA': '=mlx5_0', 'NCCL_DEBUG': 'WARN', 'HOME': str(tmp_path)}
    out = subprocess.run([str(program), '-b', '1G', '-e', '4G', '-g', '8'], env=env, capture_output=True, text=True,
                         check=True, timeout=30).stdout.split('\n')
    folder = '/opt/nccl-tests/2.19.6/container-%s' % ID
    settings = sorted(out[3:7][i + 1] for i in (0, 2))
    assert out[:3] == ['start', '--mount', '/opt/nccl-tests:/opt/nccl-tests:none:x-create=dir,bind']
    assert out[3] == out[5] == '--env' and settings == ['NCCL_DEBUG', 'NCCL_IB_HCA']
    assert out[7:-1] == ['nccl-tests-2.19.6-' + ID, folder + '/build/all_reduce_perf', '-b', '1G', '-e', '4G', '-g', '8']
    assert 'HOME' not in out and 'PATH' not in out
    assert os.access(str(program), os.X_OK)
