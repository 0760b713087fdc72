# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ocigpu diag [--nodes HOSTLIST] [--output DIR]`: a diagnostics bundle of the controller and the nodes.

A tar.gz (root's, mode 0600) in diag_dir (/var/tmp) holding INDEX.txt and index.json (what is in it; per
node: collected, or unreachable with the reason), controller/ (`ocigpu status --json`, `ocigpu events`,
sinfo, squeue, scontrol's config and nodes, Slurm's *.conf, the autoscaler's configuration with its auth
section and secret-named keys redacted, its state and heartbeat, log tails, the health metrics, the node
map) and nodes/<name>/ (what ocigpu-diag-node on the node returned). Secrets are removed on both sides
(ocigpu_redact.py). The bundle's path is the last line on stdout; one progress line per node on stderr.
"""

import argparse
import concurrent.futures
import contextlib
import datetime
import glob
import io
import json
import os
import re
import subprocess  # nosec: fixed argument lists, no shell
import sys
import tarfile
import time

import ocigpu_events
import ocigpu_redact as redact

TAIL_BYTES = 8 * 1024 * 1024
AT_ONCE = 8


def run(argv, timeout=120):
    """(exit status, stdout bytes, stderr text); status None when the program cannot be started."""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, b'', str(exc)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors='replace')


def ssh_argv(key, address):
    # No host key check: the nodes' host keys change with every replacement, and the diag key only ever
    # runs the collector (authorized_keys: restrict, command=). An impostor at a node's address learns
    # nothing from us (the key is offered, not given away) and can only feed the bundle false logs.
    return ['ssh', '-i', key, '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=5', '-o', 'StrictHostKeyChecking=no',
            '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', 'root@' + address]


class Bundle(object):
    def __init__(self, top):
        self.top, self.members, self.notes = top, [], []

    def add(self, name, data, scrub=True):
        if isinstance(data, str):
            data = data.encode('utf-8', 'surrogateescape')
        if redact.never_taken(name):
            self.notes.append('left out %s: a secret by its name' % name)
            return
        self.members.append((name, redact.scrub_bytes(data) if scrub else data))

    def add_file(self, path, name, limit=TAIL_BYTES):
        if redact.never_taken(path):
            self.notes.append('left out %s: a secret by its name' % path)
            return
        try:
            with open(path, 'rb') as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - limit))
                self.add(name, handle.read())
        except OSError as exc:
            self.notes.append('left out %s: %s' % (path, exc.strerror or exc))

    def write(self, path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as handle, tarfile.open(fileobj=handle, mode='w:gz') as tar:
            for name, data in self.members:
                info = tarfile.TarInfo('%s/%s' % (self.top, name))
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(data))


def _captured(function, *args, **kwargs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = function(*args, **kwargs)
    return status, out.getvalue()


def slurm_nodes(text):
    """[{name, address, state}] from `scontrol -o show node`."""
    nodes = []
    for line in text.splitlines():
        fields = dict(re.findall(r'(\w+)=(\S*)', line))
        if fields.get('NodeName'):
            nodes.append(dict(name=fields['NodeName'], address=fields.get('NodeAddr', ''), state=fields.get('State', '')))
    return nodes


def default_nodes(nodes):
    """Slurm's nodes that have an address and are not powered down."""
    return [n for n in nodes if n['address'] and n['address'] != n['name'] and 'POWERED_DOWN' not in n['state']
            and 'POWERING_DOWN' not in n['state']]


def controller_part(bundle, config, runner):
    scontrol = config.get('scontrol') or '/usr/bin/scontrol'
    show_node = b''
    try:
        import ocigpu_status  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        bundle.notes.append('controller/status.json: skipped (ocigpu_status cannot be imported: %s)' % exc)
    else:
        try:
            bundle.add('controller/status.json', _captured(ocigpu_status.main, ['--json'], config)[1])
        # A failing part leaves a note, never fails the bundle.
        except Exception as exc:  # pylint: disable=broad-except
            bundle.notes.append('controller/status.json: failed: %s' % exc)
    try:
        out = io.StringIO()
        ocigpu_events.main([], config, out=out)
        bundle.add('controller/events.txt', out.getvalue())
    except Exception as exc:  # pylint: disable=broad-except
        bundle.notes.append('controller/events.txt: failed: %s' % exc)
    for name, argv in (('sinfo.txt', [config.get('sinfo') or '/usr/bin/sinfo', '-N', '-l']),
                       ('squeue.txt', [config.get('squeue') or '/usr/bin/squeue', '-l']),
                       ('scontrol-config.txt', [scontrol, 'show', 'config']),
                       ('scontrol-nodes.txt', [scontrol, '-o', 'show', 'node'])):
        status, out, err = runner(argv)
        if status is None:
            bundle.notes.append('controller/%s: %s could not run: %s' % (name, argv[0], err))
            continue
        bundle.add('controller/' + name, out + (('\n(exit status %d) %s\n' % (status, err)).encode() if status else b''))
        if name == 'scontrol-nodes.txt' and status == 0:
            show_node = out
    conf_dir = config.get('slurm_conf_dir') or '/etc/slurm'
    for path in sorted(glob.glob(os.path.join(conf_dir, '*.conf'))):
        if os.path.basename(path) != 'slurmdbd.conf':  # the database's password
            bundle.add_file(path, 'controller/slurm/' + os.path.basename(path))
    scaler_path = config.get('autoscaler_config') or ocigpu_events.AUTOSCALER_CONFIG
    scaler = ocigpu_events.autoscaler_settings(config)
    if scaler:
        bundle.add('controller/autoscaler.json', json.dumps(redact.redact_config(scaler), indent=2, sort_keys=True))
        state = scaler.get('state_file') or '/var/lib/ocigpu-autoscaler/state.json'
        bundle.add_file(state, 'controller/autoscaler-state.json')
        bundle.add_file(os.path.join(os.path.dirname(state), 'heartbeat.json'), 'controller/heartbeat.json')
        heal = scaler.get('heal') if isinstance(scaler.get('heal'), dict) else {}
        if heal.get('metrics_file'):
            bundle.add_file(heal['metrics_file'], 'controller/metrics/' + os.path.basename(heal['metrics_file']))
    else:
        bundle.notes.append('controller/autoscaler.json: %s absent (no control plane here)' % scaler_path)
    for _parser, path in ocigpu_events.sources(config):
        for copy in ocigpu_events.rotated(path)[-2:]:
            if not copy.endswith('.gz'):
                bundle.add_file(copy, 'controller/logs/' + os.path.basename(copy))
    if not config.get('sweep_log'):
        status, out, err = runner(['journalctl', '-u', config.get('sweep_unit') or ocigpu_events.SWEEP_UNIT,
                                   '-o', 'short-iso', '--no-pager', '-n', '20000'])
        if status is not None:
            bundle.add('controller/logs/active-sweep.journal.txt', out)
    for path in sorted(glob.glob(os.path.join(config.get('metrics_dir') or '/var/lib/ocigpu-health', '*'))):
        if os.path.isfile(path):
            bundle.add_file(path, 'controller/metrics/' + os.path.basename(path))
    bundle.add_file(config.get('node_map') or '/etc/ocigpu-health/nodes.json', 'controller/nodes.json')
    return show_node.decode(errors='replace')


def collect_node(node, key, runner):
    """(entry for the index, {member name: data}) of one node through its collector."""
    started = time.time()
    status, out, err = runner(ssh_argv(key, node['address']) + ['ocigpu-diag-node'])
    seconds = time.time() - started
    entry = dict(name=node['name'], address=node['address'], seconds=round(seconds, 1))
    if status != 0:
        why = (err.strip().splitlines() or ['exit status %s' % status])[-1] if status is not None else err
        entry.update(result='unreachable', reason=why)
        return entry, {}
    try:
        members = {}
        with tarfile.open(fileobj=io.BytesIO(out), mode='r:gz') as tar:
            for info in tar.getmembers():
                if info.isfile() and '..' not in info.name.split('/') and not info.name.startswith('/'):
                    members[info.name] = tar.extractfile(info).read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        entry.update(result='unreachable', reason='its collector returned no bundle (%s)' % exc)
        return entry, {}
    entry.update(result='collected', files=len(members), bytes=sum(len(d) for d in members.values()))
    return entry, members


def main(argv, config, runner=run, now=None, err=None, out=None):
    err, out = err or sys.stderr, out or sys.stdout
    parser = argparse.ArgumentParser(prog='ocigpu diag', description='A diagnostics bundle of the controller and the nodes.')
    parser.add_argument('--nodes', help='these nodes only (a hostlist); default: those with an address, not powered down')
    parser.add_argument('--output', help='the folder of the bundle (default: diag_dir of operator.json, /var/tmp)')
    args = parser.parse_args(argv)
    now = now or datetime.datetime.now()
    cluster = re.sub(r'[^A-Za-z0-9_.-]', '-', config.get('cluster') or 'cluster')
    top = 'ocigpu-diag-%s-%s' % (cluster, now.strftime('%Y%m%d-%H%M%S'))
    bundle = Bundle(top)
    nodes = slurm_nodes(controller_part(bundle, config, runner))
    if args.nodes:
        known = dict((n['name'], n) for n in nodes)
        chosen = [known.get(name) or dict(name=name, address='', state='') for name in ocigpu_events.expand(args.nodes)]
    else:
        chosen = default_nodes(nodes)
    key = config.get('diag_key') or '/etc/ocigpu-health/diag_ed25519'
    entries = []
    reachable = [n for n in chosen if n['address'] and n['address'] != n['name']]
    for node in chosen:
        if node not in reachable:
            entries.append(dict(name=node['name'], address='', result='unreachable', reason='Slurm has no address for it'))
            err.write('diag: %s: unreachable: Slurm has no address for it\n' % node['name'])
    with concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        futures = dict((pool.submit(collect_node, node, key, runner), node) for node in reachable)
        for future in concurrent.futures.as_completed(futures):
            entry, members = future.result()
            entries.append(entry)
            if entry['result'] == 'collected':
                size = (entry['bytes'] + 1023) // 1024
                err.write('diag: %s (%s): %d files, %d KiB, %.1f s\n' % (entry['name'], entry['address'], entry['files'], size, entry['seconds']))
                for name, data in sorted(members.items()):
                    bundle.add('nodes/%s/%s' % (entry['name'], name), data)
            else:
                err.write('diag: %s: unreachable: %s\n' % (entry['name'], entry['reason']))
    entries.sort(key=lambda e: e['name'])
    index = dict(cluster=config.get('cluster') or '', written=now.isoformat(timespec='seconds'), nodes=entries,
                 notes=list(bundle.notes), members=[name for name, _data in bundle.members])
    text = ['ocigpu diag of %s, %s' % (config.get('cluster') or 'the cluster', index['written']), '', 'nodes:']
    for entry in entries:
        if entry['result'] == 'collected':
            text.append('  %-16s %-15s collected: %d files, %d bytes, %.1f s'
                        % (entry['name'], entry['address'], entry['files'], entry['bytes'], entry['seconds']))
        else:
            text.append('  %-16s %-15s unreachable: %s' % (entry['name'], entry['address'] or '-', entry['reason']))
    text += ['', 'controller:'] + ['  ' + name for name in index['members'] if name.startswith('controller/')]
    text += ['', 'notes:'] + ['  ' + note for note in bundle.notes or ['(none)']]
    bundle.members[:0] = [('INDEX.txt', ('\n'.join(text) + '\n').encode()), ('index.json', json.dumps(index, indent=2).encode())]
    folder = args.output or config.get('diag_dir') or '/var/tmp'
    # A folder of its own (diagnose.yml's) is made root's alone; an existing one is left as it is.
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, top + '.tar.gz')
    bundle.write(path)
    out.write(path + '\n')
    return 0
