# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu status: one row per Slurm node of the cluster, joined from what the controller knows.

  ocigpu status [--json] [--no-figures]

Sources (each one that cannot be read is named in the footer; the table prints all the same):
- Slurm: `scontrol -o show node` (state, reason, address) and `squeue` (the running jobs of each node).
- OCI: `ocigpu-slurm-autoscaler nodes` where the control plane runs (autoscaler_config exists: on-demand
  nodes or the self-healing loop): one record per instance that carries a Slurm name of the cluster,
  terminated ones included. Elsewhere the static map configure.yml wrote (node_map), as of that run.
- Each node's rdma_exporter (exporter_port, /metrics, 2 s, all nodes at once): the health checks that
  failed and the last active NCCL bus bandwidth against its threshold. --no-figures skips it.
- The autoscaler's state file: the self-healing loop's step of each node (heal.nodes), the loop paused,
  the jobs waiting for capacity (capacity_waits); its heartbeat file beside it.

The join of a Slurm name with its instances: the live ones (neither TERMINATING nor TERMINATED) first,
RUNNING before the others, then the newest; when two live instances claim one name (a replacement in
flight) the row says so. A name whose instances are all gone shows the last one, said gone; a name
without any instance (a CLOUD node powered down) shows none, and that is no error.

Standard library only, beside ocigpu_slurm (the collection's module_utils/_slurm.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import sys
import time
import urllib.request

import ocigpu_slurm
from ocigpu_events import expand  # the hostlist reader of the timeline, installed beside this file

DEFAULTS = dict(cluster='', scontrol='/usr/bin/scontrol', squeue='/usr/bin/squeue',
                autoscaler_config='/etc/ocigpu-autoscaler/autoscaler.json',
                autoscaler_program='/usr/local/sbin/ocigpu-slurm-autoscaler',
                node_map='/etc/ocigpu-health/nodes.json', exporter_port=9879)
GONE = ('TERMINATING', 'TERMINATED')
# The loop's steps (the controller's decide.STEP_NAMES): what each record's step is called.
STEPS = {'down': 'replacing', 'up': 'powering_up', 'again': 'retrying', 'healthy': 'in_service',
         'left': 'left_for_a_person', 'pool': 'replacing_in_the_pool'}
HEALTH_PREFIX = 'ocigpu-health:'
HEAL_PREFIX = 'ocigpu-heal:'
SCRAPE_TIMEOUT = 2.0


# (exit status, stdout, stderr) of argv; a program that cannot be started is exit status 127.
run_command = ocigpu_slurm.run_command


def fetch_metrics(address, port, timeout=SCRAPE_TIMEOUT):
    """The text of a node exporter's /metrics."""
    with urllib.request.urlopen('http://%s:%s/metrics' % (address, port), timeout=timeout) as answer:  # nosec
        return answer.read().decode('utf-8', 'replace')


# Small readers -----------------------------------------------------------------------------------

def short_id(ocid):
    """An OCID's last 8 characters (enough to tell a cluster's instances apart on one screen)."""
    if not ocid:
        return '-'
    return '..' + ocid[-8:] if len(ocid) > 12 else ocid


def read_json(path):
    with open(path, encoding='utf-8') as handle:
        return json.load(handle)


def metric_values(text):
    """{name: [(labels dict, value)]} of a Prometheus text answer."""
    found = {}
    for line in (text or '').splitlines():
        if not line or line.startswith('#'):
            continue
        match = re.match(r'^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)', line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ''))
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        found.setdefault(match.group(1), []).append((labels, value))
    return found


def figures_of(text):
    """{failing: [checks], busbw_gbps, threshold_gbps} from a node's /metrics."""
    values = metric_values(text)
    failing = sorted(labels.get('check', '?') for labels, value in values.get('ocigpu_health_check_ok', []) if value == 0)

    def one(*names):
        for name in names:
            for _labels, value in values.get(name, []):
                if not math.isnan(value):
                    return value
        return None
    return dict(failing=failing, checks=len(values.get('ocigpu_health_check_ok', [])),
                busbw_gbps=one('ocigpu_nccl_active_busbw_gbps', 'ocigpu_nccl_busbw_gbps'),
                threshold_gbps=one('ocigpu_nccl_active_threshold_gbps', 'ocigpu_nccl_threshold_gbps'))


# The sources -------------------------------------------------------------------------------------

def read_slurm(config, run, problems):
    status, out, err = run([config['scontrol'], '-o', 'show', 'node'])
    if status != 0:
        problems.append('Slurm: scontrol show node failed (%s)' % ((err or out).strip() or 'exit status %d' % status))
        return None
    return ocigpu_slurm.parse_show_node(out)


def read_jobs(config, run, problems):
    """{node: ['<job id> <user>']} of the running (and completing) jobs."""
    status, out, err = run([config['squeue'], '--noheader', '--states=RUNNING,COMPLETING', '--format=%i|%u|%N'])
    if status != 0:
        problems.append('Slurm: squeue failed (%s)' % ((err or out).strip() or 'exit status %d' % status))
        return {}
    found = {}
    for line in out.splitlines():
        parts = line.strip().split('|')
        if len(parts) != 3:
            continue
        for name in expand(parts[2]):
            found.setdefault(name, []).append('%s %s' % (parts[0], parts[1]))
    return found


def read_oci(config, run, problems, control):
    """(records, source): from the autoscaler's program where the control plane runs, else the static map."""
    if control is not None:
        # The installed program names its configuration itself (slurm_autoscaler's program.j2).
        status, out, err = run([config['autoscaler_program'], 'nodes'])
        lines = [line for line in (err or '').splitlines() if line.strip() and not line.startswith('service:')]
        if status != 0:
            problems.append('OCI: %s nodes failed (%s)' % (config['autoscaler_program'], (lines[-1] if lines else 'exit status %d' % status)))
            return [], dict(kind='none')
        try:
            records = json.loads(out)
        except ValueError as exc:
            problems.append('OCI: %s nodes printed no JSON (%s)' % (config['autoscaler_program'], exc))
            return [], dict(kind='none')
        return records, dict(kind='oci', text='OCI now')
    try:
        data = read_json(config['node_map'])
        records = [dict(r, kind=r.get('kind') or 'static') for r in data.get('nodes') or []]
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        problems.append('OCI: no control plane here and the static map %s cannot be read (%s)' % (config['node_map'], exc))
        return [], dict(kind='none')
    # configure.yml keeps the time of its run out of the file (a run again reports ok): the file's own
    # time is when a run last found the nodes changed.
    written = data.get('written') or time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(os.stat(config['node_map']).st_mtime))
    return records, dict(kind='node_map', written=written, text='as of configure %s' % written)


def read_control(config, problems, now):
    """The control plane's settings, state and heartbeat; None on a static cluster without it."""
    path = config['autoscaler_config']
    if not os.path.exists(path):
        return None
    try:
        settings = read_json(path)
    except (OSError, ValueError) as exc:
        problems.append('control plane: %s cannot be read (%s)' % (path, exc))
        settings = {}
    state_file = settings.get('state_file') or '/var/lib/ocigpu-autoscaler/state.json'
    try:
        state = read_json(state_file)
    except FileNotFoundError:
        state = {}
    except (OSError, ValueError) as exc:
        problems.append('control plane: the state file %s cannot be read (%s)' % (state_file, exc))
        state = {}
    beat_path = os.path.join(os.path.dirname(state_file) or '.', 'heartbeat.json')
    stale = 3 * float(settings.get('poll_interval') or 1.0) + 30
    try:
        beat = read_json(beat_path)
        age = max(0.0, now - float(beat['time']))
        heartbeat = dict(age_s=round(age, 1), pid=beat.get('pid'), alive=age <= stale, stale_after_s=stale)
    except (OSError, ValueError, KeyError, TypeError):
        heartbeat = dict(age_s=None, pid=None, alive=False, stale_after_s=stale, missing=beat_path)
    heal = state.get('heal') or {}
    return dict(settings=settings, heartbeat=heartbeat, heal_nodes=heal.get('nodes') or {},
                heal_enabled=bool((settings.get('heal') or {}).get('enabled')), paused=bool(heal.get('paused')),
                capacity_waits=list(state.get('capacity_waits') or []))


def scrape(targets, port, fetch):
    """{node: figures or {'error'}} of the nodes' exporters, all at once, each within 2 s."""
    found = {}
    if not targets:
        return found
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
        futures = dict((pool.submit(fetch, addr, port, SCRAPE_TIMEOUT), name) for name, addr in targets.items())
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            try:
                found[name] = figures_of(future.result())
            except Exception as exc:  # pylint: disable=broad-except  # one node's exporter: named, never fatal
                found[name] = dict(error=str(getattr(exc, 'reason', None) or exc) or type(exc).__name__)
    return found


# The join ----------------------------------------------------------------------------------------

def join_instance(name, records):
    """(instance shown, note) of one Slurm name's OCI records: a live one (RUNNING first, then the newest)
    before any gone one; of gone ones only, the newest, which the row says is gone. Listing order counts
    for nothing (OCI's and the static map's are not the join's)."""
    def newest(record):
        return record.get('time_created') or ''
    live = [r for r in records if r.get('instance_state') not in GONE]
    if not live:
        return (max(records, key=newest) if records else None), ''
    running = [r for r in live if r.get('instance_state') == 'RUNNING']
    chosen = max(running or live, key=newest)
    others = [r for r in live if r is not chosen]
    if not others:
        return chosen, ''
    return chosen, '%d live instances claim %s (a replacement in flight?): showing the %s one %s; also %s' % (
        len(live), name, 'RUNNING' if running else 'newest', chosen.get('instance_id'),
        ', '.join('%s (%s)' % (r.get('instance_id'), r.get('instance_state')) for r in others))


def health_of(node, figures):
    """The node's verdict from its Slurm reason and its figures."""
    reason = node.reason if node is not None else ''
    if reason.startswith(HEAL_PREFIX):
        return 'replacing'
    if reason.startswith(HEALTH_PREFIX):
        return 'failing'
    if figures and not figures.get('error'):
        if figures['failing']:
            return 'failing'
        if None not in (figures['busbw_gbps'], figures['threshold_gbps']) and figures['busbw_gbps'] < figures['threshold_gbps']:
            return 'failing'
    if node is not None and node.drain:
        return 'drained'
    if node is not None and node.powered_down:
        return '-'
    if node is not None and 'NOT_RESPONDING' in node.flags:
        return 'not responding'
    if figures and not figures.get('error') and figures['checks']:
        return 'healthy'
    return 'unknown'


def figures_text(figures):
    if not figures:
        return '-'
    if figures.get('error'):
        return 'no figures (%s)' % figures['error']
    parts = ['failing %s' % ','.join(figures['failing'])] if figures['failing'] else (
        ['checks ok'] if figures['checks'] else [])
    if figures['busbw_gbps'] is not None:
        threshold = '?' if figures['threshold_gbps'] is None else '%.0f' % figures['threshold_gbps']
        parts.append('nccl %.0f/%s GB/s' % (figures['busbw_gbps'], threshold))
    return '; '.join(parts) or 'none'


def build(config, run=run_command, fetch=fetch_metrics, now=None, figures=True):
    """The report: {nodes: [row], service: {...}}."""
    now = time.time() if now is None else now
    problems = []
    control = read_control(config, problems, now)
    slurm = read_slurm(config, run, problems)
    jobs = read_jobs(config, run, problems) if slurm is not None else {}
    records, source = read_oci(config, run, problems, control)
    by_name = {}
    for record in records:
        by_name.setdefault(record.get('name'), []).append(record)
    names = list(slurm) if slurm is not None else sorted(n for n in by_name if n)
    rows = []
    for name in names:
        node = slurm.get(name) if slurm is not None else None
        chosen, note = join_instance(name, by_name.get(name, []))
        rows.append(row(name, node, chosen, note, source, control, jobs.get(name, [])))
    if figures:
        targets = dict((r['node'], r['address']) for r in rows if r['address'] and r['instance_state'] not in GONE
                       and r['slurm_state'] and not re.search(r'POWERED_DOWN|POWERING_UP', r['slurm_state']))
        scraped = scrape(targets, config['exporter_port'], fetch)
        for r in rows:
            r['figures'] = scraped.get(r['node'])
    for r in rows:
        r['health'] = health_of(slurm.get(r['node']) if slurm is not None else None, r['figures'])
    return dict(nodes=rows, service=service_of(config, control, source, problems))


def row(name, node, chosen, note, source, control, jobs):
    heal = (control or {}).get('heal_nodes', {}).get(name) or {}
    chosen = chosen or {}
    gone = chosen.get('instance_state') in GONE
    last = None
    if gone and node is not None and node.powered_down:
        # A suspend terminates the instance, which OCI lists a while longer: a node powered down has none.
        last, chosen, gone = chosen.get('instance_id'), {}, False
    address = node.address if node and node.address != name else None
    if not chosen and address and not (node.powered_down or 'POWERING_UP' in node.flags):
        # Slurm still has an address for it, OCI lists no instance of it: gone, and no longer listed.
        gone, note = True, 'OCI lists no instance of %s; Slurm still has address %s' % (name, address)
    return dict(
        node=name, slurm_state=node.state if node else None, reason=node.reason if node else '',
        address=(None if gone else chosen.get('private_ip')) or (node.address if node and node.address != name else None),
        instance_id=chosen.get('instance_id'), instance_state=chosen.get('instance_state'),
        instance_gone=gone, instance_note=note, display_name=chosen.get('display_name'), kind=chosen.get('kind'),
        cluster_network_id=chosen.get('cluster_network_id'), cluster_network_name=chosen.get('cluster_network_name'),
        cluster_network_state=chosen.get('cluster_network_state'), local_block=chosen.get('local_block'),
        availability_domain=chosen.get('availability_domain'), fault_domain=chosen.get('fault_domain'),
        oci_source=source.get('text') if chosen else None,
        heal_step=STEPS.get(heal.get('step'), heal.get('step')) if heal else None, heal_record=heal or None,
        # Where this node's capacity comes from: the autoscaler's capacity source (its cluster network's tag), else its AD.
        capacity_source=(chosen.get('capacity_source') or chosen.get('availability_domain')) if chosen and not gone else None,
        jobs=jobs, figures=None, health=None, last_instance=last)


def service_of(config, control, source, problems):
    if control is None:
        text = 'no control plane on this cluster (static nodes; %s absent)' % config['autoscaler_config']
        service = dict(control_plane=False, heartbeat=None, text=text, paused=None, heal_enabled=False, capacity_waits=[])
    else:
        beat = control['heartbeat']
        if beat['age_s'] is None:
            text = 'no heartbeat (%s missing or unreadable): the service is not running' % beat['missing']
        else:
            text = 'last heartbeat %ds ago from pid %s (%s after %ds)' % (
                beat['age_s'], beat['pid'], 'alive' if beat['alive'] else 'not running', beat['stale_after_s'])
        service = dict(control_plane=True, heartbeat=beat, text=text, paused=control['paused'],
                       heal_enabled=control['heal_enabled'], capacity_waits=control['capacity_waits'])
    service.update(oci_source=source.get('text') or 'none', problems=problems, cluster=config.get('cluster') or '')
    return service


# Output ------------------------------------------------------------------------------------------

COLUMNS = ('NODE', 'STATE', 'REASON', 'INSTANCE', 'LIFECYCLE', 'CLUSTER NETWORK', 'LOCAL BLOCK', 'HEALTH', 'FIGURES',
           'LOOP', 'CAPACITY', 'JOBS')


def clip(text, width):
    text = text or ''
    return text if len(text) <= width else text[:width - 3] + '...'


def lifecycle_text(r):
    if r['instance_gone']:
        return 'gone (%s)' % r['instance_state']
    if not r['instance_id']:
        return 'none' + (' (powered down)' if 'POWERED_DOWN' in (r['slurm_state'] or '') else '')
    return r['instance_state'] + (' *' if r['instance_note'] else '')


def table(report):
    lines = [COLUMNS]
    for r in report['nodes']:
        lines.append((r['node'], clip(r['slurm_state'], 28), clip(r['reason'], 32) or '-', short_id(r['instance_id']),
                      lifecycle_text(r), clip(r['cluster_network_name'], 24) or '-', short_id(r['local_block']),
                      r['health'], clip(figures_text(r['figures']), 40), r['heal_step'] or '-',
                      r['capacity_source'] or '-', clip(', '.join(r['jobs']), 24) or '-'))
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = ['  '.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    for r in report['nodes']:
        if r['instance_note']:
            out.append('* %s: %s' % (r['node'], r['instance_note']))
        if r['instance_gone']:
            out.append('  %s: its instance %s is gone (%s); Slurm still has address %s' % (
                r['node'], r['instance_id'], r['instance_state'], r['address'] or '-'))
    service = report['service']
    out.append('')
    out.append('service: %s' % service['text'])
    out.append('instances: %s' % service['oci_source'])
    if service['control_plane']:
        waits = service['capacity_waits']
        out.append('jobs waiting for capacity: %s' % (', '.join(str(j) for j in waits) if waits else 'none'))
        loop = 'PAUSED (many nodes drained at once: nothing is replaced)' if service['paused'] else 'running'
        out.append('self-healing loop: %s' % (loop if service['heal_enabled'] else 'off'))
    for problem in service['problems']:
        out.append('not read: %s' % problem)
    return '\n'.join(out) + '\n'


def main(argv, config, run=run_command, fetch=fetch_metrics, now=None, out=None):
    parser = argparse.ArgumentParser(prog='ocigpu status', description='One row per node: Slurm, OCI, health, the loop.')
    parser.add_argument('--json', action='store_true', help='print one JSON object {nodes, service}')
    parser.add_argument('--no-figures', action='store_true', help="do not ask the nodes' exporters for their figures")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    settings = dict(DEFAULTS, **dict((k, v) for k, v in (config or {}).items() if v not in (None, '')))
    report = build(settings, run=run, fetch=fetch, now=now, figures=not args.no_figures)
    out.write(json.dumps(report, indent=1, sort_keys=True) + '\n' if args.json else table(report))
    return 0
