# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The autoscaler service's own figures (controller/ocigpu_control/metrics.py) in the metrics file the
controller's exporter serves, for the alert rules: its heartbeat, resumes done and failed, jobs waiting for
capacity, jobs held; and the self-healing loop's limit (replacements in the last hour, the most)."""
from __future__ import annotations

import time

from ocigpu_control import metrics, requests
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    config, sim)
from tests.unit.controller.test_autoscale_faults import logged
from tests.unit.controller.test_autoscale_heal import one_sick_node, replace_once
from tests.unit.controller.test_autoscale_service import one_of_two_jobs_short_of_hosts


def samples(path):
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel
    return dict(((s.name, tuple(sorted(s.labels.items()))), s.value)
                for f in text_string_to_metric_families(path.read_text()) for s in f.samples)


def test_the_service_writes_its_figures_with_the_loop_off(sim, tmp_path, config):
    prom = tmp_path / 'autoscaler.prom'
    fake, conf, svc, failed, ran = one_of_two_jobs_short_of_hosts(sim, config, heal=dict(metrics_file=str(prom)))
    assert fake.jobs[failed]['state'] == 'PENDING' and ran
    before = time.time()
    requests.beat(conf, before)
    svc.write_metrics()
    now = samples(prom)
    assert now[('ocigpu_autoscaler_resumes_total', (('outcome', 'done'),))] == 1
    assert now[('ocigpu_autoscaler_resumes_total', (('outcome', 'failed'),))] == 1
    assert now[('ocigpu_autoscaler_jobs_waiting_for_capacity', ())] == 1
    assert now[('ocigpu_autoscaler_jobs_held', ())] == 0
    assert before - 1 <= now[('ocigpu_autoscaler_heartbeat_timestamp_seconds', ())] <= time.time() + 1
    assert now[('ocigpu_heal_enabled', ())] == 0
    assert oct(prom.stat().st_mode & 0o777) == '0o644'


def test_an_unwritable_metrics_file_is_said_once(sim, tmp_path, config):
    (tmp_path / 'a-file').write_text('')
    prom = tmp_path / 'a-file' / 'autoscaler.prom'    # its folder is a file
    _fake, conf, svc, _failed, _ran = one_of_two_jobs_short_of_hosts(sim, config, heal=dict(metrics_file=str(prom)))
    svc.write_metrics()
    svc.write_metrics()
    assert len(logged(conf, 'the metrics file %s could not be written' % prom)) == 1
    assert not prom.exists()


def test_held_jobs_are_those_at_the_limit_not_resumed_since():
    state = dict(attempts={'7': 5, '8': 2}, pull_failures={'9': 5, '7': 5}, capacity_waits=['8'])
    text = metrics.service_text(state, 100.0, 5)
    assert 'ocigpu_autoscaler_jobs_held 2\n' in text
    assert 'ocigpu_autoscaler_jobs_waiting_for_capacity 1\n' in text
    assert 'ocigpu_autoscaler_resumes_total{outcome="failed"} 0\n' in text


def test_the_loop_writes_its_limit_and_the_service_figures(sim, tmp_path, config):
    prom = tmp_path / 'autoscaler.prom'
    fake, conf, svc, clock = one_sick_node(config, metrics_file=str(prom), max_per_hour=3)
    replace_once(sim, conf, svc, fake, clock, 'gpu-1')
    now = samples(prom)
    assert now[('ocigpu_heal_started_last_hour', ())] == 1
    assert now[('ocigpu_heal_max_per_hour', ())] == 3
    assert now[('ocigpu_heal_enabled', ())] == 1
    clock.now += 3600
    svc.heal()
    now = samples(prom)
    assert now[('ocigpu_heal_started_last_hour', ())] == 0
    assert now[('ocigpu_autoscaler_resumes_total', (('outcome', 'done'),))] == 2  # the first instance and its replacement
