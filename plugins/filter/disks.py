# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: root_growth
short_description: Whether the root filesystem's disk has space that no partition holds
version_added: 0.4.0
description:
  - Reads the block device tree that C(lsblk --json --bytes --paths --output NAME,TYPE,SIZE,MOUNTPOINT)
    prints, follows it from each disk down to the device mounted on O(mountpoint) (a partition, or a
    logical volume on a partition), and tells whether that disk has at least O(min_bytes) in no partition.
  - The common role runs OCI's C(oci-growfs) only then, so that a re-run changes nothing. Once the
    partition fills the disk, what is left (alignment, the backup GPT) is far below O(min_bytes).
  - A root on a whole disk, with no partition, has nothing to grow by partition.
options:
  _input:
    description: The parsed output of C(lsblk --json --bytes --paths --output NAME,TYPE,SIZE,MOUNTPOINT).
    type: dict
    required: true
  min_bytes:
    description: Space in no partition below which there is nothing to grow.
    type: int
    default: 1073741824
  mountpoint:
    description: The mount point whose device is followed.
    type: str
    default: /
"""

EXAMPLES = r"""
- name: Decide
  ansible.builtin.set_fact:
    plan: "{{ lsblk.stdout | from_json | ocigpu.cluster.root_growth }}"
"""

RETURN = r"""
_value:
  description: The decision and what it was made from.
  type: dict
  contains:
    grow:
      description: Whether a disk under the mount point has at least O(min_bytes) in no partition.
      type: bool
    reason:
      description: Why, in a sentence.
      type: str
    root:
      description: The device mounted on O(mountpoint) (C(/dev/sda3), C(/dev/mapper/ocivolume-root)), or null.
      type: str
    root_type:
      description: Its lsblk type (C(part), C(lvm), C(disk)), or null.
      type: str
    root_bytes:
      description: Its size in bytes, or null.
      type: int
    disks:
      description: For each disk under the mount point, C(disk), C(disk_bytes), C(partition) (null for a whole
        disk) and C(unallocated_bytes).
      type: list
      elements: dict
"""

GIB = 1 << 30


def _size(node):
    # lsblk 2.33 and later print numbers, older ones strings.
    try:
        return int(node.get('size') or 0)
    except (TypeError, ValueError):
        return 0


def _chains(node, chain, mountpoint):
    chain = chain + [node]
    found = [chain] if node.get('mountpoint') == mountpoint else []
    for child in node.get('children') or []:
        found += _chains(child, chain, mountpoint)
    return found


def _gib(n):
    return '%.1f GiB' % (n / GIB)


def root_growth(lsblk, min_bytes=GIB, mountpoint='/'):
    chains = []
    for dev in (lsblk or {}).get('blockdevices') or []:
        if dev.get('type') == 'disk':
            chains += _chains(dev, [], mountpoint)
    result = dict(grow=False, root=None, root_type=None, root_bytes=None, disks=[])
    if not chains:
        result['reason'] = 'no disk holds the device mounted on %s' % mountpoint
        return result
    root = chains[0][-1]
    result.update(root=root.get('name'), root_type=root.get('type'), root_bytes=_size(root))
    seen = set()
    for chain in chains:
        disk = chain[0]
        if disk.get('name') in seen:
            continue
        seen.add(disk.get('name'))
        parts = [c for c in disk.get('children') or [] if c.get('type') == 'part']
        partition = next((n for n in chain[1:] if n.get('type') == 'part'), None)
        result['disks'].append(dict(
            disk=disk.get('name'), disk_bytes=_size(disk), partition=partition.get('name') if partition else None,
            unallocated_bytes=_size(disk) - sum(_size(p) for p in parts) if partition else 0))
    growable = [d for d in result['disks'] if d['partition'] and d['unallocated_bytes'] >= min_bytes]
    result['grow'] = bool(growable)
    if growable:
        result['reason'] = '; '.join(
            '%s of %s (%s) is in no partition' % (_gib(d['unallocated_bytes']), d['disk'], _gib(d['disk_bytes']))
            for d in growable)
    elif not any(d['partition'] for d in result['disks']):
        result['reason'] = '%s is on the whole disk %s, with no partition to grow' % (
            mountpoint, ', '.join(d['disk'] for d in result['disks']))
    else:
        result['reason'] = '; '.join('the partitions fill %s (%s)' % (d['disk'], _gib(d['disk_bytes']))
                                     for d in result['disks'] if d['partition'])
    return result


class FilterModule(object):
    def filters(self):
        return {'root_growth': root_growth}
