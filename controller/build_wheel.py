# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Build the control plane's wheel: the ``ocigpu_control`` package beside this file, plus the files of
the collection's ``plugins/module_utils`` that it imports (found by reading the imports, transitively),
under their own import path (``ansible_collections.ocigpu.cluster.plugins.module_utils``). The
slurm_autoscaler role runs it on the operator's machine, copies the wheel to the controller and
installs it there with pip; nothing else is needed (no setuptools, no network).

The wheel is the same bytes for the same sources (sorted entries, fixed times), so a re-run copies
nothing. Its version is the collection's, with the sources' digest as the local label
(``0.5.0+<12 hex>``); ``ocigpu_control._build`` holds both for ``ocigpu-autoscaler --version``.

    python3 controller/build_wheel.py [--out FOLDER]    # prints {"path", "name", "version", "build"}
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGE = 'ocigpu_control'
DIST = 'ocigpu_control'
MODULE_UTILS = 'ansible_collections/ocigpu/cluster/plugins/module_utils'
# The programs an operator runs (the role's programs in its bin folder bind the configuration's path).
ENTRY_POINTS = {'ocigpu-autoscaler': 'ocigpu_control.programs:main'}
REQUIRES = ['oci']
_IMPORT = re.compile(r'^\s*from ansible_collections\.ocigpu\.cluster\.plugins\.module_utils(?:\.(\w+))?\s+import\s+'
                     r'(\([^)]*\)|[^\n#]+)', re.M)
_DATE = (1980, 1, 1, 0, 0, 0)


def collection_version(root=ROOT):
    """The collection's version: MANIFEST.json when installed, galaxy.yml in a checkout."""
    manifest = os.path.join(root, 'MANIFEST.json')
    if os.path.exists(manifest):
        with open(manifest) as f:
            return json.load(f)['collection_info']['version']
    with open(os.path.join(root, 'galaxy.yml')) as f:
        found = re.search(r'^version:\s*["\']?([^"\'\s]+)', f.read(), re.M)
    if not found:
        raise ValueError('galaxy.yml has no version')
    return found.group(1)


def imported_module_utils(source):
    """Names of the module_utils files a Python source imports ('_oci', ...)."""
    names = set()
    for module, imported in _IMPORT.findall(source):
        if module:
            names.add(module)
        else:
            names.update(part.split(' as ')[0].strip() for part in imported.strip('()').replace('\n', ' ').split(','))
    return set(n for n in names if n)


def closure(package_dir, module_utils_dir):
    """The module_utils files the package needs, transitively: sorted file names ('_oci.py', ...)."""
    todo = []
    for name in sorted(os.listdir(package_dir)):
        if name.endswith('.py'):
            with open(os.path.join(package_dir, name)) as f:
                todo.extend(imported_module_utils(f.read()))
    found = set()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = os.path.join(module_utils_dir, name + '.py')
        if not os.path.exists(path):
            raise ValueError('%s imports module_utils %s, which %s does not have' % (PACKAGE, name, module_utils_dir))
        found.add(name)
        with open(path) as f:
            todo.extend(imported_module_utils(f.read()))
    return sorted(n + '.py' for n in found)


def _sources(root):
    """[(path in the wheel, bytes)] of the package and its module_utils, sorted."""
    package_dir = os.path.join(root, 'controller', PACKAGE)
    module_utils_dir = os.path.join(root, 'plugins', 'module_utils')
    files = []
    for name in sorted(os.listdir(package_dir)):
        if name.endswith('.py') and name != '_build.py':
            with open(os.path.join(package_dir, name), 'rb') as f:
                files.append(('%s/%s' % (PACKAGE, name), f.read()))
    for name in closure(package_dir, module_utils_dir):
        with open(os.path.join(module_utils_dir, name), 'rb') as f:
            files.append(('%s/%s' % (MODULE_UTILS, name), f.read()))
    return files


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode('ascii')
    return '%s,sha256=%s,%d' % (path, digest, len(data))


def wheel_bytes(root=ROOT):
    """(file name, version, build digest, wheel bytes)."""
    files = _sources(root)
    build = hashlib.sha256(b''.join(p.encode() + b'\0' + d + b'\0' for p, d in files)).hexdigest()[:12]
    version = '%s+%s' % (collection_version(root), build)
    info = '%s-%s.dist-info' % (DIST, version)
    files.append(('%s/_build.py' % PACKAGE, (
        '"""The build of this package (controller/build_wheel.py)."""\nVERSION = %r\nBUILD = %r\n' % (version, build)).encode()))
    files.sort()
    meta = ['Metadata-Version: 2.1', 'Name: %s' % DIST.replace('_', '-'), 'Version: %s' % version,
            'Summary: The control plane of an ocigpu.cluster Slurm cluster on OCI (autoscaler service, '
            'power-saving programs, self-healing loop, pull server)',
            'License: GPL-3.0-or-later', 'Requires-Python: >=3.9'] + ['Requires-Dist: %s' % r for r in REQUIRES]
    dist_files = [
        ('%s/METADATA' % info, ('\n'.join(meta) + '\n').encode()),
        ('%s/WHEEL' % info, b'Wheel-Version: 1.0\nGenerator: ocigpu.cluster build_wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n'),
        ('%s/entry_points.txt' % info, ('[console_scripts]\n' + ''.join(
            '%s = %s\n' % kv for kv in sorted(ENTRY_POINTS.items()))).encode()),
        ('%s/top_level.txt' % info, b'ansible_collections\nocigpu_control\n'),
    ]
    files += dist_files
    record = ''.join(_record_line(p, d) + '\n' for p, d in files) + '%s/RECORD,,\n' % info
    files.append(('%s/RECORD' % info, record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', zipfile.ZIP_DEFLATED) as zf:
        for path, data in files:
            entry = zipfile.ZipInfo(path, date_time=_DATE)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    return '%s-%s-py3-none-any.whl' % (DIST, version), version, build, buf.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--out', help='folder to write the wheel to (default: a new temporary folder)')
    args = parser.parse_args(argv)
    try:
        name, version, build, data = wheel_bytes()
    except (IOError, OSError, ValueError) as exc:
        sys.stderr.write('build_wheel: %s\n' % exc)
        return 1
    out = args.out or tempfile.mkdtemp(prefix='ocigpu-control-')
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name)
    with open(path, 'wb') as f:
        f.write(data)
    sys.stdout.write(json.dumps(dict(path=path, folder=out, name=name, version=version, build=build)) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
