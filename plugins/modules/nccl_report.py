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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.module_utils._nccl_report import (
    build_report, summary_table, write_report)


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
