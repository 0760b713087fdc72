# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The OCI view of a cluster's nodes (controller/ocigpu_control/view.py, `ocigpu-slurm-autoscaler nodes`)
against the simulator: on-demand nodes, one whose instance was terminated, a static node, local blocks
from the compute hosts or from the places file, and the program's answer when OCI cannot be asked."""
from __future__ import annotations

import io
import json

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch
from ocigpu_control import programs
from ocigpu_control import scaler as _autoscale
from ocigpu_control.view import KEYS, NodesView
from tests.unit.controller.test_autoscale import (  # noqa: F401 pylint: disable=unused-import
    config, sim, write_config)


def by_name(records):
    found = {}
    for record in records:
        found.setdefault(record['name'], []).append(record)
    return found


def cluster(sim, config, tmp_path):  # pylint: disable=redefined-outer-name
    """gpu-1 running in its cluster network, gpu-2 resumed then suspended (its instance TERMINATED), and a
    static cluster network of two instances, one tagged st-1 (as the loop tags a replacement)."""
    scaler = _autoscale.Autoscaler(config)
    first, = scaler.resume('gpu-1')
    second, = scaler.resume('gpu-2')
    scaler.suspend('gpu-2')
    res = scaler.ops.create('as-static', dict(node_count=2, instance_configuration_id=config['instance_configuration_id'],
                                              availability_domain=config['availability_domain'],
                                              subnet_id=config['subnet_id'], freeform_tags={'ocigpu-cluster': 'as'}))
    members = scaler.ops.nodes(res.id)
    _launch.label_instance(scaler.session, members[0]['id'], freeform_tags={'ocigpu-slurm-name': 'st-1'})
    conf = dict(config, static=dict(cluster_network_id=res.id, nodes='st-[1-2]'))
    return conf, first, second, res, members


def test_the_view_lists_running_terminated_and_static_instances_with_their_cluster_networks(sim, config, tmp_path):
    conf, first, second, res, members = cluster(sim, config, tmp_path)
    records = NodesView(conf).nodes()
    assert all(sorted(r) == sorted(KEYS) for r in records)
    names = by_name(records)
    assert sorted(names) == ['gpu-1', 'gpu-2', 'st-1']  # the untagged member is no node of a static name
    gpu1, = names['gpu-1']
    assert (gpu1['instance_id'], gpu1['instance_state'], gpu1['kind']) == (first['id'], 'RUNNING', 'on_demand')
    assert gpu1['private_ip'] == first['private_ip'] and gpu1['cluster_network_id'] == first['cluster_network_id']
    assert gpu1['cluster_network_state'] == 'RUNNING' and gpu1['cluster_network_name']
    assert gpu1['availability_domain'] == config['availability_domain'] and gpu1['fault_domain']
    # gpu-2's instance is still listed, TERMINATED, with the cluster network it was in (found by its tag).
    gpu2, = names['gpu-2']
    assert (gpu2['instance_id'], gpu2['instance_state'], gpu2['private_ip']) == (second['id'], 'TERMINATED', None)
    assert gpu2['cluster_network_id'] == second['cluster_network_id']
    assert gpu2['cluster_network_state'] in ('TERMINATING', 'TERMINATED')
    st1, = names['st-1']
    assert (st1['instance_id'], st1['kind'], st1['cluster_network_id']) == (members[0]['id'], 'static', res.id)
    assert st1['private_ip'] == members[0]['private_ip']
    # The simulator's compute hosts give each running instance its local block.
    assert gpu1['local_block'] and st1['local_block'] and gpu2['local_block'] is None


def test_local_blocks_come_from_the_places_file_when_the_policy_hides_the_hosts(sim, config, tmp_path):
    places = tmp_path / 'places.json'
    places.write_text(json.dumps({'gpu-1': ['island', 'nb', 'lb-from-places']}))
    conf = dict(config, topology=dict(places=str(places)))
    _autoscale.Autoscaler(conf).resume('gpu-1')
    sim.faults.error(404, route='GET /computeHosts', count=10)
    gpu1, = NodesView(conf).nodes()
    assert gpu1['local_block'] == 'lb-from-places'


def test_the_program_prints_the_view_and_says_when_oci_cannot_be_asked(sim, config, tmp_path, capsys):
    _autoscale.Autoscaler(config).resume('gpu-1')
    path = write_config(tmp_path, config)
    out = io.StringIO()
    assert programs.main(['--config', path, 'nodes'], out=out) == 0
    assert [r['name'] for r in json.loads(out.getvalue())] == ['gpu-1']
    assert 'service: no heartbeat' in capsys.readouterr().err
    sim.faults.error(500, route='GET /instances', count=100)
    out = io.StringIO()
    assert programs.main(['--config', path, 'nodes'], out=out) == 1
    assert out.getvalue() == '' and 'OCI cannot be asked' in capsys.readouterr().err
    assert programs.main(['--config', path, 'nodes', 'gpu-1'], out=out) == 2  # no hostlist


def test_an_instance_of_an_untagged_cluster_network_gives_its_availability_domain_as_its_source(sim, config, tmp_path):
    _autoscale.Autoscaler(config).resume('gpu-1')
    gpu1, = NodesView(config).nodes()
    assert gpu1['capacity_source'] == config['availability_domain']
