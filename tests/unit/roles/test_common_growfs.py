# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/common: when the role grows the root filesystem with OCI's oci-growfs (issue 28).

The decision is the root_growth filter over lsblk's JSON; the layouts below are those of OCI's
Oracle Linux images on a 200 GB boot volume (root on LVM, OL 8/9 GPU images; root on a partition,
older platform images). oci-growfs itself never runs here: no OCI image on these machines."""
from __future__ import annotations

import pathlib

import jinja2
import pytest
import yaml

from ansible_collections.ocigpu.cluster.plugins.filter.disks import root_growth

ROOT = pathlib.Path(__file__).resolve().parents[3]
GB = 10 ** 9
GIB = 1 << 30
MIB = 1 << 20


def dev(name, kind, size, mountpoint=None, children=()):
    d = {'name': name, 'type': kind, 'size': size, 'mountpoint': mountpoint}
    if children:
        d['children'] = list(children)
    return d


def ol_lvm(disk_bytes, pv_bytes, root_bytes):
    """sda: EFI, /boot, and a PV holding the root and /var/oled logical volumes."""
    pv = dev('/dev/sda3', 'part', pv_bytes, children=[
        dev('/dev/mapper/ocivolume-root', 'lvm', root_bytes, '/'),
        dev('/dev/mapper/ocivolume-oled', 'lvm', 10 * GIB, '/var/oled')])
    return {'blockdevices': [dev('/dev/sda', 'disk', disk_bytes, children=[
        dev('/dev/sda1', 'part', 100 * MIB, '/boot/efi'), dev('/dev/sda2', 'part', 2 * GIB, '/boot'), pv])]}


def ol_part(disk_bytes, root_bytes):
    return {'blockdevices': [dev('/dev/sda', 'disk', disk_bytes, children=[
        dev('/dev/sda1', 'part', 100 * MIB, '/boot/efi'), dev('/dev/sda2', 'part', GIB, '/boot'),
        dev('/dev/sda3', 'part', root_bytes, '/')])]}


def filled(disk_bytes, *used):
    """What is left after growpart: the first MiB (alignment) and the backup GPT."""
    return disk_bytes - sum(used) - MIB - 33 * 512


def test_a_new_node_grows_its_lvm_root_to_the_200_gb_boot_volume():
    plan = root_growth(ol_lvm(200 * GB, 45 * GIB, 35 * GIB))
    assert plan['grow'] and plan['root'] == '/dev/mapper/ocivolume-root' and plan['root_type'] == 'lvm'
    assert plan['root_bytes'] == 35 * GIB
    assert plan['disks'] == [dict(disk='/dev/sda', disk_bytes=200 * GB, partition='/dev/sda3',
                                  unallocated_bytes=200 * GB - 45 * GIB - 2 * GIB - 100 * MIB)]
    assert '/dev/sda' in plan['reason'] and 'in no partition' in plan['reason']


def test_a_grown_node_has_nothing_to_grow():
    disk = 200 * GB
    pv = filled(disk, 100 * MIB, 2 * GIB)
    plan = root_growth(ol_lvm(disk, pv, pv - 10 * GIB))
    assert not plan['grow'] and 'the partitions fill /dev/sda' in plan['reason']


def test_a_partition_root_grows_and_then_does_not():
    assert root_growth(ol_part(200 * GB, 44 * GIB))['grow']
    grown = root_growth(ol_part(200 * GB, filled(200 * GB, 100 * MIB, GIB)))
    assert not grown['grow'] and grown['root'] == '/dev/sda3' and grown['root_type'] == 'part'


def test_less_than_the_minimum_is_not_worth_a_run():
    layout = ol_part(200 * GB, 200 * GB - GIB - 100 * MIB - 600 * MIB)
    assert not root_growth(layout)['grow']
    assert root_growth(layout, min_bytes=500 * MIB)['grow']


def test_old_lsblk_prints_sizes_as_strings():
    layout = ol_part(200 * GB, 44 * GIB)
    for d in [layout['blockdevices'][0]] + layout['blockdevices'][0]['children']:
        d['size'] = str(d['size'])
    assert root_growth(layout)['grow']


def test_a_root_on_a_whole_disk_or_none_is_left_alone():
    whole = {'blockdevices': [dev('/dev/vda', 'disk', 200 * GB, '/')]}
    plan = root_growth(whole)
    assert not plan['grow'] and 'whole disk /dev/vda' in plan['reason']
    # A container (the stand-ins): the root is an overlay, on no block device.
    plan = root_growth({'blockdevices': [dev('/dev/nvme0n1', 'disk', 6 * 10 ** 12)]})
    assert not plan['grow'] and plan['root'] is None and 'no disk holds' in plan['reason']
    assert not root_growth({})['grow']


def test_other_disks_with_free_space_do_not_count():
    layout = ol_part(200 * GB, filled(200 * GB, 100 * MIB, GIB))
    layout['blockdevices'].append(dev('/dev/nvme0n1', 'disk', 6 * 10 ** 12))  # NVMe scratch, blank
    layout['blockdevices'].append(dev('/dev/sdb', 'disk', 1000 * GB, children=[dev('/dev/sdb1', 'part', GIB, '/data')]))
    assert not root_growth(layout)['grow']


# The role: oci-growfs runs only on the filter's word, and says what it did.
def _tasks():
    return yaml.safe_load((ROOT / 'roles' / 'common' / 'tasks' / 'growfs.yml').read_text())


def test_the_role_runs_oci_growfs_only_when_the_filter_says_so():
    block = next(t for t in _tasks() if 'block' in t)
    assert 'ocigpu.cluster.root_growth' in block['vars']['__common_growfs_before_plan']
    run = next(t for t in block['block'] if t.get('register') == '__common_growfs_run')
    assert run['ansible.builtin.command']['argv'] == ['{{ __common_growfs_tool }}', '-y']
    assert run['when'] == '__common_growfs_before_plan.grow'
    main = yaml.safe_load((ROOT / 'roles' / 'common' / 'tasks' / 'main.yml').read_text())
    assert main[0]['ansible.builtin.import_tasks'] == 'growfs.yml', 'the root grows before any package is installed'
    assert main[0]['when'] == 'common_grow_root_filesystem | bool'


def _say(check_mode=False, **context):
    """The role's last message, rendered with its task vars (human_readable stands in)."""
    task = next(t for t in _tasks() if 'block' in t)['block'][-1]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters['ansible.builtin.human_readable'] = lambda n: '%.2f GB' % (n / GIB)
    env.tests['changed'] = lambda r: bool(r.get('changed'))
    assert task['vars']['_plan'] == '{{ __common_growfs_before_plan }}'
    context = dict(context, ansible_check_mode=check_mode, _plan=context['__common_growfs_before_plan'])
    for key in ('_before', '_after', '_said'):
        try:
            context[key] = env.from_string(task['vars'][key]).render(context)
        except jinja2.UndefinedError:
            pass  # Ansible renders task vars when read: the branch taken does not read this one
    return env.from_string(task['ansible.builtin.debug']['msg']).render(context)


@pytest.mark.parametrize('case', ['grew', 'nothing', 'check', 'nochange'])
def test_the_role_says_what_it_did(case):
    before = root_growth(ol_lvm(200 * GB, 45 * GIB, 35 * GIB))
    after = root_growth(ol_lvm(200 * GB, filled(200 * GB, 100 * MIB, 2 * GIB), 186 * GIB))
    run = dict(changed=False, stdout_lines=['NOCHANGE: partition 3 is size 94371840. it cannot be grown'],
               stderr_lines=[])
    if case == 'grew':
        said = _say(__common_growfs_before_plan=before, __common_growfs_after_plan=after,
                    __common_growfs_run=dict(changed=True))
        assert said == 'root filesystem: grew /dev/mapper/ocivolume-root from 35.00 GB to 186.00 GB with oci-growfs'
    elif case == 'nothing':
        said = _say(__common_growfs_before_plan=after, __common_growfs_run=dict(skipped=True))
        assert said.startswith('root filesystem: nothing to grow, the partitions fill /dev/sda (186.3 GiB)')
        assert said.endswith('(/dev/mapper/ocivolume-root, 186.00 GB)')
    elif case == 'check':
        said = _say(check_mode=True, __common_growfs_before_plan=before, __common_growfs_run=dict(skipped=True))
        assert said.startswith('root filesystem: would grow /dev/mapper/ocivolume-root (35.00 GB) with oci-growfs: ')
        assert 'of /dev/sda (186.3 GiB) is in no partition' in said
    else:
        said = _say(__common_growfs_before_plan=before, __common_growfs_run=run)
        assert said.startswith('root filesystem: oci-growfs grew nothing') and 'NOCHANGE' in said
