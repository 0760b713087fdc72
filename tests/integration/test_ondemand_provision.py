# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""provision.yml with autoscaling: true and no static GPU node, against the simulator: the network,
the controller and the node template, whose user_data is the collection's pull cloud-init - within
OCI's 32,000-byte limit, free of secrets, carrying the node's ocigpu-pull unchanged, which runs on
its own (standard library only). A re-run changes nothing; teardown leaves nothing billable."""
from __future__ import annotations

import base64
import gzip
import os
import re
import subprocess
import sys

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, clients, everything, playbook, ssh_public_key

pytestmark = pytest.mark.slow

CLUSTER = 'odm'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PULL_NODE = os.path.join(ROOT, 'roles', 'slurm_autoscaler', 'files', 'ocigpu_pull.py')


def test_on_demand_cluster_provisions_a_template_whose_nodes_configure_themselves(simulator, tmp_path):
    variables = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[ssh_public_key()],
                     gpu_node_count=0, autoscaling=True)
    first = playbook(os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml'), simulator, tmp_path, **variables)
    assert 'on demand: up to 8 x BM.GPU4.8 as gpu-[1-8]' in first['stdout']
    made = everything(simulator)
    assert made['cluster_networks'] == []
    assert [i.display_name for i in made['instances']] == [CLUSTER + '-bastion']
    template, = [t for t in made['instance_configurations'] if t.display_name.startswith(CLUSTER + '-gpu-template')]

    _compute, cm, _vn = clients(simulator)
    launch = cm.get_instance_configuration(template.id).data.instance_details.launch_details
    encoded = launch.metadata['user_data']
    assert 0 < len(encoded) <= 32000
    script = base64.b64decode(encoded).decode()
    assert script.startswith('#!/bin/bash\n')
    # No secret: the operator's API key and any private key stay out; the key the node needs comes later.
    assert 'PRIVATE KEY' not in script
    api_key = open(re.search(r'key_file=(.*)', open(simulator['config_file']).read()).group(1).strip()).read()
    assert api_key.strip().splitlines()[1] not in script
    # The node's program, byte for byte (compressed), and it runs with the standard library alone.
    start = script.index('\n', script.index("<<'OCIGPU_PULL'")) + 1
    blob = script[start:script.index('\nOCIGPU_PULL\n', start)]
    body = gzip.decompress(base64.b64decode(blob)).decode()
    assert body.startswith('#!/usr/bin/env python3\n')
    assert body.split('\n', 1)[1].rstrip('\n') == open(PULL_NODE).read().rstrip('\n')
    # Outside that blob, nothing shaped like a key (a munge key or a token is a long base64 run).
    assert not re.search(r'[A-Za-z0-9+/]{64,}', script.replace(blob, ''))
    assert 'systemctl start --no-block ocigpu-pull.service' in script
    (tmp_path / 'ocigpu-pull').write_text(body)
    run = subprocess.run([sys.executable, '-I', str(tmp_path / 'ocigpu-pull'), '--wait', '0',
                          '--imds-url', 'http://127.0.0.1:9/opc/v2', '--prefix', str(tmp_path / 'p'),
                          '--state-dir', str(tmp_path / 's'), '--log-file', str(tmp_path / 'pull.log')],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'not an on-demand node' in run.stdout and (tmp_path / 's' / 'static').exists()

    again = playbook(os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml'), simulator, tmp_path, **variables)
    assert again['changed'] == 0

    playbook(os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml'), simulator, tmp_path, cluster_name=CLUSTER)
    left = everything(simulator)
    assert left['instances'] == [] and left['cluster_networks'] == [] and left['instance_configurations'] == []
