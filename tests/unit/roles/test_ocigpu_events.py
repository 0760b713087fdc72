# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ocigpu events` (roles/node_health/files/ocigpu_events.py): one timeline from the autoscaler's log, the
pull server's log, slurmctld's log and the sweep's journal, with lines copied from a demo's logs."""
from __future__ import annotations

import datetime
import gzip
import io
import json
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, 'roles', 'node_health', 'files'))

import ocigpu_events as events  # noqa: E402  pylint: disable=wrong-import-position

# The autoscaler's log of make demo-ondemand (ids shortened).
SERVICE_OLD = '''\
2026-11-28 19:23:13,500 2257 INFO service: started; 0 request(s) waiting
'''
SERVICE = '''\
2026-11-28 19:23:40,812 3375 INFO resume gpu-[1-4]: handed to the autoscaler service (request 0179-resume-55f9; jobs 1: gpu-[1-2], 2: gpu-3, 3: gpu-4)
2026-11-28 19:23:41,739 2973 INFO resume gpu-4: creating cluster network demo-gpu-4 with 1 node(s) for gpu-4
2026-11-28 19:23:48,948 2973 INFO resume gpu-4: failure details {"nodes": "gpu-4", "cleaned_up": true}
2026-11-28 19:23:48,948 2973 INFO run: /usr/bin/scontrol update nodename=gpu-4 state=POWER_DOWN_FORCE reason=ocigpu-autoscaler: failed
2026-11-28 19:23:48,962 2973 INFO resume gpu-3 for job 2: done: gpu-3=198.18.121.4
2026-11-28 19:23:48,968 2973 ERROR resume gpu-4 for job 3 failed: cluster network demo-gpu-4 for gpu-4 failed: Out of host capacity.
2026-11-28 19:23:49,522 2973 INFO suspend gpu-4: no cluster network carries gpu-4
2026-11-28 19:30:02,000 2973 INFO heal gpu-3: drained by the checks (ocigpu-health: gpu 2 missing) with no job on it; replacing it
'''
PULL = '''\
2026-11-28 19:23:15,025 2375 INFO serving the pull path on 198.18.120.2:8740 (bundle /opt/ocigpu-autoscaler/pull/bundle.tar.gz)
2026-11-28 19:23:43,298 2935 INFO 198.18.120.2: connection dropped: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1029)
2026-11-28 19:23:49,865 2935 INFO bundle: 2385974 bytes to 198.18.121.3
2026-11-28 19:23:50,465 2935 INFO join: gpu-2 (ocid1.instance.oc1..aaaa) accepted from 198.18.121.3
'''
SLURMCTLD = '''\
[2026-11-28T19:29:30.123] update_node: node gpu-3 reason set to: ocigpu-health: gpu 2 missing
[2026-11-28T19:29:30.124] update_node: node gpu-3 state set to DRAINING
[2026-11-28T19:29:31.000] sched: Allocate JobId=7 NodeList=gpu-[1-2] #CPUs=4 Partition=gpu
[2026-11-28T19:29:32.000] debug: something slurmctld says a lot
'''
JOURNAL = '2026-11-28T19:29:00+0000 ctl python3[4321]: sweep: gpu-3 idle, never checked; active check submitted (job 6)\n'


@pytest.fixture
def config(tmp_path):
    log = tmp_path / 'autoscaler.log'
    log.write_text(SERVICE)
    with gzip.open(str(log) + '.1.gz', 'wt') as handle:
        handle.write(SERVICE_OLD)
    (tmp_path / 'pull-server.log').write_text(PULL)
    (tmp_path / 'slurmctld.log').write_text(SLURMCTLD)
    (tmp_path / 'autoscaler.json').write_text(json.dumps(dict(log_file=str(log), pull=dict(log_file=str(tmp_path / 'pull-server.log')))))
    return dict(autoscaler_config=str(tmp_path / 'autoscaler.json'), slurmctld_log=str(tmp_path / 'slurmctld.log'))


def timeline(config, *argv, now=None):
    os.environ['TZ'] = 'UTC'
    time.tzset()
    out = io.StringIO()
    calls = []

    def run(argv_):
        calls.append(argv_)
        return JOURNAL
    assert events.main(list(argv), config, run=run, now=now, out=out) == 0
    return out.getvalue().splitlines(), calls


def test_one_timeline_in_time_order(config):
    lines, calls = timeline(config)
    assert lines[0] == '2026-11-28 19:23:13  -          service: started; 0 request(s) waiting'  # the rotated copy, first
    assert '2026-11-28 19:23:50  gpu-2      pull: join accepted from 198.18.121.3 (ocid1.instance.oc1..aaaa)' in lines
    assert '2026-11-28 19:29:00  gpu-3      sweep: idle, never checked; active check submitted (job 6)' in lines
    assert ('2026-11-28 19:29:30  gpu-3      slurm: drained by its health check: ocigpu-health: gpu 2 missing') in lines
    assert '2026-11-28 19:23:48  gpu-4      resume for job 3 failed (error): cluster network demo-gpu-4 for gpu-4 failed: ' \
        'Out of host capacity.' in lines
    assert [line[:19] for line in lines] == sorted(line[:19] for line in lines)
    assert calls[0][:3] == ['journalctl', '-u', 'ocigpu-active-sweep.service']


def test_lines_not_understood_only_with_all(config):
    lines, _calls = timeline(config)
    text = '\n'.join(lines)
    for noise in ('scontrol update nodename', 'connection dropped', 'failure details', 'something slurmctld says'):
        assert noise not in text
    everything = '\n'.join(timeline(config, '--all')[0])
    for noise in ('scontrol update nodename', 'connection dropped', 'failure details', 'something slurmctld says'):
        assert noise in everything


def test_node_matches_names_and_hostlists(config):
    lines, _calls = timeline(config, '--node', 'gpu-2')
    assert len(lines) == 3
    assert 'resume: handed to the autoscaler service' in lines[0]  # gpu-[1-4] covers gpu-2
    assert 'join accepted' in lines[1]
    assert 'slurm: JobId=7 started' in lines[2]  # NodeList=gpu-[1-2]
    assert not any('gpu-3' in line.split()[2] for line in timeline(config, '--node', 'gpu-4')[0])


def test_job_and_since(config):
    lines, _calls = timeline(config, '--job', '3')
    assert [line.split('  ')[-1][:30] for line in lines] == ['resume: handed to the autoscal', 'resume for job 3 failed (error']
    now = datetime.datetime(2026, 11, 28, 19, 35)
    lines, calls = timeline(config, '--since', '6m', now=now)
    assert lines and all(line >= '2026-11-28 19:29:00' for line in lines)
    assert calls[0][-2:] == ['--since', '2026-11-28 19:29:00']
    assert events.parse_since('2026-11-28T19:00:00', now) == datetime.datetime(2026, 11, 28, 19)
    with pytest.raises(ValueError):
        events.parse_since('yesterday', now)


def test_hostlist_expansion():
    assert events.expand('gpu-[1-3,07],cpu-1') == ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-07', 'cpu-1']
    assert events.expand('rack[1-2]-n[1-2]') == ['rack1-n1', 'rack1-n2', 'rack2-n1', 'rack2-n2']


def test_slurmctld_from_its_journal_without_a_log_file(config, tmp_path):
    """The slurm role sets no SlurmctldLogFile: slurmctld logs to stderr, hence the journal, its lines
    starting with "slurmctld: ". Without a log file its journal is read."""
    config['slurmctld_log'] = str(tmp_path / 'none' / 'slurmctld.log')
    ctld = ('2026-11-28T19:40:00+0000 ctl slurmctld[812]: slurmctld: update_node: node gpu-2 reason set to: '
            'ocigpu: being replaced (provision.yml) instance ocid1.instance.oc1..old2\n'
            '2026-11-28T19:40:00+0000 ctl slurmctld[812]: slurmctld: update_node: node gpu-2 state set to DRAINED\n')
    os.environ['TZ'] = 'UTC'
    time.tzset()
    out = io.StringIO()
    units = []

    def run(argv):
        units.append(argv[2])
        return ctld if argv[2] == 'slurmctld.service' else ''
    assert events.main(['--node', 'gpu-2'], config, run=run, out=out) == 0
    assert units == ['ocigpu-active-sweep.service', 'slurmctld.service']
    assert ('2026-11-28 19:40:00  gpu-2      slurm: drained for its replacement: ocigpu: being replaced (provision.yml) '
            'instance ocid1.instance.oc1..old2') in out.getvalue().splitlines()
    assert '2026-11-28 19:40:00  gpu-2      slurm: state set to DRAINED' in out.getvalue().splitlines()
    # With the log file there, its journal is not asked.
    assert 'slurmctld.service' not in timeline(dict(config, slurmctld_log=str(tmp_path / 'slurmctld.log')))[1][-1]
