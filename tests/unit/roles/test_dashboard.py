# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dashboards/ocigpu-cluster.json against what the rdma_exporter really serves (issue 17): the exporter
runs on a fake RDMA tree with a --textfile-dir holding the health checks' health.prom (made by
_health.metrics_text from a real evaluation) and the nccl.prom that validate.yml writes (the nccl_tests
role's task content, rendered), the active check's nccl-active.prom and the self-healing loop's
autoscaler.prom (made by ocigpu_control.heal.metrics_text); every metric that any panel or variable query names must be served."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import threading
import urllib.request

import jinja2
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.ocigpu.cluster.plugins.module_utils import _health, _nccl
from ocigpu_control import heal as _autoscale_heal
from ocigpu_control import metrics as _autoscale_metrics

ROOT = pathlib.Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / 'dashboards' / 'ocigpu-cluster.json'
spec = importlib.util.spec_from_file_location('rdma_exporter', ROOT / 'roles' / 'rdma_exporter' / 'files' / 'rdma_exporter.py')
rdma_exporter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rdma_exporter)

PROMQL_WORDS = {'sum', 'count', 'min', 'max', 'avg', 'rate', 'irate', 'increase', 'time', 'by', 'without', 'on',
                'ignoring', 'label_values', 'and', 'or', 'unless', 'bool', 'topk', 'bottomk'}


def metric_names(expr):
    """The metric names a PromQL expression (or a label_values() query) reads."""
    expr = re.sub(r'"[^"]*"', '', expr)            # strings: label values, legends
    expr = re.sub(r'\{[^}]*\}', ' ', expr)         # label matchers
    expr = re.sub(r'\[[^\]]*\]', ' ', expr)        # range selectors
    expr = re.sub(r'\b(by|without|on|ignoring)\s*\([^)]*\)', ' ', expr)
    expr = re.sub(r'label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)', r' \1 ', expr)
    return set(w for w in re.findall(r'\b[a-zA-Z_:][a-zA-Z0-9_:]*\b', expr) if w not in PROMQL_WORDS) - {'instance'}


def render_task_content(tasks_file, name, **variables):
    """The content of a role's copy task, rendered with variables; a variable the content names and the
    test does not give is an error, not an empty value."""
    tasks = yaml.safe_load((ROOT / 'roles' / 'nccl_tests' / 'tasks' / tasks_file).read_text())
    task, = [t for t in tasks if t['name'] == name]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    return env.from_string(task['ansible.builtin.copy']['content']).render(**variables)


def nccl_prom():
    """nccl.prom as the nccl_tests role writes it, for a node run and a cluster run."""
    runs = [dict(name='gpu-1', scope='node', busbw_gbps=441.2, passed=True),
            dict(name='cluster', scope='cluster', busbw_gbps=390.5, passed=True)]
    return render_task_content('report.yml', 'Write the last NCCL bus bandwidths for the exporter', __nccl_tests_mine=runs)


def nccl_active_prom():
    """nccl-active.prom as the active checks write it: the nccl_tests role's active entry point through the
    nccl_active_metrics filter, and ocigpu-healthcheck --active, both _nccl.active_metrics_text."""
    tasks = yaml.safe_load((ROOT / 'roles' / 'nccl_tests' / 'tasks' / 'active.yml').read_text())
    task, = [t for t in tasks if t['name'] == "Write the check's figures for the exporter"]
    assert 'ocigpu.cluster.nccl_active_metrics(' in task['ansible.builtin.copy']['content']
    verdict = dict(busbw_gbps=343.33, threshold_gbps=352.0, passed=False)
    return _nccl.active_metrics_text(verdict, 1790000000)


def test_every_panel_names_a_metric_the_exporter_serves(tmp_path):
    ib = tmp_path / 'infiniband' / 'mlx5_0' / 'ports' / '1'
    for name, value in (('state', '4: ACTIVE'), ('phys_state', '5: LinkUp'), ('rate', '200 Gb/sec (4X HDR)'),
                        ('link_layer', 'Ethernet'), ('counters/port_xmit_data', '10'), ('counters/port_rcv_data', '20'),
                        ('hw_counters/np_cnp_sent', '3'), ('hw_counters/out_of_sequence', '1')):
        (ib / name).parent.mkdir(parents=True, exist_ok=True)
        (ib / name).write_text(value + '\n')
    text_dir = tmp_path / 'health'
    text_dir.mkdir()
    expect = dict(gpus=8, rdma_devices=['mlx5_0'])
    observed = dict(gpus=[], gpu_fields=_health.BASE_FIELDS, xids=[], kernel_log_readable=True,
                    ib_ports=_health.read_ib_ports(str(tmp_path / 'infiniband')))
    results = _health.evaluate('gpu-1', expect, observed)
    (text_dir / 'health.prom').write_text(_health.metrics_text(results, observed, 1790000000))
    (text_dir / 'nccl.prom').write_text(nccl_prom())
    (text_dir / 'nccl-active.prom').write_text(nccl_active_prom())
    heal = dict(nodes=dict(gpu_1=dict(step='healthy'), gpu_2=dict(step='up')), paused=False, last_drain_to_service=171.0,
                counts=dict(replaced=2, powered_up=2, healed=1))
    service = dict(cooling={'ad-1': 1790000600}, stock_outs={'ad-1': 2})  # the service's figures, with capacity sources
    (text_dir / 'autoscaler.prom').write_text(_autoscale_heal.metrics_text(heal) + _autoscale_metrics.service_text(
        service, 1790000000, 5, sources=['r1', 'ad-1'], now=1790000000, hosts_free={'r1': 2}))
    (text_dir / 'broken.prom').write_text('this is { not prometheus text\n')
    server = rdma_exporter.make_server('127.0.0.1', 0, rdma_exporter.make_registry(str(tmp_path / 'infiniband')),
                                       str(text_dir))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % server.server_address[1], timeout=5) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    served = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served.setdefault(sample.name, []).append(sample)
    assert served['rdma_exporter_textfile_errors'][0].value == 1  # broken.prom left out, the rest served
    assert served['ocigpu_health_ok'][0].value == 0 and served['ocigpu_nccl_busbw_gbps'][0].value == 441.2
    assert served['ocigpu_nccl_active_busbw_gbps'][0].value == 343.33 and served['ocigpu_nccl_active_passed'][0].value == 0
    assert served['ocigpu_nccl_active_last_run_timestamp_seconds'][0].value == 1790000000
    steps = dict((x.labels['step'], x.value) for x in served['ocigpu_heal_steps_total'])
    assert steps == dict(replaced=2, powered_up=2, healed=1, failed=0, left=0)
    assert served['ocigpu_heal_last_drain_to_service_seconds'][0].value == 171.0

    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t['expr'] for p in dashboard['panels'] for t in p['targets']]
    queries += [v['query']['query'] for v in dashboard['templating']['list'] if v['type'] == 'query']
    named = set()
    for query in queries:
        names = metric_names(query)
        assert names, 'no metric in %r' % query
        named |= names
    missing = sorted(n for n in named if n not in served)
    assert not missing, 'dashboard metrics the exporter does not serve: %s' % missing
    assert len(named) >= 18 and len(dashboard['panels']) >= 15


def test_the_metric_name_reader():
    assert metric_names('sum by (instance) (rate(rdma_port_transmit_bytes_total{instance=~"$instance"}[5m])) * 8') \
        == {'rdma_port_transmit_bytes_total'}
    assert metric_names('time() - ocigpu_health_last_run_timestamp_seconds{x="y"}') == {'ocigpu_health_last_run_timestamp_seconds'}
    assert metric_names('label_values(rdma_exporter_read_errors, instance)') == {'rdma_exporter_read_errors'}
    assert metric_names('no_such_metric == 0') == {'no_such_metric'}
