# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the playbook tests: the simulator as a process, ansible-playbook against it, and what
the compartment holds, read through the SDK (not through our own modules)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request

import oci
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOKS = os.path.join(ROOT, 'tests', 'integration', 'provision')
COLLECTION_PLAYBOOKS = os.path.join(ROOT, 'playbooks')
VENV_BIN = os.path.dirname(sys.executable)


def start_simulator(tmp_path):
    """The simulator process (lifecycle durations scaled by 0.01) and its info line: (process, info)."""
    proc = subprocess.Popen([sys.executable, '-m', 'tests.ocisim', '--port', '0', '--scale', '0.01',  # pylint: disable=consider-using-with
                             '--write-config', str(tmp_path / 'oci' / 'config')],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())


def playbook_command(name, sim, tmp_path, check=False, **extra_vars):
    """The command line and environment that run a playbook (a name under tests/integration/provision,
    or a path) against the simulator."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'),
               OCI_CONFIG_FILE=sim['config_file'], OCI_CONFIG_PROFILE=sim['profile'], OCI_REGION=sim['region'],
               OCIGPU_SERVICE_ENDPOINT=sim['endpoint'], ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_CALLBACKS_ENABLED='ansible.posix.profile_tasks')
    cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', os.path.join(PLAYBOOKS, name),
           '-e', json.dumps(dict(compartment_id=sim['compartment_id'], **extra_vars))] + (['--check'] if check else [])
    return cmd, env


def playbook(name, sim, tmp_path, check=False, fail=False, **extra_vars):
    """Run a playbook against the simulator; assert that it succeeded (or failed, with fail=True); its
    recap counts and its stdout."""
    cmd, env = playbook_command(name, sim, tmp_path, check=check, **extra_vars)
    # cwd outside the checkout: the repository's ansible.cfg (callbacks, fact cache) stays out of it.
    out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600, check=False)
    print(out.stdout[-4000:], out.stderr[-2000:])
    if fail:
        assert out.returncode != 0, out.stdout[-6000:]
    else:
        assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    recap = re.search(r'localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', out.stdout)
    return dict(ok=int(recap.group(1)), changed=int(recap.group(2)), failed=int(recap.group(4)), stdout=out.stdout)


def admin(sim, method, path, body=None):
    """The simulator's unsigned admin endpoint (/_admin/...): its JSON answer, or None."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(sim['endpoint'] + '/_admin' + path, data=data, method=method,
                                 headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(req, timeout=30) as resp:  # nosec: the local simulator
        raw = resp.read()
    return json.loads(raw) if raw else None


def mutations(sim):
    """POST, PUT and DELETE calls the simulator served since the last reset of its counters, less the
    capacity report's POST (a read that OCI spells as a POST; it stores nothing)."""
    calls = admin(sim, 'GET', '/calls')
    return sum(n for route, n in calls.items() if route.split(' ')[0] in ('POST', 'PUT', 'DELETE')
               and route != 'POST /computeCapacityReports')


def ssh_public_key():
    return ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def sdk_config(sim):
    return oci.config.from_file(sim['config_file'], sim['profile'])


def clients(sim):
    kw = dict(service_endpoint=sim['endpoint'])
    config = sdk_config(sim)
    return (oci.core.ComputeClient(config, **kw), oci.core.ComputeManagementClient(config, **kw),
            oci.core.VirtualNetworkClient(config, **kw))


def first_availability_domain(sim):
    identity = oci.identity.IdentityClient(sdk_config(sim), service_endpoint=sim['endpoint'])
    return sorted(a.name for a in identity.list_availability_domains(sim['compartment_id']).data)[0]


def everything(sim):
    """The live instances, cluster networks and VCNs and every instance configuration of the compartment."""
    compute, cm, vn = clients(sim)
    comp = sim['compartment_id']
    lst = oci.pagination.list_call_get_all_results
    return dict(
        instances=[i for i in lst(compute.list_instances, comp).data if i.lifecycle_state != 'TERMINATED'],
        cluster_networks=[c for c in lst(cm.list_cluster_networks, comp).data if c.lifecycle_state != 'TERMINATED'],
        instance_configurations=lst(cm.list_instance_configurations, comp).data,
        vcns=[v for v in lst(vn.list_vcns, comp).data if v.lifecycle_state != 'TERMINATED'],
    )
