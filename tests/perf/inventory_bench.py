# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark of the ocigpu.cluster.gpu_nodes inventory plugin against the OCI simulator.

Seeds a tenancy (compartments, filler instances, GPU clusters each with a bastion in a public
subnet and its nodes in a private subnet), adds latency to every request, then runs
`ansible-inventory --list` in a subprocess: once with an empty cache (cold) and once more with the
cache filled (warm). Prints wall times, the plugin's own time, the simulator's call counters and
the ratios between the two scales.

    .venv/bin/python -m tests.perf.inventory_bench                  # large and small tenancy
    .venv/bin/python -m tests.perf.inventory_bench --scale small
    .venv/bin/python -m tests.perf.inventory_bench --oracle-oci ~/src/oci-ansible-collection

--oracle-oci PATH also runs the oracle.oci `oci` inventory plugin from a local checkout of
oracle/oci-ansible-collection (never part of this repository) against the same simulator, with
its configuration filtered to GPU shapes and private IPs. That plugin has no endpoint option, so
the run goes through a small sitecustomize that points the SDK's clients at the simulator.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from tests.ocisim import Simulator
from tests.ocisim import network as sim_network
from tests.ocisim import seed as sim_seed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, '.build', 'collections')
CLUSTER_TAG = 'ocigpu-cluster'
GPU_SHAPE = 'BM.GPU4.8'
BASTION_SHAPE = 'VM.Standard.E5.Flex'
FILLER_SHAPE = 'VM.Standard.E5.Flex'

# The large tenancy, and the same layout scaled down by 8.
SCALES = {
    'large': dict(compartments=30, instances=2000, gpu_nodes=512, clusters=32, latency=0.020),
    'small': dict(compartments=4, instances=250, gpu_nodes=64, clusters=4, latency=0.020),
    # One cluster (`cluster: gpu00`) in a crowded tenancy: 4,000 instances, 24 clusters of 16 nodes.
    'crowded': dict(compartments=8, instances=4000, gpu_nodes=384, clusters=24, latency=0.020, cluster='gpu00'),
}


# -- seeding ------------------------------------------------------------------------------------

def _private_subnet(sim, vcn, compartment_id, cidr, name):
    """A second subnet in the cluster's VCN that forbids public IPs (where GPU nodes live)."""
    store = sim.store
    ctx = sim.internal_context(store.compartments[compartment_id]['_tenancy'])
    ctx.raw_body = None
    ctx._json = {'compartmentId': compartment_id, 'cidrBlock': cidr, 'vcnId': vcn['id'],  # pylint: disable=protected-access
                 'displayName': name + '-private', 'dnsLabel': 'priv', 'prohibitPublicIpOnVnic': True}
    subnet = store.subnets[sim_network.create_subnet(ctx).body['id']]
    subnet['lifecycleState'] = 'AVAILABLE'
    return subnet


def seed_gpu_cluster(sim, name, size, compartment_id, index, shape=GPU_SHAPE, tags=None, private_prefix=24):
    """One cluster as the collection builds it: VCN 10.<index>.0.0/16 with a public /24 and a
    private subnet, a bastion `<name>-bastion` with a public IP, and a cluster network of `size`
    nodes in the private subnet."""
    tags = dict(tags or {}, **{CLUSTER_TAG: name})
    with sim.store.lock:
        base = ipaddress.ip_network('10.{0}.0.0/16'.format(index))
        vcn, public = sim_seed.seed_network(sim, compartment_id, str(base), subnet_prefix=24, name=name)
        private = _private_subnet(sim, vcn, compartment_id, str(list(base.subnets(new_prefix=private_prefix))[1]),
                                  name)
        bastion_id = sim_seed.seed_instances(sim, 1, [compartment_id], shape=BASTION_SHAPE, name_prefix=name,
                                             freeform_tags=tags, assign_public_ip=True, subnet_id=public['id'])[0]
        sim.store.instances[bastion_id]['displayName'] = name + '-bastion'
        cn = sim_seed.seed_cluster(sim, name, size, shape=shape, compartment_id=compartment_id,
                                   subnet_id=private['id'], freeform_tags=tags)
    return dict(name=name, compartment_id=compartment_id, bastion=bastion_id, nodes=list(cn['instanceIds']),
                cluster_network=cn['id'], public_subnet=public['id'], private_subnet=private['id'])


def seed_tenancy(sim, compartments, instances, gpu_nodes, clusters, **_ignored):
    """The benchmark layout: `compartments` under the tenancy, `clusters` GPU clusters of
    gpu_nodes/clusters nodes spread over them, filler CPU instances up to `instances` in total."""
    comps = [sim.add_compartment('bench-{0:02d}'.format(i))['id'] for i in range(compartments)]
    per_cluster = gpu_nodes // clusters
    seeded = [seed_gpu_cluster(sim, 'gpu{0:02d}'.format(c), per_cluster, comps[c % len(comps)], c)
              for c in range(clusters)]
    filler = instances - per_cluster * clusters - clusters
    if filler > 0:
        sim_seed.seed_instances(sim, filler, comps, shape=FILLER_SHAPE, name_prefix='cpu')
    return dict(compartments=comps, clusters=seeded)


# -- the truth, from the simulator's store ---------------------------------------------------------

def expected_hosts(sim, layout):
    """{instance id: dict(private_ip, public_ip, role, cluster, bastion_public_ip, ...)}."""
    state = sim.state
    out = {}

    def primary_vnic(iid):
        for att in state.vnic_attachments.values():
            if att['instanceId'] == iid and att['lifecycleState'] == 'ATTACHED':
                vnic = state.vnics[att['vnicId']]
                if vnic['isPrimary']:
                    return vnic
        raise AssertionError('no primary VNIC for %s' % iid)

    for cluster in layout['clusters']:
        bastion_vnic = primary_vnic(cluster['bastion'])
        inst = state.instances[cluster['bastion']]
        out[cluster['bastion']] = dict(role='bastion', cluster=cluster['name'], display_name=inst['displayName'],
                                       private_ip=bastion_vnic['privateIp'], public_ip=bastion_vnic['publicIp'],
                                       shape=inst['shape'], cluster_network=None, bastion_public_ip=None,
                                       availability_domain=inst['availabilityDomain'],
                                       fault_domain=inst['faultDomain'], compartment_id=inst['compartmentId'])
        for iid in cluster['nodes']:
            vnic = primary_vnic(iid)
            inst = state.instances[iid]
            out[iid] = dict(role='gpu_node', cluster=cluster['name'], display_name=inst['displayName'],
                            private_ip=vnic['privateIp'], public_ip=vnic['publicIp'], shape=inst['shape'],
                            cluster_network=cluster['cluster_network'], bastion_public_ip=bastion_vnic['publicIp'],
                            availability_domain=inst['availabilityDomain'], fault_domain=inst['faultDomain'],
                            compartment_id=inst['compartmentId'])
    return out


def active_compartments(sim):
    """Compartments the plugin searches by default: the tenancy root and its ACTIVE subtree."""
    return sum(1 for c in sim.state.compartments.values()
               if c['_tenancy'] == sim.tenancy_id and c['lifecycleState'] == 'ACTIVE')


def expected_calls(compartments, clusters, images=2, holding=None, topology=True):
    """API requests for the benchmark layout (one page per list): the compartment listing and
    the root; list_instances per compartment (root included); in each of the `holding` compartments
    that hold a cluster (default: one per cluster) the other 4 lists and list_compute_hosts (the
    nodes are bare metal); per cluster the cluster network's instances, get_subnet +
    list_private_ips for its 2 subnets and get_vnic for the bastion; get_image per image. No term
    counts instances. Without topology, no list_compute_hosts."""
    holding = clusters if holding is None else holding
    return 2 + compartments + (5 if topology else 4) * holding + 6 * clusters + images


# -- running ansible-inventory ---------------------------------------------------------------------

def write_config(path, sim, cache_dir, extra=None):
    lines = [
        'plugin: ocigpu.cluster.gpu_nodes',
        'config_file: %s' % sim.config_file,
        'config_profile: %s' % sim.profile,
        'region: %s' % sim.region,
        'service_endpoint: %s' % sim.endpoint,
        'cache: true',
        'cache_plugin: ansible.builtin.jsonfile',
        'cache_connection: %s' % cache_dir,
        'cache_timeout: 3600',
    ]
    for key, value in (extra or {}).items():
        lines.append('%s: %s' % (key, json.dumps(value)))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def cli_env(extra=None):
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_INVENTORY_UNPARSED_FAILED='true',
               ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED='true', ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=tempfile.gettempdir(), ANSIBLE_HOME=os.path.join(tempfile.gettempdir(), 'ocigpu-bench-home'))
    env.pop('OCIGPU_SERVICE_ENDPOINT', None)
    env.update(extra or {})
    return env


def ansible_inventory(config, env=None, timeout=300):
    """Run `ansible-inventory -i config --list`; returns (wall seconds, inventory dict, output text)."""
    binary = os.path.join(os.path.dirname(sys.executable), 'ansible-inventory')
    if not os.path.exists(binary):
        binary = shutil.which('ansible-inventory') or binary
    with tempfile.NamedTemporaryFile(suffix='.json') as out:
        started = time.monotonic()
        proc = subprocess.run([binary, '-i', config, '--list', '--output', out.name, '-vvv'],
                              env=env or cli_env(), capture_output=True, text=True, timeout=timeout, check=False)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError('ansible-inventory failed (%d):\n%s\n%s'
                               % (proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
        with open(out.name) as f:
            data = json.load(f)
    return wall, data, proc.stdout + proc.stderr


def plugin_seconds(output):
    found = re.findall(r'gpu_nodes: \d+ hosts from the (?:API|cache) in ([0-9.]+) s', output)
    return float(found[-1]) if found else None


def baseline_seconds(tmp):
    """Wall time of ansible-inventory on a one-host static inventory: the process's own start-up."""
    path = os.path.join(tmp, 'static.yml')
    with open(path, 'w') as f:
        f.write('all:\n  hosts:\n    localhost:\n')
    best = None
    for dummy in range(2):
        wall = ansible_inventory(path)[0]
        best = wall if best is None else min(best, wall)
    return best


def plain(value):
    """ansible-inventory marks strings from plugins as {"__ansible_unsafe": text}; back to text."""
    if isinstance(value, dict):
        if set(value) == {'__ansible_unsafe'}:
            return value['__ansible_unsafe']
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def hosts_of(data):
    return {name: plain(data['_meta']['hostvars'][name]) for name in data['_meta']['hostvars']}


def measure(scale, tmp, figures=None, oracle_oci=None, params=None, topology=True):
    """Seed a simulator at this scale, run cold and warm, return the figures (topology=False: the
    plugin's topology option off, no list_compute_hosts)."""
    params = dict(params or SCALES[scale])
    sim = Simulator(manual_clock=False).start()
    try:
        label = scale if topology else scale + '-no-topology'
        sim.write_config(os.path.join(tmp, '%s-oci-config' % label))
        started = time.monotonic()
        layout = seed_tenancy(sim, **params)
        seed_s = time.monotonic() - started
        one = params.get('cluster')
        if one:
            layout = dict(layout, clusters=[c for c in layout['clusters'] if c['name'] == one])
        truth = expected_hosts(sim, layout)
        sim.faults.add(route='*', latency=params['latency'])
        cache_dir = os.path.join(tmp, '%s-cache' % label)
        extra = dict(cluster=one) if one else {}
        if not topology:
            extra['topology'] = False
        config = write_config(os.path.join(tmp, '%s.gpu_nodes.yml' % label), sim, cache_dir, extra=extra)

        sim.calls.reset()
        cold_wall, data, output = ansible_inventory(config)
        cold_calls = sim.calls.as_dict()
        cold_plugin = plugin_seconds(output)
        found = hosts_of(data)
        gpu = [h for h in found.values() if h.get('ocigpu_role') == 'gpu_node']
        check_against_truth(found, truth)

        sim.calls.reset()
        warm_wall, data2, output2 = ansible_inventory(config)
        warm_calls = sim.calls.total()
        if hosts_of(data2) != found:
            raise AssertionError('warm (cached) inventory differs from the cold one')
        clusters = len(layout['clusters'])
        result = dict(scale=label, params=params, seed_seconds=round(seed_s, 2), hosts=len(found),
                      gpu_nodes=len(gpu), cold_wall=cold_wall, cold_plugin=cold_plugin,
                      warm_wall=warm_wall, warm_plugin=plugin_seconds(output2),
                      cold_calls=sum(cold_calls.values()), cold_calls_by_route=cold_calls, warm_calls=warm_calls,
                      expected_calls=expected_calls(active_compartments(sim), clusters,
                                                    holding=len(set(c['compartment_id'] for c in layout['clusters'])),
                                                    topology=topology))
        if oracle_oci:
            result['oracle'] = measure_oracle(sim, oracle_oci, tmp, scale, cluster=one)
        return result
    finally:
        sim.stop()


def check_against_truth(found, truth):
    """The inventory has exactly the simulator's GPU nodes and bastions, with the right IPs,
    jump through the bastion and cluster network."""
    by_id = {h['oci_instance_id']: h for h in found.values()}
    if set(by_id) != set(truth):
        missing = set(truth) - set(by_id)
        extra = set(by_id) - set(truth)
        raise AssertionError('inventory != truth: %d missing, %d unexpected' % (len(missing), len(extra)))
    for iid, want in truth.items():
        got = by_id[iid]
        problems = []
        if got['oci_private_ip'] != want['private_ip'] or got['oci_public_ip'] != want['public_ip']:
            problems.append('IPs %s/%s != %s/%s' % (got['oci_private_ip'], got['oci_public_ip'],
                                                    want['private_ip'], want['public_ip']))
        if got['ocigpu_role'] != want['role'] or got['ocigpu_cluster'] != want['cluster']:
            problems.append('role/cluster')
        if want['role'] == 'gpu_node':
            if got['ansible_host'] != want['private_ip']:
                problems.append('ansible_host')
            if not got.get('ansible_ssh_common_args', '').endswith(" opc@%s'" % want['bastion_public_ip']):
                problems.append('jump %r' % got.get('ansible_ssh_common_args'))
            if got['oci_cluster_network_id'] != want['cluster_network']:
                problems.append('cluster network')
            if got['ocigpu_rdma_index'] != int(want['private_ip'].rsplit('.', 1)[1]):
                problems.append('rdma index')
        elif got['ansible_host'] != want['public_ip']:
            problems.append('bastion ansible_host')
        if problems:
            raise AssertionError('%s (%s): %s' % (want['display_name'], iid, '; '.join(problems)))


# -- oracle.oci, side by side (local comparison only) ------------------------------------------------

_SITECUSTOMIZE = '''
import os
import oci.base_client
_init = oci.base_client.BaseClient.__init__
def _patched(self, *args, **kwargs):
    kwargs['service_endpoint'] = os.environ['BENCH_OCI_ENDPOINT']
    _init(self, *args, **kwargs)
oci.base_client.BaseClient.__init__ = _patched
'''


def measure_oracle(sim, checkout, tmp, scale, cluster=None):
    """Run oracle.oci's `oci` inventory plugin against the same simulator (GPU shapes, private IPs).

    For one cluster it filters on the cluster's freeform tag with its static `filters` option (which
    works under ansible-core 2.19), not on the shape: its best working configuration for that host set."""
    colls = os.path.join(tmp, 'oracle-collections')
    target = os.path.join(colls, 'ansible_collections', 'oracle', 'oci')
    if not os.path.exists(target):
        os.makedirs(os.path.dirname(target))
        os.symlink(os.path.abspath(os.path.expanduser(checkout)), target)
    shim = os.path.join(tmp, 'oracle-shim')
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, 'sitecustomize.py'), 'w') as f:
        f.write(_SITECUSTOMIZE)
    config = os.path.join(tmp, '%s.oci.yml' % scale)
    with open(config, 'w') as f:
        f.write('\n'.join([
            'plugin: oracle.oci.oci',
            'config_file: %s' % sim.config_file,
            'config_profile: %s' % sim.profile,
            'regions: [%s]' % sim.region,
            'hostname_format: private_ip',
            'fetch_db_hosts: false',
            'enable_ipv6: false',
        ] + (['filters:', '  - freeform_tags:', '      %s: %s' % (CLUSTER_TAG, cluster)] if cluster else [
            'include_host_filters:',
            '  - "shape is match(\'.*GPU.*\')"',
        ])) + '\n')
    env = cli_env(dict(ANSIBLE_COLLECTIONS_PATH=colls + os.pathsep + COLLECTIONS,
                       PYTHONPATH=shim + os.pathsep + os.environ.get('PYTHONPATH', ''),
                       BENCH_OCI_ENDPOINT=sim.endpoint))
    sim.calls.reset()
    try:
        wall, data, _output = ansible_inventory(config, env=env, timeout=1800)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return dict(error=str(exc)[-2000:], calls=sim.calls.total())
    hosts = list(hosts_of(data))
    return dict(wall=wall, hosts=len(hosts), calls=sim.calls.total(), calls_by_route=sim.calls.as_dict())


# -- report ------------------------------------------------------------------------------------------

def report(results, baseline):
    lines = []
    out = lines.append
    out('ansible-inventory start-up alone (static one-host inventory): %.2f s' % baseline)
    out('')
    out('%-6s %5s %6s %5s %4s | %9s %9s %7s %6s | %9s %9s %5s' % (
        'scale', 'comps', 'insts', 'gpu', 'clus', 'cold wall', 'cold plug', 'calls', 'expect',
        'warm wall', 'warm plug', 'calls'))
    for r in results:
        p = r['params']
        out('%-6s %5d %6d %5d %4d | %8.2fs %8.2fs %7d %6d | %8.2fs %8.3fs %5d' % (
            r['scale'], p['compartments'], p['instances'], r['gpu_nodes'], p['clusters'], r['cold_wall'],
            r['cold_plugin'] or -1, r['cold_calls'], r['expected_calls'], r['warm_wall'], r['warm_plugin'] or -1,
            r['warm_calls']))
    if len(results) == 2:
        a, b = results
        pa, pb = a['params'], b['params']
        out('')
        out('ratio %s/%s: instances x%.1f, GPU nodes x%.1f, compartments x%.1f, clusters x%.1f -> API calls x%.2f'
            % (a['scale'], b['scale'], pa['instances'] / pb['instances'], a['gpu_nodes'] / b['gpu_nodes'],
               (pa['compartments'] + 1) / (pb['compartments'] + 1), pa['clusters'] / pb['clusters'],
               a['cold_calls'] / b['cold_calls']))
    for r in results:
        out('')
        out('%s: calls per instance %.3f; by route: %s' % (
            r['scale'], r['cold_calls'] / r['params']['instances'],
            ', '.join('%s=%d' % kv for kv in sorted(r['cold_calls_by_route'].items()))))
        if 'oracle' in r:
            o = r['oracle']
            if 'error' in o:
                out('%s: oracle.oci failed after %d calls: %s' % (r['scale'], o['calls'], o['error']))
            else:
                out('%s: oracle.oci oci plugin: %.2f s wall, %d hosts, %d API calls (gpu_nodes: %.2f s, %d calls)'
                    % (r['scale'], o['wall'], o['hosts'], o['calls'], r['cold_wall'], r['cold_calls']))
                out('    by route: ' + ', '.join('%s=%d' % kv for kv in sorted(o['calls_by_route'].items())))
    out('')
    out('reproduce: cd %s && .venv/bin/python -m tests.perf.inventory_bench %s' % (ROOT, ' '.join(sys.argv[1:])))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--scale', choices=['both', 'large', 'small', 'crowded', 'all'], default='both',
                        help='both: large and small; crowded: one cluster among 24 in 4,000 instances; all: the three')
    parser.add_argument('--oracle-oci', metavar='PATH', help='local checkout of oracle/oci-ansible-collection')
    parser.add_argument('--json', metavar='FILE', help='also write the figures as JSON')
    parser.add_argument('--no-topology-too', action='store_true',
                        help='measure each scale a second time with the topology option off (no list_compute_hosts)')
    args = parser.parse_args(argv)
    scales = dict(both=['large', 'small'], all=['large', 'small', 'crowded']).get(args.scale, [args.scale])
    tmp = tempfile.mkdtemp(prefix='ocigpu-inventory-bench-')
    try:
        baseline = baseline_seconds(tmp)
        results = [measure(s, tmp, oracle_oci=args.oracle_oci) for s in scales]
        if args.no_topology_too:
            results += [measure(s, tmp, topology=False) for s in scales]
        print(report(results, baseline))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(dict(baseline=baseline, results=results), f, indent=2)
        failed = False
        for r in results:
            if r['scale'] == 'large':
                ok = r['cold_wall'] < 3.0 and r['warm_plugin'] < 0.5
                figures = (r['cold_wall'], r['warm_plugin'], r['warm_wall'], baseline, r['hosts'], 'PASS' if ok else 'FAIL')
                print('acceptance (large): cold discovery, whole ansible-inventory run %.2f s < 3 s; warm cache, '
                      'plugin %.3f s < 0.5 s (whole run %.2f s: %.2f s start-up, the rest is ansible-inventory '
                      'writing %d hosts as JSON): %s' % figures)
                failed = failed or not ok
            elif r['scale'] == 'crowded':
                ok = r['cold_calls'] <= 30 and r['cold_plugin'] <= 1.0
                print('acceptance (crowded): one cluster of %d hosts among %d clusters and %d instances: %d API '
                      'calls <= 30, plugin %.2f s cold <= 1 s: %s' % (
                          r['hosts'], r['params']['clusters'], r['params']['instances'], r['cold_calls'],
                          r['cold_plugin'], 'PASS' if ok else 'FAIL'))
                failed = failed or not ok
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
