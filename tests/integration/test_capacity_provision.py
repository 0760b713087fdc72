# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""provision.yml with capacity sources against the simulator process (a region with two availability
domains): one node template per source, a static cluster network that finds no host in the first source
made in the next with the reason printed, a re-run that adopts it where it is, and a teardown that
leaves nothing (every template of the cluster included)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import oci
import pytest

from tests.integration._helpers import (COLLECTION_PLAYBOOKS, ROOT, admin, clients, everything, mutations, playbook, playbook_command,
                                        sdk_config, ssh_public_key)

pytestmark = pytest.mark.slow

PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')
TEARDOWN = os.path.join(COLLECTION_PLAYBOOKS, 'teardown.yml')
CLUSTER = 'cap'
SHAPE = 'BM.GPU4.8'


@pytest.fixture
def simulator2(tmp_path):
    """The simulator with two availability domains in its region (the real Tokyo has one)."""
    proc = subprocess.Popen([sys.executable, '-m', 'tests.ocisim', '--port', '0', '--scale', '0.01',  # pylint: disable=consider-using-with
                             '--availability-domains', '2', '--write-config', str(tmp_path / 'oci' / 'config')],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        yield json.loads(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def availability_domains(sim):
    identity = oci.identity.IdentityClient(sdk_config(sim), service_endpoint=sim['endpoint'])
    return sorted(a.name for a in identity.list_availability_domains(sim['compartment_id']).data)


def on_demand_settings(sim, tmp_path, fail=False, **extra_vars):
    """configure.yml's first play alone (the other plays have no host: --limit localhost), in check mode;
    the on-demand settings it remembers for the controller (or, with fail, its output)."""
    inventory = tmp_path / 'hosts.ini'
    inventory.write_text('localhost ansible_connection=local\n[bastion]\n%s-bastion ansible_host=127.0.0.1\n' % CLUSTER)
    cmd, env = playbook_command(os.path.join(COLLECTION_PLAYBOOKS, 'configure.yml'), sim, tmp_path, check=True,
                                **extra_vars)
    cmd[cmd.index('localhost,')] = str(inventory)
    out = subprocess.run(cmd + ['--limit', 'localhost', '-v'], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    if fail:
        assert out.returncode != 0, out.stdout[-6000:]
        return out.stdout
    task = out.stdout.find('TASK [Remember the on-demand settings for the controller]')
    start = out.stdout.find('ok: [localhost] => ', task)
    assert task >= 0 and start >= 0, out.stdout[-8000:] + out.stderr[-3000:]
    result, _end = json.JSONDecoder().raw_decode(out.stdout, start + len('ok: [localhost] => '))
    return result['ansible_facts']['_ocigpu_autoscaling']


def test_a_static_cluster_goes_to_the_next_source_and_stays_there(simulator2, tmp_path):
    sim = simulator2
    ad1, ad2 = availability_domains(sim)
    assert ad1.endswith('AD-1') and ad2.endswith('AD-2')
    vars_ = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[ssh_public_key()],
                 gpu_node_count=2, gpu_drain=False, availability_domain=ad1,
                 gpu_capacity_sources=[dict(availability_domain=ad1), dict(availability_domain=ad2)])
    # No BM.GPU4.8 host in AD-1 (the plan's, the bastion's); the default (64) in AD-2.
    admin(sim, 'POST', '/capacity', dict(shape=SHAPE, hosts=0, availability_domain=ad1))

    out = playbook(PROVISION, sim, tmp_path, **vars_)
    said = ' '.join(out['stdout'].split())
    assert 'capacity sources, in order: ad-1 (on-demand, %s): 0 hosts free' % ad1 in said, said[-6000:]
    assert 'new GPU nodes go to ad-2' in said
    assert 'GPU nodes in ad-2; tried: ad-1 (ad-1 out of host capacity)' in out['stdout'], out['stdout'][-6000:]
    found = everything(sim)
    assert [c.display_name for c in found['cluster_networks']] == ['cap-cn']
    cn = found['cluster_networks'][0]
    assert cn.freeform_tags.get('ocigpu-capacity-source') == 'ad-2'
    gpus = [i for i in found['instances'] if i.shape == SHAPE]
    assert len(gpus) == 2 and set(i.availability_domain for i in gpus) == set([ad2])
    templates = dict((c.display_name.rsplit('-', 1)[0], c) for c in found['instance_configurations'])
    assert sorted(templates) == ['cap-gpu-template', 'cap-gpu-template-ad-2']
    assert templates['cap-gpu-template-ad-2'].freeform_tags['ocigpu-capacity-source'] == 'ad-2'
    assert templates['cap-gpu-template'].freeform_tags['ocigpu-capacity-source'] == 'ad-1'

    # A re-run adopts the cluster network where it is: nothing made, nothing changed.
    admin(sim, 'POST', '/calls/reset')
    again = playbook(PROVISION, sim, tmp_path, **vars_)
    assert again['changed'] == 0 and mutations(sim) == 0, admin(sim, 'GET', '/calls')
    assert 'GPU nodes in ad-2' in again['stdout'] and 'tried:' not in again['stdout'].split('GPU nodes in ad-2')[1][:20]
    assert [c.id for c in everything(sim)['cluster_networks']] == [cn.id]

    # configure.yml's first play hands the autoscaler each source with its template (the newest of its name).
    settings = on_demand_settings(sim, tmp_path, **dict(vars_, autoscaling=True, gpu_capacity_cooldown_minutes=3))
    assert settings['availability_domain'] == ad1 and settings['capacity_cooldown'] == 180
    assert settings['instance_configuration_id'] == templates['cap-gpu-template'].id
    assert settings['capacity_sources'] == [
        dict(name='ad-1', kind='on-demand', availability_domain=ad1, capacity_reservation_id=None,
             instance_configuration_id=templates['cap-gpu-template'].id),
        dict(name='ad-2', kind='on-demand', availability_domain=ad2, capacity_reservation_id=None,
             instance_configuration_id=templates['cap-gpu-template-ad-2'].id)]
    # A source whose template provision.yml did not make: refused, saying what to run.
    late = dict(vars_)
    late.update(autoscaling=True, gpu_capacity_sources=vars_['gpu_capacity_sources'] + [dict(name='late', availability_domain=ad2)])
    out = on_demand_settings(sim, tmp_path, fail=True, **late)
    assert 'missing: cap-gpu-template-late of cluster cap. Run provision.yml' in ' '.join(out.split())

    down = playbook(TEARDOWN, sim, tmp_path, **vars_)
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout']
    assert everything(sim) == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[])


def test_a_full_reservation_gives_way_to_the_next_source(simulator, tmp_path):
    """A reservation named without its AD (the preflight reads it) that holds one host of the two asked: its
    template carries the reservation, its cluster network fails as OCI's does and is gone, the nodes go to
    the AD's on-demand hosts."""
    sim = simulator
    compute, cm, _vn = clients(sim)
    ad = sorted(a.name for a in oci.identity.IdentityClient(sdk_config(sim), service_endpoint=sim['endpoint'])
                .list_availability_domains(sim['compartment_id']).data)[0]
    reservation = admin(sim, 'POST', '/capacity_reservation', dict(availability_domain=ad, shape=SHAPE, count=1,
                                                                   compartment_id=sim['compartment_id'], display_name='r1'))
    vars_ = dict(cluster_name=CLUSTER, ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[ssh_public_key()],
                 gpu_node_count=2, gpu_drain=False,
                 gpu_capacity_sources=[dict(name='r1', capacity_reservation_id=reservation['id']), dict(availability_domain=ad)])
    out = playbook(PROVISION, sim, tmp_path, **vars_)
    said = ' '.join(out['stdout'].split())
    assert 'GPU nodes in ad-1; tried: r1 (reservation r1 full)' in said, said[-6000:]
    found = everything(sim)
    templates = dict((c.display_name.rsplit('-', 1)[0], c) for c in found['instance_configurations'])
    assert sorted(templates) == ['cap-gpu-template', 'cap-gpu-template-ad-1']
    launch = cm.get_instance_configuration(templates['cap-gpu-template'].id).data.instance_details.launch_details
    assert launch.capacity_reservation_id == reservation['id'] and launch.availability_domain == ad
    assert [c.freeform_tags['ocigpu-capacity-source'] for c in found['cluster_networks']] == ['ad-1']
    assert len([i for i in found['instances'] if i.shape == SHAPE]) == 2
    assert compute.get_compute_capacity_reservation(reservation['id']).data.used_instance_count == 0
    assert playbook(PROVISION, sim, tmp_path, **vars_)['changed'] == 0

    down = playbook(TEARDOWN, sim, tmp_path, **vars_)
    assert 'Nothing billable of %s is left.' % CLUSTER in down['stdout']
    assert everything(sim) == dict(instances=[], cluster_networks=[], instance_configurations=[], vcns=[])
