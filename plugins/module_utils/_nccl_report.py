# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The NCCL validation report: runs judged by _nccl's parser and gates, as a fixed-width summary,
Markdown, a busbw plot (matplotlib, when the controller has it) and JSON (the nccl_report module).

Plain Python with no Ansible import, unit-tested on recorded outputs (tests/unit/data/nccl/).
"""

from __future__ import annotations

import datetime
import json
import os

from ansible_collections.ocigpu.cluster.plugins.module_utils._nccl import (
    expected_largest_size, format_size, gate, parse_output, row_busbw, row_wrong)


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
