# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/nvme_scratch: which disks the role refuses, evaluated with the role's own expressions.

The expressions are read from tasks/scratch.yml and rendered with Jinja over node_facts-shaped
disk records, so a change to the role's decision logic is tested here without a VM (the molecule
scenario nvme_scratch tests it on real disks, the refusal included)."""
from __future__ import annotations

import pathlib

import jinja2
import pytest
import yaml

ROLE = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'nvme_scratch'


def disk(name, signatures=(), partitions=(), holders=(), mounted=(), lvm_vg=None):
    d = {'name': name, 'path': '/dev/' + name, 'by_id': '/dev/disk/by-id/nvme-X_' + name,
         'signatures': [{'type': t} for t in signatures], 'partitions': list(partitions),
         'holders': list(holders), 'mounted': list(mounted), 'lvm_vg': lvm_vg}
    d['empty'] = not (signatures or partitions or holders or mounted)
    return d


def decide(disks, vg='nvme'):
    tasks = yaml.safe_load((ROLE / 'tasks' / 'scratch.yml').read_text())
    facts = tasks[0]['ansible.builtin.set_fact']
    env = jinja2.Environment()
    out = {}
    for key in ('__nvme_scratch_foreign', '__nvme_scratch_busy'):
        text = env.from_string('{{ (' + facts[key].strip()[2:-2] + ') | map(attribute="name") | list }}').render(
            __nvme_scratch_disks=disks, nvme_scratch_vg=vg)
        out[key.rsplit('_', 1)[1]] = yaml.safe_load(text)
    return out


def test_blank_disks_are_used():
    assert decide([disk('nvme1n1'), disk('nvme2n1')]) == {'foreign': [], 'busy': []}


def test_a_second_run_accepts_the_roles_own_volume_group():
    ours = [disk('nvme%dn1' % i, signatures=['LVM2_member'], holders=['dm-0'], mounted=['/mnt/localdisk'],
                 lvm_vg='nvme') for i in (1, 2, 3, 4)]
    assert decide(ours) == {'foreign': [], 'busy': []}


@pytest.mark.parametrize('record', [
    disk('nvme2n1', signatures=['ext4']),
    disk('nvme2n1', signatures=['xfs']),
    disk('nvme2n1', signatures=['gpt', 'PMBR'], partitions=['nvme2n1p1']),
    disk('nvme2n1', signatures=['LVM2_member'], lvm_vg='data'),
    disk('nvme2n1', signatures=['LVM2_member'], lvm_vg=''),          # a PV in no volume group
    disk('nvme2n1', signatures=['LVM2_member'], lvm_vg=None),        # pvs could not say
    disk('nvme2n1', signatures=['linux_raid_member']),
    disk('nvme2n1', signatures=['LVM2_member'], partitions=['nvme2n1p1'], lvm_vg='nvme'),
])
def test_disks_that_hold_data_are_refused(record):
    assert decide([disk('nvme1n1'), record])['foreign'] == ['nvme2n1']


def test_mounted_or_held_disks_are_busy_even_with_force():
    result = decide([disk('nvme1n1', mounted=['/data']), disk('nvme2n1', holders=['md0']), disk('nvme3n1')])
    assert result['busy'] == ['nvme1n1', 'nvme2n1'] and result['foreign'] == ['nvme1n1', 'nvme2n1']
