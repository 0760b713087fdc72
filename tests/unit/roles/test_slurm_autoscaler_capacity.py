# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/slurm_autoscaler: the capacity sources and their cooldown in autoscaler.json, and the role's
check of them (run by ansible-playbook)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.unit.roles.test_slurm_autoscaler import REQUIRED, role_render

ROOT = pathlib.Path(__file__).resolve().parents[3]
AD1, AD2 = 'Abcd:AP-TOKYO-1-AD-1', 'Abcd:AP-TOKYO-1-AD-2'
RESERVATION = 'ocid1.capacityreservation.oc1..r'
SOURCES = [
    dict(name='r1', kind='reservation', availability_domain=AD1, instance_configuration_id='ocid1.instanceconfiguration.oc1..i',
         capacity_reservation_id=RESERVATION),
    # As a role user may write one: kind and reservation left out, a key the autoscaler does not read.
    dict(name='ad-2', availability_domain=AD2, instance_configuration_id='ocid1.instanceconfiguration.oc1..j',
         fault_domains=['FAULT-DOMAIN-1']),
]


def test_autoscaler_json_carries_the_sources_and_the_cooldown():
    data = json.loads(role_render('autoscaler.json.j2', slurm_autoscaler_capacity_sources=SOURCES,
                                  slurm_autoscaler_capacity_cooldown=120))
    assert data['capacity_sources'] == [
        dict(SOURCES[0]),
        dict(name='ad-2', kind='on-demand', availability_domain=AD2,
             instance_configuration_id='ocid1.instanceconfiguration.oc1..j', capacity_reservation_id=None)]
    assert data['capacity_cooldown'] == 120
    # The first source's stay in the keys an older autoscaler reads.
    assert data['availability_domain'] == REQUIRED['slurm_autoscaler_availability_domain']
    assert data['instance_configuration_id'] == REQUIRED['slurm_autoscaler_instance_configuration_id']


def test_autoscaler_json_defaults_no_sources_and_ten_minutes():
    data = json.loads(role_render('autoscaler.json.j2'))
    assert data['capacity_sources'] == [] and data['capacity_cooldown'] == 600


PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Check
      ansible.builtin.include_role:
        name: ocigpu.cluster.slurm_autoscaler
        tasks_from: validate
"""


def _validate(tmp_path, **variables):
    (tmp_path / 'play.yml').write_text(PLAY)
    (tmp_path / 'vars.json').write_text(json.dumps(dict(REQUIRED, **variables)))
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_HOME=str(tmp_path / 'ansible'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'))
    return subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', '@' + str(tmp_path / 'vars.json'), str(tmp_path / 'play.yml')],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)


@pytest.mark.parametrize('sources, cooldown, ok', [
    (SOURCES, 600, True),
    ([], 0, True),
    (SOURCES + [dict(SOURCES[1])], 600, False),                                               # a name twice
    ([dict(SOURCES[1], instance_configuration_id='ocid1.vcn.oc1..v')], 600, False),
    ([dict(SOURCES[0], capacity_reservation_id=None)], 600, False),                           # a reservation without one
    ([dict(SOURCES[1], kind='spot')], 600, False),
    (SOURCES, -1, False),
], ids=['two', 'none', 'twice', 'not-a-template', 'no-reservation', 'kind', 'cooldown'])
def test_the_role_checks_the_sources(tmp_path, sources, cooldown, ok):
    proc = _validate(tmp_path, slurm_autoscaler_capacity_sources=sources, slurm_autoscaler_capacity_cooldown=cooldown)
    assert (proc.returncode == 0) == ok, proc.stdout
    if not ok and cooldown >= 0:
        assert 'slurm_autoscaler_capacity_sources: each source needs its own name' in ' '.join(proc.stdout.split())
