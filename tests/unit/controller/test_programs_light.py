# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The programs Slurm calls hand their request over with the standard library and the package's light
modules (settings.py, requests.py): neither the OCI SDK nor the collection's OCI code is imported, so a
call takes tens of milliseconds (docs/autoscaling.md has the figures)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ocigpu_control import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = '''
import sys
sys.modules["oci"] = sys.modules["ansible"] = sys.modules["ansible_collections"] = None  # unimportable
from ocigpu_control import programs
status = programs.main(sys.argv[1:], run=lambda argv: print("run", argv) or 0)
print(sorted(m for m in sys.modules if m.startswith("ocigpu_control")))
sys.exit(status)
'''


@pytest.mark.parametrize('action, alive, status', [
    ('resume', True, 0), ('suspend', True, 0), ('resume-fail', True, 0), ('resume', False, 1), ('suspend', False, 0)])
def test_the_programs_load_no_oci_code(tmp_path, action, alive, status):
    config = dict(cluster_name='as', compartment_id='c', availability_domain='ad', subnet_id='s',
                  instance_configuration_id='i', nodes='gpu-[1-4]', state_file=str(tmp_path / 'state' / 'state.json'),
                  log_file=str(tmp_path / 'autoscaler.log'))
    path = tmp_path / 'autoscaler.json'
    path.write_text(json.dumps(config))
    if alive:
        requests.beat(dict(config, poll_interval=1), time.time())
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, 'controller'))
    proc = subprocess.run([sys.executable, '-c', PROGRAM, '--config', str(path), action, 'gpu-[1-2]'], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    out = proc.stdout.decode()
    assert proc.returncode == status, out
    assert out.splitlines()[-1] == "['ocigpu_control', 'ocigpu_control.programs', 'ocigpu_control.requests', 'ocigpu_control.settings']"
    assert ('state=POWER_DOWN_FORCE' in out) is (not alive and action == 'resume')
    folder = tmp_path / 'state' / 'requests'
    assert len(os.listdir(str(folder)) if folder.exists() else []) == (0 if status else 1)
