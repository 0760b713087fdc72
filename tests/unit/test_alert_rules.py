# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dashboards/ocigpu-alerts.yml: promtool finds the rule file sound and its unit tests
(tests/alerts/*.yml) pass, each alert firing where it should and not elsewhere; and every metric a rule
reads is one the collection writes (the health checks' health.prom, the active check's nccl-active.prom,
the self-healing loop's and the autoscaler service's autoscaler.prom, or Prometheus' own `up`), so that
a metric renamed at its source fails here rather than silencing an alert.

promtool comes with Debian's prometheus package (tests/infra/host.sh installs it). Without it these
tests fail under CI=true or OCIGPU_REQUIRE_PROMTOOL=1, and are skipped, saying so, elsewhere."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.ocigpu.cluster.plugins.module_utils import _health, _nccl
from ocigpu_control import heal, metrics
from tests.unit.roles.test_dashboard import metric_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / 'dashboards' / 'ocigpu-alerts.yml'
TESTS = sorted((ROOT / 'tests' / 'alerts').glob('*.yml'))
# Prometheus' own series of each scrape.
PROMETHEUS_SERIES = {'up'}


def promtool():
    """The promtool program, or a failure (in CI, or when asked) or a skip that says how to get it."""
    found = shutil.which('promtool')
    if found:
        return found
    why = ('promtool is missing: the alert rules (dashboards/ocigpu-alerts.yml) are not checked. '
           'Install it with tests/infra/host.sh (Debian package prometheus, --no-install-recommends)')
    if os.environ.get('CI', '').lower() == 'true' or os.environ.get('OCIGPU_REQUIRE_PROMTOOL') == '1':
        pytest.fail(why)
    pytest.skip(why)
    return None


def run(*argv):
    return subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, check=False, timeout=120)


def test_promtool_finds_the_rule_file_sound():
    done = run(promtool(), 'check', 'rules', str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'SUCCESS' in done.stdout


def test_every_alert_fires_where_it_should_and_only_there():
    assert TESTS, 'no promtool unit tests under tests/alerts'
    done = run(promtool(), 'test', 'rules', *[str(t) for t in TESTS])
    assert done.returncode == 0, done.stdout + done.stderr


def rules():
    return [r for g in yaml.safe_load(RULES.read_text())['groups'] for r in g['rules']]


def test_every_alert_is_tested_firing_and_silent():
    tested = {}
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())['tests']:
            for check in case.get('alert_rule_test') or []:
                tested.setdefault(check['alertname'], set()).add(bool(check.get('exp_alerts')))
    for rule in rules():
        assert tested.get(rule['alert']) == {True, False}, '%s needs a case where it fires and one where it does not' % rule['alert']


def test_every_alert_says_what_happened_and_what_to_do():
    for rule in rules():
        assert rule.get('for'), rule['alert']
        assert rule['labels']['severity'] in ('warning', 'critical'), rule['alert']
        summary, description = rule['annotations']['summary'], rule['annotations']['description']
        assert '$labels.instance' in summary and '$labels.instance' in description, rule['alert']
        assert '$labels.job' in description and '`' in description, rule['alert']


def written():
    """The metric names the collection writes, from the writers themselves."""
    expect = dict(gpus=8, rdma_devices=['mlx5_0'])
    observed = dict(gpus=[], gpu_fields=_health.BASE_FIELDS, xids=[], kernel_log_readable=True, ib_ports={})
    texts = [_health.metrics_text(_health.evaluate('gpu-1', expect, observed), observed, 1790000000),
             _nccl.active_metrics_text(dict(busbw_gbps=343.3, threshold_gbps=352.0, passed=False), 1790000000),
             heal.metrics_text(dict(nodes={}, started=[100.0], paused=True), now=200.0, max_per_hour=4),
             metrics.service_text(dict(capacity_waits=['3'], attempts={'4': 5}), 1790000000, 5)]
    names = set()
    for text in texts:
        for family in text_string_to_metric_families(text):
            names |= set(s.name for s in family.samples)
    return names


def test_every_metric_a_rule_reads_is_one_the_collection_writes():
    served = written() | PROMETHEUS_SERIES
    for rule in rules():
        unknown = metric_names(rule['expr']) - served
        assert not unknown, '%s reads %s, which nothing of the collection writes' % (rule['alert'], sorted(unknown))
