# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/slurm templates rendered by Ansible's own templating engine with the role's defaults and
vars, for inventories the molecule scenario cannot have: GPU nodes (Gres lines, GresTypes,
gres.conf AutoDetect per node), mixed PMIx support, overrides, and which changes need a restart.
Also the expression in tasks/facts.yml that turns node_facts into a node's GPU count and type."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from tests.unit import _collection_loader
from tests.unit.roles._trust import trust

ROLE = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'slurm'


def facts(name, ip, vcpus=128, sockets=2, cores=32, threads=2, mem=2063720):
    return {'hostname': name, 'default_ipv4': {'address': ip}, 'processor_vcpus': vcpus,
            'processor_count': sockets, 'processor_cores': cores,
            'processor_threads_per_core': threads, 'memtotal_mb': mem}


def gpu_node(name, ip, count=8, gtype='a100', pmix=True, nvml=False, nvidia=True, **kw):
    return {'ansible_facts': facts(name, ip, **kw), '__slurm_node_gpus': {'count': count, 'type': gtype},
            '__slurm_node_caps': {'pmix': pmix, 'nvml': nvml, 'nvidia': nvidia}}


def templar(nodes, **overrides):
    _collection_loader.install()  # the role's vars use the collection's filters (slurm_topology)
    loader = DataLoader()
    loader.set_basedir(str(ROLE / 'templates'))
    variables = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    variables.update(trust(overrides))
    hostvars = {'bastion': {'ansible_facts': facts('bastion', '10.0.0.2', 4, 1, 2, 2, 15000)}}
    hostvars.update(nodes)
    variables.update(hostvars=hostvars, inventory_hostname='bastion', ansible_managed='managed',
                     groups={'slurm_controller': ['bastion'], 'gpu_nodes': list(nodes)})
    return Templar(loader=loader, variables=variables)


def render(name, nodes, **overrides):
    text = (ROLE / 'templates' / name).read_text()
    return templar(nodes, **overrides).template(trust_as_template(text))


def conf(text):
    """slurm.conf's key=value lines (not NodeName/PartitionName) as a dict."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([A-Za-z]+)=(.*)$', line)
        if m and m.group(1) not in ('NodeName', 'PartitionName'):
            out[m.group(1)] = m.group(2)
    return out


GPU_NODES = {'gpu-1': gpu_node('gpu-1', '10.0.1.11'), 'gpu-2': gpu_node('gpu-2', '10.0.1.12', nvml=True)}


def test_gpu_nodes_get_gres_and_topology_from_facts():
    text = render('slurm.conf.j2', GPU_NODES)
    # The nodes are in nodes.conf, named relative to slurm.conf's folder (configless mode serves it).
    assert 'Include nodes.conf' in text.splitlines() and 'NodeName' not in text
    text = render('nodes.conf.j2', GPU_NODES)
    assert ('NodeName=gpu-1 NodeAddr=10.0.1.11 CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 '
            'RealMemory=1960534 Gres=gpu:a100:8 State=UNKNOWN') in text.splitlines()
    # 2063720 MB less 5 %, rounded down
    assert 1960534 == int(2063720 * 95 / 100)
    c = conf(render('slurm.conf.j2', GPU_NODES))
    assert c['GresTypes'] == 'gpu'
    assert c['SlurmctldHost'] == 'bastion(10.0.0.2)'
    assert c['SlurmctldParameters'] == 'enable_configless'
    assert c['SelectType'] == 'select/cons_tres'
    assert c['MpiDefault'] == 'pmix'
    assert c['Prolog'] == '/etc/slurm/prolog.d/*'
    assert 'AccountingStorageType' not in c
    assert 'PartitionName=compute Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO' in render(
        'slurm.conf.j2', GPU_NODES)


def test_gres_conf_follows_each_nodes_plugins():
    nodes = dict(GPU_NODES)
    nodes['gpu-3'] = gpu_node('gpu-3', '10.0.1.13', count=4, gtype='h100', nvml=False, nvidia=False)
    lines = [ln for ln in render('gres.conf.j2', nodes).splitlines() if ln and not ln.startswith('#')]
    assert lines == [
        'NodeName=gpu-1 AutoDetect=nvidia',
        'NodeName=gpu-2 AutoDetect=nvml',
        'NodeName=gpu-3 AutoDetect=off Name=gpu Type=h100 File=/dev/nvidia[0-3]',
    ]
    forced = render('gres.conf.j2', nodes, slurm_gres_autodetect='off')
    assert 'NodeName=gpu-2 AutoDetect=off Name=gpu Type=a100 File=/dev/nvidia[0-7]' in forced


def test_nodes_without_gpus_have_no_gres_and_pmi2_when_one_lacks_pmix():
    nodes = {'cpu-1': gpu_node('cpu-1', '198.18.10.11', count=0, pmix=True, vcpus=2, sockets=1, cores=2, threads=1, mem=24000),
             'cpu-2': gpu_node('cpu-2', '198.18.10.12', count=0, pmix=False, vcpus=2, sockets=1, cores=2, threads=1, mem=24000)}
    text = render('slurm.conf.j2', nodes) + render('nodes.conf.j2', nodes)
    assert 'Gres' not in text
    assert conf(text)['MpiDefault'] == 'pmi2'
    assert 'NodeName=cpu-1 NodeAddr=198.18.10.11 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=22800 State=UNKNOWN' in text
    assert [ln for ln in render('gres.conf.j2', nodes).splitlines() if ln and not ln.startswith('#')] == []


def test_overrides_and_omit():
    text = render('slurm.conf.j2', GPU_NODES,
                  slurm_config={'SchedulerType': 'omit', 'MaxJobCount': 50000, 'ReturnToService': 1},
                  slurm_mpi_default='pmi2', slurm_accounting_enabled=True,
                  slurm_extra_nodes=['NodeName=cloud-[1-4] CPUs=128 State=CLOUD'])
    nodes = render('nodes.conf.j2', GPU_NODES, slurm_extra_nodes=['NodeName=cloud-[1-4] CPUs=128 State=CLOUD'])
    c = conf(text)
    assert 'SchedulerType' not in c
    assert c['MaxJobCount'] == '50000'
    assert c['ReturnToService'] == '1'
    assert c['MpiDefault'] == 'pmi2'
    assert c['AccountingStorageType'] == 'accounting_storage/slurmdbd'
    assert c['AccountingStorageTRES'] == 'gres/gpu'
    assert 'NodeName=cloud-[1-4] CPUs=128 State=CLOUD' in nodes.splitlines()


def test_cgroup_conf_defaults_and_omit():
    text = render('cgroup.conf.j2', GPU_NODES, slurm_cgroup_config={'ConstrainSwapSpace': 'omit', 'AllowedRAMSpace': 98})
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith('#')]
    assert lines == ['CgroupPlugin=autodetect', 'ConstrainCores=yes', 'ConstrainDevices=yes',
                     'ConstrainRAMSpace=yes', 'AllowedRAMSpace=98']


@pytest.mark.parametrize('change, restart', [
    ({'slurm_partition_options': {'Default': 'YES', 'MaxTime': '24:00:00', 'State': 'UP'}}, False),
    ({'slurm_config': {'SlurmdTimeout': 600}}, False),
    ({'slurm_mpi_default': 'pmi2'}, False),
    ({'slurm_proctrack_type': 'proctrack/linuxproc'}, True),
    ({'slurm_slurmd_port': 7818}, True),
    ({'slurm_extra_nodes': ['NodeName=cloud-1 State=CLOUD']}, True),
])
def test_restart_keys_change_only_for_settings_that_need_a_restart(change, restart):
    before = render('restart-keys.j2', GPU_NODES)
    after = render('restart-keys.j2', GPU_NODES, **change)
    assert (before != after) is restart
    assert render('slurm.conf.j2', GPU_NODES) != render('slurm.conf.j2', GPU_NODES, **change)


def test_adding_a_node_needs_a_restart():
    nodes = dict(GPU_NODES, **{'gpu-3': gpu_node('gpu-3', '10.0.1.13')})
    assert render('restart-keys.j2', GPU_NODES) != render('restart-keys.j2', nodes)


def _gpu_expression():
    tasks = yaml.safe_load((ROLE / 'tasks' / 'facts.yml').read_text())
    task = next(t for t in tasks if t['name'] == "Record the node's GPUs")
    return task['ansible.builtin.set_fact']['__slurm_node_gpus']


@pytest.mark.parametrize('node_facts, expected', [
    ({'gpus': {'source': 'detected', 'count': 8, 'model': 'NVIDIA A100-SXM4-40GB'},
      'shape_facts': {'gpu_model': 'A100', 'gpu_count': 8}}, {'count': 8, 'type': 'a100'}),
    # driver not loaded yet: the shape's count, so that slurmd reports the shortfall
    ({'gpus': {'source': 'none', 'count': 0}, 'shape_facts': {'gpu_model': 'H100', 'gpu_count': 8}},
     {'count': 8, 'type': 'h100'}),
    # unknown shape (e.g. a VM): what was detected, type from the device name
    ({'gpus': {'source': 'detected', 'count': 2, 'model': 'NVIDIA H200'}, 'shape_facts': {}},
     {'count': 2, 'type': 'h200'}),
    ({'gpus': {'source': 'none', 'count': 0}, 'shape_facts': {}}, {'count': 0, 'type': 'gpu'}),
    ({}, {'count': 0, 'type': 'gpu'}),
])
def test_node_gpus_from_node_facts(node_facts, expected):
    expr = _gpu_expression()
    t = templar({}, __slurm_nf=node_facts)
    got = {'count': int(t.template(trust_as_template(expr['count']))),
           'type': str(t.template(trust_as_template(expr['type']))).strip()}
    assert got == expected


def joining_templar(**overrides):
    """What a node that joins by itself (the pull path) has: itself in gpu_nodes, no controller."""
    loader = DataLoader()
    loader.set_basedir(str(ROLE / 'templates'))
    variables = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    variables.update(trust(dict(dict(slurm_conf_server='10.0.0.2:6817', slurm_node_name='gpu-3'), **overrides)))
    variables.update(hostvars={'gpu-3': gpu_node('inst-abcde', '10.0.1.13')}, inventory_hostname='gpu-3',
                     ansible_managed='managed', groups={'gpu_nodes': ['gpu-3']})
    return Templar(loader=loader, variables=variables)


def test_a_node_that_joins_by_itself_points_slurmd_at_the_given_controller_under_its_slurm_name():
    t = joining_templar()
    env = t.template(trust_as_template((ROLE / 'templates' / 'slurmd.env.j2').read_text()))
    assert 'SLURMD_OPTIONS="--conf-server 10.0.0.2:6817 -N gpu-3"' in env.splitlines()
    # the restart record needs no controller in the inventory, and changes with the name or server
    keys = t.template(trust_as_template((ROLE / 'templates' / 'restart-keys.j2').read_text()))
    assert 'conf_server=10.0.0.2:6817' in keys.splitlines() and 'node_name=gpu-3' in keys.splitlines()
    other = joining_templar(slurm_node_name='gpu-4').template(
        trust_as_template((ROLE / 'templates' / 'restart-keys.j2').read_text()))
    assert other != keys
    assert t.template(trust_as_template('{{ __slurm_joining | bool and __slurm_is_compute | bool '
                                        'and not __slurm_is_controller | bool }}')) is True


def test_a_pushed_node_keeps_the_controller_from_the_inventory():
    env = render('slurmd.env.j2', GPU_NODES)
    assert 'SLURMD_OPTIONS="--conf-server 10.0.0.2:6817"' in env.splitlines()


def test_cloud_gpu_nodes_get_gres_conf_lines_without_static_gpu_nodes():
    line = 'NodeName=gpu-[1-4] AutoDetect=off Name=gpu Type=a100 File=/dev/nvidia[0-7]'
    text = render('gres.conf.j2', {}, slurm_extra_gres=[line])
    assert line in text.splitlines()
    assert templar({}, slurm_extra_gres=[line]).template(trust_as_template('{{ __slurm_any_gpu }}')) is True


def test_the_controller_is_reached_on_its_private_address():
    """A bastion whose default route is a public interface (a second NIC) still sends the nodes to its
    private address: slurmd would otherwise register through NAT, under the wrong address."""
    t = templar(GPU_NODES)
    t.available_variables['hostvars']['bastion']['oci_private_ip'] = '10.0.0.7'
    text = t.template(trust_as_template((ROLE / 'templates' / 'slurm.conf.j2').read_text()))
    assert conf(text)['SlurmctldHost'] == 'bastion(10.0.0.7)'
    assert conf(render('slurm.conf.j2', GPU_NODES))['SlurmctldHost'] == 'bastion(10.0.0.2)'


def test_topology_from_where_oci_puts_the_nodes():
    """Nodes with a place (the gpu_nodes inventory's oci_*_id) give topology.conf and TopologyPlugin;
    the extra (on-demand) nodes go into the switch `unknown`; without any place, neither."""
    placed = {name: dict(node, oci_hpc_island_id='ocid1.computehpcisland.oc1..isl00001',
                         oci_network_block_id='ocid1.computenetworkblock.oc1..blk00001',
                         oci_local_block_id='ocid1.computelocalblock.oc1..loc0000%d' % i)
              for i, (name, node) in enumerate(sorted(GPU_NODES.items()), 1)}
    extra = ['NodeName=gpu-od-[1-4] CPUs=128 State=CLOUD']
    lines = [l for l in render('topology.conf.j2', placed, slurm_extra_nodes=extra).splitlines() if l.startswith('Switch')]
    assert lines == ['SwitchName=lb-loc00001 Nodes=gpu-1', 'SwitchName=lb-loc00002 Nodes=gpu-2',
                     'SwitchName=nb-blk00001 Switches=lb-loc00001,lb-loc00002',
                     'SwitchName=is-isl00001 Switches=nb-blk00001',
                     'SwitchName=unknown Nodes=gpu-od-[1-4]', 'SwitchName=root Switches=is-isl00001,unknown']
    assert conf(render('slurm.conf.j2', placed))['TopologyPlugin'] == 'topology/tree'
    assert 'TopologyPlugin=topology/tree' in render('restart-keys.j2', placed)
    assert 'TopologyPlugin' not in conf(render('slurm.conf.j2', GPU_NODES))
    assert 'TopologyPlugin' not in conf(render('slurm.conf.j2', placed, slurm_topology='none'))
    # The block plugin: a block per local block, and its plugin in slurm.conf.
    assert conf(render('slurm.conf.j2', placed, slurm_topology='block'))['TopologyPlugin'] == 'topology/block'
    blocks = [l for l in render('topology.conf.j2', placed, slurm_topology='block').splitlines() if not l.startswith('#')]
    assert blocks == ['BlockName=lb-loc00001 Nodes=gpu-1', 'BlockName=lb-loc00002 Nodes=gpu-2']


def test_on_demand_nodes_keep_the_places_the_autoscaler_found():
    """A cluster of on-demand nodes only has topology.conf from the start (all in `unknown`), and a re-run
    of the role keeps the places the autoscaler recorded (its places file, read by tasks/config.yml);
    topology.json holds what the autoscaler renders from."""
    import base64
    import json
    extra = ['NodeName=gpu-od-[1-4] CPUs=128 State=CLOUD']
    lines = [l for l in render('topology.conf.j2', {}, slurm_extra_nodes=extra).splitlines() if l.startswith('Switch')]
    assert lines == ['SwitchName=unknown Nodes=gpu-od-[1-4]']
    assert conf(render('slurm.conf.j2', {}, slurm_extra_nodes=extra))['TopologyPlugin'] == 'topology/tree'
    assert json.loads(render('topology.json.j2', {}, slurm_extra_nodes=extra)) == dict(
        kind='tree', placed={}, unknown=['gpu-od-1', 'gpu-od-2', 'gpu-od-3', 'gpu-od-4'])
    places = {'gpu-od-2': ['ocid1.computehpcisland.oc1..isl00001', 'ocid1.computenetworkblock.oc1..blk00001',
                           'ocid1.computelocalblock.oc1..loc00007'],
              'gpu-od-9': ['ocid1.computehpcisland.oc1..isl00001', 'ocid1.computenetworkblock.oc1..blk00001',
                           'ocid1.computelocalblock.oc1..loc00008']}   # no longer declared: ignored
    read = {'content': base64.b64encode(json.dumps(places).encode()).decode()}
    lines = [l for l in render('topology.conf.j2', {}, slurm_extra_nodes=extra, __slurm_topology_places_read=read).splitlines()
             if l.startswith('Switch')]
    assert lines == ['SwitchName=lb-loc00007 Nodes=gpu-od-2', 'SwitchName=nb-blk00001 Switches=lb-loc00007',
                     'SwitchName=is-isl00001 Switches=nb-blk00001', 'SwitchName=unknown Nodes=gpu-od-[1,3-4]',
                     'SwitchName=root Switches=is-isl00001,unknown']
    # The autoscaler renders the same lines from topology.json and its places.
    from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import tree_lines
    inputs = json.loads(render('topology.json.j2', {}, slurm_extra_nodes=extra))
    assert tree_lines(dict((n, p) for n, p in places.items() if n in inputs['unknown']), inputs['unknown']) == lines
