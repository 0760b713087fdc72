# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The demos run the shipped defaults: their variables never choose an install method or give a sum
(tests/demo/lib.sh, demo_check_vars, which the demos call on the variables they write)."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def check(tmp_path, text):
    path = tmp_path / 'vars.yml'
    path.write_text(text)
    script = 'die() { echo "ERROR: $*" >&2; exit 1; }; VENV=/nonexistent; . tests/demo/lib.sh; demo_check_vars "$1"'
    return subprocess.run(['bash', '-c', script, 'bash', str(path)], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize('line', [
    'containerd_rootless_install_method: package',
    'enroot_package_sha256: {}',
    'pyxis_sha256: 0123',
    'containerd_rootless_checksums: {containerd: abc}',
])
def test_an_install_method_or_a_sum_stops_the_demo(tmp_path, line):
    result = check(tmp_path, 'ocigpu_use_imds: false\n%s\n' % line)
    assert result.returncode != 0
    assert 'override an install method or a sum' in result.stderr and line.split(':')[0] in result.stderr


def test_where_the_bytes_come_from_and_versions_are_allowed(tmp_path):
    result = check(tmp_path, 'containerd_rootless_url_base: http://198.18.120.1:8765/github\n'
                             'pyxis_version: 0.24.0-standin\ncontainerd_rootless_versions:\n  runc: "1.1.15-standin"\n')
    assert result.returncode == 0, result.stderr


def test_the_demos_check_the_variables_they_write():
    lib = (ROOT / 'tests' / 'demo' / 'lib.sh').read_text()
    ondemand = (ROOT / 'tests' / 'demo' / 'ondemand.sh').read_text()
    assert 'demo_check_vars "$w/standin-vars.yml"' in lib
    assert 'demo_check_vars "$work/node-vars.yml"' in ondemand
