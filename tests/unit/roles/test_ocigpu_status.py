# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu status (roles/node_health/files/ocigpu_status.py): the join of Slurm's nodes with their OCI
instances (gone, none yet, replaced, two claiming one name), the loop's step, the figures of the
nodes' exporters and the footer, with scontrol lines as Slurm 24.11 prints them, injected runners and
a fake exporter (no real command, no network)."""
from __future__ import annotations

import io
import json
import os
import sys
import urllib.error

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _slurm
from tests.unit.plugins.module_utils.test_slurm import real

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
sys.modules.setdefault('ocigpu_slurm', _slurm)
sys.path.insert(0, os.path.join(ROOT, 'roles', 'node_health', 'files'))
import ocigpu_status  # noqa: E402 pylint: disable=wrong-import-position

NOW = 1_800_000_000.0
CN = 'ocid1.clusternetwork.oc1.iad.aaaaaaaacn0000000000000001'


def inst(name, ocid, state='RUNNING', created='2026-11-28T10:00:00+00:00', ip=None, kind='on_demand', cn_name='as-gpu-[1-5]'):
    return dict(name=name, instance_id='ocid1.instance.oc1.iad.' + ocid, instance_state=state, display_name='as-' + name,
                private_ip=ip, availability_domain='Uocm:US-ASHBURN-AD-1', fault_domain='FAULT-DOMAIN-1',
                cluster_network_id=CN, cluster_network_name=cn_name, cluster_network_state='RUNNING',
                local_block='ocid1.computelocalblock.oc1.iad.lb00000001', kind=kind, time_created=created)


class Cluster(object):
    """Slurm's answers, the autoscaler program's answer and the control plane's files in tmp_path."""

    def __init__(self, tmp_path, nodes, records, control=True, state=None, jobs=''):
        self.tmp = tmp_path
        self.show = '\n'.join(nodes) + '\n'
        self.records = records
        self.jobs = jobs
        self.calls = []
        self.answers = {}
        self.config = dict(cluster='as', scontrol='/usr/bin/scontrol', squeue='/usr/bin/squeue',
                           autoscaler_config=str(tmp_path / 'autoscaler.json'), node_map=str(tmp_path / 'nodes.json'),
                           autoscaler_program='/usr/local/sbin/ocigpu-slurm-autoscaler', exporter_port=9879)
        if control:
            state_dir = tmp_path / 'state'
            state_dir.mkdir()
            (tmp_path / 'autoscaler.json').write_text(json.dumps(dict(
                state_file=str(state_dir / 'state.json'), poll_interval=1.0, heal=dict(enabled=True))))
            (state_dir / 'state.json').write_text(json.dumps(state or {}))
            (state_dir / 'heartbeat.json').write_text(json.dumps(dict(time=NOW - 3, pid=4242, started=NOW - 600)))
        self.scraped = []

    def run(self, argv):
        self.calls.append(argv)
        tool = os.path.basename(argv[0])
        if tool in self.answers:
            return self.answers[tool]
        if tool == 'scontrol':
            return 0, self.show, ''
        if tool == 'squeue':
            return 0, self.jobs, ''
        if tool == 'ocigpu-slurm-autoscaler':
            return 0, json.dumps(self.records), 'service: last heartbeat 3s ago from pid 4242 (alive after 33s)\n'
        raise AssertionError('unexpected command %s' % argv)

    def fetch(self, address, port, timeout):
        self.scraped.append((address, port, timeout))
        if address == '10.0.0.11':
            return ('# HELP ocigpu_health_check_ok x\nocigpu_health_check_ok{check="gpu_count"} 1\n'
                    'ocigpu_health_check_ok{check="xid"} 1\nocigpu_nccl_active_busbw_gbps 182.4\n'
                    'ocigpu_nccl_active_threshold_gbps 150\n')
        if address == '10.0.0.15':
            return ('ocigpu_health_check_ok{check="gpu_count"} 0\nocigpu_health_check_ok{check="xid"} 1\n'
                    'ocigpu_nccl_active_busbw_gbps 92.0\nocigpu_nccl_active_threshold_gbps 150\n')
        raise urllib.error.URLError('timed out')

    def report(self, *argv):
        out = io.StringIO()
        assert ocigpu_status.main(['--json'] + list(argv), self.config, run=self.run, fetch=self.fetch, now=NOW, out=out) == 0
        found = json.loads(out.getvalue())
        return dict((r['node'], r) for r in found['nodes']), found['service']

    def text(self, *argv):
        out = io.StringIO()
        assert ocigpu_status.main(list(argv), self.config, run=self.run, fetch=self.fetch, now=NOW, out=out) == 0
        return out.getvalue()


# The join ----------------------------------------------------------------------------------------

def test_a_node_whose_instance_is_gone_says_which_instance_it_was(tmp_path):
    old = inst('gpu-2', 'gone0002', state='TERMINATED')
    cluster = Cluster(tmp_path, [real('gpu-2', 'IDLE+CLOUD+NOT_RESPONDING', addr='10.0.0.12')], [old])
    row = cluster.report()[0]['gpu-2']
    assert row['instance_gone'] and row['instance_id'] == old['instance_id'] and row['instance_state'] == 'TERMINATED'
    assert row['address'] == '10.0.0.12' and row['capacity_source'] is None
    text = cluster.text()
    assert 'gone (TERMINATED)' in text
    assert 'gpu-2: its instance %s is gone (TERMINATED); Slurm still has address 10.0.0.12' % old['instance_id'] in text


def test_a_node_oci_lists_nothing_for_while_slurm_has_its_address_is_said_gone(tmp_path):
    cluster = Cluster(tmp_path, [real('gpu-2', 'IDLE+CLOUD+NOT_RESPONDING', addr='10.0.0.12')], [])
    row = cluster.report()[0]['gpu-2']
    assert row['instance_gone'] and row['instance_id'] is None
    assert row['instance_note'] == 'OCI lists no instance of gpu-2; Slurm still has address 10.0.0.12'


@pytest.mark.parametrize('addr', [None, '10.0.0.13'])  # Slurm may keep the address of its last instance
def test_a_cloud_node_powered_down_has_no_instance_and_no_error(tmp_path, addr):
    cluster = Cluster(tmp_path, [real('gpu-3', 'IDLE+CLOUD+POWERED_DOWN', addr=addr)], [])
    rows, service = cluster.report()
    row = rows['gpu-3']
    assert (row['instance_id'], row['instance_gone'], row['instance_note'], row['health']) == (None, False, '', '-')
    assert service['problems'] == [] and cluster.scraped == []
    assert 'none (powered down)' in cluster.text()


def test_a_node_powered_down_after_its_instance_was_terminated_has_no_instance_and_names_the_last(tmp_path):
    """A suspend terminates the node's instance, which OCI lists a while longer: the node is powered down,
    as it should be, and nothing is gone."""
    last = inst('gpu-3', 'last0003', state='TERMINATED')
    cluster = Cluster(tmp_path, [real('gpu-3', 'IDLE+CLOUD+POWERED_DOWN', addr='10.0.0.13')], [last])
    row = cluster.report()[0]['gpu-3']
    assert (row['instance_id'], row['instance_gone'], row['instance_note']) == (None, False, '')
    assert row['last_instance'] == last['instance_id'] and row['cluster_network_name'] is None
    text = cluster.text()
    assert 'none (powered down)' in text and 'gone' not in text


@pytest.mark.parametrize('order', ['new first', 'old first'])
def test_a_replaced_node_shows_its_new_instance_and_the_loops_step(tmp_path, order):
    old = inst('gpu-4', 'old00004', state='TERMINATING', created='2026-11-28T10:00:00+00:00')
    new = inst('gpu-4', 'new00004', state='PROVISIONING', created='2026-11-28T11:00:00+00:00', ip='10.0.0.24')
    state = dict(heal=dict(nodes={'gpu-4': dict(step='up', up_since=NOW - 60, instance_id=new['instance_id'])}))
    records = [new, old] if order == 'new first' else [old, new]
    cluster = Cluster(tmp_path, [real('gpu-4', 'IDLE+CLOUD+DRAIN+POWERING_UP', 'ocigpu-heal: replacing (ocigpu-health: xid 79)',
                                      addr='10.0.0.14')], records, state=state)
    row = cluster.report()[0]['gpu-4']
    assert (row['instance_id'], row['instance_state'], row['instance_gone']) == (new['instance_id'], 'PROVISIONING', False)
    assert row['heal_step'] == 'powering_up' and row['heal_record']['instance_id'] == new['instance_id']
    assert row['address'] == '10.0.0.24' and row['health'] == 'replacing'
    assert row['figures'] is None and cluster.scraped == []  # powering up: no exporter to ask yet
    assert row['instance_note'] == ''  # a gone instance beside a live one is no claim


@pytest.mark.parametrize('order', ['running first', 'running last'])
def test_two_live_instances_claiming_one_name_the_running_one_wins_and_the_row_says_so(tmp_path, order):
    running = inst('gpu-5', 'run00005', state='RUNNING', created='2026-11-28T10:00:00+00:00', ip='10.0.0.15')
    coming = inst('gpu-5', 'new00005', state='PROVISIONING', created='2026-11-28T11:00:00+00:00')
    records = [running, coming] if order == 'running first' else [coming, running]
    cluster = Cluster(tmp_path, [real('gpu-5', 'IDLE+CLOUD', addr='10.0.0.15')], records)
    row = cluster.report()[0]['gpu-5']
    assert row['instance_id'] == running['instance_id']
    assert row['instance_note'] == ('2 live instances claim gpu-5 (a replacement in flight?): showing the RUNNING one '
                                    '%s; also %s (PROVISIONING)' % (running['instance_id'], coming['instance_id']))
    assert '* gpu-5: 2 live instances claim gpu-5' in cluster.text()


@pytest.mark.parametrize('order', ['newest first', 'newest last'])
def test_of_two_live_instances_neither_running_the_newest_wins(tmp_path, order):
    first = inst('gpu-5', 'aaa00005', state='STARTING', created='2026-11-28T10:00:00+00:00')
    second = inst('gpu-5', 'bbb00005', state='PROVISIONING', created='2026-11-28T11:00:00+00:00')
    records = [second, first] if order == 'newest first' else [first, second]
    cluster = Cluster(tmp_path, [real('gpu-5', 'IDLE+CLOUD+POWERING_UP')], records, control=False)
    (tmp_path / 'nodes.json').write_text(json.dumps(dict(nodes=records)))
    row = cluster.report()[0]['gpu-5']
    assert row['instance_id'] == second['instance_id'] and 'showing the newest one' in row['instance_note']


# The rows' other columns and the footer ------------------------------------------------------------

def full(tmp_path, **kwargs):
    nodes = [real('gpu-1', 'ALLOCATED+CLOUD', addr='10.0.0.11'),
             real('gpu-3', 'IDLE+CLOUD+POWERED_DOWN'),
             real('gpu-5', 'MIXED+CLOUD', addr='10.0.0.15'),
             real('gpu-6', 'IDLE+CLOUD+DRAIN', 'ocigpu-health: xid 79; gpu_count 7 of 8 [bad=x]', addr='10.0.0.16')]
    records = [inst('gpu-1', 'run00001', ip='10.0.0.11'), inst('gpu-5', 'run00005', ip='10.0.0.15'),
               inst('gpu-6', 'run00006', ip='10.0.0.16')]
    state = dict(capacity_waits=[812, 815], heal=dict(nodes={'gpu-6': dict(step='left', reason='x')}, paused=True))
    jobs = '101|alice|gpu-1\n102|bob|gpu-[5-6]\n'
    return Cluster(tmp_path, nodes, records, state=state, jobs=jobs, **kwargs)


def test_rows_carry_slurm_oci_figures_the_loop_and_the_jobs(tmp_path):
    cluster = full(tmp_path)
    rows, service = cluster.report()
    assert list(rows) == ['gpu-1', 'gpu-3', 'gpu-5', 'gpu-6']
    one = rows['gpu-1']
    assert one['figures'] == dict(failing=[], checks=2, busbw_gbps=182.4, threshold_gbps=150.0) and one['health'] == 'healthy'
    assert one['jobs'] == ['101 alice'] and one['capacity_source'] == 'Uocm:US-ASHBURN-AD-1'
    assert one['cluster_network_name'] == 'as-gpu-[1-5]' and one['oci_source'] == 'OCI now'
    assert rows['gpu-5']['figures']['failing'] == ['gpu_count'] and rows['gpu-5']['health'] == 'failing'
    assert rows['gpu-5']['jobs'] == ['102 bob'] == rows['gpu-6']['jobs']
    six = rows['gpu-6']
    assert six['reason'] == 'ocigpu-health: xid 79; gpu_count 7 of 8 [bad=x]'  # whole in --json
    assert six['figures'] == dict(error='timed out') and six['health'] == 'failing' and six['heal_step'] == 'left_for_a_person'
    # The exporters are asked at each node's address and port with 2 s; none for a node powered down.
    assert sorted(cluster.scraped) == [('10.0.0.11', 9879, 2.0), ('10.0.0.15', 9879, 2.0), ('10.0.0.16', 9879, 2.0)]
    assert service['heartbeat']['alive'] and service['heartbeat']['pid'] == 4242
    assert service['capacity_waits'] == [812, 815] and service['paused'] is True and service['problems'] == []
    # The installed program passes its own --config first (program.j2): a second one would be taken for the action.
    assert ['/usr/local/sbin/ocigpu-slurm-autoscaler', 'nodes'] in cluster.calls


def test_the_table_shortens_the_reason_and_ends_with_the_footer(tmp_path):
    text = full(tmp_path).text()
    assert 'ocigpu-health: xid 79; gpu_co...' in text and '[bad=x]' not in text
    assert 'nccl 182/150 GB/s' in text and '..run00001' in text
    assert text.endswith('service: last heartbeat 3s ago from pid 4242 (alive after 33s)\ninstances: OCI now\n'
                         'jobs waiting for capacity: 812, 815\n'
                         'self-healing loop: PAUSED (many nodes drained at once: nothing is replaced)\n')


def test_no_figures_asks_no_exporter(tmp_path):
    cluster = full(tmp_path)
    rows, _service = cluster.report('--no-figures')
    assert cluster.scraped == [] and rows['gpu-1']['figures'] is None and rows['gpu-1']['health'] == 'unknown'


def test_a_static_cluster_reads_the_map_of_configure_and_says_there_is_no_control_plane(tmp_path):
    records = [dict(inst('st-1', 'st000001', ip='10.0.2.7', kind='static', cn_name='as-static'), time_created='2026-11-20T08:00:00+00:00')]
    cluster = Cluster(tmp_path, [real('st-1', 'IDLE', addr='10.0.2.7')], records, control=False)
    (tmp_path / 'nodes.json').write_text(json.dumps(dict(nodes=records)))
    os.utime(str(tmp_path / 'nodes.json'), (NOW - 7200, NOW - 7200))  # configure wrote it two hours ago
    rows, service = cluster.report()
    assert rows['st-1']['oci_source'] == 'as of configure 2027-01-15T06:00:00Z' and rows['st-1']['kind'] == 'static'
    assert service['control_plane'] is False and not any('ocigpu-slurm-autoscaler' in c[0] for c in cluster.calls)
    text = cluster.text('--no-figures')
    assert 'service: no control plane on this cluster' in text and 'instances: as of configure 2027-01-15T06:00:00Z' in text


def test_each_source_that_cannot_be_read_is_named_and_the_table_still_prints(tmp_path):
    cluster = full(tmp_path)
    cluster.answers['scontrol'] = (1, '', 'slurm_load_node error: Unable to contact slurm controller (connect failure)\n')
    cluster.answers['ocigpu-slurm-autoscaler'] = (1, '', 'service: no heartbeat\nocigpu-slurm-autoscaler: OCI cannot be asked: boom\n')
    (tmp_path / 'state' / 'state.json').write_text('{not json')
    (tmp_path / 'state' / 'heartbeat.json').unlink()
    text = cluster.text('--no-figures')
    assert text.startswith('NODE')
    assert 'not read: Slurm: scontrol show node failed (slurm_load_node error: Unable to contact slurm controller' in text
    assert 'not read: OCI: /usr/local/sbin/ocigpu-slurm-autoscaler nodes failed (ocigpu-slurm-autoscaler: OCI cannot be asked: boom)' in text
    assert 'not read: control plane: the state file' in text and 'no heartbeat (' in text


def test_squeue_hostlists_are_expanded():
    assert ocigpu_status.expand('gpu-[1-3,07],cpu-1,r[1-2]n[3,5]') == [
        'gpu-1', 'gpu-2', 'gpu-3', 'gpu-07', 'cpu-1', 'r1n3', 'r1n5', 'r2n3', 'r2n5']


def test_the_stale_heartbeat_says_not_running(tmp_path):
    cluster = full(tmp_path)
    (tmp_path / 'state' / 'heartbeat.json').write_text(json.dumps(dict(time=NOW - 600, pid=7)))
    _rows, service = cluster.report('--no-figures')
    assert service['heartbeat']['alive'] is False and service['text'] == 'last heartbeat 600s ago from pid 7 (not running after 33s)'
