# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ocigpu events [--node N] [--job J] [--since T] [--all]`: one timeline of what the control plane did.

Sources (each optional; one that is not there is skipped): the autoscaler service's log (the service,
the resume and suspend programs, the self-healing loop, static replacements; `log_file` of the
autoscaler's configuration), the pull server's log (`pull.log_file`: joins, failed pulls, bundles), slurmctld's
log (drains and resumes, by the health checks, the autoscaler or by hand; power saving; jobs started,
requeued, ended) and the active sweep's output (the journal of its unit, or a file). Rotated logs
(name.1, name.2.gz, name-20261128) are read too. One line an event, in time order:

  2026-11-28 19:23:50  gpu-2  pull: join accepted from 198.18.121.3 (ocid1.instance...)

Lines no rule understands (the scontrol calls the service logs, dropped TLS connections, details
already told in the line before) are left out, except with --all. Standard library only.
"""

import argparse
import datetime
import glob
import gzip
import json
import os
import re
import subprocess  # nosec: fixed argument lists, no shell
import sys

AUTOSCALER_CONFIG = '/etc/ocigpu-autoscaler/autoscaler.json'
AUTOSCALER_LOG = '/var/log/ocigpu-autoscaler/autoscaler.log'
SLURMCTLD_LOG = '/var/log/slurm/slurmctld.log'
SWEEP_UNIT = 'ocigpu-active-sweep.service'
SLURMCTLD_UNIT = 'slurmctld.service'

# A Slurm hostlist or a node name: gpu-[1-3,7], gpu-2, node07.
_NAME = r'[A-Za-z][A-Za-z0-9_.-]*(?:\[[0-9,-]+\][A-Za-z0-9_.-]*)*'
_PYLOG = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,\d+)? \d+ ([A-Z]+) (.*)$')
_SLURMCTLD = re.compile(r'^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?\] (.*)$')
# journalctl -o short-iso: 2026-11-29T01:02:03+0000 host python3[123]: text; or a file with an ISO time first.
_JOURNAL = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,]\d+)?([+-]\d\d:?\d\d|Z)? \S+ [^:\s]+: (.*)$')
_STAMPED = re.compile(r'^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)? (.*)$')
# What the service and its programs do, as the first word of their lines (controller/ocigpu_control).
_VERBS = ('resume', 'suspend', 'heal', 'replace', 'topology', 'reconcile', 'service', 'node setup', 'static')
_NOISE = re.compile(r'^(?:run: |status$|nodes$|\S+ \S+: failure details |.*: connection dropped: )')


def expand(expr):
    """Slurm hostlist -> node names ('gpu-[1-3,7],cpu-1'); a part it cannot read is kept as it is."""
    parts, depth, cur = [], 0, ''
    for char in expr or '':
        depth += {'[': 1, ']': -1}.get(char, 0)
        if char == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += char
    parts.append(cur)
    names = []
    for part in (p.strip() for p in parts):
        match = re.match(r'^([^\[]*)\[([0-9,-]+)\](.*)$', part)
        if not match:
            if part:
                names.append(part)
            continue
        prefix, ranges, rest = match.groups()
        tails = expand(rest) if rest else ['']
        for item in ranges.split(','):
            low, _sep, high = item.partition('-')
            if not low.isdigit() or (high and not high.isdigit()):
                names.append(part)
                break
            width = len(low) if low.startswith('0') and len(low) > 1 else 0
            for number in range(int(low), int(high or low) + 1):
                names.extend(prefix + str(number).zfill(width) + tail for tail in tails)
    return names


class Event(object):
    """One line of the timeline."""

    def __init__(self, when, node, text, raw, known=True):
        self.when, self.node, self.text, self.raw, self.known = when, node or '-', text, raw, known

    def names(self):
        """Every node name the line speaks of, hostlists expanded."""
        found = set()
        for token in re.findall(r'(?<![A-Za-z0-9_.\[-])' + _NAME, self.raw + ' ' + self.node):
            found.update(expand(token))
        return found

    def jobs(self):
        found = set(re.findall(r'(?i)\bjob(?:id)?[ =](\d+)\b', self.raw))
        for listing in re.findall(r'\bjobs ([0-9][^;)]*)', self.raw):
            found.update(re.findall(r'(?:^|, )(\d+)(?=[:, ]|$)', listing))
        return found


def parse_time(text):
    return datetime.datetime.strptime(text.replace('T', ' ')[:19], '%Y-%m-%d %H:%M:%S')


def _subject(message):
    """(node, text) of the service's message: 'heal gpu-3: drained ...' -> ('gpu-3', 'heal: drained ...')."""
    for verb in _VERBS:
        if message.startswith(verb + ':'):
            return None, message
        if message.startswith(verb + ' '):
            rest = message[len(verb) + 1:]
            match = re.match(r'^(%s)((?: for jobs? [0-9][^:]*?)?(?: failed)?(?:: | \(request ).*)$' % _NAME, rest)
            if match:
                return match.group(1), verb + match.group(2)
            return None, message
    match = re.match(r'^(%s): (.*)$' % _NAME, message)
    if match and re.search(r'\d', match.group(1)):
        return match.group(1), match.group(2)
    return None, None


def parse_service(line):
    """A line of the autoscaler's log (its service and its programs)."""
    match = _PYLOG.match(line)
    if not match:
        return None
    when, level, message = parse_time(match.group(1)), match.group(2), match.group(3)
    node, text = _subject(message)
    if text is None or _NOISE.match(message):
        return Event(when, node, message, line, known=False)
    if level in ('WARNING', 'ERROR', 'CRITICAL'):
        text = '%s (%s)' % (text, level.lower()) if ':' not in text else text.replace(':', ' (%s):' % level.lower(), 1)
    return Event(when, node, text, line)


def parse_pull(line):
    """A line of the pull server's log."""
    match = _PYLOG.match(line)
    if not match:
        return None
    when, message = parse_time(match.group(1)), match.group(3)
    join = re.match(r'^join: (\S+) \((\S+)\) accepted from (\S+)$', message)
    if join:
        return Event(when, join.group(1), 'pull: join accepted from %s (%s)' % (join.group(3), join.group(2)), line)
    failed = re.match(r'^pull failed on (\S+) \((.*)$', message)
    if failed:
        return Event(when, failed.group(1), 'pull: failed (%s' % failed.group(2), line)
    bundle = re.match(r'^bundle: (\d+) bytes to (\S+)$', message)
    if bundle:
        return Event(when, None, 'pull: bundle of %d KiB sent to %s' % (int(bundle.group(1)) // 1024, bundle.group(2)), line)
    if re.match(r'^(serving the pull path|\S+ refused for |\S+ from \S+: |\d+ connections already open)', message):
        return Event(when, None, 'pull: ' + message, line)
    return Event(when, None, 'pull: ' + message, line, known=False)


def _drainer(reason):
    if reason.startswith(('ocigpu-health', 'ocigpu-nccl')):
        return 'by its health check'
    if reason.startswith('ocigpu-autoscaler'):
        return 'by the autoscaler'
    if reason.startswith('ocigpu-heal'):
        return 'by the self-healing loop'
    if reason.startswith('ocigpu: being replaced'):
        return 'for its replacement'
    return 'by hand or another program'


_CTLD_RULES = (
    (r'^update_node: node (\S+) reason set to: (.*)$',
     lambda m: (m.group(1), 'slurm: drained %s: %s' % (_drainer(m.group(2)), m.group(2)))),
    (r'^update_node: node (\S+) state set to (\S+)$', lambda m: (m.group(1), 'slurm: state set to %s' % m.group(2))),
    (r'^(?:drain_nodes|down_nodes?): node (\S+) state set to (\S+)$', lambda m: (m.group(1), 'slurm: state set to %s' % m.group(2))),
    (r'^(?:update_node: )?node (\S+) returned to service$', lambda m: (m.group(1), 'slurm: returned to service')),
    (r'^[Nn]ode (\S+) now responding$', lambda m: (m.group(1), 'slurm: responding again')),
    (r'^error: Nodes? (\S+) not responding(.*)$', lambda m: (m.group(1), 'slurm: not responding' + m.group(2))),
    (r'^power_save: (?:pid \d+ )?(waking|suspending|powering up|powering down) nodes? (\S+)$',
     lambda m: (m.group(2), 'slurm: power saving: %s' % {'waking': 'resume', 'suspending': 'suspend'}.get(m.group(1), m.group(1)))),
    (r'^(?:error: )?[Nn]ode (\S+) not resumed by ResumeTimeout\((\d+)\)(.*)$',
     lambda m: (m.group(1), 'slurm: not up within ResumeTimeout (%s s)%s' % (m.group(2), m.group(3)))),
    (r'^sched(?:/backfill)?: (?:_start_job: )?Allocate (JobId=\d+) NodeList=(\S+)',
     lambda m: (m.group(2), 'slurm: %s started' % m.group(1))),
    (r'^_job_complete: (JobId=\d+) WEXITSTATUS (\d+)$', lambda m: (None, 'slurm: %s ended, exit status %s' % m.groups())),
    (r'^[Rr]equeu(?:e job|ing) (JobId=\d+)(?: due to failure of node (\S+))?',
     lambda m: (m.group(2), 'slurm: %s requeued%s' % (m.group(1), ' (node %s failed)' % m.group(2) if m.group(2) else ''))),
    (r'^_slurm_rpc_submit_batch_job: (JobId=\d+)', lambda m: (None, 'slurm: %s submitted' % m.group(1))),
    (r'^(?:_slurm_rpc_)?reconfigure', lambda m: (None, 'slurm: reconfigured')),
)


def _journal_time(match):
    """The local time of a journal line (short-iso gives the zone: turned into this machine's)."""
    when, zone = parse_time(match.group(1)), match.group(2)
    if zone:
        stamp = datetime.datetime.strptime(match.group(1) + zone.replace('Z', '+0000').replace(':', ''), '%Y-%m-%dT%H:%M:%S%z')
        when = stamp.astimezone().replace(tzinfo=None)
    return when


def parse_slurmctld_journal(line):
    """A line of slurmctld's journal (journalctl -o short-iso), where it logs without SlurmctldLogFile
    (the slurm role sets none): its stderr lines, which start with "slurmctld: "."""
    match = _JOURNAL.match(line)
    if not match:
        return None
    message = match.group(3)
    if message.startswith('slurmctld: '):
        message = message[len('slurmctld: '):]
    return _slurmctld_event(_journal_time(match), message, line)


def parse_slurmctld(line):
    match = _SLURMCTLD.match(line)
    if not match:
        return None
    return _slurmctld_event(parse_time(match.group(1)), match.group(2), line)


def _slurmctld_event(when, message, line):
    for pattern, make in _CTLD_RULES:
        found = re.match(pattern, message)
        if found:
            node, text = make(found)
            return Event(when, node, text, line)
    return Event(when, None, 'slurm: ' + message, line, known=False)


def parse_sweep(line):
    """A line of the active sweep (the journal's short-iso output, or a file with a time first)."""
    match = _JOURNAL.match(line) or _STAMPED.match(line)
    if not match:
        return None
    when = _journal_time(match) if match.re is _JOURNAL else parse_time(match.group(1))
    message = match.group(match.lastindex)
    found = re.match(r'^sweep: (%s) (.*)$' % _NAME, message)
    if found and re.search(r'\d', found.group(1)):
        return Event(when, found.group(1), 'sweep: ' + found.group(2), line)
    if message.startswith('sweep: '):
        return Event(when, None, message, line)
    return Event(when, None, message, line, known=False)


def rotated(path):
    """The log and its rotated copies, oldest first (name.3.gz, name.2, name.1, name-20261128, name)."""
    copies = [p for p in glob.glob(glob.escape(path) + '[.-]*') if re.match(r'^[.-](\d+|\d{8})(\.gz)?$', p[len(path):])]

    def age(name):
        tail = re.match(r'^[.-](\d+)', name[len(path):]).group(1)
        return (0, -int(tail)) if len(tail) < 8 else (1, int(tail))
    copies.sort(key=age)
    numbered = [p for p in copies if len(re.match(r'^[.-](\d+)', p[len(path):]).group(1)) < 8]
    dated = [p for p in copies if p not in numbered]
    return numbered + dated + ([path] if os.path.exists(path) else [])


def read_lines(path):
    try:
        if path.endswith('.gz'):
            with gzip.open(path, 'rt', errors='replace') as handle:
                return handle.read().splitlines()
        with open(path, errors='replace') as handle:
            return handle.read().splitlines()
    except (OSError, EOFError):
        return []


def _run(argv):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return ''
    return proc.stdout if proc.returncode == 0 else ''


def autoscaler_settings(config):
    try:
        with open(config.get('autoscaler_config') or AUTOSCALER_CONFIG) as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def sources(config):
    """[(parser, [paths])] of the logs to read, and the sweep's journal unit when it logs there."""
    scaler = autoscaler_settings(config)
    found = []
    service_log = scaler.get('log_file') or (AUTOSCALER_LOG if scaler else '')
    if service_log:
        found.append((parse_service, service_log))
    pull_log = (scaler.get('pull') or {}).get('log_file') if isinstance(scaler.get('pull'), dict) else None
    if pull_log:
        found.append((parse_pull, pull_log))
    ctld_log = config.get('slurmctld_log') or SLURMCTLD_LOG
    if rotated(ctld_log):
        found.append((parse_slurmctld, ctld_log))
    if config.get('sweep_log'):
        found.append((parse_sweep, config['sweep_log']))
    return found


def parse_since(text, now):
    match = re.match(r'^(\d+)\s*([smhd])$', text.strip())
    if match:
        return now - datetime.timedelta(seconds=int(match.group(1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400}[match.group(2)])
    try:
        return parse_time(text.strip() + (' 00:00:00' if len(text.strip()) == 10 else ''))
    except ValueError:
        raise ValueError('--since %r: give 10m, 2h, 3d or an ISO time (2026-11-29T01:00:00)' % text)


def collect(config, run=_run, show_all=False, since=None):
    """Every event of every source, in time order (a stable sort: a log's own order within a second)."""
    events = []
    for parser, path in sources(config):
        for name in rotated(path):
            for line in read_lines(name):
                event = parser(line)
                if event is not None and (event.known or show_all):
                    events.append(event)
    journals = []
    if not config.get('sweep_log'):
        journals.append((parse_sweep, config.get('sweep_unit') or SWEEP_UNIT))
    # Without a SlurmctldLogFile (the slurm role sets none), slurmctld logs to the journal.
    if not rotated(config.get('slurmctld_log') or SLURMCTLD_LOG):
        journals.append((parse_slurmctld_journal, config.get('slurmctld_unit') or SLURMCTLD_UNIT))
    for parser, unit in journals:
        argv = ['journalctl', '-u', unit, '-o', 'short-iso', '--no-pager', '-q']
        if since is not None:
            argv += ['--since', since.strftime('%Y-%m-%d %H:%M:%S')]
        for line in run(argv).splitlines():
            event = parser(line)
            if event is not None and (event.known or show_all):
                events.append(event)
    events.sort(key=lambda e: e.when)
    return events


def select(events, nodes=None, job=None, since=None):
    wanted = set(expand(nodes)) if nodes else None
    return [e for e in events
            if (since is None or e.when >= since)
            and (wanted is None or wanted & e.names())
            and (job is None or str(job) in e.jobs())]


def render(events):
    width = max([len(e.node) for e in events] + [1])
    return ['%s  %-*s  %s' % (e.when.strftime('%Y-%m-%d %H:%M:%S'), width, e.node, e.text) for e in events]


def main(argv, config, run=_run, now=None, out=None):
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog='ocigpu events', description='One timeline of what the control plane did.')
    parser.add_argument('--node', help='only lines about these nodes (a name or a hostlist: gpu-[1-3])')
    parser.add_argument('--job', help='only lines about this job id')
    parser.add_argument('--since', help='only lines since: 10m, 2h, 3d, or an ISO time')
    parser.add_argument('--all', action='store_true', help='also the lines no rule understands, as they are')
    args = parser.parse_args(argv)
    now = now or datetime.datetime.now()
    try:
        since = parse_since(args.since, now) if args.since else None
    except ValueError as exc:
        sys.stderr.write('ocigpu events: %s\n' % exc)
        return 2
    events = select(collect(config, run=run, show_all=args.all, since=since), args.node, args.job, since)
    for line in render(events):
        out.write(line + '\n')
    return 0
