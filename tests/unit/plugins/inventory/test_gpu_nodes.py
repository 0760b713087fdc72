# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.gpu_nodes, in process, with the real oci SDK against the simulator.

The plugin is loaded through ansible's plugin loader (so its documented options and doc fragments
apply) and parsed into a fresh InventoryData. Retry back-off sleeps on the simulator clock."""

from __future__ import annotations

import re
import sys

import pytest
import yaml

from tests.perf import inventory_bench as bench
from tests.unit import _collection_loader

PLUGIN = 'ocigpu.cluster.gpu_nodes'
_MU = 'ansible_collections.ocigpu.cluster.plugins.module_utils.'


def _plugin_loader():
    """Ansible's collection loader, installed once (tests/unit/_collection_loader.py)."""
    from ansible.plugins.loader import inventory_loader
    _collection_loader.install()
    return inventory_loader


class Result:
    """What a parse produced, in plain Python."""

    def __init__(self, inventory):
        self.inventory = inventory
        self.hosts = {name: dict(host.vars) for name, host in inventory.hosts.items()}
        self.groups = {name: sorted(h.name for h in group.hosts) for name, group in inventory.groups.items()}
        self.all_vars = dict(inventory.groups['all'].vars)

    def by_id(self):
        return {h['oci_instance_id']: dict(h, name=name) for name, h in self.hosts.items()}


@pytest.fixture
def inventory(ocisim, tmp_path, monkeypatch):
    """run(use_cache=True, **options) parses a gpu_nodes config pointing at the simulator; returns a Result."""
    from ansible.inventory.data import InventoryData
    from ansible.parsing.dataloader import DataLoader

    loader = _plugin_loader()
    # The plugin makes each cluster's ~/.ocigpu/<cluster>/ for its known_hosts file.
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    oci_mu = sys.modules.get(_MU + '_oci') or __import__(_MU + '_oci', fromlist=['CLOCK'])
    monkeypatch.setattr(oci_mu.CLOCK, 'sleep', ocisim.clock.sleep)
    monkeypatch.setattr(oci_mu.CLOCK, 'monotonic', ocisim.clock.now)
    warnings = []

    def run(use_cache=True, **options):
        config = dict(plugin=PLUGIN, **ocisim.auth_args())
        config.update(options)
        config = {k: v for k, v in config.items() if v is not None}  # None: leave the option unset
        path = tmp_path / 'test.gpu_nodes.yml'
        path.write_text(yaml.safe_dump(config))
        plugin = loader.get(PLUGIN)
        module = sys.modules[type(plugin).__module__]
        monkeypatch.setattr(module.display, 'warning', lambda msg, *a, **k: warnings.append(msg))
        data = InventoryData()
        plugin.parse(data, DataLoader(), str(path), cache=use_cache)
        if options.get('cache'):
            plugin.update_cache_if_changed()  # as ansible's InventoryManager does after a parse
        return Result(data)
    run.warnings = warnings
    return run


def _cluster(ocisim, name, size, compartment_id, index, **kw):
    return bench.seed_gpu_cluster(ocisim, name, size, compartment_id, index, **kw)


@pytest.fixture
def two_clusters(ocisim):
    """Two clusters: one in a compartment, one in its child (found through the subtree); CPU
    filler instances; a tagged CPU instance that is not a bastion; a stopped GPU node."""
    team = ocisim.add_compartment('team')['id']
    child = ocisim.add_compartment('team-child', team)['id']
    a = _cluster(ocisim, 'alpha', 3, team, 0)
    b = _cluster(ocisim, 'beta-2', 2, child, 1, shape='BM.GPU.H100.8')
    ocisim.seed_instances(12, [team, child], shape='VM.Standard.E5.Flex', name_prefix='cpu')
    ocisim.seed_instances(1, [team], shape='VM.Standard.E5.Flex', name_prefix='alpha-login',
                          freeform_tags={'ocigpu-cluster': 'alpha'}, subnet_id=a['public_subnet'])
    stopped = ocisim.seed_instances(1, [team], shape='BM.GPU4.8', name_prefix='alpha-old', state='STOPPED',
                                    freeform_tags={'ocigpu-cluster': 'alpha'}, subnet_id=a['private_subnet'])
    layout = dict(compartments=[team, child], clusters=[a, b])
    return dict(team=team, child=child, alpha=a, beta=b, layout=layout, stopped=stopped[0],
                truth=bench.expected_hosts(ocisim, layout))


def _check_truth(result, truth):
    found = {name: dict(h) for name, h in result.hosts.items()}
    bench.check_against_truth(found, truth)


def test_inventory_matches_the_simulator_exactly(ocisim, inventory, two_clusters):
    result = inventory()
    _check_truth(result, two_clusters['truth'])
    by_id = result.by_id()
    a, b = two_clusters['alpha'], two_clusters['beta']
    name = {iid: by_id[iid]['name'] for iid in by_id}

    assert result.groups['bastion'] == sorted(['alpha-bastion', 'beta-2-bastion'])
    assert result.groups['slurm_controller'] == result.groups['bastion']
    assert result.groups['gpu_nodes'] == sorted(name[i] for i in a['nodes'] + b['nodes'])
    assert result.groups['cluster_alpha'] == sorted([name[a['bastion']]] + [name[i] for i in a['nodes']])
    assert result.groups['cluster_beta_2'] == sorted([name[b['bastion']]] + [name[i] for i in b['nodes']])
    assert result.groups['cluster_network_alpha'] == sorted(name[i] for i in a['nodes'])
    assert result.groups['instance_pool_alpha_pool1'] == sorted(name[i] for i in a['nodes'])
    assert result.groups['shape_bm_gpu4_8'] == sorted(name[i] for i in a['nodes'])
    assert result.groups['shape_bm_gpu_h100_8'] == sorted(name[i] for i in b['nodes'])
    for iid, host in by_id.items():
        inst = ocisim.state.instances[iid]
        ad_group = 'ad_' + inst['availabilityDomain'].lower().replace(':', '_').replace('-', '_')
        assert host['name'] in result.groups[ad_group]
        fd_group = ad_group.replace('ad_', 'fd_', 1) + '_' + inst['faultDomain'].lower().replace('-', '_')
        assert host['name'] in result.groups[fd_group]
        assert host['oci_compartment_id'] == inst['compartmentId']
        assert host['oci_image']['operating_system'] == 'Oracle Linux'
        assert host['ansible_user'] == 'opc'

    node = by_id[b['nodes'][0]]
    assert node['oci_compartment_name'] == 'team-child'
    assert node['ocigpu_gpu_count'] == 8 and node['oci_shape'] == 'BM.GPU.H100.8'
    assert node['ocigpu_gpu_model'] and node['ocigpu_gpu_memory_gb'] > 0 and node['ocigpu_nvme_count'] >= 0
    alpha_node = by_id[a['nodes'][0]]
    assert alpha_node['ocigpu_rdma_interfaces'][0] == 'enp12s0f0' and len(alpha_node['ocigpu_rdma_interfaces']) == 16
    assert alpha_node['oci_cluster_network_name'] == 'alpha'
    assert alpha_node['oci_instance_pool_name'] == 'alpha-pool1'
    assert alpha_node['oci_public_ip'] is None
    # the stopped node and the tagged non-bastion CPU instance are not in the inventory
    assert two_clusters['stopped'] not in by_id
    assert len(by_id) == len(two_clusters['truth'])


def test_instances_listed_without_models_read_as_the_models_do(ocisim, inventory, two_clusters):
    """list_instances is read without the SDK's models (many instances, few kept); the hostvars are the
    ones the models give - oci_time_created included, in the models' datetime text."""
    import datetime
    import oci
    host = inventory().by_id()[two_clusters['alpha']['nodes'][0]]
    model = oci.core.ComputeClient(oci.config.from_file(ocisim.config_file, ocisim.profile),
                                   service_endpoint=ocisim.endpoint).get_instance(host['oci_instance_id']).data
    assert isinstance(model.time_created, datetime.datetime)
    assert host['oci_time_created'] == str(model.time_created)
    assert (host['oci_display_name'], host['oci_shape'], host['oci_freeform_tags'], host['oci_lifecycle_state']) == (
        model.display_name, model.shape, model.freeform_tags, model.lifecycle_state)


def test_call_count_grows_with_compartments_and_subnets_not_instances(ocisim, inventory):
    def count(nodes, filler):
        ocisim.reset()
        comps = [ocisim.add_compartment('c%d' % i)['id'] for i in range(3)]
        for c in range(2):
            _cluster(ocisim, 'k%d' % c, nodes, comps[c], c)
        if filler:
            ocisim.seed_instances(filler, comps, shape='VM.Standard.E5.Flex', name_prefix='cpu')
        ocisim.calls.reset()
        result = inventory()
        assert len(result.groups['gpu_nodes']) == 2 * nodes
        return ocisim.calls.total(), bench.active_compartments(ocisim)

    small, comps = count(nodes=2, filler=3)
    big, comps_big = count(nodes=48, filler=400)
    assert comps == comps_big == 5  # root, ocigpu-test and the three above
    assert small == big == bench.expected_calls(comps, clusters=2)


def test_one_cluster_and_shape_options(ocisim, inventory, two_clusters):
    result = inventory(cluster='beta-2')
    ids = set(result.by_id())
    beta = two_clusters['beta']
    assert ids == set(beta['nodes'] + [beta['bastion']])

    result = inventory(shapes=['BM.GPU4.8'], include_bastions=False)
    assert set(result.by_id()) == set(two_clusters['alpha']['nodes'])
    assert result.groups['bastion'] == []

    result = inventory(lifecycle_states=['RUNNING', 'STOPPED'], cluster='alpha')
    assert two_clusters['stopped'] in result.by_id()


def test_compartment_list_limits_the_search(ocisim, inventory, two_clusters):
    result = inventory(compartments=[dict(id=two_clusters['team'], subtree=False)])
    assert set(result.by_id()) == set(two_clusters['alpha']['nodes'] + [two_clusters['alpha']['bastion']])
    result = inventory(compartments=[two_clusters['child']])
    assert set(result.by_id()) == set(two_clusters['beta']['nodes'] + [two_clusters['beta']['bastion']])


def test_pagination_returns_every_instance(ocisim, inventory):
    # More instances and VNIC attachments in one compartment than one page (1000) holds.
    comp = ocisim.add_compartment('big')['id']
    cluster = _cluster(ocisim, 'wide', 1020, comp, 0, private_prefix=21)
    ocisim.calls.reset()
    result = inventory(compartments=[comp])
    assert len(result.groups['gpu_nodes']) == 1020
    assert ocisim.calls['GET /instances'] == 2
    assert ocisim.calls['GET /vnicAttachments'] == 2
    assert ocisim.calls['GET /clusterNetworks/{clusterNetworkId}/instances'] == 2
    assert ocisim.calls['GET /privateIps'] >= 3  # private subnet: 2 pages, public subnet: 1
    by_id = result.by_id()
    assert set(cluster['nodes']) <= set(by_id)
    assert all(by_id[i]['oci_cluster_network_id'] == cluster['cluster_network'] for i in cluster['nodes'])
    assert len({h['oci_private_ip'] for h in by_id.values()}) == 1021


def test_429_storm_is_ridden_out(ocisim, inventory, two_clusters):
    ocisim.calls.reset()
    baseline = inventory()
    baseline_calls = ocisim.calls.total()
    ocisim.calls.reset()
    start = ocisim.clock.now()
    # 27 failed requests in all; no single call can meet more than 14 of them (< api_retries)
    ocisim.faults.throttle('*', count=14)
    ocisim.faults.throttle('GET /vnicAttachments', count=10)
    ocisim.faults.error(503, 'GET /privateIps', count=3)
    stormy = inventory(api_retries=16)
    assert stormy.hosts == baseline.hosts
    assert stormy.groups == baseline.groups
    assert ocisim.calls.total() == baseline_calls + 27  # every failed request was retried, nothing more
    assert ocisim.sdk_sleeps == [] and ocisim.clock.now() > start  # backoff slept on the simulator clock
    _check_truth(stormy, two_clusters['truth'])


def test_exhausted_retries_fail_loudly(ocisim, inventory, two_clusters):
    from ansible.errors import AnsibleError
    ocisim.faults.throttle('GET /vnicAttachments')  # never ends
    with pytest.raises(AnsibleError, match=r'list_vnic_attachments .*429 TooManyRequests'):
        inventory(api_retries=3)


def test_compartment_returning_404_strict(ocisim, inventory, two_clusters):
    from ansible.errors import AnsibleError
    gone = 'ocid1.compartment.oc1..' + 'a' * 60
    with pytest.raises(AnsibleError) as err:
        inventory(compartments=[two_clusters['team'], gone])
    assert '1 API call(s) failed' in str(err.value)
    assert 'get_compartment' in str(err.value) and gone in str(err.value) and '404' in str(err.value)


def test_compartment_returning_404_not_strict_warns_with_counts(ocisim, inventory, two_clusters):
    gone = 'ocid1.compartment.oc1..' + 'b' * 60
    result = inventory(compartments=[dict(id=two_clusters['team'], subtree=False), gone], strict=False)
    alpha = two_clusters['alpha']
    assert set(result.by_id()) == set(alpha['nodes'] + [alpha['bastion']])
    assert len(inventory.warnings) == 1
    assert 'INCOMPLETE INVENTORY: 1 API call(s) failed' in inventory.warnings[0]
    assert gone in inventory.warnings[0]
    errors = result.all_vars['ocigpu_inventory_errors']
    assert [(e['operation'], e['status'], e['compartment_id']) for e in errors] == [('get_compartment', 404, gone)]


def test_list_failing_in_one_compartment_not_strict(ocisim, inventory, two_clusters):
    # The listing of one compartment answers 404 (e.g. a policy that hides it); the other is kept.
    ocisim.faults.add('GET /instances', status=404, count=1, code='NotAuthorizedOrNotFound')
    result = inventory(compartments=[dict(id=two_clusters['team'], subtree=False),
                                     dict(id=two_clusters['child'], subtree=False)], strict=False)
    errors = result.all_vars['ocigpu_inventory_errors']
    assert len(errors) == 1 and errors[0]['operation'] == 'list_instances' and errors[0]['status'] == 404
    failed = errors[0]['compartment_id']
    kept = two_clusters['child'] if failed == two_clusters['team'] else two_clusters['team']
    assert {h['oci_compartment_id'] for h in result.hosts.values()} == {kept}
    assert 'INCOMPLETE INVENTORY' in inventory.warnings[0]


def test_cache(ocisim, inventory, two_clusters, tmp_path):
    cache = dict(cache=True, cache_plugin='ansible.builtin.jsonfile', cache_connection=str(tmp_path / 'cache'))
    ocisim.calls.reset()
    first = inventory(**cache)
    cold = ocisim.calls.total()
    assert cold > 0
    ocisim.calls.reset()
    second = inventory(**cache)
    assert ocisim.calls.total() == 0
    assert second.hosts == first.hosts and second.groups == first.groups
    # --flush-cache (cache=False) asks the API again and refreshes the cache
    extra = _cluster(ocisim, 'gamma', 1, two_clusters['team'], 7)
    ocisim.calls.reset()
    third = inventory(use_cache=False, **cache)  # like --flush-cache
    assert ocisim.calls.total() > cold  # one more cluster: its subnets, network and bastion VNIC
    assert extra['nodes'][0] in third.by_id()
    ocisim.calls.reset()
    fourth = inventory(**cache)
    assert ocisim.calls.total() == 0 and extra['nodes'][0] in fourth.by_id()


def test_incomplete_result_is_not_cached(ocisim, inventory, two_clusters, tmp_path):
    cache = dict(cache=True, cache_plugin='ansible.builtin.jsonfile', cache_connection=str(tmp_path / 'cache'))
    ocisim.faults.add('GET /vnicAttachments', status=404, count=1, code='NotAuthorizedOrNotFound')
    inventory(strict=False, **cache)
    ocisim.calls.reset()
    again = inventory(strict=False, **cache)
    assert ocisim.calls.total() > 0
    _check_truth(again, two_clusters['truth'])


def test_remote_strings_are_unsafe_and_names_always_exist(ocisim, inventory, two_clusters):
    from ansible.template import is_trusted_as_template
    alpha = two_clusters['alpha']
    evil = "{{ lookup('pipe', 'id') }}"
    ocisim.state.instances[alpha['nodes'][0]]['displayName'] = evil
    twin = ocisim.state.instances[alpha['nodes'][2]]['displayName']
    ocisim.state.instances[alpha['nodes'][1]]['displayName'] = twin  # two instances, one display name
    result = inventory()
    by_id = result.by_id()
    assert by_id[alpha['nodes'][0]]['name'] == evil
    assert by_id[alpha['nodes'][0]]['oci_display_name'] == evil
    assert not is_trusted_as_template(by_id[alpha['nodes'][0]]['oci_display_name'])
    # Twins launched at the same time: neither takes the name, each its next preference (the DNS label).
    for iid in alpha['nodes'][1:]:
        vnic = ocisim.state.vnics[by_id[iid]['oci_vnic_id']]
        assert by_id[iid]['name'] == vnic['hostnameLabel'] != twin
    assert len(result.hosts) == len(two_clusters['truth'])
    # The older twin keeps the name, whichever OCID sorts first.
    for older, newer in (alpha['nodes'][1:], alpha['nodes'][:0:-1]):
        ocisim.state.instances[older]['timeCreated'] = '2026-01-01T00:00:00.000Z'
        ocisim.state.instances[newer]['timeCreated'] = '2026-02-01T00:00:00.000Z'
        by_id = inventory().by_id()
        assert by_id[older]['name'] == twin and by_id[newer]['name'] != twin

    result = inventory(hostnames=['tag:missing'])
    assert sorted(result.by_id()[i]['name'] for i in alpha['nodes']) == sorted(alpha['nodes'])

    result = inventory(hostnames=['private_ip'])
    assert result.by_id()[alpha['nodes'][2]]['name'] == ocisim.state.vnics[
        result.by_id()[alpha['nodes'][2]]['oci_vnic_id']]['privateIp']


def test_ansible_user_follows_the_image(ocisim, inventory):
    ubuntu = [i for i in ocisim.state.images.values() if i['displayName'].startswith('Canonical-Ubuntu-22.04-Gen2-GPU')][0]
    comp = ocisim.add_compartment('u')['id']
    cluster = _cluster(ocisim, 'ubu', 2, comp, 0)
    for iid in cluster['nodes']:
        ocisim.state.instances[iid]['imageId'] = ubuntu['id']
        ocisim.state.instances[iid]['sourceDetails']['imageId'] = ubuntu['id']
    result = inventory()
    by_id = result.by_id()
    assert {by_id[i]['ansible_user'] for i in cluster['nodes']} == {'ubuntu'}
    assert by_id[cluster['bastion']]['ansible_user'] == 'opc'
    # the jump's user is the bastion's
    assert re.search(r" -W %h:%p opc@[0-9.]+'$", by_id[cluster['nodes'][0]]['ansible_ssh_common_args'])
    result = inventory(ansible_user_by_os={'Canonical Ubuntu': 'admin'}, proxy_jump=False)
    assert result.by_id()[cluster['nodes'][0]]['ansible_user'] == 'admin'
    # no jump, the host keys still checked
    assert 'ProxyCommand' not in result.by_id()[cluster['nodes'][0]]['ansible_ssh_common_args']
    assert 'StrictHostKeyChecking=accept-new' in result.by_id()[cluster['nodes'][0]]['ansible_ssh_common_args']


def _ssh_argv(common_args):
    """ansible_ssh_common_args as the ssh connection plugin splits them, and the jump's command as
    the shell splits it: ({option: value} of the -o options, the jump's argv or None)."""
    import shlex
    argv = shlex.split(common_args)
    assert argv[0::2] == ['-o'] * (len(argv) // 2), argv
    options = dict(o.split('=', 1) for o in argv[1::2])
    jump = options.get('ProxyCommand')
    return options, (shlex.split(jump) if jump else None)


def test_every_host_checks_host_keys_against_its_clusters_known_hosts(ocisim, inventory, tmp_path):
    """The bastion, every node and the jump through the bastion check host keys against the
    cluster's known_hosts file, beside its MPI keys: a new host is accepted once, a changed key
    refused (no host_key_checking = False needed); the jump is a ProxyCommand, since ssh passes no -o
    option to a ProxyJump hop. Each host's key is named by its instance OCID (HostKeyAlias), the
    jump's by the bastion's: a new instance on a released IP is a new host. The folder is made, so
    that ssh can record the keys."""
    comp = ocisim.add_compartment('k')['id']
    cluster = _cluster(ocisim, 'keys', 2, comp, 0)
    by_id = inventory().by_id()
    known = str(tmp_path / 'home' / '.ocigpu' / 'keys' / 'known_hosts')
    checks = {'UserKnownHostsFile': '"%s"' % known, 'StrictHostKeyChecking': 'accept-new'}
    bastion = by_id[cluster['bastion']]
    assert _ssh_argv(bastion['ansible_ssh_common_args']) == (dict(checks, HostKeyAlias=cluster['bastion']), None)
    assert bastion['ocigpu_known_hosts_file'] == known
    for iid in cluster['nodes']:
        options, jump = _ssh_argv(by_id[iid]['ansible_ssh_common_args'])
        assert {k: options[k] for k in checks} == checks
        assert options['HostKeyAlias'] == iid
        assert jump == ['ssh', '-o', 'UserKnownHostsFile="%s"' % known, '-o', 'StrictHostKeyChecking=accept-new',
                        '-o', 'HostKeyAlias=' + cluster['bastion'], '-W', '%h:%p', 'opc@' + bastion['ansible_host']]
        assert by_id[iid]['ocigpu_known_hosts_file'] == known
        assert 'ansible_ssh_private_key_file' not in by_id[iid]
    assert (tmp_path / 'home' / '.ocigpu' / 'keys').is_dir()
    assert (tmp_path / 'home' / '.ocigpu' / 'keys').stat().st_mode & 0o077 == 0


def test_a_private_key_and_a_known_hosts_file_given_serve_both_hops(ocisim, inventory, tmp_path):
    """private_key_file reaches the jump too (ssh's own identity otherwise); a known_hosts_file
    given is used as it is, a path with a space included."""
    comp = ocisim.add_compartment('p')['id']
    cluster = _cluster(ocisim, 'pk', 1, comp, 0)
    known = tmp_path / 'my keys' / 'known_hosts'
    by_id = inventory(private_key_file='~/.ssh/oci key', known_hosts_file=str(known)).by_id()
    key = str(tmp_path / 'home' / '.ssh' / 'oci key')
    node = by_id[cluster['nodes'][0]]
    options, jump = _ssh_argv(node['ansible_ssh_common_args'])
    assert options['UserKnownHostsFile'] == '"%s"' % known
    assert jump[jump.index('-i'):jump.index('-W')] == ['-i', key, '-o', 'IdentitiesOnly=yes']
    assert node['ansible_ssh_private_key_file'] == key == by_id[cluster['bastion']]['ansible_ssh_private_key_file']
    assert known.parent.is_dir()


def test_a_cluster_tag_names_no_path_elsewhere():
    """The cluster name comes from a tag: one that is not a plain folder name becomes its digest."""
    import hashlib
    import os
    plugin = sys.modules[type(_plugin_loader().get(PLUGIN)).__module__]
    home = os.path.expanduser('~')
    assert plugin.known_hosts_path('train-01') == os.path.join(home, '.ocigpu', 'train-01', 'known_hosts')
    for tag in ('../..', '..', 'a/b', 'a b', "x';touch /tmp/y;'", ''):
        assert plugin.known_hosts_path(tag) == os.path.join(
            home, '.ocigpu', 'cluster-' + hashlib.sha256(tag.encode()).hexdigest()[:8], 'known_hosts'), tag


def test_constructable_options(ocisim, inventory, two_clusters):
    result = inventory(
        compose={'gpus_total': 'ocigpu_gpu_count | default(0) * 2'},
        groups={'big_gpu': "oci_shape == 'BM.GPU.H100.8'"},
        keyed_groups=[{'key': 'ocigpu_cluster', 'prefix': 'team'}],
        slurm_controller='alpha-bastion',
    )
    by_id = result.by_id()
    beta = two_clusters['beta']
    assert by_id[beta['nodes'][0]]['gpus_total'] == 16
    assert result.groups['big_gpu'] == sorted(by_id[i]['name'] for i in beta['nodes'])
    assert by_id[beta['nodes'][0]]['name'] in result.groups['team_beta_2']
    assert result.groups['slurm_controller'] == ['alpha-bastion']

    from ansible.errors import AnsibleError
    with pytest.raises(AnsibleError):
        inventory(compose={'broken': 'no_such_variable.attr'}, strict=True)


def test_compute_cluster_and_multi_pool_cluster_network(ocisim, inventory):
    import oci
    comp = ocisim.add_compartment('h100')['id']
    two_pools = _cluster(ocisim, 'split', 4, comp, 0)  # bastion, subnets and a one-pool cluster network
    # a second cluster network with two instance pools: membership comes from each pool's instance list
    split2 = ocisim.seed_cluster('split2', 4, shape='BM.GPU4.8', compartment_id=comp, pools=2,
                                 subnet_id=two_pools['private_subnet'], freeform_tags={'ocigpu-cluster': 'split'})
    # a compute cluster (the H100 way): instances launched into it
    compute = ocisim.client(oci.core.ComputeClient)
    cc = compute.create_compute_cluster(oci.core.models.CreateComputeClusterDetails(
        availability_domain=next(iter(ocisim.availability_domains)), compartment_id=comp,
        display_name='cc-h100', freeform_tags={'ocigpu-cluster': 'split'})).data
    members = ocisim.seed_instances(2, [comp], shape='BM.GPU.H100.8', name_prefix='split-h100',
                                    freeform_tags={'ocigpu-cluster': 'split'}, subnet_id=two_pools['private_subnet'])
    for iid in members:
        ocisim.state.instances[iid]['_compute_cluster'] = cc.id

    result = inventory(cluster='split')
    by_id = result.by_id()
    pools = {}
    for iid in split2['instanceIds']:
        assert by_id[iid]['oci_cluster_network_id'] == split2['id']
        assert by_id[iid]['name'] in result.groups['cluster_network_split2']
        pools.setdefault(by_id[iid]['oci_instance_pool_name'], []).append(by_id[iid]['name'])
    assert sorted(pools) == ['split2-pool1', 'split2-pool2']
    for pool, names in pools.items():
        assert result.groups['instance_pool_' + pool.replace('-', '_')] == sorted(names)
    assert ocisim.calls['GET /instancePools/{instancePoolId}/instances'] == 2  # only the two-pool network
    for iid in members:
        assert by_id[iid]['oci_compute_cluster_id'] == cc.id and by_id[iid]['oci_compute_cluster_name'] == 'cc-h100'
        assert by_id[iid]['oci_cluster_network_id'] is None
    assert result.groups['compute_cluster_cc_h100'] == sorted(by_id[i]['name'] for i in members)
    assert len(result.groups['gpu_nodes']) == 4 + 4 + 2


def test_service_endpoint_from_the_environment(ocisim, inventory, two_clusters, monkeypatch):
    monkeypatch.setenv('OCIGPU_SERVICE_ENDPOINT', ocisim.endpoint)
    args = ocisim.auth_args()
    result = inventory(service_endpoint=None, config_file=args['config_file'], cluster='alpha')
    assert set(result.by_id()) == set(two_clusters['alpha']['nodes'] + [two_clusters['alpha']['bastion']])
    monkeypatch.setenv('OCIGPU_SERVICE_ENDPOINT', 'http://127.0.0.1:9')  # nothing listens there
    from ansible.errors import AnsibleError
    with pytest.raises(AnsibleError, match='failed after retries'):
        inventory(service_endpoint=None, api_retries=1)


def test_on_demand_nodes_get_a_group_of_their_own(ocisim, inventory):
    """The Slurm autoscaler's nodes configure themselves (the pull path): a push of configure.yml,
    which targets gpu_nodes, must leave them alone, and a person can still reach them by group."""
    team = ocisim.add_compartment('ondemand')['id']
    a = _cluster(ocisim, 'alpha', 2, team, 0)
    pulled = ocisim.seed_instances(1, [team], shape='BM.GPU4.8', name_prefix='alpha-gpu-1', subnet_id=a['private_subnet'],
                                   freeform_tags={'ocigpu-cluster': 'alpha', 'ocigpu-slurm-node': 'gpu-1'})
    result = inventory(cluster='alpha')
    name = {iid: h['name'] for iid, h in result.by_id().items()}
    assert result.groups['gpu_nodes'] == sorted(name[i] for i in a['nodes'])
    assert result.groups['gpu_nodes_on_demand'] == [name[pulled[0]]]
    assert name[pulled[0]] in result.groups['cluster_alpha']


def test_a_bake_builder_is_no_node_to_configure(ocisim, inventory):
    """bake.yml's builder (tag ocigpu-role=bake-builder) is of the cluster and the GPU shape, but configure.yml must
    not push to it: it is in bake_builders, not gpu_nodes."""
    team = ocisim.add_compartment('baking')['id']
    a = _cluster(ocisim, 'alpha', 2, team, 0)
    builder = ocisim.seed_instances(1, [team], shape='BM.GPU4.8', name_prefix='alpha-bake-builder', subnet_id=a['private_subnet'],
                                    freeform_tags={'ocigpu-cluster': 'alpha', 'ocigpu-role': 'bake-builder'})
    result = inventory(cluster='alpha')
    name = {iid: h['name'] for iid, h in result.by_id().items()}
    assert result.groups['bake_builders'] == [name[builder[0]]]
    assert result.groups['gpu_nodes'] == sorted(name[i] for i in a['nodes'])


def test_a_replacement_carries_its_slurm_name_and_stays_a_pushed_node(ocisim, inventory):
    """provision.yml's replacement (gpu_replace_nodes) tags the new instance with the Slurm name of the node it
    replaced; configure.yml pushes to it (gpu_nodes) and makes ocigpu_slurm_name its host name."""
    team = ocisim.add_compartment('replaced')['id']
    a = _cluster(ocisim, 'alpha', 2, team, 0)
    new = ocisim.seed_instances(1, [team], shape='BM.GPU4.8', name_prefix='alpha-cn-pool', subnet_id=a['private_subnet'],
                                freeform_tags={'ocigpu-cluster': 'alpha', 'ocigpu-slurm-name': 'inst-old42'})
    result = inventory(cluster='alpha')
    hosts = result.by_id()
    assert hosts[new[0]]['name'] in result.groups['gpu_nodes'] and result.groups.get('gpu_nodes_on_demand', []) == []
    assert hosts[new[0]]['ocigpu_slurm_name'] == 'inst-old42'
    assert all('ocigpu_slurm_name' not in hosts[i] for i in a['nodes'])


def test_names_and_groups_depend_on_the_clusters_own_instances(ocisim, inventory, two_clusters):
    """Tenancy-wide: a node of another cluster renamed like this cluster's bastion, an untagged copy
    named like one of its nodes (both older and with smaller OCIDs than the originals would not
    matter), and tags that differ only in case or '-'/'_' change none of alpha's names or groups."""
    alpha, beta = two_clusters['alpha'], two_clusters['beta']
    before = inventory()
    names = {iid: before.by_id()[iid]['name'] for iid in alpha['nodes'] + [alpha['bastion']]}
    old = '2020-01-01T00:00:00.000Z'
    intruder = ocisim.state.instances[beta['nodes'][0]]
    intruder['displayName'], intruder['timeCreated'] = 'alpha-bastion', old
    copy = ocisim.seed_instances(1, [two_clusters['child']], shape='BM.GPU4.8', name_prefix='copy')[0]
    ocisim.state.instances[copy]['displayName'] = names[alpha['nodes'][0]]
    ocisim.state.instances[copy]['timeCreated'] = old
    look_alikes = [_cluster(ocisim, tag, 1, two_clusters['child'], 5 + i)
                   for i, tag in enumerate(['Alpha', 'alpha_'])]
    after = inventory()
    by_id = after.by_id()
    assert {iid: by_id[iid]['name'] for iid in names} == names
    assert by_id[beta['nodes'][0]]['name'] != 'alpha-bastion'
    assert by_id[copy]['name'] != names[alpha['nodes'][0]]
    assert after.groups['cluster_alpha'] == before.groups['cluster_alpha'] == sorted(names.values())
    look_alike_groups = [g for g in after.groups if g.startswith('cluster_alpha_')]
    assert len(look_alike_groups) == 2 and len(set(look_alike_groups)) == 2
    for cluster in look_alikes:
        assert sum(by_id[cluster['bastion']]['name'] in after.groups[g] for g in look_alike_groups) == 1


def test_one_clusters_calls_do_not_grow_with_other_clusters(ocisim, inventory):
    """With cluster set, 20 more clusters in the tenancy (in its compartment and in others) add no call."""
    home = ocisim.add_compartment('home')['id']
    others = [ocisim.add_compartment('other%d' % i)['id'] for i in range(3)]
    mine = _cluster(ocisim, 'mine', 4, home, 0)
    _cluster(ocisim, 'first', 2, others[0], 1)

    def calls():
        ocisim.calls.reset()
        result = inventory(cluster='mine')
        assert set(result.by_id()) == set(mine['nodes'] + [mine['bastion']])
        return ocisim.calls.as_dict()

    alone = calls()
    for i in range(20):
        _cluster(ocisim, 'more%02d' % i, 2, home if i % 2 == 0 else others[i % 3], 2 + i)
    crowded = calls()
    assert crowded == alone
    assert sum(crowded.values()) <= 30


def test_each_bare_metal_node_knows_where_it_sits_in_the_fabric(ocisim, inventory, two_clusters):
    """HPC island, network block and local block from the Compute Hosts API, as the simulator's host
    records hold them; null on the bastion (a VM) and, with a warning, where a policy hides the hosts."""
    from tests.ocisim import compute as sim_compute
    alpha = two_clusters['alpha']
    by_id = inventory().by_id()
    for iid in alpha['nodes'] + two_clusters['beta']['nodes']:
        host = sim_compute.host_of(ocisim, ocisim.state.instances[iid])
        node = by_id[iid]
        assert (node['oci_hpc_island_id'], node['oci_network_block_id'], node['oci_local_block_id']) == (
            host['hpcIslandId'], host['networkBlockId'], host['localBlockId'])
    assert len({by_id[i]['oci_network_block_id'] for i in alpha['nodes']}) == 1  # one cluster network
    assert by_id[alpha['bastion']]['oci_local_block_id'] is None

    ocisim.faults.add('GET /computeHosts', status=404, code='NotAuthorizedOrNotFound')
    by_id = inventory().by_id()
    assert all(by_id[i]['oci_local_block_id'] is None for i in alpha['nodes'])
    assert any('list_compute_hosts' in w and 'no HPC island' in w for w in inventory.warnings)

    assert 'GET /computeHosts' not in _routes_called(ocisim, inventory, topology=False)


def test_a_32_node_cluster_in_three_local_blocks_reaches_topology_conf(ocisim, inventory):
    """The simulator fills local blocks of 12 hosts: the inventory's places, through the slurm role's
    filter, give one switch per local block (12, 12 and 8 nodes) under the cluster network's block."""
    from ansible_collections.ocigpu.cluster.plugins.filter.topology import slurm_topology
    ocisim.local_block_hosts = 12
    home = ocisim.add_compartment('home')['id']
    _cluster(ocisim, 'big', 32, home, 0)
    result = inventory(cluster='big')
    nodes = [dict(result.hosts[h], name=h) for h in result.groups['gpu_nodes']]
    assert len(nodes) == 32
    lines = slurm_topology(nodes)
    leaves = [line for line in lines if line.startswith('SwitchName=lb-')]
    assert len(leaves) == 3
    sizes = sorted(len(_expand(line.split('Nodes=')[1])) for line in leaves)
    assert sizes == [8, 12, 12]
    assert sorted(n for line in leaves for n in _expand(line.split('Nodes=')[1])) == sorted(n['name'] for n in nodes)
    blocks = [line for line in lines if line.startswith('SwitchName=nb-')]
    assert len(blocks) == 1 and blocks[0].count('lb-') == 3


def _expand(hostlist):
    """Node names of a Slurm hostlist as slurm_topology writes it (prefix-[a-b,c] ranges)."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import expand_hostlist
    return expand_hostlist(hostlist)


def test_compute_hosts_filed_in_the_root_compartment_are_found_there(ocisim, inventory, two_clusters):
    """Where the hosts are not beside their instances (OCI's reference files them in the root
    compartment), one more list_compute_hosts of the root finds them; where they are, it is not made."""
    from tests.ocisim import compute as sim_compute
    alpha = two_clusters['alpha']
    ocisim.calls.reset()
    inventory(cluster='alpha')
    beside = ocisim.calls.as_dict().get('GET /computeHosts')
    ocisim.compute_hosts_in_root = True
    ocisim.calls.reset()
    by_id = inventory(cluster='alpha').by_id()
    assert ocisim.calls.as_dict().get('GET /computeHosts') == beside + 1
    for iid in alpha['nodes']:
        host = sim_compute.host_of(ocisim, ocisim.state.instances[iid])
        assert by_id[iid]['oci_local_block_id'] == host['localBlockId']


def _routes_called(ocisim, inventory, **options):
    ocisim.calls.reset()
    inventory(**options)
    return ocisim.calls.as_dict()


# -- a cluster is its tag in its compartment (issue 45) --------------------------------------------

def test_two_compartments_clusters_of_one_name_never_merge(ocisim, inventory):
    """Tenancy-wide: two teams each made a cluster `alpha`, in compartments of their own. Each is a
    group of its own (the compartment's suffix after the name), each node jumps through its own
    cluster's bastion, each bastion is its own cluster's controller, and a warning names both."""
    import hashlib
    team_a = ocisim.add_compartment('team-a')['id']
    team_b = ocisim.add_compartment('team-b')['id']
    a = _cluster(ocisim, 'alpha', 2, team_a, 0)
    b = _cluster(ocisim, 'alpha', 3, team_b, 1)
    solo = _cluster(ocisim, 'solo', 1, team_b, 2)
    result = inventory()
    _check_truth(result, bench.expected_hosts(ocisim, dict(compartments=[team_a, team_b], clusters=[a, b, solo])))
    by_id = result.by_id()
    assert 'cluster_alpha' not in result.groups
    assert result.groups['cluster_solo'] == sorted(by_id[i]['name'] for i in solo['nodes'] + [solo['bastion']])
    for cluster, compartment in ((a, team_a), (b, team_b)):
        group = 'cluster_alpha_' + hashlib.sha256(compartment.encode()).hexdigest()[:8]
        members = cluster['nodes'] + [cluster['bastion']]
        assert result.groups[group] == sorted(by_id[i]['name'] for i in members)
        bastion_ip = ocisim.state.vnics[by_id[cluster['bastion']]['oci_vnic_id']]['publicIp']
        for iid in cluster['nodes']:
            assert by_id[iid]['ansible_ssh_common_args'].endswith(" -W %%h:%%p opc@%s'" % bastion_ip)
            assert by_id[iid]['ocigpu_bastion'] == bastion_ip
        assert group in ' '.join(inventory.warnings)
    assert sorted(result.groups['slurm_controller']) == sorted(by_id[c['bastion']]['name'] for c in (a, b, solo))
    # the cluster networks are named alike too (both `alpha`): apart as well
    networks = [g for g in result.groups if g.startswith('cluster_network_alpha')]
    assert len(networks) == 2 and sorted(len(result.groups[g]) for g in networks) == [2, 3]
    assert any("cluster tag 'alpha' is on instances in 2 compartments" in w for w in inventory.warnings)


def test_one_cluster_is_exactly_its_compartment(ocisim, inventory):
    """The documented settings (compartments: [the cluster's], cluster: <name>) give the nodes that
    provision.yml made there, not instances tagged with the name in a child compartment; an item with
    subtree: true still searches below, and so does the tenancy-wide mode."""
    home = ocisim.add_compartment('home')['id']
    child = ocisim.add_compartment('home-child', home)['id']
    mine = _cluster(ocisim, 'train', 2, home, 0)
    stray = _cluster(ocisim, 'train', 1, child, 1)
    result = inventory(compartments=[home], cluster='train')
    assert set(result.by_id()) == set(mine['nodes'] + [mine['bastion']])
    assert result.groups['cluster_train'] == sorted(result.hosts)
    wider = inventory(compartments=[dict(id=home, subtree=True)], cluster='train')
    assert set(wider.by_id()) == set(mine['nodes'] + [mine['bastion']] + stray['nodes'] + [stray['bastion']])
    assert 'cluster_train' not in wider.groups  # two compartments: two clusters
    everything = inventory(compartments=[home])
    assert set(stray['nodes']) <= set(everything.by_id())


def test_an_inventory_without_hosts_names_the_clusters_it_saw(ocisim, inventory):
    """A misspelt cluster name, or an empty compartment: a warning says where it looked and which
    cluster tags it found there, instead of an empty answer with no word."""
    home = ocisim.add_compartment('home')['id']
    empty = ocisim.add_compartment('empty')['id']
    _cluster(ocisim, 'train-01', 1, home, 0)
    _cluster(ocisim, 'infer', 1, home, 1)
    result = inventory(compartments=[home], cluster='train01')
    assert result.hosts == {}
    assert len(inventory.warnings) == 1
    warning = inventory.warnings[0]
    assert "no host found for cluster 'train01' in 1 compartment(s) (home)" in warning
    assert 'Clusters seen there (tag ocigpu-cluster): infer, train-01.' in warning
    del inventory.warnings[:]
    assert inventory(compartments=[empty]).hosts == {}
    assert 'No instance there carries the tag ocigpu-cluster' in inventory.warnings[0]
    del inventory.warnings[:]
    inventory(compartments=[home], cluster='train-01')
    assert inventory.warnings == []


def test_a_burst_of_40_throttled_answers_is_ridden_out(ocisim, inventory, two_clusters):
    """40 answers of 429 in a row, with the default api_retries (8): the first calls meet all of them.
    A throttled answer pauses every call and uses up no attempt, so the inventory is whole, within
    the time budget (api_retry_max_seconds), not an error or an empty inventory."""
    baseline = inventory()
    ocisim.calls.reset()
    start = ocisim.clock.now()
    rule = ocisim.faults.throttle('*', count=40)
    stormy = inventory(strict=False)
    assert rule.fired == 40
    assert inventory.warnings == []
    assert stormy.hosts == baseline.hosts and stormy.groups == baseline.groups
    _check_truth(stormy, two_clusters['truth'])
    assert 0 < ocisim.clock.now() - start < 600
