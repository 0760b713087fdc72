# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Invalid input fails before the first mutating API call, with a message that names the option."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import (
    cluster_network, compute_cluster, instance, instance_configuration, network)
from tests.unit.plugins.modules._helpers import mutations

SSH = ['203.0.113.0/24']
GOOD_KEY = None  # filled from the ssh_key fixture
VCN = '<the VCN of the network>'  # replaced by the VCN's OCID once the network exists
NO_SUBNET = 'ocid1.subnet.oc1.ap-tokyo-1.aaaaaaaanosuchsubnet'
GPU_IMAGE = 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'
FLEX = dict(shape='VM.Standard.E5.Flex', shape_config=dict(ocpus=2, memory_in_gbs=16))


def net_case(**kw):
    return ('network', dict(dict(ssh_source_cidrs=SSH), **kw))


CASES = {
    'vcn cidr not a cidr': (net_case(vcn_cidr='10.0.0.0/33'), 'vcn_cidr'),
    'vcn cidr garbage': (net_case(vcn_cidr='ten-dot-oh'), 'vcn_cidr'),
    'vcn prefix too wide (/8)': (net_case(vcn_cidr='10.0.0.0/8'), 'vcn_cidr'),
    'subnet /31': (net_case(private_subnet_cidr='10.0.1.0/31'), 'private_subnet_cidr'),
    'subnet outside the vcn': (net_case(public_subnet_cidr='10.1.0.0/24'), 'public_subnet_cidr'),
    'subnets overlap': (net_case(private_subnet_cidr='10.0.0.128/25'), 'private_subnet_cidr'),
    'subnet host bits set': (net_case(public_subnet_cidr='10.0.0.5/24'), 'public_subnet_cidr'),
    'ipv6 vcn': (net_case(vcn_cidr='fd00::/48'), 'vcn_cidr'),
    'ssh cidrs missing': (('network', {}), 'ssh_source_cidrs'),
    'ssh cidr malformed': (net_case(ssh_source_cidrs=['203.0.113.0/24', 'my-laptop']), 'ssh_source_cidrs'),
    'dns label with a dash': (net_case(dns_label='gpu-net'), 'dns_label'),
    'extra rule bad protocol': (net_case(extra_ingress_rules=[dict(source='10.0.0.0/24', protocol='gre?')]),
                                'extra_ingress_rules[0].protocol'),
    'extra rule port range upside down': (net_case(extra_ingress_rules=[dict(source='10.0.0.0/24', port_min=9000,
                                                                             port_max=80)]), 'extra_ingress_rules[0].port_min'),
    'unknown gpu shape': (('instance', dict(shape='BM.GPU9.8')), 'shape'),
    'not a shape name': (('instance', dict(shape='gpu-large')), 'shape'),
    'flex shape without shape_config': (('instance', dict(shape='VM.Standard.E5.Flex', shape_config=None)), 'shape_config'),
    'malformed ssh key': (('instance', dict(ssh_authorized_keys=['ssh-rsa not-base64!!'])), 'ssh_authorized_keys[0]'),
    'ssh key type mismatch': (('instance', dict(ssh_authorized_keys=['ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIBdU9qg2T2Ew6rWq7cW9nP5a0dXq3w1mC0p9QoFv2oKk'])),
                              'ssh_authorized_keys[0]'),
    'image name matches nothing': (('instance', dict(image_os=None, image_name='Oracle-Linux-6-GPU')), 'image_name'),
    'image os matches nothing': (('instance', dict(image_os='Windows')), 'image_os'),
    'image id not an ocid': (('instance', dict(image_os=None, image_id='ami-123')), 'image_id'),
    'boot volume too small': (('instance', dict(boot_volume_size_gb=20)), 'boot_volume_size_gb'),
    'user data file missing': (('instance', dict(user_data_file='/nonexistent/cloud-init.yml')), 'user_data_file'),
    'missing compartment': (('instance', dict(compartment_id=None)), 'compartment_id'),
    'missing subnet': (('instance', dict(subnet_id=None)), 'subnet_id'),
    'node count 0': (('cluster_network', dict(node_count=0)), 'node_count'),
    'cluster network of a non-RDMA shape': (('cluster_network', dict(instance_configuration_id='BM.GPU3.8')),
                                            'instance_configuration_id'),
    'cluster network missing configuration': (('cluster_network', dict(instance_configuration_id=None)),
                                              'instance_configuration_id'),
    'configuration of unknown shape': (('instance_configuration', dict(shape='BM.GPU.X1.8')), 'shape'),
    'compute cluster without ad': (('compute_cluster', dict(availability_domain=None)), 'availability_domain'),
    'bad config profile': (('compute_cluster', dict(config_profile='NOPE')), 'config_profile'),
    'compute cluster in an unknown availability domain': (('compute_cluster', dict(availability_domain='Abcd:AP-TOKYO-1-AD-9')),
                                                          'availability_domain'),
    'compute cluster name over 255': (('compute_cluster', dict(display_name='k' * 256)), 'display_name'),
    # Issue 28: what OCI itself would refuse, or what could never launch, is refused before the first call.
    'empty cluster name (network)': (net_case(cluster_name=''), 'cluster_name'),
    'blank cluster name (instance)': (('instance', dict(cluster_name='  ')), 'cluster_name'),
    'empty cluster name (cluster network)': (('cluster_network', dict(cluster_name='')), 'cluster_name'),
    'cluster name longer than a tag value': (('instance', dict(cluster_name='c' * 257)), 'cluster_name'),
    'network names over 255 characters': (net_case(cluster_name='n' * 250), 'cluster_name'),
    'instance display name over 255': (('instance', dict(display_name='i' * 256)), 'display_name'),
    'empty instance display name': (('instance', dict(display_name='')), 'display_name'),
    'configuration name over 255 with its hash': (('instance_configuration', dict(display_name='t' * 250)), 'display_name'),
    'cluster network pool name over 255': (('cluster_network', dict(display_name='p' * 252)), 'display_name'),
    'fault domain 9 (instance)': (('instance', dict(fault_domain='FAULT-DOMAIN-9')), 'fault_domain'),
    'fault domain 9 (configuration)': (('instance_configuration', dict(fault_domain='FAULT-DOMAIN-9')), 'fault_domain'),
    'availability domain of another region': (('instance_configuration', dict(availability_domain='Abcd:EU-FRANKFURT-1-AD-1')),
                                              'availability_domain'),
    'availability domain 9 (instance)': (('instance', dict(availability_domain='Abcd:AP-TOKYO-1-AD-9')),
                                         'availability_domain'),
    'availability domain 9 (cluster network)': (('cluster_network', dict(availability_domain='Abcd:AP-TOKYO-1-AD-9')),
                                                'availability_domain'),
    'vcn ocid as subnet (configuration)': (('instance_configuration', dict(subnet_id=VCN)), 'subnet_id'),
    'vcn ocid as subnet (instance)': (('instance', dict(subnet_id=VCN)), 'subnet_id'),
    'vcn ocid as subnet (cluster network)': (('cluster_network', dict(subnet_id=VCN)), 'subnet_id'),
    'unknown subnet (instance)': (('instance', dict(subnet_id=NO_SUBNET)), 'subnet_id'),
    'unknown subnet (configuration)': (('instance_configuration', dict(subnet_id=NO_SUBNET)), 'subnet_id'),
    'unknown subnet (cluster network)': (('cluster_network', dict(subnet_id=NO_SUBNET)), 'subnet_id'),
    'public ip on the private subnet (configuration)': (('instance_configuration', dict(assign_public_ip=True)),
                                                        'assign_public_ip'),
    'public ip on the private subnet (instance)': (('instance', dict(assign_public_ip=True)), 'assign_public_ip'),
    'gpu image on a flex shape (configuration)': (('instance_configuration', dict(FLEX, image_os=None, image_name=GPU_IMAGE)),
                                                  'image_name'),
    'gpu image on a flex shape (instance)': (('instance', dict(FLEX, image_os=None, image_name=GPU_IMAGE)), 'image_name'),
    'flex ocpus beyond the shape': (('instance', dict(FLEX, shape_config=dict(ocpus=500))), 'shape_config.ocpus'),
    'flex ocpus negative': (('instance', dict(FLEX, shape_config=dict(ocpus=-2))), 'shape_config.ocpus'),
    'flex memory beyond the shape': (('instance', dict(FLEX, shape_config=dict(ocpus=2, memory_in_gbs=4000))),
                                     'shape_config.memory_in_gbs'),
    'flex memory per ocpu (configuration)': (('instance_configuration', dict(FLEX, shape_config=dict(ocpus=1, memory_in_gbs=200))),
                                             'shape_config.memory_in_gbs'),
}

MODULES = dict(network=network, instance=instance, cluster_network=cluster_network,
               instance_configuration=instance_configuration, compute_cluster=compute_cluster)


@pytest.fixture
def valid(ocisim, run, base, ssh_key, ad):
    """Valid arguments for a module, built on real resources (only those it needs), so each case differs
    from a working call by one option."""
    def build(module_name, gpu3=False):
        if module_name in ('network', 'compute_cluster'):
            return dict(base, availability_domain=ad) if module_name == 'compute_cluster' else dict(base)
        net = run(network, dict(base, ssh_source_cidrs=SSH))['network']
        launch = dict(base, shape='BM.GPU4.8', image_os='Oracle Linux', subnet_id=net['private_subnet_id'],
                      ssh_authorized_keys=[ssh_key], availability_domain=ad)
        if module_name == 'instance':
            return dict(launch, display_name='c1-gpu-1')
        if module_name == 'instance_configuration':
            return launch
        cfg = run(instance_configuration, dict(launch, shape='BM.GPU3.8') if gpu3 else launch)['instance_configuration']
        return dict(base, instance_configuration_id=cfg['id'], node_count=2, availability_domain=ad,
                    subnet_id=net['private_subnet_id'])
    return build


def test_there_are_at_least_15_cases():
    assert len(CASES) >= 15


@pytest.mark.parametrize('name', sorted(CASES))
def test_bad_input_fails_before_any_mutation(name, valid, run, ocisim):
    (module_name, changes), option = CASES[name]
    gpu3 = changes.get('instance_configuration_id') == 'BM.GPU3.8'
    args = valid(module_name, gpu3=gpu3)
    if gpu3:
        changes = {}
    args.update(changes)
    if VCN in args.values():
        vcn = ocisim.state.find('vcns', displayName='c1-vcn')[0]['id']
        args = dict((k, vcn if v == VCN else v) for k, v in args.items())
    args = dict((k, v) for k, v in args.items() if v is not None)
    ocisim.calls.reset()
    result = run(MODULES[module_name], args, fail=True)
    print("%-40s %s" % (name, result["msg"]))
    assert option in result["msg"], result["msg"]
    assert mutations(ocisim) == 0, ocisim.calls.as_dict()
