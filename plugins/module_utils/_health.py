# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Passive health checks of a GPU node: what it reads, what it expects, what it decides.

Standard library only: the nccl_health module imports it, and the node_health role copies this file
to the nodes, where `ocigpu-healthcheck` (Slurm's HealthCheckProgram) runs it without Ansible.

    observed = gather(expect)                       # nvidia-smi, kernel log, sysfs, ip, /proc/mounts
    results = evaluate(node, expect, observed)      # [{check, ok, reason}], ok None = could not run
    metrics_text(results, observed)                 # Prometheus text for a textfile collector

`expect` (the role writes it to /etc/ocigpu-health/expect.json from the shape table and node_facts):
gpus, rdma_devices, rdma_port_gbps, rdma_addresses ({interface: address}), scratch_path, paths
(files that must exist), ignore_xids.
"""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess  # nosec: fixed argument lists, no shell
import tempfile

# The GPU driver's XID report, as the whole start of a kernel record (kernel_rc.c in NVIDIA's open kernel
# modules prints "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, <text>", on a MIG GPU with
# " GPU-I:%02u" and " GPU-CI:%02u" inside the parenthesis; older drivers leave out "PCI:"). Anchored at the
# start and with the driver's own PCI address, so text a user can get the kernel to print (a path in an
# overlayfs error, a crashing process's name of at most 15 characters) does not match.
XID_RE = re.compile(r'NVRM: Xid \((?P<pci>(?:PCI:)?[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)'
                    r'(?: GPU-I:\d+)?(?: GPU-CI:\d+)?\): (?P<xid>\d+),')
# A /dev/kmsg record: "<syslog priority>,<sequence>,<microseconds>,<flags>[,...];<message>" (the kernel's
# Documentation/ABI/testing/dev-kmsg); the priority's facility is 0 (kern) only for what the kernel itself
# printed: the kernel gives a record written to /dev/kmsg by user space the user facility unless it names
# another one, and never the kern facility.
KMSG_RE = re.compile(r'(?P<pri>\d+),\d+,\d+,[^;]*;(?P<message>.*)')
KMSG_DEVICE = '/dev/kmsg'
RATE_RE = re.compile(r'^\s*(?P<gbps>\d+(?:\.\d+)?)\s*Gb/sec')
# nvidia-smi --query-gpu fields: the base ones every driver knows, then the optional ones (row
# remapping is Ampere and later, page retirement Volta and earlier; an old driver rejects a name).
BASE_FIELDS = ('index', 'pci.bus_id', 'name', 'ecc.errors.uncorrected.volatile.total')
EXTRA_FIELDS = ('retired_pages.pending', 'retired_pages.sbe', 'retired_pages.dbe',
                'remapped_rows.pending', 'remapped_rows.failure',
                'pcie.link.width.current', 'pcie.link.width.max', 'clocks_throttle_reasons.hw_slowdown')
# Volta and earlier retire at most 64 pages per GPU (NVIDIA's dynamic page retirement notes).
RETIRED_PAGES_MAX = 64
# XIDs that NVIDIA's XID catalog attributes to the application rather than the GPU: a job's fault.
DEFAULT_IGNORE_XIDS = (13, 31, 43, 45)
MISSING = ('', 'N/A', '[N/A]', '[Not Supported]', 'Not Supported', '[Unknown Error]')
IB_SYSFS = '/sys/class/infiniband'


def _value(text):
    text = (text or '').strip()
    if text in MISSING:
        return None
    return int(text) if text.isdigit() else text


def parse_gpu_query(csv_text, fields=BASE_FIELDS):
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits` as dicts keyed by field
    name; values that the GPU or driver does not report ('[N/A]', '[Not Supported]') are None."""
    gpus = []
    for line in (csv_text or '').splitlines():
        parts = [p.strip() for p in line.split(',')]
        if len(parts) < len(fields) or not parts[0].isdigit():
            continue
        gpus.append(dict((name, _value(part)) for name, part in zip(fields, parts)))
    return gpus


def gpu_list(gpus):
    """Rows of the base query as index, bus_id, name and ecc_uncorrected (None when ECC is off)."""
    return [dict(index=g['index'], bus_id=g['pci.bus_id'], name=g['name'],
                 ecc_uncorrected=g['ecc.errors.uncorrected.volatile.total']
                 if isinstance(g['ecc.errors.uncorrected.volatile.total'], int) else None)
            for g in gpus]


def find_xids(messages):
    """XID events (the GPU driver's error reports) in kernel messages: a list of whole kernel records (as
    kernel_log() returns them), or text of one record a line. A record counts only when it starts with
    the driver's own report (XID_RE)."""
    if isinstance(messages, str):
        messages = messages.splitlines()
    return [dict(m.groupdict(), xid=int(m.group('xid')), line=message.strip())
            for message in messages or () for m in [XID_RE.match(message)] if m]


def _unescape_kmsg(text):
    # /dev/kmsg writes a byte below 32 or above 126 and the backslash as \xHH
    return re.sub(r'\\x([0-9a-fA-F]{2})', lambda m: chr(int(m.group(1), 16)), text)


def parse_kmsg(text):
    """The kernel's own records (facility kern) in /dev/kmsg text: [message], each a whole record with any
    newline it holds kept inside (so a record cannot pass for two). Records of any other facility (what user
    space wrote to /dev/kmsg) and the records' key=value continuation lines are left out."""
    messages = []
    for line in (text or '').splitlines():
        match = KMSG_RE.match(line)
        if match and int(match.group('pri')) >> 3 == 0:
            messages.append(_unescape_kmsg(match.group('message')))
    return messages


def read_text(path):
    """A file's text, stripped, or None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def write_text(path, text, mode=0o644):
    """Write a file whole or not at all, as a reader sees it (its folder made when missing): the node
    programs' metrics and the sweep's state, the self-healing loop's metrics, topology.conf's places."""
    folder = os.path.dirname(path) or '.'
    os.makedirs(folder, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix='.' + os.path.basename(path))
    try:
        with os.fdopen(handle, 'w', encoding='utf-8') as out:
            out.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_ib_ports(sysfs_root=IB_SYSFS):
    """{device: {port: {'state', 'phys_state', 'link_layer', 'rate'}}} read from sysfs."""
    ports = {}
    if not os.path.isdir(sysfs_root):
        return ports
    for dev in sorted(os.listdir(sysfs_root)):
        pdir = os.path.join(sysfs_root, dev, 'ports')
        if not os.path.isdir(pdir):
            continue
        for port in sorted(os.listdir(pdir)):
            ports.setdefault(dev, {})[port] = dict(
                (name, read_text(os.path.join(pdir, port, name))) for name in ('state', 'phys_state', 'link_layer', 'rate'))
    return ports


def rate_gbps(rate):
    """100 from '100 Gb/sec (4X EDR)'; None when unreadable."""
    match = RATE_RE.match(rate or '')
    return float(match.group('gbps')) if match else None


def mount_of(path, mounts_text):
    """The /proc/mounts entry whose mount point is exactly path, or None."""
    target = path.rstrip('/') or '/'
    for line in (mounts_text or '').splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == target:
            return {'device': fields[0], 'mountpoint': fields[1], 'fstype': fields[2]}
    return None


def parse_ip_addresses(ip_json):
    """{interface: [address/prefix, ...]} from `ip -j addr show` (IPv4 and IPv6)."""
    out = {}
    for link in json.loads(ip_json or '[]'):
        out[link.get('ifname')] = ['%s/%s' % (a.get('local'), a.get('prefixlen')) for a in link.get('addr_info') or []]
    return out


def _run(argv, timeout=60):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # nosec
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, '', str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def query_gpus(nvidia_smi='nvidia-smi', field_sets=(BASE_FIELDS + EXTRA_FIELDS, BASE_FIELDS), run=_run):
    """(gpus, fields, error): the rows of the first of field_sets that the driver knows (by default the
    base and optional fields, else the base ones); gpus None with the error text when nvidia-smi does
    not answer. run(argv) -> (rc, stdout, stderr) runs nvidia-smi."""
    error = None
    for fields in field_sets:
        rc, out, err = run([nvidia_smi, '--query-gpu=' + ','.join(fields), '--format=csv,noheader,nounits'])
        if rc == 0:
            return parse_gpu_query(out, fields), fields, None
        error = (err or out).strip().splitlines()[-1:] or ['exit %d' % rc]
        error = error[0]
    return None, (), error


def read_kmsg(device=KMSG_DEVICE):
    """The records /dev/kmsg holds now (what dmesg reads), as its text, or None when it cannot be read (it
    needs root, or CAP_SYSLOG where kernel.dmesg_restrict is set)."""
    try:
        handle = os.open(device, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    records = []
    try:
        while True:
            try:
                record = os.read(handle, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the record was overwritten before it was read; the next one follows
                    continue
                raise
            if not record:
                break
            records.append(record.decode('utf-8', 'replace'))
    except OSError:
        return None
    finally:
        os.close(handle)
    return ''.join(records)


def journal_kernel_messages(journal_json):
    """The messages of `journalctl -k -o json` entries whose _TRANSPORT (a field journald sets, which a
    client cannot) is kernel; a message journald kept as bytes is decoded."""
    messages = []
    for line in (journal_json or '').splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get('_TRANSPORT') != 'kernel':
            continue
        message = entry.get('MESSAGE')
        if isinstance(message, list):
            message = bytes(b & 0xff for b in message if isinstance(b, int)).decode('utf-8', 'replace')
        if isinstance(message, str):
            messages.append(message)
    return messages


def kernel_log(run=None, kmsg=KMSG_DEVICE):
    """The kernel's own records of this boot, [message], or None when none can be read: /dev/kmsg's records
    of the kern facility, else the journal's entries of the kernel transport (`journalctl -k`). Never the
    plain text of dmesg or syslog, where a line cannot be told from a record of another facility or from
    part of a record. run(argv) -> (rc, stdout, stderr) runs journalctl (default: subprocess)."""
    text = read_kmsg(kmsg)
    if text is not None:
        return parse_kmsg(text)
    rc, out, _err = (run or _run)(['journalctl', '-k', '-b', '-o', 'json', '--no-pager', '-q',
                                   '--output-fields=MESSAGE,_TRANSPORT'])
    if rc == 0:
        return journal_kernel_messages(out)
    return None


def gather(expect, nvidia_smi='nvidia-smi', sysfs_root=IB_SYSFS, mounts_file='/proc/mounts',
           ip_command=('ip', '-j', 'addr', 'show'), log_reader=kernel_log):
    """Everything the checks of `expect` need, read from this node."""
    observed = {}
    if expect.get('gpus') is not None:
        observed['gpus'], observed['gpu_fields'], observed['gpu_error'] = query_gpus(nvidia_smi)
    if expect.get('check_xid', expect.get('gpus') is not None):
        log = log_reader()
        observed['kernel_log_readable'] = log is not None
        observed['xids'] = find_xids(log) if log is not None else []
    if expect.get('rdma_devices'):
        observed['ib_ports'] = read_ib_ports(sysfs_root)
    if expect.get('rdma_addresses'):
        rc, out, err = _run(list(ip_command))
        observed['addresses'] = parse_ip_addresses(out) if rc == 0 else None
        observed['addresses_error'] = None if rc == 0 else (err.strip() or 'exit %d' % rc)
    if expect.get('scratch_path'):
        observed['mounts'] = read_text(mounts_file) or ''
    if expect.get('paths'):
        observed['paths'] = dict((p, os.path.exists(p)) for p in expect['paths'])
    return observed


def _gpu_checks(add, expect, observed):
    gpus = observed.get('gpus')
    want = int(expect['gpus'])
    if gpus is None:
        add('gpu_count', False, 'nvidia-smi did not answer (%s)' % (observed.get('gpu_error') or 'driver not loaded?'),
            'nvidia-smi failed')
        return
    if len(gpus) != want:
        add('gpu_count', False, '%d GPUs visible, the shape has %d' % (len(gpus), want), '%d/%d GPUs' % (len(gpus), want))
    else:
        add('gpu_count', True, '%d GPUs visible' % len(gpus))
    if not gpus:
        return
    fields = observed.get('gpu_fields') or BASE_FIELDS

    def each(check, field_names, bad, describe, short):
        if not all(f in fields for f in field_names):
            add(check, None, 'not reported by this driver (%s)' % ', '.join(field_names))
            return
        found = [g for g in gpus if bad(g)]
        if found:
            text = ', '.join('GPU %s (%s): %s' % (g['index'], g['pci.bus_id'], describe(g)) for g in found)
            add(check, False, text, '%s on GPU %s' % (short, ','.join(str(g['index']) for g in found)))
        else:
            add(check, True, 'none of %d GPUs' % len(gpus))

    ecc = 'ecc.errors.uncorrected.volatile.total'
    each('ecc', (ecc,), lambda g: isinstance(g[ecc], int) and g[ecc] > 0,
         lambda g: '%d uncorrected ECC errors' % g[ecc], 'ECC errors')
    if not expect.get('gpu_extra_checks', True):
        return
    if any(g.get('remapped_rows.pending') is not None for g in gpus) or 'remapped_rows.pending' not in fields:
        each('row_remap', ('remapped_rows.pending', 'remapped_rows.failure'),
             lambda g: g['remapped_rows.pending'] == 'Yes' or g['remapped_rows.failure'] == 'Yes',
             lambda g: 'row remap %s' % ('failed' if g['remapped_rows.failure'] == 'Yes' else 'pending (reset the GPU)'),
             'row remap')
    if any(g.get('retired_pages.pending') is not None for g in gpus):
        each('retired_pages', ('retired_pages.pending', 'retired_pages.sbe', 'retired_pages.dbe'),
             lambda g: g['retired_pages.pending'] == 'Yes'
             or (g['retired_pages.sbe'] or 0) + (g['retired_pages.dbe'] or 0) >= RETIRED_PAGES_MAX,
             lambda g: 'page retirement %s' % ('pending' if g['retired_pages.pending'] == 'Yes' else 'table full'),
             'retired pages')
    each('pcie_width', ('pcie.link.width.current', 'pcie.link.width.max'),
         lambda g: isinstance(g['pcie.link.width.current'], int) and isinstance(g['pcie.link.width.max'], int)
         and g['pcie.link.width.current'] < g['pcie.link.width.max'],
         lambda g: 'PCIe link x%s of x%s' % (g['pcie.link.width.current'], g['pcie.link.width.max']), 'PCIe width')
    each('clock_slowdown', ('clocks_throttle_reasons.hw_slowdown',),
         lambda g: g['clocks_throttle_reasons.hw_slowdown'] == 'Active',
         lambda g: 'hardware slowdown active (thermal or power brake)', 'HW slowdown')


def evaluate(node, expect, observed):
    """The checks `expect` asks for, on what `observed` holds: [{check, ok, reason, short}] where ok is
    True, False, or None for a check that could not read its data (never passed silently). reason
    starts with the node name; short is the part that goes into a Slurm drain reason."""
    results = []

    def add(check, ok, reason, short=None):
        results.append({'check': check, 'ok': ok, 'reason': '%s: %s' % (node, reason), 'short': short or reason})

    if expect.get('gpus') is not None:
        _gpu_checks(add, expect, observed)
    if expect.get('check_xid', expect.get('gpus') is not None):
        ignore = set(expect.get('ignore_xids', DEFAULT_IGNORE_XIDS))
        if not observed.get('kernel_log_readable', True):
            add('xid', None, 'kernel log not readable, XID check not run')
        else:
            xids = [x for x in observed.get('xids') or [] if x['xid'] not in ignore]
            if xids:
                seen = sorted(set((x['xid'], x['pci']) for x in xids))
                add('xid', False, 'XID errors in the kernel log since boot: ' + ', '.join(
                    'Xid %d on %s' % s for s in seen[:8]), 'Xid ' + ','.join(str(s[0]) for s in seen[:4]))
            else:
                add('xid', True, 'no XID errors in the kernel log since boot (ignored: %s)' % (
                    ', '.join(str(x) for x in sorted(ignore)) or 'none'))
    if expect.get('rdma_devices'):
        ports = observed.get('ib_ports') or {}
        want_rate = expect.get('rdma_port_gbps')
        problems = []
        for dev in expect['rdma_devices']:
            if dev not in ports:
                problems.append('%s missing' % dev)
                continue
            for port, info in sorted(ports[dev].items()):
                state = info.get('state') or 'unknown'
                if 'ACTIVE' not in state.upper():
                    problems.append('%s/%s %s' % (dev, port, state.split(':')[-1].strip()))
                elif want_rate and (rate_gbps(info.get('rate')) or 0) < float(want_rate):
                    problems.append('%s/%s at %s, not %s Gb/sec' % (dev, port, info.get('rate') or 'unknown rate', want_rate))
        if problems:
            add('rdma_links', False, 'RDMA ports: ' + '; '.join(problems), 'RDMA ' + '; '.join(problems[:3]))
        else:
            add('rdma_links', True, '%d RDMA devices ACTIVE%s' % (
                len(expect['rdma_devices']), (' at %s Gb/sec' % want_rate) if want_rate else ''))
    if expect.get('rdma_addresses'):
        have = observed.get('addresses')
        if have is None:
            add('rdma_addresses', None, 'ip did not answer (%s)' % observed.get('addresses_error'))
        else:
            missing = ['%s %s' % (ifname, addr) for ifname, addr in sorted(expect['rdma_addresses'].items())
                       if addr not in (have.get(ifname) or [])]
            if missing:
                add('rdma_addresses', False, 'RDMA interfaces without their address: ' + ', '.join(missing),
                    'no address on ' + ','.join(m.split()[0] for m in missing[:4]))
            else:
                add('rdma_addresses', True, '%d RDMA interfaces have their address' % len(expect['rdma_addresses']))
    if expect.get('scratch_path'):
        mount = mount_of(expect['scratch_path'], observed.get('mounts'))
        if mount is None:
            add('nvme_scratch', False, 'NVMe scratch %s is not mounted' % expect['scratch_path'],
                '%s not mounted' % expect['scratch_path'])
        else:
            add('nvme_scratch', True, '%s mounted from %s (%s)' % (expect['scratch_path'], mount['device'], mount['fstype']))
    if expect.get('paths'):
        gone = [p for p in expect['paths'] if not (observed.get('paths') or {}).get(p)]
        if gone:
            add('container_paths', False, 'missing: ' + ', '.join(gone), 'missing ' + ','.join(os.path.basename(p) for p in gone))
        else:
            add('container_paths', True, '%d enroot and pyxis paths present' % len(expect['paths']))
    return results


DRAIN_PREFIX = 'ocigpu-health:'
# The active NCCL check's drain of a node that fell short (the nccl_tests role's, and
# `ocigpu-healthcheck --active`'s): the self-healing loop reads it as the check nccl_active.
ACTIVE_DRAIN_PREFIX = 'ocigpu-nccl: all_reduce'
REASON_MAX = 200


def drain_reason(results):
    """The Slurm reason for a node that failed: 'ocigpu-health: <check> <short>; ...' (at most 200 characters)."""
    return clip_reason(DRAIN_PREFIX + ' ' + '; '.join('%s %s' % (r['check'], r['short']) for r in results if r['ok'] is False))


def metrics_text(results, observed, now):
    """Prometheus text (for a textfile collector or the rdma_exporter's --textfile-dir)."""
    lines = ['# HELP ocigpu_health_check_ok 1 when a node health check passed, 0 when it failed, -1 when it could not run.',
             '# TYPE ocigpu_health_check_ok gauge']
    for r in results:
        lines.append('ocigpu_health_check_ok{check="%s"} %d' % (r['check'], {True: 1, False: 0, None: -1}[r['ok']]))
    failed = [r for r in results if r['ok'] is False]
    lines += ['# HELP ocigpu_health_ok 1 when every node health check passed, else 0.',
              '# TYPE ocigpu_health_ok gauge',
              'ocigpu_health_ok %d' % (0 if failed else 1),
              '# HELP ocigpu_health_failed_checks Node health checks that failed in the last run.',
              '# TYPE ocigpu_health_failed_checks gauge',
              'ocigpu_health_failed_checks %d' % len(failed),
              '# HELP ocigpu_health_last_run_timestamp_seconds When the node health checks last ran.',
              '# TYPE ocigpu_health_last_run_timestamp_seconds gauge',
              'ocigpu_health_last_run_timestamp_seconds %.0f' % now]
    if observed.get('gpus') is not None:
        lines += ['# HELP ocigpu_health_gpus GPUs that nvidia-smi lists.', '# TYPE ocigpu_health_gpus gauge',
                  'ocigpu_health_gpus %d' % len(observed['gpus'])]
    if 'xids' in observed:
        lines += ['# HELP ocigpu_health_xid_events XID events in the kernel log since boot.',
                  '# TYPE ocigpu_health_xid_events gauge',
                  'ocigpu_health_xid_events %d' % len(observed['xids'])]
    return '\n'.join(lines) + '\n'


def clip_reason(text):
    """A drain reason cut to what this collection writes into Slurm (REASON_MAX characters). Slurm's nodes
    and the rule of which drains a check may change are in _slurm.py."""
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3] + '...'
