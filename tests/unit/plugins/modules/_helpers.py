# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the module tests."""
from __future__ import annotations

import base64
import stat

MUTATING = ('POST *', 'PUT *', 'DELETE *')


def mutations(sim):
    return sum(sim.calls.count(p) for p in MUTATING)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def live(sim, kind):
    """Stored resources of a kind that are not dead (default VCN children left out)."""
    return [r for r in getattr(sim.state, kind).values()
            if r.get('lifecycleState') not in ('TERMINATED', 'TERMINATING', 'DELETED') and not r.get('_default')]


def run_module(module, args, capsys, check=False):
    """Run a module's main() with these arguments; its JSON result."""
    # Imported here: the OCI module tests import this file without needing the module test kit.
    import json

    import pytest
    from ansible.module_utils.testing import patch_module_args

    args = dict(args)
    if check:
        args['_ansible_check_mode'] = True
    capsys.readouterr()
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def script(path, body):
    """An executable shell script at path (a stand-in program); its path as a string."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\n' + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def fake_toolchain(root, bin_dir, cuda_release, nccl_version):
    """A node's nccl-tests toolchain under root: nvcc of a CUDA release ('12.8, V12.8.93'), NCCL's
    library and header of a version ((2, 27, 7)), Open MPI with an mpicc in bin_dir that shows its
    folders. Returns (cuda home, nccl home, mpi home, mpicc's path)."""
    cuda = root / 'cuda'
    script(cuda / 'bin' / 'nvcc', 'echo "Cuda compilation tools, release %s"\n' % cuda_release)
    nccl = root / 'nccl'
    (nccl / 'include').mkdir(parents=True)
    (nccl / 'include' / 'nccl.h').write_text('#define NCCL_MAJOR %d\n#define NCCL_MINOR %d\n#define NCCL_PATCH %d\n'
                                             % nccl_version)
    (nccl / 'lib').mkdir()
    (nccl / 'lib' / 'libnccl.so.2').write_text('')
    mpi = root / 'openmpi'
    (mpi / 'include').mkdir(parents=True)
    (mpi / 'include' / 'mpi.h').write_text('')
    (mpi / 'lib').mkdir()
    (mpi / 'lib' / 'libmpi.so.40').write_text('')
    mpicc = script(bin_dir / 'mpicc', 'case "$1" in --showme:incdirs) echo %s/include;; '
                   '--showme:libdirs) echo %s/lib;; *) exit 1;; esac\n' % (mpi, mpi))
    return cuda, nccl, mpi, mpicc
