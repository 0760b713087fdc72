# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight (issue 16, part 1): each bad plan of the issue is refused with 0 mutating calls and
every problem named in one message; a good plan passes; capacity and service limits come from OCI's
capacity report and the Limits service, as the simulator serves them.

Mutating calls are the POST, PUT and DELETE requests the simulator received, less the capacity
report's POST /computeCapacityReports: OCI spells that read as a POST, and it creates nothing (the
simulator stores nothing for it; test_the_capacity_report_is_the_only_post checks both)."""
from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from ansible_collections.ocigpu.cluster.plugins.module_utils import _preflight
from ansible_collections.ocigpu.cluster.plugins.filter.capacity import capacity_sources as capacity_sources_filter
from ansible_collections.ocigpu.cluster.plugins.modules import preflight

GPU_IMAGE = 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'
CAPACITY_REPORT = 'POST /computeCapacityReports'
GPU4_LIMIT = 'gpu-bm-gpu4-8-count'  # the simulator's quotaNames entry of BM.GPU4.8 (OCI names it gpu4-count)


def mutations(sim):
    return sum(sim.calls.count(p) for p in ('POST *', 'PUT *', 'DELETE *')) - sim.calls[CAPACITY_REPORT]


def warnings(result):
    """The warnings' texts (ansible-core 2.19 returns each as a dict with its event)."""
    return [w if isinstance(w, str) else w['event']['msg'] for w in result.get('warnings', [])]


def private_key_text():
    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()).decode('ascii')


@pytest.fixture
def plan(ocisim, ssh_key):
    """A good plan: the cluster vars' defaults with two BM.GPU4.8 nodes on a cluster network."""
    return dict(cluster_name='c1', compartment_id=ocisim.compartment_id, bastion_shape='VM.Standard.E5.Flex',
                bastion_ocpus=2, bastion_memory_gb=16, bastion_image_os='Oracle Linux', bastion_image_os_version='9',
                gpu_shape='BM.GPU4.8', gpu_image_name=GPU_IMAGE, gpu_node_count=2, gpu_boot_volume_gb=200,
                ssh_authorized_keys=[ssh_key])


@pytest.fixture
def check(run, ocisim, plan):
    """Run the preflight on the plan with some variables changed; assert it read only."""
    def _check(fail=False, check_mode=False, **changes):
        if changes.get('capacity_sources') and 'kind' not in changes['capacity_sources'][0]:
            # As provision.yml hands them over: through the capacity_sources filter (checked and named).
            changes['capacity_sources'] = capacity_sources_filter(changes['capacity_sources'])
        args = dict(plan, **changes)
        args = dict((k, v) for k, v in args.items() if v is not None)
        ocisim.calls.reset()
        result = run(preflight, args, check=check_mode, fail=fail)
        print(result.get('msg') or result['problems'])
        assert mutations(ocisim) == 0, ocisim.calls.as_dict()
        assert not result['changed']
        return result
    return _check


def test_a_good_plan_passes_and_reports_what_oci_said(check, ocisim):
    result = check()
    assert result['problems'] == [] and result['skipped'] == []
    checks = result['checks']
    ad = sorted(ocisim.availability_domains)[0]
    assert checks['availability_domain'] == ad
    assert checks['bastion']['image']['display_name'] == 'Oracle-Linux-9.6-2025.10.23-0'
    assert checks['bastion']['exists'] is False
    assert checks['gpu']['image']['display_name'] == GPU_IMAGE
    assert checks['gpu']['kind'] == 'cluster_network' and checks['gpu']['new'] == 2 and checks['gpu']['existing'] == 0
    assert checks['ssh_keys'] == 1
    gpu = [c for c in checks['capacity'] if c['shape'] == 'BM.GPU4.8'][0]
    assert (gpu['available_count'], gpu['availability_status'], gpu['new']) == (64, 'AVAILABLE', 2)
    limits = dict((c['limit'], c) for c in checks['limits'])
    assert limits[GPU4_LIMIT]['needed'] == 16 and limits[GPU4_LIMIT]['available'] == 512
    assert limits['standard-e5-core-count']['needed'] == 2 and limits['standard-e5-memory-count']['needed'] == 16
    assert ocisim.calls[CAPACITY_REPORT] == 1
    assert ocisim.calls['GET /services/{serviceName}/limits/{limitName}/resourceAvailability'] == 3


def test_check_mode_runs_the_same_checks(check, ocisim):
    good = check(check_mode=True)
    assert good['problems'] == [] and good['checks']['capacity']
    bad = check(check_mode=True, fail=True, gpu_boot_volume_gb=10)
    assert bad['problems'] == ['gpu_boot_volume_gb: 10 GB; OCI boot volumes are 50 to 32768 GB (32 TB)']


def test_the_capacity_report_is_the_only_post(check, ocisim):
    before = dict((kind, len(getattr(ocisim.state, kind))) for kind in
                  ('instances', 'vcns', 'subnets', 'instance_configurations', 'cluster_networks', 'work_requests'))
    check()
    assert sum(ocisim.calls.count(p) for p in ('POST *', 'PUT *', 'DELETE *')) == ocisim.calls[CAPACITY_REPORT] == 1
    after = dict((kind, len(getattr(ocisim.state, kind))) for kind in before)
    assert after == before


def _user_data_file(tmp_path, size):
    path = tmp_path / 'cloud-init.sh'
    path.write_bytes(b'#!/bin/sh\n' + b'x' * size)
    return str(path)


# Each bad input of the issue: (plan changes, the variable the problem names, text in the problem).
CASES = {
    'unknown gpu_shape': (dict(gpu_shape='BM.GPU.X9000.8'), 'gpu_shape', 'unknown to this collection'),
    'unknown gpu image': (dict(gpu_image_name='Oracle-Linux-6-GPU'), 'gpu_image_name', 'no available image'),
    'boot volume 10': (dict(gpu_boot_volume_gb=10), 'gpu_boot_volume_gb', '50 to 32768'),
    'boot volume 40000': (dict(gpu_boot_volume_gb=40000), 'gpu_boot_volume_gb', '50 to 32768'),
    'user data over 32 KB': ('user_data', 'gpu_user_data_file', 'OCI takes at most 32000'),
    'wrong availability domain': (dict(availability_domain='Abcd:AP-TOKYO-1-AD-9'), 'availability_domain',
                                  'is not an availability domain'),
    'unknown bastion_shape': (dict(bastion_shape='VM.Standard.X9.Flex'), 'bastion_shape', "not in the collection's shape table"),
    'GPU shape as bastion': (dict(bastion_shape='VM.GPU.A10.1'), 'bastion_shape', 'CPU VM shape'),
    'key file holding no key': ('no_key_file', 'ssh_public_key_file', 'holds no OpenSSH public key'),
    'private key file': ('private_key_file', 'ssh_public_key_file', 'PRIVATE key'),
    'private key in the list': ('private_key_list', 'ssh_authorized_keys[0]', 'PRIVATE key'),
    'no key at all': (dict(ssh_authorized_keys=[]), 'ssh_authorized_keys', 'no SSH public key'),
    'flex ocpus -1': (dict(bastion_ocpus=-1), 'bastion_ocpus', 'positive number of OCPUs'),
    'flex ocpus 500': (dict(bastion_ocpus=500), 'bastion_ocpus', '500; VM.Standard.E5.Flex takes 1 to 94 OCPUs'),
    'flex memory per ocpu': (dict(bastion_memory_gb=200), 'bastion_memory_gb', 'GB per OCPU'),
    'GPU-only image on a non-GPU shape': (dict(gpu_shape='VM.Standard.E5.Flex'), 'gpu_image_name',
                                          'does not run on VM.Standard.E5.Flex'),
    'non-RDMA shape on a cluster network': (dict(gpu_shape='VM.GPU.A10.1'), 'gpu_shape', 'cannot join an RDMA cluster network'),
    'node count 10000': (dict(gpu_node_count=10000), 'gpu_node_count', "capacity report shows 64 available"),
    'node count 65 beyond capacity': (dict(gpu_node_count=65), 'gpu_node_count', "capacity report shows 64 available"),
    'node count 0 without autoscaling': (dict(gpu_node_count=0), 'gpu_node_count', 'at least 1'),
    'autoscaling with single mode': (dict(autoscaling=True, gpu_cluster_mode='single'), 'gpu_cluster_mode', 'autoscaling takes'),
    'autoscaling with a user data file': ('autoscaling_user_data', 'gpu_user_data_file', 'not with autoscaling'),
    # Issue 28: the same checks as the modules (one function each).
    'empty cluster_name': (dict(cluster_name=''), 'cluster_name', 'empty; name the cluster'),
    'cluster_name making names over 255': (dict(cluster_name='c' * 240), 'cluster_name', 'OCI takes at most 255'),
    'availability domain of another region': (dict(availability_domain='Abcd:EU-FRANKFURT-1-AD-1'), 'availability_domain',
                                              'is not an availability domain of region ap-tokyo-1'),
    'flex memory beyond the shape': (dict(bastion_ocpus=20, bastion_memory_gb=4000), 'bastion_memory_gb',
                                     'VM.Standard.E5.Flex takes 1 to 1049 GB of memory'),
    'flex memory -1': (dict(bastion_memory_gb=-1), 'bastion_memory_gb', 'positive number of GB of memory'),
    # Issue 33: placement asked where OCI cannot honour it.
    'placement for a single instance': (dict(gpu_node_count=1, gpu_placement_constraint='SINGLE_BLOCK'),
                                        'gpu_placement_constraint', 'only for a cluster network'),
    'network blocks without their island': (
        dict(gpu_network_block_ids=['ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaa']), 'gpu_network_block_ids',
        'needs gpu_hpc_island_id'),
    'an island that is not one': (dict(gpu_hpc_island_id='ocid1.subnet.oc1.ap-tokyo-1.aaaa'), 'gpu_hpc_island_id',
                                  'is the OCID of a subnet, not of a computehpcisland'),
}


def _changes(kind, tmp_path):
    if isinstance(kind, dict):
        return kind
    if kind == 'user_data':
        return dict(gpu_user_data_file=_user_data_file(tmp_path, 24001))
    if kind == 'autoscaling_user_data':
        return dict(autoscaling=True, gpu_user_data_file=_user_data_file(tmp_path, 100))
    if kind == 'no_key_file':
        path = tmp_path / 'id_ed25519.pub'
        path.write_text('this file was meant to hold my key\n')
        return dict(ssh_authorized_keys=[], ssh_public_key_file=str(path))
    if kind == 'private_key_file':
        path = tmp_path / 'id_ed25519'
        path.write_text(private_key_text())
        return dict(ssh_authorized_keys=[], ssh_public_key_file=str(path))
    return dict(ssh_authorized_keys=[private_key_text()])


@pytest.mark.parametrize('name', sorted(CASES))
def test_bad_plan_is_refused_before_any_mutation(name, check, tmp_path):
    kind, option, text = CASES[name]
    result = check(fail=True, **_changes(kind, tmp_path))
    named = [p for p in result['problems'] if p.startswith(option + ':') or p.startswith(option + ' (')]
    assert named and any(text in p for p in named), result['problems']
    assert all(p in result['msg'] for p in result['problems'])


def test_node_count_10000_is_beyond_capacity_and_limit(check):
    result = check(fail=True, gpu_node_count=10000)
    assert len(result['problems']) == 2, result['problems']
    capacity, limit = result['problems']
    assert '10000 new BM.GPU4.8 node(s)' in capacity and '64 available there (AVAILABLE)' in capacity
    assert ('need 80000 GPUs of the service limit %s' % GPU4_LIMIT) in limit and 'reports 512 available' in limit


def test_a_private_key_is_never_repeated(check, tmp_path):
    key = private_key_text()
    path = tmp_path / 'id_ed25519'
    path.write_text(key)
    result = check(fail=True, ssh_authorized_keys=[key], ssh_public_key_file=str(path))
    body = ''.join(key.strip().splitlines()[1:-1])
    text = json.dumps(result)
    assert body[:40] not in text and body[-40:] not in text
    assert len([p for p in result['problems'] if 'PRIVATE key' in p]) == 2


@pytest.mark.parametrize('text, wanted', [
    ('', 'holds no key'),
    ('# my key\n', 'only comments'),
    ('---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n---- END SSH2 PUBLIC KEY ----', 'ssh-keygen -i'),
    ('ssh-rsa not-base64!!', 'not valid base64'),
    ('ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIBdU9qg2T2Ew6rWq7cW9nP5a0dXq3w1mC0p9QoFv2oKk', 'key data says ssh-ed25519'),
    ('PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none', 'PRIVATE key'),
])
def test_key_problems(text, wanted):
    assert wanted in _preflight.key_problem(text)


def test_two_keys_in_one_entry_are_named(ssh_key):
    assert 'holds 2 lines' in _preflight.key_problem(ssh_key + '\n' + ssh_key)
    assert _preflight.key_problem('# laptop\n' + ssh_key + '\n') is None


def test_every_problem_of_a_plan_is_listed_in_one_message(check, tmp_path):
    result = check(fail=True, gpu_shape='BM.GPU.X9000.8', gpu_image_name='nope', gpu_boot_volume_gb=40000,
                   gpu_user_data_file=_user_data_file(tmp_path, 30000), bastion_shape='VM.Standard.X9.Flex',
                   availability_domain='Abcd:AP-TOKYO-1-AD-9', ssh_authorized_keys=['hello', private_key_text()])
    options = [p.split(':')[0] for p in result['problems']]
    assert options == ['bastion_shape', 'gpu_shape', 'gpu_boot_volume_gb', 'gpu_user_data_file',
                       'ssh_authorized_keys[0]', 'ssh_authorized_keys[1]', 'availability_domain', 'gpu_image_name']
    assert result['msg'].startswith('preflight: 8 problems in the cluster plan, found before anything was created: (1) ')
    for n, problem in enumerate(result['problems'], 1):
        assert '(%d) %s' % (n, problem) in result['msg']
    assert result['skipped'] == ['capacity and limits: not checked without a valid availability domain']


def test_an_unknown_image_is_named_with_the_newest_gpu_images(check):
    result = check(fail=True, gpu_image_name='Oracle-Linux-9.6-GPU')
    assert result['problems'] == [
        "gpu_image_name: no available image is named 'Oracle-Linux-9.6-GPU' in the compartment or among the platform "
        "images; the newest images for BM.GPU4.8: Canonical-Ubuntu-22.04-Gen2-GPU-2025.10.31-0, " + GPU_IMAGE +
        ", Oracle-Linux-9.5-Gen2-GPU-2025.06.17-0"]


def test_a_boot_volume_smaller_than_the_image_is_refused(check):
    result = check(fail=True, gpu_boot_volume_gb=50)
    assert result['problems'] == ['gpu_boot_volume_gb: 50 GB is smaller than the image %s (55000 MB); a boot volume '
                                  'must hold its image' % GPU_IMAGE]


def test_an_unknown_compartment_is_one_problem(check):
    result = check(fail=True, compartment_id='ocid1.compartment.oc1..nope')
    assert [p.split(':')[0] for p in result['problems']] == ['compartment_id']
    assert '404' in result['problems'][0]


# Capacity and limits -------------------------------------------------------------------------------------

def test_a_plan_larger_than_capacity_is_refused_with_what_oci_reports(check, ocisim):
    ocisim.capacity.set('BM.GPU4.8', 3)
    result = check(fail=True, gpu_node_count=4)
    assert result['problems'] == [
        "gpu_node_count: 4 new BM.GPU4.8 node(s) wanted in %s (4 planned, 0 exist), but OCI's capacity report shows "
        "3 available there (AVAILABLE)" % sorted(ocisim.availability_domains)[0]]
    ocisim.capacity.set('BM.GPU4.8', 0)
    result = check(fail=True, gpu_node_count=4)
    assert "shows 0 available there (OUT_OF_HOST_CAPACITY)" in result['problems'][0]


def test_with_enough_capacity_it_passes(check, ocisim):
    ocisim.capacity.set('BM.GPU4.8', 4)
    result = check(gpu_node_count=4)
    assert result['checks']['capacity'][-1]['available_count'] == 4


def test_nodes_the_cluster_has_are_not_counted_twice(check, ocisim):
    """A re-run, or a resize from 2 to 4 nodes, needs only the 2 new ones."""
    ad = sorted(ocisim.availability_domains)[0]
    ocisim.capacity.set('BM.GPU4.8', 4)
    ocisim.seed_instances(2, compartments=[ocisim.compartment_id], shape='BM.GPU4.8', availability_domain=ad,
                          freeform_tags={'ocigpu-cluster': 'c1', 'ocigpu-role': 'gpu'})
    ocisim.seed_instances(1, compartments=[ocisim.compartment_id], shape='VM.Standard.E5.Flex', availability_domain=ad,
                          freeform_tags={'ocigpu-cluster': 'c1', 'ocigpu-role': 'bastion'})
    result = check(gpu_node_count=4)
    assert result['checks']['gpu']['existing'] == 2 and result['checks']['gpu']['new'] == 2
    assert result['checks']['bastion']['exists'] is True
    assert [c['shape'] for c in result['checks']['capacity']] == ['BM.GPU4.8']
    assert result['checks']['capacity'][0]['available_count'] == 2
    refused = check(fail=True, gpu_node_count=5)
    assert '3 new BM.GPU4.8 node(s) wanted' in refused['problems'][0] and '(5 planned, 2 exist)' in refused['problems'][0]


def test_a_plan_beyond_the_service_limit_is_refused(check, ocisim):
    ocisim.set_limit(GPU4_LIMIT, 16)
    result = check(fail=True, gpu_node_count=4)
    assert result['problems'] == [
        "gpu_node_count: 4 new BM.GPU4.8 node(s) need 32 GPUs of the service limit %s in %s; OCI's Limits service "
        "reports 16 available (0 used in the compartment): ask for a limit increase or plan less"
        % (GPU4_LIMIT, sorted(ocisim.availability_domains)[0])]
    check(gpu_node_count=2)


def test_a_shared_home_must_fit_file_storages_limits_unless_the_cluster_has_it(check, ocisim, run):
    """Issue 31, point 1: with shared_home: fss, a new file system and mount target must fit File Storage's
    limits in the availability domain (OCI's default: two mount targets per AD)."""
    from ansible_collections.ocigpu.cluster.plugins.modules import file_storage, network

    ad = sorted(ocisim.availability_domains)[0]
    result = check(shared_home='fss')
    assert [(c['limit'], c['exists'], c['available']) for c in result['checks']['shared_home']] == [
        ('file-system-count', False, 100), ('mount-target-count', False, 2)]
    assert check()['checks']['shared_home'] == []
    # Two other clusters hold the two mount targets of the AD: a third is refused before anything is made.
    for other in ('o1', 'o2'):
        net = run(network, dict(cluster_name=other, compartment_id=ocisim.compartment_id, ssh_source_cidrs=['203.0.113.0/24']))
        run(file_storage, dict(cluster_name=other, compartment_id=ocisim.compartment_id, availability_domain=ad,
                               subnet_id=net['network']['private_subnet_id'], allowed_cidrs=['10.0.0.0/16']))
    result = check(fail=True, shared_home='fss')
    assert result['problems'] == [
        "shared_home: a new mount target needs 1 of File Storage's service limit mount-target-count in %s; OCI's "
        "Limits service reports 0 available (2 used in the compartment): ask for a limit increase, or remove one" % ad]
    # The cluster's own parts are adopted, not counted: with them in place the plan passes.
    ocisim.set_limit('mount-target-count', 3)
    net = run(network, dict(cluster_name='c1', compartment_id=ocisim.compartment_id, ssh_source_cidrs=['203.0.113.0/24']))
    run(file_storage, dict(cluster_name='c1', compartment_id=ocisim.compartment_id, availability_domain=ad,
                           subnet_id=net['network']['private_subnet_id'], allowed_cidrs=['10.0.0.0/16']))
    ocisim.set_limit('mount-target-count', 2)
    result = check(shared_home='fss')
    assert [(c['limit'], c['exists']) for c in result['checks']['shared_home']] == [
        ('file-system-count', True), ('mount-target-count', True)]


def test_the_bastion_counts_against_its_core_limit(check, ocisim):
    ocisim.set_limit('standard-e5-core-count', 1)
    result = check(fail=True)
    assert [p.split(':')[0] for p in result['problems']] == ['bastion_ocpus']
    assert 'need 2 OCPUs of the service limit standard-e5-core-count' in result['problems'][0]


def test_autoscaling_counts_the_peak_against_limits_and_warns_on_capacity(check, ocisim):
    ocisim.set_limit(GPU4_LIMIT, 32)
    result = check(fail=True, autoscaling=True, gpu_node_count=0, autoscaling_max_nodes=8)
    assert len(result['problems']) == 1 and '(with autoscaling_max_nodes 8)' in result['problems'][0]
    ocisim.set_limit(GPU4_LIMIT, 64)
    ocisim.capacity.set('BM.GPU4.8', 2)
    result = check(autoscaling=True, gpu_node_count=0, autoscaling_max_nodes=8)
    assert any('on-demand nodes may wait for capacity' in w for w in warnings(result))


def test_reads_oci_refuses_are_skipped_not_problems(check, ocisim):
    ocisim.set_limit(GPU4_LIMIT, None)
    ocisim.faults.add(route=CAPACITY_REPORT, status=404, code='NotAuthorizedOrNotFound', message='no permission')
    result = check()
    assert result['problems'] == []
    assert len(result['skipped']) == 2
    assert result['skipped'][0].startswith('capacity: OCI did not answer the compute capacity report (404')
    assert result['skipped'][1] == 'limit %s: OCI gives no resource availability for it (404 NotAuthorizedOrNotFound)' % GPU4_LIMIT
    assert all(s in warnings(result) for s in result['skipped'])


def test_an_api_error_is_an_error(check, ocisim):
    ocisim.faults.add(route='GET /shapes', status=500)
    result = check(fail=True, api_retries=1)
    assert result['msg'].startswith('OCI API error') and result['status'] == 500


def test_the_plan_says_where_oci_puts_the_nodes(check):
    assert check()['checks']['gpu']['placement'] == "one HPC island, any; OCI's default placement"
    island = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaisland'
    block = 'ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock'
    placed = check(gpu_placement_constraint='SINGLE_BLOCK', gpu_hpc_island_id=island, gpu_network_block_ids=[block])
    assert placed['checks']['gpu']['placement'] == (
        'one HPC island (%s); network blocks %s; placement constraint SINGLE_BLOCK' % (island, block))
    assert check(gpu_node_count=1)['checks']['gpu']['placement'] == 'a single instance: any host of the availability domain'


# Capacity sources (docs/capacity.md) ----------------------------------------------------------------------------
# The reservations are fakes of GetComputeCapacityReservation (the SDK's own models); the ADs' capacity is the
# simulator's capacity report.

R1 = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaar1'
R2 = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaar2'
ISLAND = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaisland'
BLOCK = 'ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock'


@pytest.fixture
def reservations(ocisim, monkeypatch):
    """{OCID: ComputeCapacityReservation} that get_compute_capacity_reservation answers; any other is a 404."""
    import oci
    from oci.core import models

    known = {}

    def get(_client, capacity_reservation_id, **_kwargs):
        if capacity_reservation_id not in known:
            raise oci.exceptions.ServiceError(404, 'NotAuthorizedOrNotFound', {},
                                              'Authorization failed or requested resource not found.')
        return oci.response.Response(200, {}, known[capacity_reservation_id], None)

    def add(ocid, reserved=2, used=0, shape='BM.GPU4.8', state='ACTIVE', ad=None, compartment=None, island=None, blocks=None):
        pin = models.ClusterConfigDetails(hpc_island_id=island, network_block_ids=blocks) if island else None
        known[ocid] = models.ComputeCapacityReservation(
            id=ocid, compartment_id=compartment or ocisim.compartment_id, lifecycle_state=state,
            availability_domain=ad or sorted(ocisim.availability_domains)[0], reserved_instance_count=reserved,
            used_instance_count=used, instance_reservation_configs=[models.InstanceReservationConfig(
                instance_shape=shape, reserved_count=reserved, used_count=used, cluster_config=pin)])
    monkeypatch.setattr(oci.core.ComputeClient, 'get_compute_capacity_reservation', get)
    return add


@pytest.fixture
def three_ads(ocisim):
    """The simulator with three availability domains (its region has one); asked before the plan, which
    reads the compartment of the fresh state."""
    saved = ocisim._ad_count  # pylint: disable=protected-access
    ocisim._ad_count = 3  # pylint: disable=protected-access
    ocisim.reset(drop_command_hook=True)
    yield sorted(ocisim.availability_domains)
    ocisim._ad_count = saved  # pylint: disable=protected-access
    ocisim.reset(drop_command_hook=True)


def _ads(ocisim):
    return sorted(ocisim.availability_domains)


def _rows(result):
    return [(r['name'], r['kind'], r['availability_domain'], r['hosts_free']) for r in result['checks']['capacity_sources']]


def test_without_sources_the_table_is_the_availability_domain(check, ocisim):
    result = check(gpu_node_count=2)
    ad = _ads(ocisim)[0]
    assert _rows(result) == [('ad-1', 'on-demand', ad, 64)]
    assert result['checks']['capacity_sources'][0]['note'] == 'capacity report: AVAILABLE'
    assert result['checks']['capacity_source'] == 'ad-1'
    assert ocisim.calls[CAPACITY_REPORT] == 1


def test_the_table_of_sources_and_the_first_that_holds_the_nodes(three_ads, check, ocisim, reservations):
    ad1, ad2 = _ads(ocisim)[:2]
    reservations(R1, reserved=2, used=1)
    ocisim.capacity.set('BM.GPU4.8', 0, availability_domain=ad1)
    ocisim.capacity.set('BM.GPU4.8', 12, availability_domain=ad2)
    sources = [dict(name='r1', capacity_reservation_id=R1), dict(availability_domain=ad1), dict(availability_domain=ad2)]
    result = check(gpu_node_count=4, capacity_sources=sources)
    assert result['problems'] == []
    # The reservation's AD is read from it.
    assert _rows(result) == [('r1', 'reservation', ad1, 1), ('ad-1', 'on-demand', ad1, 0), ('ad-2', 'on-demand', ad2, 12)]
    assert [r['note'] for r in result['checks']['capacity_sources']] == [
        'ACTIVE, 2 reserved, 1 used', 'capacity report: OUT_OF_HOST_CAPACITY', 'capacity report: AVAILABLE']
    assert result['checks']['capacity_source'] == 'ad-2'
    said = [w for w in warnings(result) if w.startswith('gpu_capacity_sources:')]
    assert said == ['gpu_capacity_sources: the first source that holds the 4 new node(s) is ad-2 (3rd of 3): '
                    'r1 (reservation, AP-TOKYO-1-AD-1): 1 free (ACTIVE, 2 reserved, 1 used); '
                    'ad-1 (on-demand, AP-TOKYO-1-AD-1): 0 free (capacity report: OUT_OF_HOST_CAPACITY)'.replace(
                        'AP-TOKYO-1-AD-1', ad1.split(':')[-1])]
    # Each AD's capacity report once; the plan's AD also for the bastion.
    assert ocisim.calls[CAPACITY_REPORT] == 3
    # The first source holds them: no warning.
    first = check(gpu_node_count=1, gpu_cluster_mode='cluster_network', capacity_sources=sources)
    assert first['checks']['capacity_source'] == 'r1'
    assert not [w for w in warnings(first) if w.startswith('gpu_capacity_sources:')]


def test_a_static_plan_no_source_holds_is_refused_with_the_table(three_ads, check, ocisim, reservations):
    ad1, ad2 = _ads(ocisim)[:2]
    reservations(R1, reserved=2, used=1)
    ocisim.capacity.set('BM.GPU4.8', 0, availability_domain=ad1)
    ocisim.capacity.set('BM.GPU4.8', 3, availability_domain=ad2)
    sources = [dict(name='r1', capacity_reservation_id=R1), dict(availability_domain=ad2)]
    result = check(fail=True, gpu_node_count=4, capacity_sources=sources)
    assert result['problems'] == [
        'gpu_node_count: 4 new BM.GPU4.8 node(s) wanted, but no capacity source holds them: r1 (reservation, %s): 1 free '
        '(ACTIVE, 2 reserved, 1 used); ad-2 (on-demand, %s): 3 free (capacity report: AVAILABLE)'
        % (ad1.split(':')[-1], ad2.split(':')[-1])]
    assert result['checks']['capacity_source'] is None
    # On-demand nodes alone: the table, no refusal; a warning when the sources hold fewer than the peak.
    ondemand = check(autoscaling=True, gpu_node_count=0, capacity_sources=sources)
    assert ondemand['problems'] == [] and _rows(ondemand)[1] == ('ad-2', 'on-demand', ad2, 3)
    assert ('autoscaling_max_nodes: at its peak the cluster adds 8 BM.GPU4.8 node(s); the capacity sources show 4 free '
            'now, so on-demand nodes may wait for capacity') in warnings(ondemand)


@pytest.mark.parametrize('given, reason', [
    (dict(state='CREATING'), 'it is CREATING, not ACTIVE'),
    (dict(compartment='ocid1.compartment.oc1..other'), 'it is in the compartment ocid1.compartment.oc1..other'),
    (dict(shape='BM.GPU.H100.8'), 'it reserves no BM.GPU4.8 host (its shapes: BM.GPU.H100.8)'),
    (dict(ad='other'), 'not in {ad1} as given'),
    (dict(island=ISLAND), 'its hosts are pinned to HPC island %s: set gpu_hpc_island_id' % ISLAND),
])
def test_a_reservation_that_cannot_hold_the_nodes_is_refused_with_the_reason(three_ads, check, ocisim, reservations, given, reason):
    ad1, ad2 = _ads(ocisim)[:2]
    if given.get('ad') == 'other':
        given = dict(given, ad=ad2)
    reservations(R1, **given)
    result = check(fail=True, capacity_sources=[dict(name='r1', capacity_reservation_id=R1, availability_domain=ad1),
                                                dict(availability_domain=ad1)])
    assert len(result['problems']) == 1, result['problems']
    problem = result['problems'][0]
    assert problem.startswith('gpu_capacity_sources[1] (r1): the capacity reservation %s cannot hold the BM.GPU4.8 '
                              'nodes: ' % R1), problem
    assert reason.format(ad1=ad1) in problem
    assert 'refused: ' in result['checks']['capacity_sources'][0]['note']


def test_a_reservation_pinned_to_the_plans_island_and_blocks_passes_another_is_refused(check, ocisim, reservations):
    reservations(R1, island=ISLAND, blocks=[BLOCK])
    sources = [dict(name='r1', capacity_reservation_id=R1)]
    placed = check(gpu_hpc_island_id=ISLAND, gpu_network_block_ids=[BLOCK], capacity_sources=sources)
    assert placed['checks']['capacity_sources'][0]['note'] == 'ACTIVE, 2 reserved, 0 used; HPC island %s, network blocks %s' % (
        ISLAND, BLOCK)
    other = 'ocid1.computehpcisland.oc1.ap-tokyo-1.aaaaother'
    refused = check(fail=True, gpu_hpc_island_id=other, capacity_sources=sources)
    assert 'its hosts are in the HPC island %s, and gpu_hpc_island_id is %s' % (ISLAND, other) in refused['problems'][0]
    block2 = 'ocid1.computenetworkblock.oc1.ap-tokyo-1.aaaablock2'
    refused = check(fail=True, gpu_hpc_island_id=ISLAND, gpu_network_block_ids=[block2], capacity_sources=sources)
    assert 'its hosts are in the network blocks %s, and gpu_network_block_ids has %s' % (BLOCK, block2) in refused['problems'][0]


def test_a_reservation_oci_will_not_read_is_a_problem_naming_it(check, ocisim, reservations):
    result = check(fail=True, capacity_sources=[dict(capacity_reservation_id=R2)])
    assert result['problems'] == [
        'gpu_capacity_sources[1] (reservation-1): OCI answers 404 NotAuthorizedOrNotFound for the capacity reservation %s: '
        'it does not exist, or this user may not read it (Authorization failed or requested resource not found.)' % R2]
    assert _rows(result) == [('reservation-1', 'reservation', None, None)]


def test_a_bad_source_is_refused_up_front(check, ocisim):
    ad1 = _ads(ocisim)[0]
    with pytest.raises(AnsibleFilterError, match=r'gpu_capacity_sources\[1\]: unknown key\(s\) availability_domian'):
        capacity_sources_filter([dict(availability_domian=ad1)])
    # Handed over without the filter: the module refuses a misspelt key too, as a problem of the plan.
    result = check(fail=True, capacity_sources=[dict(name='ad-1', kind='on-demand', availability_domian=ad1)])
    assert result['problems'][0].startswith('gpu_capacity_sources[1]: availability_domian; a source takes name, kind')
    result = check(fail=True, capacity_sources=[dict(availability_domain='Abcd:AP-TOKYO-1-AD-9')])
    assert result['problems'] == ['gpu_capacity_sources[1] (ad-9): Abcd:AP-TOKYO-1-AD-9 is not an availability domain of '
                                  'the compartment (%s)' % ', '.join(_ads(ocisim))]


def test_the_sources_as_the_filter_returns_them_are_taken(check, ocisim, reservations):
    reservations(R1)
    ad1 = _ads(ocisim)[0]
    sources = capacity_sources_filter([dict(capacity_reservation_id=R1), dict(availability_domain=ad1)], ad1)
    result = check(capacity_sources=sources)
    assert [r['name'] for r in result['checks']['capacity_sources']] == ['reservation-1', 'ad-1']
    assert result['checks']['capacity_source'] == 'reservation-1'


def test_a_reservation_of_the_simulator(check, ocisim):
    """The same read against the simulator's reservations (tests/ocisim), whose hosts leave the AD's on-demand
    capacity."""
    ad = _ads(ocisim)[0]
    ocisim.capacity.set('BM.GPU4.8', 5, availability_domain=ad)
    reservation = ocisim.create_capacity_reservation(ad, 'BM.GPU4.8', 3, display_name='r1')
    sources = [dict(name='r1', capacity_reservation_id=reservation['id']), dict(availability_domain=ad)]
    result = check(gpu_node_count=2, capacity_sources=sources)
    assert _rows(result) == [('r1', 'reservation', ad, 3), ('ad-1', 'on-demand', ad, 2)]
    assert result['checks']['capacity_source'] == 'r1'
    refused = check(fail=True, gpu_node_count=4, capacity_sources=sources)
    assert refused['problems'][0].startswith('gpu_node_count: 4 new BM.GPU4.8 node(s) wanted, but no capacity source holds them')
