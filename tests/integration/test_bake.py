# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's bake.yml against the simulator process, on a pull bundle of this machine (ocigpu_bake_bundle_file):
--check says what it would bake and changes nothing; an image of the bundle's bake digest is adopted and nothing is
made (no builder is launched); older baked images are pruned to gpu_image_bake_keep, and an image of another digest
is never adopted. The builder's own path (SSH to a GPU instance, ocigpu-pull --bake) needs a host to reach and is not
run here."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import oci
import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, admin, clients, everything, mutations, playbook, ssh_public_key

pytestmark = pytest.mark.slow

BAKE = os.path.join(COLLECTION_PLAYBOOKS, 'bake.yml')
PULL = os.path.join(ROOT, 'roles', 'slurm_autoscaler', 'files', 'ocigpu_pull.py')
CLUSTER = 'bake'
KEY = ssh_public_key()

# The network and the bastion, as provision.yml makes them; then images of the cluster made from the bastion (the
# simulator does not care that it is no GPU node), one per digest, oldest first.
SETUP = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ocigpu.cluster.network:
        cluster_name: {cluster}
        compartment_id: "{{{{ compartment_id }}}}"
        vcn_cidr: 10.0.0.0/16
        public_subnet_cidr: 10.0.0.0/24
        private_subnet_cidr: 10.0.1.0/24
        ssh_source_cidrs: [203.0.113.0/24]
      register: net
    - ocigpu.cluster.instance:
        cluster_name: {cluster}
        compartment_id: "{{{{ compartment_id }}}}"
        display_name: {cluster}-bastion
        shape: VM.Standard.E5.Flex
        shape_config: {{ocpus: 1, memory_in_gbs: 16}}
        image_os: Oracle Linux
        image_os_version: "9"
        subnet_id: "{{{{ net.network.public_subnet_id }}}}"
        assign_public_ip: true
        ssh_authorized_keys: ["{key}"]
        freeform_tags: {{ocigpu-role: bastion}}
      register: bastion
    - ocigpu.cluster.image:
        cluster_name: {cluster}
        compartment_id: "{{{{ compartment_id }}}}"
        instance_id: "{{{{ bastion.instance.id }}}}"
        display_name: "{cluster}-gpu-baked-{{{{ item[:12] }}}}"
        match_tags: {{ocigpu-bake-digest: "{{{{ item }}}}"}}
      loop: "{{{{ digests }}}}"
"""


def bundle(path, settings_text):
    """A pull bundle as build-pull-bundle.sh lays it out (members ./pull.json, ./node-vars.yml, ./ocigpu.lock.yml,
    ./collections/...), and its digests from ocigpu_pull.py --digest."""
    members = {'./pull.json': json.dumps({'collections': ['ocigpu.cluster 0.5.0'], 'ansible_core': 'ansible-core==2.19.4'}),
               './node-vars.yml': settings_text, './ocigpu.lock.yml': 'artifacts: {}\n',
               './collections/ansible_collections/ocigpu/cluster/MANIFEST.json': '{}'}
    with tarfile.open(path, 'w:gz') as tar:
        for name, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = subprocess.run([sys.executable, PULL, '--digest', str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def available(sim):
    """The display names of the compartment's AVAILABLE custom images, read through the SDK."""
    compute = clients(sim)[0]
    found = oci.pagination.list_call_get_all_results(compute.list_images, sim['compartment_id'], lifecycle_state='AVAILABLE').data
    return sorted(i.display_name for i in found if i.compartment_id == sim['compartment_id'])


def test_adopted_by_digest_pruned_and_predicted(simulator, tmp_path):
    current = bundle(tmp_path / 'bundle.tar.gz', 'enroot_version: 3.5.0\n')
    older = [bundle(tmp_path / ('old%d.tar.gz' % n), 'enroot_version: 3.%d.0\n' % n)['bundle_digest'] for n in (1, 2)]
    setup = tmp_path / 'setup.yml'
    setup.write_text(SETUP.format(cluster=CLUSTER, key=KEY))
    playbook(str(setup), simulator, tmp_path, digests=older)
    cluster = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[KEY],
                   ocigpu_bake_bundle_file=str(tmp_path / 'bundle.tar.gz'))

    # No image of this digest: check mode says what it would bake, and what pruning would delete; nothing changes.
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(BAKE, simulator, tmp_path, check=True, gpu_image_bake_keep=1, **cluster)['stdout']
    assert mutations(simulator) == 0, admin(simulator, 'GET', '/calls')
    assert 'bake digest %s' % current['bundle_digest'][:12] in out
    assert 'no image of it yet: it would be baked (check mode: nothing is made)' in out
    assert 'would launch the builder bake-bake-builder (BM.GPU4.8, Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0)' in out
    assert 'ocigpu-lock-digest=%s' % current['lock_digest'][:16] in out
    assert 'kept 1 image of cluster bake; would delete 1' in out

    # An image of this digest (made like the bake makes it): adopted, no builder, no image made; pruning keeps 2.
    playbook(str(setup), simulator, tmp_path, digests=[current['bundle_digest']])
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(BAKE, simulator, tmp_path, **cluster)['stdout']
    calls = admin(simulator, 'GET', '/calls')
    assert not any(route.startswith(('POST /instances', 'POST /images')) for route in calls), calls
    assert "was baked from it: adopted, nothing is made" in out
    assert 'bake-gpu-baked-%s): adopted' % current['bundle_digest'][:12] in out
    assert 'kept 2 images of cluster bake; deleted 1' in out
    assert available(simulator) == sorted('bake-gpu-baked-%s' % d[:12] for d in (current['bundle_digest'], older[1]))

    # Again: nothing to adopt anew, nothing to prune.
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(BAKE, simulator, tmp_path, **cluster)['stdout']
    assert mutations(simulator) == 0, admin(simulator, 'GET', '/calls')
    assert 'kept 2 images of cluster bake; deleted 0' in out

    # The teardown deletes the cluster's baked images with the rest: they are billed for their storage.
    out = playbook(os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml'), simulator, tmp_path, **cluster)['stdout']
    assert 'Nothing billable of bake is left.' in out
    assert available(simulator) == []


def test_a_failed_bake_terminates_the_builder(tmp_path):
    """The builder never answers SSH (its bastion's public address, in 198.19.250.0/24, has no host): the bake fails,
    and the builder is terminated all the same; no image is made."""
    proc = subprocess.Popen([sys.executable, '-m', 'tests.ocisim', '--port', '0', '--scale', '0.01',  # pylint: disable=consider-using-with
                             '--public-ip-cidr', '198.19.250.0/24', '--write-config', str(tmp_path / 'oci' / 'config')],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        sim = json.loads(proc.stdout.readline())
        current = bundle(tmp_path / 'bundle.tar.gz', 'enroot_version: 3.5.0\n')
        setup = tmp_path / 'setup.yml'
        setup.write_text(SETUP.format(cluster=CLUSTER, key=KEY))
        playbook(str(setup), sim, tmp_path, digests=[])
        admin(sim, 'POST', '/calls/reset')
        out = playbook(BAKE, sim, tmp_path, fail=True, cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'],
                       ssh_authorized_keys=[KEY], ocigpu_bake_bundle_file=str(tmp_path / 'bundle.tar.gz'), boot_wait_timeout=5)['stdout']
        assert 'bake digest %s' % current['bundle_digest'][:12] in out
        assert 'The bake failed at "Wait until the builder answers SSH"' in out
        assert 'TASK [Terminate the builder]' in out
        calls = admin(sim, 'GET', '/calls')
        assert calls.get('POST /instances') == 1 and not calls.get('POST /images'), calls
        assert [i.display_name for i in everything(sim)['instances']] == ['bake-bastion']
    finally:
        proc.terminate()
        proc.wait(timeout=30)
