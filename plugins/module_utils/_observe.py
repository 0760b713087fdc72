# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the collection reads on a node, one function a read: RDMA devices in sysfs, GPUs from
nvidia-smi, installed packages (dpkg or rpm) and the state of systemd units.

sysfs is read through a root folder (``root='/'`` in production, a fake tree in unit tests). Commands
run through an injected ``run(argv) -> (rc, stdout, stderr)``, or through the module's get_bin_path
and run_command for the package and unit reads.

The RDMA port attributes (read_ib_ports) and the nvidia-smi query (query_gpus) are _health's: the
node_health role copies that file alone onto the nodes, where it can import nothing else. They are
used here, not written again.
"""

from __future__ import annotations

import os
import re

from ansible_collections.ocigpu.cluster.plugins.module_utils._health import (
    IB_SYSFS, query_gpus, read_ib_ports, read_text)

_PCI_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
# The nvidia-smi fields of node_facts' GPU list.
GPU_FIELDS = ('index', 'name', 'uuid', 'pci.bus_id', 'memory.total')


def natural_key(text):
    """Sort key that orders nvme2n1 before nvme10n1 and mlx5_2 before mlx5_10."""
    return [int(p) if p.isdigit() else p for p in re.split(r'(\d+)', text)]


def under(root, path):
    """path inside the root folder."""
    return os.path.join(root, path.lstrip('/'))


def read_file(path, default=None):
    """A file's text, stripped, or default when it cannot be read."""
    text = read_text(path)
    return default if text is None else text


def listdir(path):
    """A folder's entries in natural order; none when it cannot be read."""
    try:
        return sorted(os.listdir(path), key=natural_key)
    except (IOError, OSError):
        return []


# ---------------------------------------------------------------- RDMA


def _rdma_netdev(dev_dir):
    nets = listdir(os.path.join(dev_dir, 'device', 'net'))
    if nets:
        return nets[0]
    parent = read_file(os.path.join(dev_dir, 'parent'))  # soft-RoCE (rxe) and siw devices
    if parent:
        return parent
    for port in listdir(os.path.join(dev_dir, 'ports')):
        ndev = read_file(os.path.join(dev_dir, 'ports', port, 'gid_attrs', 'ndevs', '0'))
        if ndev:
            return ndev
    return None


def rdma_devices(root='/'):
    """RDMA devices from /sys/class/infiniband, in PCI order (virtual devices last, by name), with the
    state and link layer of their first port."""
    devices = []
    base = under(root, IB_SYSFS)
    ports = read_ib_ports(base)
    for name in listdir(base):
        dev_dir = os.path.join(base, name)
        pci = None
        pci_id = None
        driver = None
        device_link = os.path.join(dev_dir, 'device')
        if os.path.exists(device_link):
            real = os.path.basename(os.path.realpath(device_link))
            if _PCI_RE.match(real):
                pci = real
            vendor = read_file(os.path.join(device_link, 'vendor'))
            product = read_file(os.path.join(device_link, 'device'))
            if vendor and product:
                pci_id = '%s:%s' % (vendor.replace('0x', ''), product.replace('0x', ''))
            drv = os.path.join(device_link, 'driver')
            if os.path.exists(drv):
                driver = os.path.basename(os.path.realpath(drv))
        own = ports.get(name) or {}
        first = own[min(own, key=natural_key)] if own else {}
        devices.append({
            'name': name,
            'netdev': _rdma_netdev(dev_dir),
            'pci': pci,
            'pci_id': pci_id,
            'driver': driver,
            'port_state': (first.get('state') or '').split(':')[-1].strip() or None,
            'link_layer': first.get('link_layer'),
        })
    devices.sort(key=lambda d: (d['pci'] is None, d['pci'] or '', natural_key(d['name'])))
    return devices


# ---------------------------------------------------------------- GPUs


def gpus(root='/', run=None, nvidia_smi=None):
    """GPUs via nvidia-smi when present, else NVIDIA display controllers counted in sysfs."""
    if run and nvidia_smi:
        rows = query_gpus(nvidia_smi, (GPU_FIELDS,), run)[0]
        if rows is not None:
            found = [{'index': g['index'], 'name': g['name'], 'uuid': g['uuid'],
                      'pci_bus_id': (g['pci.bus_id'] or '').lower() or None,
                      'memory_mib': g['memory.total'] if isinstance(g['memory.total'], int) else None}
                     for g in rows]
            return {'source': 'detected', 'method': 'nvidia-smi', 'count': len(found),
                    'model': found[0]['name'] if found else None, 'list': found}
    found = []
    base = under(root, '/sys/bus/pci/devices')
    for addr in listdir(base):
        vendor = read_file(os.path.join(base, addr, 'vendor'))
        klass = read_file(os.path.join(base, addr, 'class'), '')
        if vendor == '0x10de' and klass.startswith(('0x0300', '0x0302')):
            found.append({'index': len(found), 'name': None, 'uuid': None, 'pci_bus_id': addr,
                          'memory_mib': None})
    return {'source': 'detected' if found else 'none', 'method': 'sysfs', 'count': len(found),
            'model': None, 'list': found}


# ---------------------------------------------------------------- packages


def parse_dpkg_query(text):
    """`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`: {package: version} of installed ones."""
    found = {}
    for line in text.splitlines():
        fields = line.split('\t')
        if len(fields) == 3 and fields[2].strip().startswith('ii'):
            found[fields[0].split(':')[0]] = fields[1]
    return found


def package_versions(module, packages):
    """{package: version, None when not installed} by dpkg-query, else rpm; {} when neither is there."""
    if not packages:
        return {}
    dpkg_query, rpm = module.get_bin_path('dpkg-query'), module.get_bin_path('rpm')
    found = {}
    if dpkg_query:
        # Exit status 1 when a name is not installed: the others are still printed.
        _rc, out, _err = module.run_command([dpkg_query, '-W', '-f', '${Package}\t${Version}\t${db:Status-Abbrev}\n', '--'] + list(packages))
        found = parse_dpkg_query(out)
    elif rpm:
        _rc, out, _err = module.run_command([rpm, '-q', '--qf', '%{NAME}\t%{VERSION}-%{RELEASE}\tii\n'] + list(packages))
        found = parse_dpkg_query(out)
    return dict((name, found.get(name)) for name in packages)


def parse_dpkg_status(text):
    """Names of the packages that dpkg's status file says are installed."""
    names = set()
    for stanza in text.split('\n\n'):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (' ', '\t') and ':' in line:
                key, value = line.split(':', 1)
                fields[key] = value.strip()
        if fields.get('Package') and fields.get('Status', '').endswith(' installed'):
            names.add(fields['Package'])
    return sorted(names)


def installed_package_names(module, root='/'):
    """The installed packages by dpkg's status file, else rpm; None when neither is there."""
    try:
        with open(under(root, '/var/lib/dpkg/status'), encoding='utf-8', errors='replace') as handle:
            return parse_dpkg_status(handle.read())
    except FileNotFoundError:
        pass
    rpm = module.get_bin_path('rpm')
    if rpm is None:
        return None
    rc, out, dummy = module.run_command([rpm, '-qa', '--qf', '%{NAME}\\n'])
    return sorted(set(out.split())) if rc == 0 else None


# ---------------------------------------------------------------- systemd units


def parse_systemctl_show(text):
    """`systemctl show -p Id,ActiveState,UnitFileState` output: {unit: 'active_state/unit_file_state'}."""
    units, current = {}, {}
    for line in text.splitlines() + ['']:
        if not line.strip():
            if current.get('Id'):
                units[current['Id']] = '%s/%s' % (current.get('ActiveState', ''), current.get('UnitFileState', ''))
            current = {}
            continue
        key, _sep, value = line.partition('=')
        current[key] = value
    return units


def unit_states(module, units):
    """{unit: 'active_state/unit_file_state'}, 'not-found' for a unit systemd does not know, 'no systemctl'
    on a node without systemd."""
    if not units:
        return {}
    systemctl = module.get_bin_path('systemctl')
    if not systemctl:
        return dict((unit, 'no systemctl') for unit in units)
    rc, out, err = module.run_command([systemctl, 'show', '-p', 'Id,ActiveState,UnitFileState', '--'] + list(units))
    if rc != 0:
        module.fail_json(msg='systemctl show failed: %s' % (err.strip() or out.strip()))
    shown = parse_systemctl_show(out)
    # systemctl shows the unit by its Id; a unit named without its suffix is a service.
    return dict((unit, shown.get(unit, shown.get(unit + '.service', 'not-found'))) for unit in units)
