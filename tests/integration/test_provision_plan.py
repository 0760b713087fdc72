# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's provision.yml against the simulator process (issue 16): a bad plan is refused by the
preflight before the first mutating call, with every problem in one message; capacity is known before
anything is created; --check runs the preflight; a running cluster network grows, shrinks by named or
picked nodes, and has a node replaced, each re-run changing nothing; teardown leaves nothing billable.

Mutating calls are counted by the simulator (POST, PUT and DELETE, less the capacity report's POST,
which creates nothing)."""
from __future__ import annotations

import os
import re

import oci
import pytest

from tests.integration._helpers import (COLLECTION_PLAYBOOKS, admin, clients, everything, first_availability_domain,
                                        mutations, playbook, sdk_config, ssh_public_key)

pytestmark = pytest.mark.slow

PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')
TEARDOWN = os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml')
CLUSTER = 'plan'
KEY = ssh_public_key()


def plan(**changes):
    """Good cluster vars (3 BM.GPU4.8 nodes on a cluster network); gpu_drain off, as no Slurm runs here."""
    base = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[KEY],
                gpu_node_count=3, gpu_drain=False)
    base.update(changes)
    return dict((k, v) for k, v in base.items() if v is not None)


def refused(sim, tmp_path, **changes):
    admin(sim, 'POST', '/calls/reset')
    out = playbook(PROVISION, sim, tmp_path, fail=True, **plan(**changes))
    assert mutations(sim) == 0, admin(sim, 'GET', '/calls')
    assert everything(sim)['vcns'] == []
    assert 'problem' in out['stdout'] and 'found before anything was created' in out['stdout']
    return out['stdout']


def test_a_bad_plan_is_refused_whole_before_the_first_change(simulator, tmp_path):
    big = tmp_path / 'user-data.txt'
    big.write_text('#!/bin/bash\n' + '# padding\n' * 3000)  # 30 KB of text: over 32,000 bytes in base64
    private = tmp_path / 'id_ed25519'
    private.write_text('-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n')
    out = refused(simulator, tmp_path, gpu_shape='BM.GPU.X9000.8', bastion_shape='VM.Unknown.Flex',
                  gpu_image_name='Oracle-Linux-0.0-Gen2-GPU-none', gpu_boot_volume_gb=10, gpu_user_data_file=str(big),
                  availability_domain='pvIG:AP-TOKYO-1-AD-9', ssh_authorized_keys=None, ssh_public_key_file=str(private))
    assert 'preflight: 7 problems in the cluster plan' in out
    for text in ("gpu_shape: GPU shape 'BM.GPU.X9000.8' is unknown", "bastion_shape: 'VM.Unknown.Flex'",
                 'gpu_boot_volume_gb: 10 GB', 'gpu_user_data_file: 40016 bytes after base64',
                 "availability_domain: 'pvIG:AP-TOKYO-1-AD-9'", 'this is a PRIVATE key',
                 "gpu_image_name: no available image is named 'Oracle-Linux-0.0-Gen2-GPU-none'"):
        assert text in out, text
    assert 'b3BlbnNzaC1rZXktdjEAAAAA' not in out  # a private key's text is never repeated

    out = refused(simulator, tmp_path, gpu_boot_volume_gb=40000, bastion_ocpus=-1)
    assert 'gpu_boot_volume_gb: 40000 GB' in out and 'bastion_ocpus' in out
    empty = tmp_path / 'empty.pub'
    empty.write_text('not a key\n')
    out = refused(simulator, tmp_path, bastion_ocpus=500, ssh_authorized_keys=None, ssh_public_key_file=str(empty))
    assert 'bastion_ocpus' in out and 'ssh_public_key_file' in out
    out = refused(simulator, tmp_path, bastion_shape='VM.Standard.E5.Flex', bastion_image_os='Oracle Linux',
                  gpu_shape='VM.Standard.E5.Flex')
    assert "gpu_shape: " in out and 'VM.Standard.E5.Flex' in out


def test_capacity_is_known_before_anything_is_created(simulator, tmp_path):
    out = refused(simulator, tmp_path, gpu_node_count=65)
    assert 'capacity' in out and '64' in out  # the simulator's default: 64 BM.GPU4.8 hosts per AD
    out = refused(simulator, tmp_path, gpu_node_count=10000)
    assert 'capacity' in out
    admin(simulator, 'POST', '/capacity', dict(shape='BM.GPU4.8', hosts=2))
    out = refused(simulator, tmp_path)
    assert 'capacity' in out and '2' in out
    admin(simulator, 'POST', '/capacity', dict(shape='BM.GPU4.8', hosts=3))
    admin(simulator, 'POST', '/calls/reset')
    predicted = playbook(PROVISION, simulator, tmp_path, check=True, **plan())
    assert 'Check the whole plan against OCI' in predicted['stdout'] and mutations(simulator) == 0
    assert everything(simulator)['vcns'] == []
    made = playbook(PROVISION, simulator, tmp_path, **plan())
    assert made['changed'] >= 4 and len(everything(simulator)['instances']) == 4
    assert playbook(TEARDOWN, simulator, tmp_path, **plan())['failed'] == 0


def names(sim):
    return sorted(running(sim))


def running(sim):
    return dict((i.display_name, i) for i in everything(sim)['instances']
                if i.shape == 'BM.GPU4.8' and i.lifecycle_state == 'RUNNING')


def test_resize_grows_shrinks_by_chosen_nodes_and_replaces_a_node(simulator, tmp_path):
    ad = first_availability_domain(simulator)
    playbook(PROVISION, simulator, tmp_path, **plan(availability_domain=ad))
    three = names(simulator)
    assert len(three) == 3

    # A named node goes; the others stay.
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(PROVISION, simulator, tmp_path,
                   **plan(availability_domain=ad, gpu_node_count=2, gpu_remove_nodes=[three[0]]))
    assert 'left the cluster network: %s' % three[0] in out['stdout']
    calls = admin(simulator, 'GET', '/calls')
    assert calls.get('POST /instancePools/{instancePoolId}/actions/detachInstance') == 1
    assert 'PUT /clusterNetworks/{clusterNetworkId}' not in calls
    assert names(simulator) == three[1:]
    again = playbook(PROVISION, simulator, tmp_path,
                     **plan(availability_domain=ad, gpu_node_count=2, gpu_remove_nodes=[three[0]]))
    assert again['changed'] == 0

    # Names that do not fit the count are refused before any change.
    admin(simulator, 'POST', '/calls/reset')
    out = playbook(PROVISION, simulator, tmp_path, fail=True,
                   **plan(availability_domain=ad, gpu_node_count=1, gpu_remove_nodes=three[1:]))
    assert 'gpu_remove_nodes names 2 node(s)' in out['stdout'] and 'takes 1 of its 2 nodes away' in out['stdout']
    out = playbook(PROVISION, simulator, tmp_path, fail=True,
                   **plan(availability_domain=ad, gpu_node_count=1, gpu_remove_nodes=['no-such-node']))
    assert 'gpu_remove_nodes: no-such-node is not a node of the cluster network' in out['stdout']
    assert mutations(simulator) == 0

    # A failed node is replaced: same size, a new instance that carries on its display name and, as a
    # tag, its Slurm name (its host name: the simulator's pool labels inst-<id>-<pool> as inst-<id>).
    before = running(simulator)
    out = playbook(PROVISION, simulator, tmp_path,
                   **plan(availability_domain=ad, gpu_node_count=2, gpu_replace_nodes=[three[2]]))
    now = names(simulator)
    after = running(simulator)
    assert now == three[1:] and after[three[1]].id == before[three[1]].id
    assert after[three[2]].id != before[three[2]].id
    assert after[three[2]].freeform_tags['ocigpu-slurm-name'] == '-'.join(three[2].split('-')[:2])
    assert 'ocigpu-slurm-name' not in after[three[1]].freeform_tags
    # The same list again: the node of that name is the replacement, kept (no Slurm to say otherwise).
    again = playbook(PROVISION, simulator, tmp_path,
                     **plan(availability_domain=ad, gpu_node_count=2, gpu_replace_nodes=[three[2]]))
    assert again['changed'] == 0 and running(simulator)[three[2]].id == after[three[2]].id
    assert 'kept: it is the replacement made for' in again['stdout']

    # No names: the highest display name goes (no Slurm here to ask for jobs).
    out = playbook(PROVISION, simulator, tmp_path, **plan(availability_domain=ad, gpu_node_count=1))
    assert names(simulator) == [min(now)]
    assert 'left the cluster network: %s' % max(now) in out['stdout']

    # Grow again.
    playbook(PROVISION, simulator, tmp_path, **plan(availability_domain=ad, gpu_node_count=3))
    assert len(names(simulator)) == 3 and min(now) in names(simulator)
    assert playbook(PROVISION, simulator, tmp_path, **plan(availability_domain=ad, gpu_node_count=3))['changed'] == 0

    down = playbook(TEARDOWN, simulator, tmp_path, **plan())
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout']
    assert everything(simulator) == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[])


def _find_shared_home(tmp_path):
    """A play that runs configure.yml's lookup of the shared home (playbooks/tasks/shared_home_source.yml)
    as its first play does, and prints what it found."""
    path = tmp_path / 'find_shared_home.yml'
    path.write_text(
        '- hosts: localhost\n  connection: local\n  gather_facts: false\n'
        '  vars_files: [%s]\n  tasks:\n'
        '    - ansible.builtin.import_tasks: %s\n'
        '    - ansible.builtin.debug:\n        msg: "shared home source: {{ _ocigpu_shared_home_source }}"\n'
        % (os.path.join(COLLECTION_PLAYBOOKS, 'vars', 'cluster_defaults.yml'),
           os.path.join(COLLECTION_PLAYBOOKS, 'tasks', 'shared_home_source.yml')))
    return str(path)


def test_a_shared_home_on_file_storage_is_made_with_the_cluster_and_removed_with_it(simulator, tmp_path):
    """Issue 31, point 1: shared_home: fss makes the file system, its mount target in the private subnet and
    the export; a re-run adopts them; teardown removes them (the mount target before the network, which OCI
    would refuse otherwise) and finds nothing billable."""
    ad = first_availability_domain(simulator)
    vars_ = plan(availability_domain=ad, gpu_node_count=1, shared_home='fss')
    out = playbook(PROVISION, simulator, tmp_path, **vars_)
    fss = oci.file_storage.FileStorageClient(sdk_config(simulator), service_endpoint=simulator['endpoint'])
    comp = simulator['compartment_id']
    systems = [f for f in fss.list_file_systems(comp, ad).data if f.lifecycle_state == 'ACTIVE']
    targets = [m for m in fss.list_mount_targets(comp, ad).data if m.lifecycle_state == 'ACTIVE']
    assert [f.display_name for f in systems] == ['plan-home'] and [m.display_name for m in targets] == ['plan-home-mt']
    exports = [e for e in fss.list_exports(file_system_id=systems[0].id).data if e.lifecycle_state == 'ACTIVE']
    assert [e.path for e in exports] == ['/home'] and exports[0].export_set_id == targets[0].export_set_id
    subnets = dict((s.display_name, s) for s in clients(simulator)[2].list_subnets(comp).data)
    assert targets[0].subnet_id == subnets['plan-private'].id
    source = re.search(r'shared home: (10\.0\.1\.\d+:/home) \(OCI File Storage\)', out['stdout'])
    assert source
    assert playbook(PROVISION, simulator, tmp_path, **vars_)['changed'] == 0

    # configure.yml's first play finds what the hosts mount (the shared_home role's source), read-only.
    before = mutations(simulator)
    found = playbook(_find_shared_home(tmp_path), simulator, tmp_path, **vars_)
    assert 'shared home source: %s' % source.group(1) in found['stdout'] and found['changed'] == 0
    assert mutations(simulator) == before
    # Without its export, it stops and says to run provision.yml, before any change.
    fss.delete_export(exports[0].id)
    oci.wait_until(fss, fss.get_export(exports[0].id), 'lifecycle_state', 'DELETED', max_wait_seconds=60)
    broken = playbook(_find_shared_home(tmp_path), simulator, tmp_path, fail=True, **vars_)
    assert 'is not complete in OCI; run provision.yml (or site.yml) with shared_home: fss first' in broken['stdout']
    assert mutations(simulator) == before + 1  # the test's own delete_export

    down = playbook(TEARDOWN, simulator, tmp_path, **vars_)
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout']
    assert [f for f in fss.list_file_systems(comp, ad).data if f.lifecycle_state != 'DELETED'] == []
    assert [m for m in fss.list_mount_targets(comp, ad).data if m.lifecycle_state != 'DELETED'] == []
    assert everything(simulator) == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[])
