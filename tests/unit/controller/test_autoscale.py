# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm autoscaler logic (controller/ocigpu_control/scaler.py) against the simulator: resume, suspend, idempotence,
capacity failure, hostlists, and the program's command line with scontrol captured."""
from __future__ import annotations

import io
import json
import os
import subprocess
import threading
import urllib.request

import oci
import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils import _hostlist, _oci
from ocigpu_control import scaler as _autoscale
from ocigpu_control import programs as _autoscale_cli
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
from tests.unit.controller.slurmctld import Slurm

SHAPE = 'BM.GPU4.8'


def live(sim, kind):
    return [r for r in getattr(sim.state, kind).values()
            if r.get('lifecycleState') not in ('TERMINATED', 'TERMINATING', 'DELETED') and not r.get('_default')]


def gpu_instances(sim):
    return [i for i in live(sim, 'instances') if i['shape'] == SHAPE]


def mutations(sim):
    return sum(sim.calls.count(p) for p in ('POST *', 'PUT *', 'DELETE *'))


@pytest.fixture
def sim(ocisim, monkeypatch):
    monkeypatch.setattr(_oci.CLOCK, 'sleep', ocisim.clock.sleep)
    monkeypatch.setattr(_oci.CLOCK, 'monotonic', ocisim.clock.now)
    return ocisim


def autoscaler_config(sim, name, nodes, state_dir, log_file):  # pylint: disable=redefined-outer-name
    """A network, a node template and the autoscaler's configuration in the simulator (also used by
    tests/perf/autoscale_soak.py)."""
    _vcn, subnet = sim.seed_network(sim.compartment_id, '10.0.0.0/16', subnet_prefix=24, name=name)
    compute = sim.client(oci.core.ComputeClient)
    image = compute.list_images(sim.compartment_id, shape=SHAPE).data[0]
    ad = sorted(sim.availability_domains)[0]
    M = oci.core.models
    details = M.CreateInstanceConfigurationDetails(
        compartment_id=sim.compartment_id, display_name='%s-gpu-config' % name,
        instance_details=M.ComputeInstanceDetails(launch_details=M.InstanceConfigurationLaunchInstanceDetails(
            compartment_id=sim.compartment_id, availability_domain=ad, shape=SHAPE,
            source_details=M.InstanceConfigurationInstanceSourceViaImageDetails(image_id=image.id),
            create_vnic_details=M.InstanceConfigurationCreateVnicDetails(subnet_id=subnet['id']))))
    ic = sim.client(oci.core.ComputeManagementClient).create_instance_configuration(details).data
    return _autoscale.check_config(dict(
        cluster_name=name, compartment_id=sim.compartment_id, availability_domain=ad, subnet_id=subnet['id'],
        instance_configuration_id=ic.id, nodes=nodes, auth=sim.auth_args(),
        state_file=os.path.join(state_dir, 'state.json'), log_file=log_file, wait_timeout=3600))


@pytest.fixture
def config(sim, tmp_path):
    return autoscaler_config(sim, 'as', 'gpu-[1-8]', str(tmp_path / 'state'), str(tmp_path / 'log' / 'autoscaler.log'))


@pytest.fixture
def scaler(config):
    return _autoscale.Autoscaler(config)


# Hostlists -----------------------------------------------------------------------------------------

@pytest.mark.parametrize('expr, names', [
    ('gpu-[1-4,7]', ['gpu-1', 'gpu-2', 'gpu-3', 'gpu-4', 'gpu-7']),
    ('gpu-1', ['gpu-1']),
    ('gpu-[01-03]', ['gpu-01', 'gpu-02', 'gpu-03']),
    ('gpu-[1-2],cpu-5,gpu-2', ['gpu-1', 'gpu-2', 'cpu-5']),
    ('r[1-2]n[3,5]', ['r1n3', 'r1n5', 'r2n3', 'r2n5']),
    ('gpu-[9-11].ib', ['gpu-9.ib', 'gpu-10.ib', 'gpu-11.ib']),
    ('', []),
])
def test_expand_hostlist(expr, names):
    assert _hostlist.expand_hostlist(expr) == names


@pytest.mark.parametrize('bad', ['gpu-[1-4', 'gpu-1]', 'gpu-[4-1]', 'gpu-[a-b]', 'gpu 1'])
def test_bad_hostlists_are_refused(bad):
    with pytest.raises(InputError, match='^hostlist: '):
        _hostlist.expand_hostlist(bad)


@pytest.mark.parametrize('names, expr', [
    (['gpu-7', 'gpu-2', 'gpu-1', 'gpu-3', 'gpu-4'], 'gpu-[1-4,7]'),
    (['gpu-1'], 'gpu-1'),
    (['gpu-01', 'gpu-02', 'gpu-10'], 'gpu-[01-02],gpu-10'),
    (['gpu-1', 'gpu-2', 'gpu-10', 'gpu-9'], 'gpu-[1-2,9-10]'),
    (['login', 'gpu-3', 'gpu-4', 'cpu-1'], 'login,cpu-1,gpu-[3-4]'),
])
def test_compress_hostlist_round_trips(names, expr):
    assert _hostlist.compress_hostlist(names) == expr
    assert sorted(_hostlist.expand_hostlist(expr)) == sorted(names)


def test_config_names_what_is_missing():
    with pytest.raises(InputError, match='config: subnet_id, instance_configuration_id missing'):
        _autoscale.check_config(dict(cluster_name='a', compartment_id='c', availability_domain='ad', nodes='gpu-1'))


# Resume / suspend against the simulator ------------------------------------------------------------

def test_a_policy_without_the_listing_of_private_ips_reads_each_vnic(sim, scaler):
    sim.faults.add('GET /privateIps', status=404, code='NotAuthorizedOrNotFound')
    mapping = scaler.resume('gpu-[1-2]')
    assert all(m['private_ip'].startswith('10.0.0.') for m in mapping) and sim.calls['GET /vnics/{vnicId}'] == 2
    assert [sim.state.get(m['id'])['freeformTags']['ocigpu-slurm-node'] for m in mapping] == ['gpu-1', 'gpu-2']


def test_resume_creates_one_cluster_network_and_maps_names_to_ips(sim, scaler, config):
    mapping = scaler.resume('gpu-[1-2]')
    assert [m['name'] for m in mapping] == ['gpu-1', 'gpu-2']
    assert all(m['private_ip'].startswith('10.0.0.') for m in mapping) and len({m['private_ip'] for m in mapping}) == 2
    assert len({m['cluster_network_id'] for m in mapping}) == 1 and all(m['hostname'] for m in mapping)
    cns = live(sim, 'cluster_networks')
    assert len(cns) == 1 and cns[0]['lifecycleState'] == 'RUNNING'
    assert cns[0]['freeformTags'] == {'ocigpu-cluster': 'as', 'ocigpu-slurm-nodes': 'gpu-[1-2]', 'ocigpu-autoscaler': 'true'}
    assert cns[0]['displayName'] == 'as-gpu-1-2'
    instances = gpu_instances(sim)
    assert sorted(i['id'] for i in instances) == sorted(m['id'] for m in mapping)
    assert all(i['lifecycleState'] == 'RUNNING' for i in instances)
    # each instance carries its Slurm name, for the node to read from the metadata service
    for m in mapping:
        stored = sim.state.get(m['id'])
        assert stored['freeformTags']['ocigpu-slurm-node'] == m['name'] and stored['displayName'] == 'as-' + m['name']
        assert stored['freeformTags']['ocigpu-cluster'] == 'as'
        request = urllib.request.Request('%s/_imds/%s/opc/v2/instance/' % (sim.endpoint, m['id']),
                                         headers={'Authorization': 'Bearer Oracle'})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.load(answer)['freeformTags']['ocigpu-slurm-node'] == m['name']
    # about OCI's time for a cluster network: the simulated clock moved, the wall clock did not
    assert sim.clock.now() > 60


def test_repeated_resume_adopts_and_launches_nothing(sim, scaler):
    first = scaler.resume('gpu-[1-2]')
    sim.calls.reset()
    again = _autoscale.Autoscaler(scaler.config).resume('gpu-[1-2]')
    assert again == first and mutations(sim) == 0
    assert len(live(sim, 'cluster_networks')) == 1 and len(gpu_instances(sim)) == 2
    # a subset of an existing cluster network is also adopted
    assert _autoscale.Autoscaler(scaler.config).resume('gpu-2') == first[1:] and mutations(sim) == 0


def test_resume_while_provisioning_waits_on_the_same_cluster_network(sim, config):
    no_wait = _autoscale.Autoscaler(config)
    no_wait.ops.wait = False
    no_wait._map = lambda cn, names: []  # pylint: disable=protected-access
    no_wait.resume('gpu-[3-4]')
    assert live(sim, 'cluster_networks')[0]['lifecycleState'] == 'PROVISIONING'
    mapping = _autoscale.Autoscaler(config).resume('gpu-[3-4]')
    assert len(live(sim, 'cluster_networks')) == 1 and [m['name'] for m in mapping] == ['gpu-3', 'gpu-4']
    assert sim.calls['POST /clusterNetworks'] == 1


def test_suspend_terminates_and_leaves_nothing_billable(sim, scaler):
    scaler.resume('gpu-[1-2]')
    scaler.resume('gpu-5')
    assert len(live(sim, 'cluster_networks')) == 2 and len(gpu_instances(sim)) == 3
    result = scaler.suspend('gpu-[1-2]')
    assert len(result['terminated']) == 1 and result['waiting'] == []
    assert len(live(sim, 'cluster_networks')) == 1 and len(gpu_instances(sim)) == 1
    scaler.suspend('gpu-5')
    assert live(sim, 'cluster_networks') == [] and gpu_instances(sim) == []
    sim.calls.reset()
    assert scaler.suspend('gpu-[1-8]') == dict(terminated=[], waiting=[]) and mutations(sim) == 0
    # names with no cluster network stay released until a resume takes them back
    assert scaler.state.read()['released'] == ['gpu-%d' % i for i in range(1, 9)]


def test_partial_suspend_waits_for_the_rest_of_the_cluster_network(sim, scaler):
    scaler.resume('gpu-[1-3]')
    partial = scaler.suspend('gpu-[1-2]')
    assert partial['terminated'] == [] and partial['waiting'][0]['in_use'] == 'gpu-3'
    assert len(gpu_instances(sim)) == 3
    rest = scaler.suspend('gpu-3')
    assert len(rest['terminated']) == 1 and gpu_instances(sim) == []
    assert scaler.state.read()['released'] == []


def test_resume_after_partial_suspend_takes_the_names_back(sim, scaler):
    first = scaler.resume('gpu-[1-2]')
    scaler.suspend('gpu-1')
    assert scaler.state.read()['released'] == ['gpu-1']
    assert scaler.resume('gpu-1') == first[:1]
    assert scaler.state.read()['released'] == []
    assert scaler.suspend('gpu-2')['terminated'] == []  # gpu-1 is in use again
    assert len(gpu_instances(sim)) == 2


def test_a_suspend_of_one_node_never_ends_the_cluster_network_a_resume_of_another_just_took(sim, config):
    # gpu-2 of gpu-[1-2] is released; a suspend of gpu-1 reads the released names while a resume of gpu-2
    # (another service thread or program) takes gpu-2 back and adopts the cluster network.
    first = _autoscale.Autoscaler(config)
    first.resume('gpu-[1-2]')
    first.suspend('gpu-2')
    suspending, resuming = _autoscale.Autoscaler(config), _autoscale.Autoscaler(config)
    mapped = []
    resume = threading.Thread(target=lambda: mapped.extend(resuming.resume('gpu-2')))
    listing = suspending.cluster_networks

    def list_after_the_resume():
        # The suspend has marked gpu-1 released; the resume runs now, given two seconds to end.
        resume.start()
        resume.join(2)
        return listing()
    suspending.cluster_networks = list_after_the_resume
    suspending.suspend('gpu-1')
    resume.join(30)
    assert not resume.is_alive()
    instance, = mapped
    live_ids = [i['id'] for i in gpu_instances(sim)]
    # The resume waited for the suspend's decision: the old cluster network ended, gpu-2 got a new one.
    assert live_ids == [instance['id']], (instance, live_ids)
    assert first.state.read()['released'] == []


def test_out_of_host_capacity_is_reported_and_cleaned_up(sim, scaler):
    sim.capacity.set(SHAPE, 1)
    with pytest.raises(_autoscale.ResumeFailed) as err:
        scaler.resume('gpu-[1-2]')
    assert 'Out of host capacity.' in err.value.message and err.value.details['cleaned_up']
    assert err.value.details['work_request_id']
    assert live(sim, 'cluster_networks') == [] and gpu_instances(sim) == []


def test_max_nodes_per_cluster_network_splits_a_request(sim, config):
    config = dict(config, max_nodes_per_cluster_network=2)
    mapping = _autoscale.Autoscaler(config).resume('gpu-[1-5]')
    assert len(mapping) == 5 and len(live(sim, 'cluster_networks')) == 3
    assert sorted(c['freeformTags']['ocigpu-slurm-nodes'] for c in live(sim, 'cluster_networks')) == [
        'gpu-5', 'gpu-[1-2]', 'gpu-[3-4]']


def test_names_outside_the_cloud_nodes_are_refused_before_any_call(sim, scaler):
    sim.calls.reset()
    with pytest.raises(InputError, match=r'hostlist: gpu-\[9-10\] not among the autoscaled nodes gpu-\[1-8\]'):
        scaler.resume('gpu-[8-10]')
    assert mutations(sim) == 0


def test_other_clusters_networks_are_left_alone(sim, scaler):
    tags = {'ocigpu-cluster': 'other', 'ocigpu-slurm-nodes': 'gpu-[1-2]'}
    other = sim.seed_cluster('other', 2, shape=SHAPE, freeform_tags=tags)
    scaler.resume('gpu-[1-2]')
    scaler.suspend('gpu-[1-2]')
    assert [c['id'] for c in live(sim, 'cluster_networks')] == [other['id']]


# The program's command line ----------------------------------------------------------------------

def write_config(tmp_path, config):
    path = tmp_path / 'autoscaler.json'
    data = dict((k, v) for k, v in config.items() if k != 'node_names')
    data['scontrol'] = '/usr/bin/scontrol'
    path.write_text(json.dumps(data))
    return str(path)


def test_program_resume_sets_addresses_then_suspend(sim, tmp_path, config):
    path = write_config(tmp_path, config)
    slurm = Slurm(path)  # the program hands over, the service carries it out
    ran = slurm.commands
    assert slurm('resume', 'gpu-[1-2]') == 0
    ips = sorted(i['id'] for i in gpu_instances(sim))
    # Both addresses in one command, paired by position as slurmctld pairs them.
    assert len(ips) == 2 and len(ran) == 1
    assert ran[0][:3] == ['/usr/bin/scontrol', 'update', 'nodename=gpu-1,gpu-2']
    addrs, hosts = ran[0][3].split('=')[1].split(','), ran[0][4].split('=')[1].split(',')
    assert all(a.startswith('10.0.0.') for a in addrs) and len(set(addrs)) == 2
    assert ran[0][4].startswith('nodehostname=') and len(hosts) == 2
    log_text = open(config['log_file']).read()
    assert 'resume gpu-[1-2]' in log_text and 'RUNNING' in log_text

    out = io.StringIO()
    assert _autoscale_cli.main(['--config', path, 'status'], run=ran.append, out=out) == 0
    assert json.loads(out.getvalue())[0]['nodes'] == 'gpu-[1-2]'

    assert slurm('suspend', 'gpu-[1-2]') == 0
    assert gpu_instances(sim) == [] and len(ran) == 1  # the suspend runs no scontrol


def test_program_capacity_failure_powers_the_nodes_down(sim, tmp_path, config):
    sim.capacity.set(SHAPE, 0)
    path = write_config(tmp_path, config)
    slurm = Slurm(path)
    ran = slurm.commands
    assert slurm('resume', 'gpu-[1-2]') == 1
    assert ran == [['/usr/bin/scontrol', 'update', 'nodename=gpu-[1-2]', 'state=POWER_DOWN_FORCE',
                    ran[0][4]]]
    assert ran[0][4].startswith('reason=ocigpu-autoscaler: ') and 'Out of host capacity.' in ran[0][4]
    assert live(sim, 'cluster_networks') == [] and gpu_instances(sim) == []
    assert 'Out of host capacity.' in open(config['log_file']).read()


def test_program_usage_and_bad_config(tmp_path, capsys):
    assert _autoscale_cli.main(['resume']) == 2
    assert 'usage:' in capsys.readouterr().err
    missing = tmp_path / 'none.json'
    assert _autoscale_cli.main(['--config', str(missing), 'suspend', 'gpu-1']) == 2
    assert 'config: cannot read' in capsys.readouterr().err


def test_node_setup_command_gets_the_mapping(sim, tmp_path, config, monkeypatch):
    monkeypatch.delenv('OCIGPU_AUTOSCALER_NODES', raising=False)
    config = dict(config, node_setup_command=['/usr/local/sbin/setup-nodes', '--limit'])
    path = write_config(tmp_path, config)
    seen = []

    def run(argv, env=None, **_kwargs):  # the service runs the command with subprocess.run
        seen.append((argv, env.get('OCIGPU_AUTOSCALER_NODES')))
        return subprocess.CompletedProcess(argv, 0, b'')
    monkeypatch.setattr(subprocess, 'run', run)
    assert Slurm(path)('resume', 'gpu-3') == 0
    argv, env = seen[-1]
    assert argv == ['/usr/local/sbin/setup-nodes', '--limit', 'gpu-3']
    assert json.loads(env)[0]['name'] == 'gpu-3'
