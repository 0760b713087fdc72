#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_report
short_description: Judge NCCL test runs against thresholds and write the report
version_added: 0.1.0
description:
  - Parses every result line of one or more nccl-tests outputs (per node and for the whole
    cluster), compares the bus bandwidth at the largest message size with each run's threshold,
    and writes C(report.json), C(report.md) and C(busbw.png) (bus bandwidth against message size,
    one line per run) into O(dest).
  - Runs where the report should land, normally the controller (C(delegate_to=localhost)).
  - A run fails its gate when it printed no results, when any row has wrong elements or the
    output shows an error, when fewer ranks than expected took part, or when the busbw at the
    largest size is below the threshold. The busbw of a row is the better of the out-of-place
    and the in-place figure.
  - The plot needs matplotlib; without it the JSON and Markdown are still written and a warning
    says that no plot was drawn.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  runs:
    description: The runs to judge.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Name of the run (the node name, the two node names joined by C(+) for a pair, or C(cluster)).
        type: str
        required: true
      scope:
        description: C(node) for a single-node run, C(pair) for a two-node run of the pairwise check, C(cluster) for a
          run across all nodes.
        type: str
        choices: [node, pair, cluster]
        default: node
      output:
        description: The stdout of the nccl-tests program.
        type: str
        required: true
      threshold_gbps:
        description: Minimum busbw in GB/s at the largest size. Unset for no bandwidth gate.
        type: float
      expected_max_bytes:
        description: The largest size the run was asked for; a shorter run fails.
        type: int
      args:
        description:
          - The size arguments the run was given (for example C(-b 1G -e 16G -f 2)); the largest
            size they name is expected unless O(runs[].expected_max_bytes) is set.
        type: str
      expected_ranks:
        description: Ranks (GPUs) that must take part.
        type: int
      rc:
        description: Exit status of the program; a non-zero status fails the gate.
        type: int
      command:
        description: The command line, for the report.
        type: str
      env:
        description: The NCCL environment of the run, for the report.
        type: dict
  dest:
    description: Folder to write the report into (created when missing).
    type: path
    required: true
  title:
    description: Title of the report and the plot.
    type: str
    default: NCCL validation
  meta:
    description: Facts to show at the top of the report (cluster, shape, versions).
    type: dict
    default: {}
  plot:
    description: Whether to draw the PNG plot.
    type: bool
    default: true
  fail_on_gate:
    description: Fail, with the verdict table in the message, when any run fails its gate.
    type: bool
    default: true
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    details: In check mode the runs are judged but nothing is written.
"""

EXAMPLES = r"""
- name: Write the report on the controller and fail when a gate fails
  ocigpu.cluster.nccl_report:
    dest: /var/tmp/nccl-reports/2025-01-01T000000
    meta:
      shape: BM.GPU4.8
    runs:
      - name: gpu-1
        scope: node
        output: "{{ single.stdout }}"
        threshold_gbps: 185
        expected_ranks: 8
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
passed:
  description: Whether every run passed its gate.
  returned: always
  type: bool
table:
  description: Fixed-width table with one line per run (busbw, threshold, result and reasons).
  returned: always
  type: str
runs:
  description: Verdict per run (name, scope, passed, reasons, busbw_gbps, largest_size, threshold_gbps, ranks, hosts).
  returned: always
  type: list
  elements: dict
paths:
  description: Files written, by kind (json, md, png); empty in check mode.
  returned: always
  type: dict
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.module_utils._nccl import (
    expected_largest_size, format_size, gate, parse_output, row_busbw, row_wrong)

# The report: the runs judged by _nccl's parser and gates, as a fixed-width summary, Markdown, a busbw plot
# (matplotlib, when the controller has it) and JSON; tested on recorded outputs (tests/unit/data/nccl).


def build_report(runs, title='NCCL validation', meta=None, now=None):
    """Assemble the report from runs. Each run: name, scope ('node' or 'cluster'), output (the
    raw stdout), threshold_gbps (optional), expected_max_bytes (or args, the size arguments it
    is computed from), expected_ranks, rc (the exit status), command, env."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    out_runs = []
    for run in runs:
        parsed = parse_output(run.get('output') or '')
        expected_max = run.get('expected_max_bytes') or expected_largest_size(run.get('args'))
        verdict = gate(parsed, threshold_gbps=run.get('threshold_gbps'),
                       expected_max_bytes=expected_max,
                       expected_ranks=run.get('expected_ranks'), rc=run.get('rc'))
        out_runs.append({
            'name': run['name'],
            'scope': run.get('scope', 'node'),
            'command': run.get('command'),
            'env': dict(run.get('env') or {}),
            'collective': parsed['collective'] or 'all_reduce_perf',
            'nccl_tests_version': parsed['version'],
            'nccl_version': parsed['nccl_version'],
            'params': parsed['params'],
            'devices': parsed['devices'],
            'rows': parsed['rows'],
            'errors': parsed['errors'],
            'rc': run.get('rc'),
            'gate': verdict,
            # The program's own output, so the report can be parsed again or compared later.
            'output': run.get('output') or '',
        })
    return {
        'title': title,
        'created': now.strftime('%Y-%m-%dT%H:%M:%SZ'),
        'meta': dict(meta or {}),
        'passed': all(r['gate']['passed'] for r in out_runs) and bool(out_runs),
        'runs': out_runs,
    }


def _fmt(value, spec='%.2f'):
    return '-' if value is None else spec % value


def summary_table(report):
    """Fixed-width table of every run's verdict: what the play prints when a gate fails."""
    head = ('run', 'scope', 'ranks', 'size', 'busbw GB/s', 'threshold', 'result')
    lines = []
    for run in report['runs']:
        g = run['gate']
        lines.append((run['name'], run['scope'], str(g['ranks']),
                      format_size(g['largest_size']) if g['largest_size'] else '-',
                      _fmt(g['busbw_gbps']), _fmt(g['threshold_gbps']),
                      'PASS' if g['passed'] else 'FAIL: ' + '; '.join(g['reasons'])))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    widths[-1] = len(head[-1])
    fmt = '  '.join('%%-%ds' % w for w in widths)
    out = [fmt % head, fmt % tuple('-' * w for w in widths)]
    out.extend(fmt % line for line in lines)
    return '\n'.join(s.rstrip() for s in out)


def render_markdown(report, plot_name=None):
    md = ['# %s' % report['title'], '',
          '- Created: %s' % report['created'],
          '- Result: **%s**' % ('PASS' if report['passed'] else 'FAIL')]
    for key, value in sorted(report['meta'].items()):
        md.append('- %s: %s' % (key, value))
    md += ['', '## Verdict', '',
           '| run | scope | ranks | largest size | busbw (GB/s) | threshold (GB/s) | peak busbw | result |',
           '|---|---|---:|---:|---:|---:|---:|---|']
    for run in report['runs']:
        g = run['gate']
        md.append('| %s | %s | %d | %s | %s | %s | %s | %s |' % (
            run['name'], run['scope'], g['ranks'],
            format_size(g['largest_size']) if g['largest_size'] else '-',
            _fmt(g['busbw_gbps']), _fmt(g['threshold_gbps']), _fmt(g['peak_busbw_gbps']),
            'PASS' if g['passed'] else 'FAIL: ' + '; '.join(g['reasons'])))
    if plot_name:
        md += ['', '![busbw against message size](%s)' % plot_name]
    for run in report['runs']:
        md += ['', '## %s (%s)' % (run['name'], run['scope']), '']
        if run.get('command'):
            md += ['Command: `%s`' % run['command'], '']
        if run.get('env'):
            md += ['Environment: ' + ' '.join('`%s=%s`' % kv for kv in sorted(run['env'].items())), '']
        if run['devices']:
            gpus = sorted(set(d['gpu'] for d in run['devices']))
            md += ['GPUs: %d ranks on %s (%s)' % (len(run['devices']), ', '.join(run['gate']['hosts']),
                                                  ', '.join(gpus)), '']
        md += ['| size | count | type | out-of-place time (us) | algbw | busbw | in-place time (us) | algbw | busbw | #wrong |',
               '|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|']
        for row in run['rows']:
            oop, inp = row.get('out_of_place') or {}, row.get('in_place') or {}
            md.append('| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |' % (
                format_size(row['size']), row['count'], row['type'],
                _fmt(oop.get('time_us'), '%.1f'), _fmt(oop.get('algbw')), _fmt(oop.get('busbw')),
                _fmt(inp.get('time_us'), '%.1f'), _fmt(inp.get('algbw')), _fmt(inp.get('busbw')),
                _fmt(row_wrong(row), '%d')))
        if run['errors']:
            md += ['', 'Errors:', ''] + ['    ' + e for e in run['errors']]
    return '\n'.join(md) + '\n'


def render_plot(report, path):
    """PNG of busbw (the better of out-of-place and in-place) against message size: one line per
    node run, a thicker dashed line per cluster run, each threshold as a grey dashed line.
    Needs matplotlib on the controller."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    colours = plt.rcParams['axes.prop_cycle'].by_key().get('color', ['C0'])
    thresholds = set()
    top = 0.0
    for i, run in enumerate(report['runs']):
        pts = [(r['size'], row_busbw(r)) for r in run['rows'] if row_busbw(r) is not None]
        g = run['gate']
        if g['threshold_gbps'] is not None:
            thresholds.add(g['threshold_gbps'])
        if not pts:
            continue
        xs, ys = zip(*pts)
        top = max(top, *ys)
        cluster = run['scope'] == 'cluster'
        ax.plot(xs, ys, '--' if cluster else '-', marker='s' if cluster else 'o',
                markersize=6 if cluster else 4, linewidth=2.4 if cluster else 1.4,
                color=colours[i % len(colours)], alpha=0.85,
                label='%s (%s, %d ranks): %s GB/s at %s, %s' % (
                    run['name'], run['scope'], g['ranks'], _fmt(g['busbw_gbps']),
                    format_size(g['largest_size']).replace(' ', '') if g['largest_size'] else '-',
                    'PASS' if g['passed'] else 'FAIL'))
    for thr in sorted(thresholds):
        ax.axhline(thr, linestyle=':', color='dimgrey', linewidth=1.2)
        ax.annotate('threshold %g GB/s' % thr, xy=(0.01, thr), xycoords=('axes fraction', 'data'),
                    xytext=(0, 4), textcoords='offset points', fontsize=8, color='dimgrey')
        top = max(top, thr)
    ax.set_xscale('log', base=2)
    ticks = sorted(set(r['size'] for run in report['runs'] for r in run['rows']))
    if ticks:
        step = max(1, len(ticks) // 12)
        shown = ticks[::step]
        ax.set_xticks(shown)
        ax.set_xticklabels([format_size(t).replace(' ', '') for t in shown], rotation=45, ha='right')
        ax.minorticks_off()
    ax.set_xlabel('message size')
    ax.set_ylabel('bus bandwidth (GB/s)')
    ax.set_title('%s: %s' % (report['title'], 'PASS' if report['passed'] else 'FAIL'))
    ax.grid(True, which='major', alpha=0.3)
    ax.set_ylim(0, (top or 1.0) * 1.25)
    ax.legend(fontsize=8, loc='lower right', framealpha=0.9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(report, dest, plot=True):
    """Write report.json, report.md and busbw.png into dest. Returns {kind: path} and the reason
    the plot was not drawn, if it was not."""
    if not os.path.isdir(dest):
        os.makedirs(dest)
    paths = {}
    plot_error = None
    plot_name = 'busbw.png'
    if plot:
        try:
            paths['png'] = render_plot(report, os.path.join(dest, plot_name))
        except ImportError as exc:
            plot_error = 'matplotlib is not installed on the controller (%s); no plot drawn' % exc
    paths['json'] = os.path.join(dest, 'report.json')
    with open(paths['json'], 'w') as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
        handle.write('\n')
    paths['md'] = os.path.join(dest, 'report.md')
    with open(paths['md'], 'w') as handle:
        handle.write(render_markdown(report, plot_name if 'png' in paths else None))
    return paths, plot_error


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runs=dict(type='list', elements='dict', required=True, options=dict(
                name=dict(type='str', required=True),
                scope=dict(type='str', choices=['node', 'pair', 'cluster'], default='node'),
                output=dict(type='str', required=True),
                threshold_gbps=dict(type='float'),
                expected_max_bytes=dict(type='int'),
                args=dict(type='str'),
                expected_ranks=dict(type='int'),
                rc=dict(type='int'),
                command=dict(type='str'),
                env=dict(type='dict'),
            )),
            dest=dict(type='path', required=True),
            title=dict(type='str', default='NCCL validation'),
            meta=dict(type='dict', default={}),
            plot=dict(type='bool', default=True),
            fail_on_gate=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    report = build_report(p['runs'], title=p['title'], meta=p['meta'])
    table = summary_table(report)
    paths = {}
    if not module.check_mode:
        try:
            paths, plot_error = write_report(report, p['dest'], plot=p['plot'])
        except (IOError, OSError) as exc:
            module.fail_json(msg='cannot write the report to %s: %s' % (p['dest'], exc), table=table)
        if plot_error:
            module.warn(plot_error)
    verdicts = [dict(run['gate'], name=run['name'], scope=run['scope']) for run in report['runs']]
    result = dict(changed=True, passed=report['passed'], table=table, runs=verdicts, paths=paths)
    if p['fail_on_gate'] and not report['passed']:
        module.fail_json(msg='NCCL validation failed:\n' + table, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
