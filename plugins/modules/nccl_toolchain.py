#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_toolchain
short_description: Find the CUDA, NCCL and MPI installation that nccl-tests is built against
version_added: 0.1.0
description:
  - Finds, rather than assumes, the toolchain on a GPU node - C(nvcc) and its CUDA home, the
    NCCL library (through the dynamic linker cache, C(ldconfig -p)) with its header and
    version, and an MPI compiler wrapper (C(mpicc)) with its include and library folders; it
    also reports the job launchers C(srun) and C(mpirun) it finds.
  - Reads only; changes nothing on the node.
  - Fails with the list of what is missing when CUDA or NCCL cannot be found, unless I(build) lets
    nccl-tests be built in a container instead.
  - Decides where nccl-tests is built (I(build)) - on the host when its toolchain is complete, else
    in the container image I(container_image) through enroot - and returns the decision with the
    pieces the host lacks.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  cuda_home:
    description:
      - CUDA installation to use. Empty to find it from C(nvcc) on the C(PATH), then
        C(/usr/local/cuda/bin/nvcc).
    type: str
    default: ''
  nccl_home:
    description:
      - Folder holding C(include/nccl.h) and C(lib/libnccl.so). Empty to find the library in
        the linker cache and the header in the usual include folders.
    type: str
    default: ''
  mpi:
    description:
      - Whether to look for MPI. C(auto) reports it when C(mpicc) is found, C(required) fails
        without it, C(off) does not look.
    type: str
    choices: [auto, required, 'off']
    default: auto
  mpicc:
    description: The MPI compiler wrapper to ask for its folders; found on the C(PATH) when empty.
    type: str
    default: ''
  build:
    description:
      - Where nccl-tests is to be built. C(host) needs the toolchain on the node and fails without
        it. C(container) builds in I(container_image) through enroot, whatever the host has.
        C(auto) builds on the host when nvcc, libnccl.so, nccl.h and (unless I(mpi=off)) mpicc are
        all there, else in the container.
      - A container build needs I(container_image) and the C(enroot) program on the node; without
        either the module fails before it looks at anything else.
    type: str
    choices: [auto, host, container]
    default: host
    version_added: 0.4.0
  container_image:
    description:
      - The image of a container build, in enroot's form (C(nvcr.io#nvidia/tensorflow:24.06-tf2-py3));
        it must carry nvcc, nccl.h and libnccl.so and an MPI.
    type: str
    default: ''
    version_added: 0.4.0
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Find CUDA, NCCL and MPI
  ocigpu.cluster.nccl_toolchain:
    mpi: auto
  register: toolchain

- name: Show where NCCL is
  ansible.builtin.debug:
    msg: "NCCL {{ toolchain.nccl.version }} in {{ toolchain.nccl.lib_dir }}"
"""

RETURN = r"""
cuda:
  description: The CUDA installation.
  returned: success
  type: dict
  contains:
    home: {description: "CUDA home (nvcc's grandparent folder).", type: str}
    nvcc: {description: "Path of nvcc.", type: str}
    version: {description: "CUDA release nvcc reports, for example C(13.0).", type: str}
nccl:
  description: The NCCL installation.
  returned: success
  type: dict
  contains:
    lib_dir: {description: "Folder of libnccl.so.", type: str}
    include_dir: {description: "Folder of nccl.h.", type: str}
    version: {description: "NCCL version from nccl.h, for example C(2.28.3).", type: str}
mpi:
  description: The MPI installation; C(found) false when none was found or looked for.
  returned: success
  type: dict
  contains:
    found: {description: "Whether MPI was found.", type: bool}
    mpicc: {description: "Path of mpicc.", type: str}
    include_dir: {description: "Folder of mpi.h.", type: str}
    lib_dir: {description: "Folder of libmpi.so.", type: str}
build:
  description: Where nccl-tests is to be built, and why.
  returned: success
  type: dict
  version_added: 0.4.0
  contains:
    where: {description: "C(host) or C(container).", type: str}
    missing: {description: "What the host lacks, by short name (C(nvcc), C(libnccl.so), C(nccl.h), C(mpicc)).", type: list, elements: str}
    image: {description: "The container image (for C(where=container)), else null.", type: str}
    enroot: {description: "Path of enroot (for C(where=container)), else null.", type: str}
    reason: {description: "One line saying where and why.", type: str}
launchers:
  description: Paths of the job launchers found on the C(PATH), or null.
  returned: success
  type: dict
  contains:
    srun: {description: "Slurm's srun.", type: str}
    mpirun: {description: "The MPI launcher mpirun.", type: str}
"""

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

_NCCL_INCLUDE_GUESSES = ('/usr/include', '/usr/local/include', '/usr/local/cuda/include', '/opt/nvidia/nccl/include')


def _find_cuda(module, cuda_home):
    candidates = []
    if cuda_home:
        candidates.append(os.path.join(cuda_home, 'bin', 'nvcc'))
    else:
        found = module.get_bin_path('nvcc')
        if found:
            candidates.append(found)
        candidates.extend(sorted(glob.glob('/usr/local/cuda/bin/nvcc')) + sorted(glob.glob('/usr/local/cuda-*/bin/nvcc'), reverse=True))
    for nvcc in candidates:
        if os.access(nvcc, os.X_OK):
            real = os.path.realpath(nvcc)
            rc, out, err = module.run_command([real, '--version'])
            m = re.search(r'release (\d+\.\d+)', out or '')
            return {'home': os.path.dirname(os.path.dirname(real)), 'nvcc': real,
                    'version': m.group(1) if m else None}
    return None


def _nccl_version(header):
    values = {}
    with open(header) as handle:
        for line in handle:
            m = re.match(r'#define\s+NCCL_(MAJOR|MINOR|PATCH)\s+(\d+)', line)
            if m:
                values[m.group(1)] = m.group(2)
    if len(values) == 3:
        return '%s.%s.%s' % (values['MAJOR'], values['MINOR'], values['PATCH'])
    return None


def _find_nccl(module, nccl_home, cuda_home):
    if nccl_home:
        lib_dirs = [os.path.join(nccl_home, 'lib'), os.path.join(nccl_home, 'lib64')]
        inc_dirs = [os.path.join(nccl_home, 'include')]
    else:
        lib_dirs = []
        ldconfig = module.get_bin_path('ldconfig', opt_dirs=['/sbin', '/usr/sbin'])
        if ldconfig:
            rc, out, err = module.run_command([ldconfig, '-p'])
            for line in (out or '').splitlines():
                m = re.search(r'libnccl\.so(?:\.\d+)*\s.*=>\s*(\S+)', line)
                if m and os.path.dirname(m.group(1)) not in lib_dirs:
                    lib_dirs.append(os.path.dirname(m.group(1)))
        inc_dirs = list(_NCCL_INCLUDE_GUESSES)
        if cuda_home:
            inc_dirs.append(os.path.join(cuda_home, 'include'))
        inc_dirs.extend(os.path.join(os.path.dirname(d), 'include') for d in lib_dirs)
    lib_dir = next((d for d in lib_dirs if glob.glob(os.path.join(d, 'libnccl.so*'))), None)
    inc_dir = next((d for d in inc_dirs if os.path.isfile(os.path.join(d, 'nccl.h'))), None)
    return {
        'lib_dir': lib_dir,
        'include_dir': inc_dir,
        'version': _nccl_version(os.path.join(inc_dir, 'nccl.h')) if inc_dir else None,
    }


def _find_mpi(module, mpicc):
    path = mpicc or module.get_bin_path('mpicc')
    if not path or not os.access(path, os.X_OK):
        return {'found': False, 'mpicc': None, 'include_dir': None, 'lib_dir': None}
    info = {'found': False, 'mpicc': path, 'include_dir': None, 'lib_dir': None}
    # Open MPI answers --showme:incdirs/libdirs; MPICH and Intel MPI answer -show.
    rc, inc, err = module.run_command([path, '--showme:incdirs'])
    rc2, lib, err2 = module.run_command([path, '--showme:libdirs'])
    incs = inc.split() if rc == 0 else []
    libs = lib.split() if rc2 == 0 else []
    if rc != 0 or rc2 != 0:
        rc, show, err = module.run_command([path, '-show'])
        tokens = show.split() if rc == 0 else []
        incs = [t[2:] for t in tokens if t.startswith('-I')]
        libs = [t[2:] for t in tokens if t.startswith('-L')]
    home = os.path.dirname(os.path.dirname(os.path.realpath(path)))
    incs.append(os.path.join(home, 'include'))
    libs.extend([os.path.join(home, 'lib'), os.path.join(home, 'lib64')])
    info['include_dir'] = next((d for d in incs if os.path.isfile(os.path.join(d, 'mpi.h'))), None)
    info['lib_dir'] = next((d for d in libs if glob.glob(os.path.join(d, 'libmpi.so*'))), None)
    info['found'] = bool(info['include_dir'] and info['lib_dir'])
    return info


def decide(build, missing, container_image, enroot):
    """Where nccl-tests is built. build: auto, host or container; missing: (short name, message) pairs
    of what the host lacks; enroot: its path on the node or None. Returns (where, error): error is
    None, or the message the module fails with."""
    names = ', '.join(name for name, message in missing)
    if build == 'host' or (build == 'auto' and not missing):
        if missing:
            return 'host', 'nccl-tests toolchain incomplete: ' + '; '.join(message for name, message in missing)
        return 'host', None
    if not container_image:
        if build == 'container':
            return 'container', ('nccl-tests is to be built in a container (nccl_tests_build: container) but no image is '
                                 'set: set nccl_tests_build_image (or nccl_tests_container_image), for example '
                                 'nvcr.io#nvidia/tensorflow:24.06-tf2-py3')
        return 'container', ('nccl-tests toolchain incomplete on the host (missing: %s) and no container image to build in: '
                             'install them on the node, or set nccl_tests_build_image (or nccl_tests_container_image) '
                             'to an NGC image that has them' % names)
    if not enroot:
        return 'container', ('nccl-tests is to be built in the container %s%s, but enroot is not on the node: '
                             'install it (the enroot role) or set nccl_tests_build: host'
                             % (container_image, ' (the host lacks %s)' % names if missing else ''))
    return 'container', None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cuda_home=dict(type='str', default=''),
            nccl_home=dict(type='str', default=''),
            mpi=dict(type='str', choices=['auto', 'required', 'off'], default='auto'),
            mpicc=dict(type='str', default=''),
            build=dict(type='str', choices=['auto', 'host', 'container'], default='host'),
            container_image=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    p = module.params
    enroot = module.get_bin_path('enroot') if p['build'] != 'host' else None
    if p['build'] == 'container':
        # Asked for a container: nothing on the host matters, and what is wrong shows before anything runs.
        error = decide('container', [], p['container_image'], enroot)[1]
        if error:
            module.fail_json(msg=error)
    missing = []
    cuda = _find_cuda(module, p['cuda_home'])
    if cuda is None:
        missing.append(('nvcc', 'nvcc (CUDA toolkit) not found%s' % (' under %s' % p['cuda_home'] if p['cuda_home'] else
                                                                     ' on the PATH or under /usr/local/cuda')))
    nccl = _find_nccl(module, p['nccl_home'], cuda['home'] if cuda else None)
    if not nccl['lib_dir']:
        missing.append(('libnccl.so', 'libnccl.so not found (linker cache%s)' % (', ' + p['nccl_home'] if p['nccl_home'] else '')))
    if not nccl['include_dir']:
        missing.append(('nccl.h', 'nccl.h not found (install the NCCL development package)'))
    mpi = {'found': False, 'mpicc': None, 'include_dir': None, 'lib_dir': None}
    if p['mpi'] != 'off':
        mpi = _find_mpi(module, p['mpicc'])
        # A host build goes without MPI (single-node runs only) unless it is required; a container
        # build is chosen when the host has no MPI and the container can bring one.
        if not mpi['found'] and (p['mpi'] == 'required' or p['build'] != 'host'):
            missing.append(('mpicc', 'MPI not found (mpicc with mpi.h and libmpi.so)'))
    where, error = decide(p['build'], missing, p['container_image'], enroot)
    if error:
        module.fail_json(msg=error, cuda=cuda, nccl=nccl, mpi=mpi)
    names = [name for name, message in missing]
    build = {'where': where, 'missing': names if where == 'container' else [],
             'image': p['container_image'] if where == 'container' else None,
             'enroot': enroot if where == 'container' else None,
             'reason': ('on the host (CUDA %s, NCCL %s)' % (cuda['version'], nccl['version']) if where == 'host' else
                        'in the container %s (%s)' % (p['container_image'], 'the host lacks ' + ', '.join(names) if names
                                                      else 'nccl_tests_build: container'))}
    launchers = dict((name, module.get_bin_path(name)) for name in ('srun', 'mpirun'))
    module.exit_json(changed=False, cuda=cuda, nccl=nccl, mpi=mpi, launchers=launchers, build=build)


if __name__ == '__main__':
    main()
