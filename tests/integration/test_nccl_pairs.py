# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl_tests role's pairwise check (tasks/pairs.yml, then the report) on this machine: five GPU
nodes in two local blocks, each this machine under another address (connection local). mpirun is a
stand-in that records the hosts of each run and replays a run measured on 4x H200 (365.04 GB/s at
16 GiB), or the same run at a third of the bandwidth when the slow node takes part: the report fails
the pairs of that node alone, each paired inside its local block."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integration._helpers import ROOT, VENV_BIN

REPLAY = os.path.join(ROOT, 'tests', 'unit', 'data', 'nccl', 'h200x4_role_node_1g_16g.txt')
BLOCKS = {'n1': 'lb-a', 'n2': 'lb-b', 'n3': 'lb-a', 'n4': 'lb-b', 'n5': 'lb-a'}
PLAYBOOK = """
- hosts: gpu_nodes
  gather_facts: false
  tasks:
    - ansible.builtin.import_role: {name: ocigpu.cluster.nccl_tests, tasks_from: resolve}
    - ansible.builtin.set_fact:
        __nccl_tests_toolchain: {mpi: {found: true}, launchers: {srun: false}, nccl: {version: "2.27.7"}, cuda: {version: "12.9"}}
        __nccl_tests_run_env: {NCCL_DEBUG: WARN}
    - ansible.builtin.import_role: {name: ocigpu.cluster.nccl_tests, tasks_from: pairs}
    - ansible.builtin.import_role: {name: ocigpu.cluster.nccl_tests, tasks_from: report}
"""


def slow(text):
    """The replay with every bandwidth figure at a third."""
    out = []
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[0].isdigit() and len(cols) == 13:
            for i in (6, 7, 10, 11):
                cols[i] = '%.2f' % (float(cols[i]) / 3)
            line = '  '.join(cols)
        out.append(line)
    return '\n'.join(out) + '\n'


def test_pairs_stay_in_their_local_block_and_a_slow_node_fails_only_its_pairs(tmp_path):
    with open(REPLAY, encoding='utf-8') as handle:
        (tmp_path / 'slow.txt').write_text(slow(handle.read()))
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    # mpirun -np N --host a:4,b:4 ...: records the hosts; slow when 10.0.0.3 (n3) takes part.
    (bin_dir / 'mpirun').write_text(
        '#!/bin/sh\nwhile [ "$1" != --host ]; do shift; done\necho "$2" >> %s\n'
        'case "$2" in *10.0.0.3:*) exec cat %s ;; *) exec cat %s ;; esac\n'
        % (tmp_path / 'runs', tmp_path / 'slow.txt', REPLAY))
    os.chmod(str(bin_dir / 'mpirun'), 0o755)
    hosts = dict((name, dict(ansible_host='10.0.0.%s' % name[1:], oci_hpc_island_id='is1', oci_network_block_id='nb1',
                             oci_local_block_id=block, nccl_tests_metrics_dir=str(tmp_path / name)))
                 for name, block in BLOCKS.items())
    (tmp_path / 'inventory.yml').write_text(json.dumps(dict(all=dict(
        children=dict(gpu_nodes=dict(hosts=hosts)),
        vars=dict(ansible_connection='local', ansible_python_interpreter=sys.executable, ansible_become=False,
                  nccl_tests_shape='BM.GPU.H200.8', nccl_tests_gpu_count=2, nccl_tests_launcher='mpirun',
                  nccl_tests_multi_binary='/bin/true', nccl_tests_args='-b 1G -e 16G -f 2',
                  nccl_tests_multi_node_threshold_gbps=300, nccl_tests_report_plot=False,
                  nccl_tests_report_dir=str(tmp_path / 'reports'))))))
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'), ANSIBLE_NOCOLOR='1',
               PATH=str(bin_dir) + os.pathsep + os.environ['PATH'], ANSIBLE_LOCALHOST_WARNING='0')
    out = subprocess.run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(tmp_path / 'inventory.yml'),
                          str(tmp_path / 'play.yml')], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    print(out.stdout[-6000:], out.stderr[-2000:])
    # The gate fails the play, after every node's exporter file got the figures (below).
    assert out.returncode != 0 and 'NCCL validation failed (report: ' in out.stdout
    assert 'n1+n3  pair   4      16 GiB  121.68      300.00     FAIL' in out.stdout
    # The pairs: inside each local block (n1, n3, n5 in lb-a; n2, n4 in lb-b), n5 again with n1 last.
    runs = sorted((tmp_path / 'runs').read_text().split())
    assert runs == sorted(['10.0.0.1:2,10.0.0.3:2', '10.0.0.2:2,10.0.0.4:2', '10.0.0.1:2,10.0.0.5:2'])
    assert 'Pairwise check: n1 + n3, n2 + n4, then n1 + n5' in out.stdout
    report, = (tmp_path / 'reports').iterdir()
    verdicts = dict((r['name'], r['gate']['passed']) for r in json.loads((report / 'report.json').read_text())['runs'])
    assert verdicts == {'n1+n3': False, 'n2+n4': True, 'n1+n5': True}
    # Each node's exporter file names its peer.
    prom = (tmp_path / 'n1' / 'nccl.prom').read_text()
    assert 'ocigpu_nccl_passed{scope="pair",test="all_reduce_perf",peer="n3"} 0' in prom
    assert 'ocigpu_nccl_passed{scope="pair",test="all_reduce_perf",peer="n5"} 1' in prom
