# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""NCCL tests: parse nccl-tests output, gate it, check node health (the report is the nccl_report module's).

Everything here is plain Python with no Ansible import, so the parser and the gates are unit-tested
on recorded outputs (tests/unit/data/nccl/). The modules nccl_health and nccl_report and the filters
nccl_parse and nccl_gate are thin wrappers around these functions. The node_health role copies this
file to the nodes too (ocigpu_nccl.py), where `ocigpu-healthcheck --active` judges its run with
``judge``: only ``evaluate_health`` needs _health, and imports it when called.

Units: nccl-tests prints sizes in bytes and bandwidths in GB/s (10^9 bytes per second).
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------

_PARAMS_RE = re.compile(
    r'^#\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<minbytes>\d+)\s+'
    r'maxBytes\s+(?P<maxbytes>\d+)\s+step:\s*(?P<step>\d+)\((?P<step_kind>\w+)\)'
    r'(?:\s+warmup iters:\s*(?P<warmup_iters>\d+))?(?:\s+iters:\s*(?P<iters>\d+))?')
_RANK_RE = re.compile(
    r'^#\s*Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+'
    r'device\s+(?P<device>\d+)\s+\[(?P<bus_id>[^\]]+)\]\s*(?P<gpu>.*)$')
_AVG_RE = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(?P<value>[-+0-9.eE]+|nan|inf)')
_OOB_RE = re.compile(r'^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s*(?P<status>\w*)')
_VERSION_RE = re.compile(r'^#\s*nccl-tests version\s+(?P<version>\S+)(?:.*nccl-library=(?P<nccl>\d+))?')
_COLLECTIVE_RE = re.compile(r'^#\s*Collective test starting:\s*(?P<name>\S+)')
# Lines that mean the run broke, from nccl-tests itself, NCCL, CUDA or the MPI launcher.
_ERROR_RE = re.compile(
    r'(Test NCCL failure|Test CUDA failure|Test failure|NCCL WARN|Invalid number of GPUs|'
    r'^#\s*error:|MPI_ABORT|mpirun noticed|srun: error|Segmentation fault|Test timeout|'
    r'out of memory|Data corruption)', re.IGNORECASE)

SIZE_UNITS = {'': 1, 'B': 1, 'K': 1024, 'M': 1024 ** 2, 'G': 1024 ** 3, 'T': 1024 ** 4}


def parse_size(text):
    """nccl-tests' size syntax (64, 512K, 1G, 10G) in bytes; units are powers of 1024."""
    m = re.match(r'^\s*(\d+)\s*([KMGTB]?)\s*$', str(text), re.IGNORECASE)
    if not m:
        raise ValueError('not an nccl-tests size: %r' % (text,))
    return int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]


def format_size(nbytes):
    """Bytes as the shortest exact binary unit: 8589934592 -> '8 GiB', 1536 -> '1.5 KiB'."""
    nbytes = int(nbytes)
    for unit, factor in (('TiB', 1024 ** 4), ('GiB', 1024 ** 3), ('MiB', 1024 ** 2), ('KiB', 1024)):
        if nbytes >= factor:
            value = nbytes / float(factor)
            return ('%d %s' % (value, unit)) if value == int(value) else ('%.3g %s' % (value, unit))
    return '%d B' % nbytes


def size_args(args):
    """(min_bytes, max_bytes, factor) named by an all_reduce_perf argument string such as
    '-b 1G -e 16G -f 2'; None for what the string does not name."""
    tokens = str(args or '').split()
    found = {}
    for i, tok in enumerate(tokens[:-1]):
        if tok in ('-b', '--minbytes'):
            found['min'] = parse_size(tokens[i + 1])
        elif tok in ('-e', '--maxbytes'):
            found['max'] = parse_size(tokens[i + 1])
        elif tok in ('-f', '--stepfactor'):
            found['factor'] = int(tokens[i + 1])
    return found.get('min'), found.get('max'), found.get('factor')


def expected_largest_size(args):
    """The largest size all_reduce_perf will run for an argument string: it starts at -b and
    multiplies by -f while the size stays within -e (so '-b 64 -e 10G -f 2' ends at 8 GiB).
    None when the string names no -e."""
    low, high, factor = size_args(args)
    if high is None:
        return None
    if low is None or not factor or factor < 2:
        return high
    size = low
    while size * factor <= high:
        size *= factor
    return size


def _num(token):
    if token in ('N/A', '-', ''):
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _header_columns(line):
    """Column names of the result header line, or None when the line is not that header."""
    tokens = line.lstrip('#').split()
    if len(tokens) >= 9 and tokens[:2] == ['size', 'count'] and 'busbw' in tokens:
        return tokens
    return None


def parse_output(text):
    """Parse the stdout of an nccl-tests binary (all_reduce_perf and friends).

    Reads every result row, not only the average: each row gives size, count, type, redop,
    root and, for the out-of-place and the in-place run, time (us), algbw, busbw (GB/s) and
    the number of wrong elements (None when validation was off). The column positions come
    from the header line, so the per-iteration and timestamp columns of newer releases and
    the layout of older ones (the seeds') all parse.
    """
    result = {
        'collective': None,
        'version': None,
        'nccl_version': None,
        'params': {},
        'devices': [],
        'hosts': [],
        'rows': [],
        'avg_busbw': None,
        'out_of_bounds': None,
        'errors': [],
    }
    columns = None
    for raw in (text or '').splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith('#'):
            cols = _header_columns(stripped)
            if cols:
                columns = cols
                continue
            m = _PARAMS_RE.match(stripped)
            if m:
                result['params'] = dict(
                    (k, (int(v) if v is not None and v.isdigit() else v)) for k, v in m.groupdict().items())
                continue
            m = _RANK_RE.match(stripped)
            if m:
                dev = m.groupdict()
                for key in ('rank', 'group', 'pid', 'device'):
                    dev[key] = int(dev[key])
                dev['gpu'] = dev['gpu'].strip()
                result['devices'].append(dev)
                if dev['host'] not in result['hosts']:
                    result['hosts'].append(dev['host'])
                continue
            m = _AVG_RE.match(stripped)
            if m:
                result['avg_busbw'] = _num(m.group('value'))
                continue
            m = _OOB_RE.match(stripped)
            if m:
                result['out_of_bounds'] = int(m.group('count'))
                continue
            m = _VERSION_RE.match(stripped)
            if m:
                result['version'] = m.group('version')
                result['nccl_version'] = int(m.group('nccl')) if m.group('nccl') else None
                continue
            m = _COLLECTIVE_RE.match(stripped)
            if m:
                result['collective'] = m.group('name')
                continue
            if _ERROR_RE.search(stripped):
                result['errors'].append(stripped)
            continue
        row = _parse_row(stripped, columns)
        if row is not None:
            result['rows'].append(row)
        elif _ERROR_RE.search(stripped):
            result['errors'].append(stripped)
    return result


def _parse_row(line, columns):
    tokens = line.split()
    if columns is None or len(tokens) < 9 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    row = {
        'size': int(tokens[0]),
        'count': int(tokens[1]),
        'type': tokens[2],
        'redop': tokens[3],
        'root': int(tokens[4]) if re.match(r'^-?\d+$', tokens[4]) else None,
    }
    # The first time/algbw/busbw/#wrong group is out-of-place, the second in-place.
    places = ('out_of_place', 'in_place')
    seen = {}
    values = {'out_of_place': {}, 'in_place': {}}
    names = {'time': 'time_us', 'cputime': 'time_us', 'algbw': 'algbw', 'busbw': 'busbw', '#wrong': 'wrong'}
    for index, col in enumerate(columns):
        key = names.get(col)
        if key is None or index >= len(tokens):
            continue
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if occurrence >= len(places):
            continue
        value = _num(tokens[index])
        values[places[occurrence]][key] = int(value) if (key == 'wrong' and value is not None) else value
    if values['out_of_place'].get('busbw') is None and values['in_place'].get('busbw') is None:
        return None
    row.update(values)
    return row


def row_busbw(row):
    """The bus bandwidth of one row: the better of out-of-place and in-place, as the seeds read it."""
    vals = [row[p].get('busbw') for p in ('out_of_place', 'in_place') if row.get(p)]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def row_wrong(row):
    vals = [row[p].get('wrong') for p in ('out_of_place', 'in_place') if row.get(p)]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


# ---------------------------------------------------------------------------------------------
# Gates
# ---------------------------------------------------------------------------------------------

def gate(parsed, threshold_gbps=None, expected_max_bytes=None, expected_ranks=None, rc=None):
    """Judge one parsed run. Returns a dict with passed, reasons and the figures behind them.

    The run passes when it printed results, no row has wrong elements, the out-of-bounds count
    is 0, no error line was printed, the expected number of ranks took part (when given), and
    the busbw at the largest size reaches threshold_gbps (when a threshold is given).
    """
    rows = parsed.get('rows') or []
    reasons = []
    largest = max(rows, key=lambda r: r['size']) if rows else None
    busbw = row_busbw(largest) if largest else None
    peak = max((row_busbw(r) or 0.0) for r in rows) if rows else None
    if rc:
        reasons.append('exit status %s' % rc)
    if not rows:
        reasons.append('no result rows in the output (the run did not complete)')
    wrong_rows = [r for r in rows if (row_wrong(r) or 0) > 0]
    if wrong_rows:
        reasons.append('wrong elements at %s' % ', '.join(format_size(r['size']) for r in wrong_rows))
    if parsed.get('out_of_bounds'):
        reasons.append('%d out-of-bounds values' % parsed['out_of_bounds'])
    for err in (parsed.get('errors') or [])[:3]:
        reasons.append('error: %s' % err)
    if expected_ranks and parsed.get('devices') and len(parsed['devices']) != int(expected_ranks):
        reasons.append('%d ranks took part, %d expected' % (len(parsed['devices']), int(expected_ranks)))
    if largest and expected_max_bytes and largest['size'] < int(expected_max_bytes):
        reasons.append('largest size %s is below the requested %s' % (
            format_size(largest['size']), format_size(expected_max_bytes)))
    if threshold_gbps is not None and busbw is not None and busbw < float(threshold_gbps):
        reasons.append('busbw %.2f GB/s at %s is below the threshold %.2f GB/s' % (
            busbw, format_size(largest['size']), float(threshold_gbps)))
    return {
        'passed': not reasons,
        'reasons': reasons,
        'largest_size': largest['size'] if largest else None,
        'busbw_gbps': busbw,
        'peak_busbw_gbps': peak,
        'avg_busbw_gbps': parsed.get('avg_busbw'),
        'threshold_gbps': float(threshold_gbps) if threshold_gbps is not None else None,
        'ranks': len(parsed.get('devices') or []),
        'hosts': list(parsed.get('hosts') or []),
    }


def judge(text, threshold_gbps=None, args='', expected_ranks=None, rc=None, timeout=None):
    """One run's output judged by ``gate``: the verdict, its reasons as one line (``reason``), the largest
    size as ``size_bytes`` and the output's error lines. With ``timeout`` (the seconds the run was given
    under timeout(1)), a run stopped there (exit status 124, or 137 after its KILL) fails with that one
    reason, whatever it printed."""
    parsed = parse_output(text)
    verdict = gate(parsed, threshold_gbps=threshold_gbps,
                   expected_max_bytes=expected_largest_size(args) if args else None,
                   expected_ranks=expected_ranks, rc=rc)
    verdict.update(reason='; '.join(verdict['reasons']), size_bytes=verdict['largest_size'], errors=parsed['errors'])
    if timeout is not None and rc in (124, 137):
        why = 'did not finish within %d s' % int(timeout)
        verdict.update(passed=False, reasons=[why], reason=why)
    return verdict


def active_metrics_text(verdict, now):
    """The last active check of a node (its verdict, from ``judge``) in Prometheus' text format, for the
    rdma_exporter's text files (nccl-active.prom): written by validate.yml --tags health and by
    `ocigpu-healthcheck --active` alike."""
    def number(value):
        return 'NaN' if value is None else '%s' % value
    return '\n'.join([
        '# HELP ocigpu_nccl_active_busbw_gbps Bus bandwidth at the largest size of the last active NCCL check.',
        '# TYPE ocigpu_nccl_active_busbw_gbps gauge',
        'ocigpu_nccl_active_busbw_gbps %s' % number(verdict.get('busbw_gbps')),
        '# HELP ocigpu_nccl_active_threshold_gbps Threshold of the last active NCCL check (NaN when it had none).',
        '# TYPE ocigpu_nccl_active_threshold_gbps gauge',
        'ocigpu_nccl_active_threshold_gbps %s' % number(verdict.get('threshold_gbps')),
        '# HELP ocigpu_nccl_active_passed 1 when the last active NCCL check passed, else 0.',
        '# TYPE ocigpu_nccl_active_passed gauge',
        'ocigpu_nccl_active_passed %d' % (1 if verdict.get('passed') else 0),
        '# HELP ocigpu_nccl_active_last_run_timestamp_seconds When the last active NCCL check finished (Unix time).',
        '# TYPE ocigpu_nccl_active_last_run_timestamp_seconds gauge',
        'ocigpu_nccl_active_last_run_timestamp_seconds %d' % int(now)]) + '\n'


# ---------------------------------------------------------------------------------------------
# Node health
# ---------------------------------------------------------------------------------------------

def evaluate_health(node, gpus=None, expected_gpus=None, xids=None, ib_ports=None,
                    expected_hcas=None, mounts_text=None, scratch_path=None, xid_log_readable=True):
    """Health checks of one node before an NCCL test, by the rules of _health.evaluate (the same ones
    Slurm's HealthCheckProgram applies): gpus are rows of _health.parse_gpu_query (the base fields),
    xids None skips the XID check. Returns [{check, ok, reason, short}]; reasons start with the node."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _health  # pylint: disable=import-outside-toplevel

    expect = dict(gpus=expected_gpus, rdma_devices=expected_hcas, scratch_path=scratch_path, check_xid=xids is not None,
                  gpu_extra_checks=False)
    observed = dict(gpus=gpus, gpu_fields=_health.BASE_FIELDS, xids=xids or [], kernel_log_readable=xid_log_readable,
                    ib_ports=ib_ports or {}, mounts=mounts_text)
    return _health.evaluate(node, expect, observed)
