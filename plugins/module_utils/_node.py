# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a GPU node knows of itself: instance metadata, NVMe disks, RDMA NICs, the primary interface.
The RDMA devices and the GPUs are read by _observe.

Every function reads the node through a root folder (``root='/'`` in production, a fake tree in
unit tests) and runs commands through an injected ``run(argv) -> (rc, stdout, stderr)``, so the
same code is tested with fake sysfs/dev trees and used unchanged by the node_facts module.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.ocigpu.cluster.plugins.module_utils._observe import (
    listdir, natural_key, rdma_devices, read_file, under)

IMDS_URL = 'http://169.254.169.254/opc/v2'
IMDS_HEADERS = {'Authorization': 'Bearer Oracle'}

# Files whose presence means the node's own RDMA agent configures the RDMA NICs
# (Oracle's oci-rdma-configure on newer OCI HPC images, driven by the Oracle Cloud Agent plugin
# "Compute HPC RDMA Auto-Configuration").
RDMA_AGENT_PATHS = (
    '/sbin/oci-rdma-configure',
    '/usr/sbin/oci-rdma-configure',
    '/usr/bin/oci-rdma-configure',
    '/etc/oci-hpc/rdma-network.conf',
)

# Mount points whose backing disks are the boot disk(s), never data disks.
BOOT_MOUNTS = ('/', '/boot', '/boot/efi', '/usr', '/var')

_NVME_DISK_RE = re.compile(r'^nvme\d+n\d+$')


# ---------------------------------------------------------------- block devices


def _block_name_of_devnum(root, devnum):
    """Resolve 'MAJ:MIN' to the kernel block device name via /sys/dev/block."""
    link = under(root, '/sys/dev/block/%s' % devnum)
    if not os.path.exists(link):
        return None
    return os.path.basename(os.path.realpath(link))


def _disks_behind(root, name, seen=None):
    """The whole disks behind a block device (partition -> disk, dm/md -> slaves, recursively)."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    real = os.path.realpath(under(root, '/sys/class/block/%s' % name))
    if os.path.exists(os.path.join(real, 'partition')):
        return _disks_behind(root, os.path.basename(os.path.dirname(real)), seen)
    slaves = listdir(os.path.join(real, 'slaves'))
    if slaves:
        found = set()
        for slave in slaves:
            found |= _disks_behind(root, slave, seen)
        return found
    return {name}


def mounted_devices(root):
    """{mount point: kernel block device name} for mounts backed by a block device."""
    mounts = {}
    text = read_file(under(root, '/proc/self/mountinfo'), '')
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        name = _block_name_of_devnum(root, fields[2])
        if name:
            mounts[fields[4].replace('\\040', ' ')] = name
    return mounts


def swap_devices(root):
    names = []
    text = read_file(under(root, '/proc/swaps'), '')
    for line in text.splitlines()[1:]:
        dev = line.split()[0] if line.split() else ''
        if dev.startswith('/dev/'):
            names.append(os.path.basename(os.path.realpath(under(root, dev))))
    return names


def by_id_paths(root):
    """{kernel name: [/dev/disk/by-id/... links]} (the real paths, even for a fake root)."""
    links = {}
    folder = under(root, '/dev/disk/by-id')
    for entry in listdir(folder):
        target = os.path.basename(os.path.realpath(os.path.join(folder, entry)))
        links.setdefault(target, []).append('/dev/disk/by-id/' + entry)
    return links


def stable_path(name, links):
    """The most stable by-id link for a disk: model_serial, then EUI/NGUID, then any, else /dev/name."""
    candidates = links.get(name, [])

    def rank(link):
        base = os.path.basename(link)
        if base.startswith('nvme-eui.') or base.startswith('nvme-nvme.'):
            return (1, base)
        if base.startswith('nvme-') and not re.search(r'_\d+$', base):
            return (0, base)
        return (2, base)

    if not candidates:
        return '/dev/' + name
    return sorted(candidates, key=rank)[0]


def probe_signatures(run, device):
    """Signatures on a device, as wipefs sees them ([{'type': 'xfs', 'offset': '0x0'}, ...]).

    Falls back to ``blkid -p`` where wipefs has no --json (util-linux before 2.29).
    Raises RuntimeError when neither tool can probe the device, so that a disk is never taken
    for empty because probing failed.
    """
    rc, out, err = run(['wipefs', '--no-act', '--json', device])
    if rc == 0:
        if not out.strip():
            return []
        data = json.loads(out)
        return [{'type': s.get('type'), 'offset': s.get('offset'), 'label': s.get('label'),
                 'uuid': s.get('uuid')} for s in data.get('signatures', [])]
    rc2, out2, err2 = run(['blkid', '-p', '-o', 'export', device])
    if rc2 == 2:  # blkid: nothing found
        return []
    if rc2 == 0:
        values = dict(line.split('=', 1) for line in out2.splitlines() if '=' in line)
        kind = values.get('TYPE') or values.get('PTTYPE')
        return [{'type': kind, 'offset': None, 'label': values.get('LABEL'),
                 'uuid': values.get('UUID') or values.get('PTUUID')}]
    raise RuntimeError('cannot probe %s for signatures: wipefs: %s; blkid: %s'
                       % (device, (err or out).strip(), (err2 or out2).strip()))


def lvm_pv_map(run):
    """{kernel name: VG name or ''} for every LVM physical volume, or None without LVM tools."""
    try:
        rc, out, err = run(['pvs', '--noheadings', '--separator', '|', '-o', 'pv_name,vg_name'])
    except OSError:
        return None
    if rc != 0:
        return None
    pvs = {}
    for line in out.splitlines():
        if '|' not in line:
            continue
        pv, vg = [f.strip() for f in line.split('|', 1)]
        pvs[os.path.basename(pv)] = vg
    return pvs


def detect_nvme(root='/', run=None):
    """NVMe data disks, the boot disk(s) excluded.

    Returns {'source': 'detected', 'boot_disks': [...], 'disks': [...], 'lvm_probed': bool}.
    """
    mounts = mounted_devices(root)
    boot = set()
    in_use = {}
    for point, dev in mounts.items():
        for disk in _disks_behind(root, dev):
            if point in BOOT_MOUNTS:
                boot.add(disk)
            in_use.setdefault(disk, []).append(point)
    for dev in swap_devices(root):
        boot |= _disks_behind(root, dev)

    links = by_id_paths(root)
    pvs = lvm_pv_map(run) if run else None
    disks = []
    for name in listdir(under(root, '/sys/block')):
        if not _NVME_DISK_RE.match(name) or name in boot:
            continue
        sys_dir = under(root, '/sys/block/%s' % name)
        size = int(read_file(os.path.join(sys_dir, 'size'), '0') or 0) * 512
        if size == 0:
            continue  # an NVMe namespace without media (detached, or not yet ready)
        partitions = [e for e in listdir(sys_dir)
                      if e.startswith(name) and os.path.exists(os.path.join(sys_dir, e, 'partition'))]
        holders = listdir(os.path.join(sys_dir, 'holders'))
        path = '/dev/' + name
        signatures = probe_signatures(run, path) if run else []
        disk = {
            'name': name,
            'path': path,
            'by_id': stable_path(name, links),
            'size_bytes': size,
            'model': read_file(os.path.join(sys_dir, 'device', 'model'), ''),
            'serial': read_file(os.path.join(sys_dir, 'device', 'serial'), ''),
            'signatures': signatures,
            'partitions': partitions,
            'holders': holders,
            'mounted': sorted(in_use.get(name, [])),
            'lvm_vg': (pvs or {}).get(name),
        }
        disk['empty'] = not (signatures or partitions or holders or disk['mounted'])
        disks.append(disk)
    return {'source': 'detected', 'boot_disks': sorted(boot, key=natural_key), 'disks': disks,
            'lvm_probed': pvs is not None}


# ---------------------------------------------------------------- RDMA


def rdma_agent(root='/', paths=RDMA_AGENT_PATHS):
    evidence = [p for p in paths if os.path.exists(under(root, p))]
    return {'present': bool(evidence), 'evidence': evidence}


def rdma_facts(root='/', shape_facts=None, agent_paths=RDMA_AGENT_PATHS):
    """RDMA devices and the ordered list of RDMA netdevs.

    Order: the shape table's order when it names the detected netdevs (seed 001 numbers
    interfaces in that order), else PCI order. With no RDMA device in sysfs, the shape's
    interface names are used where such netdevs exist (source 'shape'); else none.
    """
    shape_facts = shape_facts or {}
    devices = rdma_devices(root)
    expected = list(shape_facts.get('rdma_interfaces') or [])
    detected = [d['netdev'] for d in devices if d['netdev']]
    if detected:
        source = 'detected'
        in_shape = [n for n in expected if n in detected]
        interfaces = in_shape + [n for n in detected if n not in in_shape]
    else:
        present = [n for n in expected if os.path.exists(under(root, '/sys/class/net/%s' % n))]
        source = 'shape' if present else 'none'
        interfaces = present
    return {'source': source, 'devices': devices, 'interfaces': interfaces,
            'expected': expected, 'agent': rdma_agent(root, agent_paths)}


# ---------------------------------------------------------------- primary interface


def default_route_interface(root='/'):
    text = read_file(under(root, '/proc/net/route'), '')
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == '00000000':
            return fields[0]
    return None


def interface_by_mac(root, mac):
    mac = (mac or '').lower()
    for name in listdir(under(root, '/sys/class/net')):
        if (read_file(under(root, '/sys/class/net/%s/address' % name), '') or '').lower() == mac:
            return name
    return None


def ipv4_of(run, interface):
    """(address, prefixlen) of an interface from `ip -j addr`, or (None, None)."""
    if not run or not interface:
        return None, None
    rc, out, err = run(['ip', '-j', '-4', 'addr', 'show', 'dev', interface])
    if rc != 0 or not out.strip():
        return None, None
    for link in json.loads(out):
        for addr in link.get('addr_info', []):
            if addr.get('family') == 'inet' and addr.get('scope', 'global') == 'global':
                return addr['local'], int(addr['prefixlen'])
    return None, None


def network_of(ip, prefixlen):
    """'a.b.c.d/n' of the network holding ip (pure arithmetic, no netaddr on the node)."""
    parts = [int(p) for p in ip.split('.')]
    value = (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]
    mask = (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF if prefixlen else 0
    net = value & mask
    return '%d.%d.%d.%d/%d' % (net >> 24, (net >> 16) & 255, (net >> 8) & 255, net & 255, prefixlen)


def instance_facts(doc):
    if not doc:
        return {'source': 'none'}
    return {
        'source': 'imds',
        'id': doc.get('id'),
        'display_name': doc.get('displayName'),
        'hostname': doc.get('hostname'),
        'region': doc.get('region'),
        'canonical_region_name': doc.get('canonicalRegionName'),
        'availability_domain': doc.get('availabilityDomain'),
        'fault_domain': doc.get('faultDomain'),
        'compartment_id': doc.get('compartmentId'),
        'image': doc.get('image'),
        'shape': doc.get('shape'),
        'freeform_tags': doc.get('freeformTags') or {},
    }


def primary_facts(root='/', run=None, vnics=None):
    """The primary VNIC: from IMDS (first VNIC) when available, else the default-route interface."""
    if vnics:
        vnic = sorted(vnics, key=lambda v: v.get('nicIndex') or 0)[0]
        interface = interface_by_mac(root, vnic.get('macAddr'))
        subnet = vnic.get('subnetCidrBlock')
        prefixlen = int(subnet.split('/')[1]) if subnet and '/' in subnet else None
        return {'source': 'imds', 'interface': interface, 'ip': vnic.get('privateIp'),
                'subnet_cidr': subnet, 'prefixlen': prefixlen,
                'mac': (vnic.get('macAddr') or '').lower() or None,
                'vnic_id': vnic.get('vnicId'), 'gateway': vnic.get('virtualRouterIp')}
    interface = default_route_interface(root)
    ip, prefixlen = ipv4_of(run, interface)
    if not ip:
        return {'source': 'none', 'interface': interface, 'ip': None, 'subnet_cidr': None,
                'prefixlen': None, 'mac': None, 'vnic_id': None, 'gateway': None}
    return {'source': 'detected', 'interface': interface, 'ip': ip,
            'subnet_cidr': network_of(ip, prefixlen), 'prefixlen': prefixlen,
            'mac': read_file(under(root, '/sys/class/net/%s/address' % interface)),
            'vnic_id': None, 'gateway': None}
