# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The autoscaler service's own figures in Prometheus' text format, written with the self-healing loop's
into ``heal.metrics_file`` (the rdma_exporter on the controller serves it), for the alert rules
(dashboards/ocigpu-alerts.yml): when the service last beat, its resumes done and failed, the jobs requeued
for want of hosts, the jobs it held; per capacity source, whether it cools after a stock-out, its stock-outs, and
the hosts free in a capacity reservation (read at each reconcile)."""

from __future__ import annotations

OUTCOMES = ('done', 'failed')


def count_resume(state, outcome):
    """Count one resume that ended (outcome 'done' or 'failed') in the state file's record (StateFile.update's
    function): counters that survive a restart of the service."""
    counts = state.setdefault('resumes', {})
    counts[outcome] = int(counts.get(outcome, 0)) + 1


def held_jobs(state, limit):
    """Jobs whose failed resumes (or pulls) reached the limit and that have not resumed since: the service held them."""
    held = set()
    for counter in ('attempts', 'pull_failures'):
        held |= set(k for k, v in (state.get(counter) or {}).items() if int(v) >= int(limit))
    return len(held)


def service_text(state, heartbeat_time, limit, sources=(), now=None, hosts_free=None):
    """The service's figures from its state file's record, its heartbeat's time (seconds since the epoch)
    and max_resume_attempts; with the capacity sources' names, now (seconds since the epoch) and the hosts free
    of the reservation sources ({name: count}; a source whose count is unknown is left out)."""
    counts = state.get('resumes') or {}
    lines = ['# HELP ocigpu_autoscaler_heartbeat_timestamp_seconds When the autoscaler service last beat (Unix time).',
             '# TYPE ocigpu_autoscaler_heartbeat_timestamp_seconds gauge',
             'ocigpu_autoscaler_heartbeat_timestamp_seconds %.0f' % heartbeat_time,
             '# HELP ocigpu_autoscaler_resumes_total Resumes the autoscaler service ended, by outcome (done, failed).',
             '# TYPE ocigpu_autoscaler_resumes_total counter']
    lines += ['ocigpu_autoscaler_resumes_total{outcome="%s"} %d' % (k, int(counts.get(k, 0))) for k in OUTCOMES]
    lines += ['# HELP ocigpu_autoscaler_jobs_waiting_for_capacity Jobs requeued for want of hosts, waiting for capacity.',
              '# TYPE ocigpu_autoscaler_jobs_waiting_for_capacity gauge',
              'ocigpu_autoscaler_jobs_waiting_for_capacity %d' % len(state.get('capacity_waits') or []),
              '# HELP ocigpu_autoscaler_jobs_held Jobs held after max_resume_attempts failed resumes, not resumed since.',
              '# TYPE ocigpu_autoscaler_jobs_held gauge',
              'ocigpu_autoscaler_jobs_held %d' % held_jobs(state, limit)]
    return '\n'.join(lines + capacity_lines(state, sources, now, hosts_free)) + '\n'


def capacity_lines(state, sources, now, hosts_free):
    """The capacity sources' figures: cooling (0/1), stock-outs (a counter), hosts free (reservations, when known)."""
    if not sources:
        return []
    cooling = state.get('cooling') or {}
    counts = state.get('stock_outs') or {}
    free = dict((k, v) for k, v in (hosts_free or {}).items() if v is not None and k in sources)
    lines = ['# HELP ocigpu_autoscaler_capacity_source_cooling Whether the capacity source cools after a stock-out (not tried).',
             '# TYPE ocigpu_autoscaler_capacity_source_cooling gauge']
    lines += ['ocigpu_autoscaler_capacity_source_cooling{source="%s"} %d' % (
        name, int(bool(cooling.get(name)) and (now is None or float(cooling[name]) > now))) for name in sources]
    lines += ['# HELP ocigpu_autoscaler_stock_outs_total Stock-outs (no host for a cluster network) met in each capacity source.',
              '# TYPE ocigpu_autoscaler_stock_outs_total counter']
    lines += ['ocigpu_autoscaler_stock_outs_total{source="%s"} %d' % (name, int(counts.get(name, 0))) for name in sources]
    if free:
        lines += ['# HELP ocigpu_autoscaler_capacity_source_hosts_free Hosts free in a capacity reservation (reserved - used).',
                  '# TYPE ocigpu_autoscaler_capacity_source_hosts_free gauge']
        lines += ['ocigpu_autoscaler_capacity_source_hosts_free{source="%s"} %d' % (name, free[name])
                  for name in sources if name in free]
    return lines
