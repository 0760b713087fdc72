# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every OCID option of every module: an OCID of another resource type, or a value that is no OCID, is
refused before any call to OCI, with a message that names the option and what was given. One row per
(module, option); a module option named *_id or *_ids that has no row fails the last test."""
from __future__ import annotations

import importlib
import pkgutil

import pytest
from ansible.module_utils import basic

from ansible_collections.ocigpu.cluster.plugins import modules as modules_package
from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch
from ansible_collections.ocigpu.cluster.plugins.modules import (
    cluster_info, cluster_network, compute_cluster, file_storage, image, image_info, instance, instance_configuration,
    network, preflight)
from tests.unit.plugins.modules._helpers import mutations, run_module

REGION = 'ap-tokyo-1'
SUBNET = 'ocid1.subnet.oc1.%s.aaaaaaaasubnet' % REGION
IMAGE = 'ocid1.image.oc1.%s.aaaaaaaaimage' % REGION
INSTANCE = 'ocid1.instance.oc1.%s.aaaaaaaainstance' % REGION
CONFIGURATION = 'ocid1.instanceconfiguration.oc1.%s.aaaaaaaaconfiguration' % REGION
COMPUTE_CLUSTER = 'ocid1.computecluster.oc1.%s.aaaaaaaacomputecluster' % REGION
ISLAND = 'ocid1.computehpcisland.oc1.%s.aaaaaaaaisland' % REGION
BLOCK = 'ocid1.computenetworkblock.oc1.%s.aaaaaaaablock' % REGION
# What a user pastes by mistake: the VCN's OCID (next to the subnet's in the console), and a name.
VCN = 'ocid1.vcn.oc1.%s.aaaaaaaathevcn' % REGION
NOT_AN_OCID = 'gpu-private-subnet'


def valid_args(module, ocisim, ssh_key, ad):
    """Arguments that pass every check made without a call (their OCIDs are well formed; the resources
    they name need not exist, since each row fails before the first call)."""
    base = dict(cluster_name='c1', compartment_id=ocisim.compartment_id)
    launch = dict(base, shape='BM.GPU4.8', image_id=IMAGE, subnet_id=SUBNET, ssh_authorized_keys=[ssh_key],
                  availability_domain=ad, compute_cluster_id=COMPUTE_CLUSTER)
    return {
        cluster_info: base,
        network: dict(base, ssh_source_cidrs=['203.0.113.0/24']),
        compute_cluster: dict(base, availability_domain=ad),
        file_storage: dict(base, availability_domain=ad, subnet_id=SUBNET, allowed_cidrs=['10.0.0.0/16']),
        image_info: dict(compartment_id=ocisim.compartment_id, image_id=IMAGE),
        image: dict(base, state='absent', instance_id=INSTANCE, image_id=IMAGE),
        instance: dict(launch, display_name='c1-gpu-1'),
        instance_configuration: launch,
        cluster_network: dict(base, instance_configuration_id=CONFIGURATION, node_count=2, availability_domain=ad,
                              subnet_id=SUBNET, hpc_island_id=ISLAND, network_block_ids=[BLOCK]),
        preflight: dict(base, bastion_shape='VM.Standard.E5.Flex', bastion_ocpus=2, bastion_memory_gb=16,
                        bastion_image_os='Oracle Linux', bastion_image_os_version='9', gpu_shape='BM.GPU4.8',
                        gpu_image_name='Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0', gpu_node_count=2,
                        gpu_hpc_island_id=ISLAND, gpu_network_block_ids=[BLOCK], ssh_authorized_keys=[ssh_key]),
    }[module]


ROWS = [
    (cluster_info, 'compartment_id'),
    (network, 'compartment_id'),
    (compute_cluster, 'compartment_id'),
    (file_storage, 'compartment_id'),
    (file_storage, 'subnet_id'),
    (image_info, 'compartment_id'),
    (image_info, 'image_id'),
    (image, 'compartment_id'),
    (image, 'instance_id'),
    (image, 'image_id'),
    (instance, 'compartment_id'),
    (instance, 'image_id'),
    (instance, 'subnet_id'),
    (instance, 'compute_cluster_id'),
    (instance_configuration, 'compartment_id'),
    (instance_configuration, 'image_id'),
    (instance_configuration, 'subnet_id'),
    (instance_configuration, 'compute_cluster_id'),
    (instance_configuration, 'capacity_reservation_id'),
    (cluster_network, 'compartment_id'),
    (cluster_network, 'instance_configuration_id'),
    (cluster_network, 'subnet_id'),
    (cluster_network, 'hpc_island_id'),
    (cluster_network, 'network_block_ids'),
    (preflight, 'compartment_id'),
    (preflight, 'gpu_hpc_island_id'),
    (preflight, 'gpu_network_block_ids'),
]

# The preflight lists every problem of the plan at once and only reads: its placement OCIDs are listed
# among the problems (as the other plan checks are), its compartment is refused before any call.
LISTED = {(preflight, 'gpu_hpc_island_id'), (preflight, 'gpu_network_block_ids')}


def _name(row):
    return '%s.%s' % (row[0].__name__.rsplit('.', 1)[-1], row[1])


@pytest.mark.parametrize('wrong', [VCN, NOT_AN_OCID], ids=['vcn-ocid', 'not-an-ocid'])
@pytest.mark.parametrize('row', ROWS, ids=[_name(r) for r in ROWS])
def test_an_ocid_of_the_wrong_form_is_refused_before_any_call(row, wrong, run, ocisim, ssh_key, ad):
    module, option = row
    args = valid_args(module, ocisim, ssh_key, ad)
    args[option] = [wrong] if option.endswith('_ids') else wrong
    ocisim.calls.reset()
    result = run(module, args, fail=True)
    print(result['msg'])
    if row in LISTED:
        named = [p for p in result['problems'] if p.startswith(option)]
        assert named and wrong in named[0], result['problems']
        # Its one POST, the capacity report, creates nothing.
        assert mutations(ocisim) - ocisim.calls['POST /computeCapacityReports'] == 0, ocisim.calls.as_dict()
        return
    assert result['msg'].startswith(option), result['msg']
    assert wrong in result['msg']
    if wrong == VCN:
        assert 'is the OCID of a vcn, not of a ' in result['msg'], result['msg']
    assert ocisim.calls.total() == 0, ocisim.calls.as_dict()


def test_the_valid_arguments_pass_the_checks(run, ocisim, ssh_key, ad, capsys):
    """The rows fail for their option alone: with the valid arguments each module gets past its checks
    to its first call (where the resources they name do not exist)."""
    for module in sorted(set(r[0] for r in ROWS), key=lambda m: m.__name__):
        args = valid_args(module, ocisim, ssh_key, ad)
        assert not _launch.early_problems(args, REGION), module.__name__
        ocisim.calls.reset()
        result = run_module(module, dict(ocisim.auth_args(), **args), capsys, check=True)
        assert ocisim.calls.total() > 0, (module.__name__, result.get('msg'))


def _module_specs():
    """{module name: its option names}, from each module's main() up to its AnsibleModule."""
    class Captured(Exception):
        pass

    def capture(self, argument_spec=None, **_kwargs):
        raise Captured(argument_spec)

    specs = {}
    original = basic.AnsibleModule.__init__
    basic.AnsibleModule.__init__ = capture
    try:
        for info in pkgutil.iter_modules(modules_package.__path__):
            module = importlib.import_module('%s.%s' % (modules_package.__name__, info.name))
            if not hasattr(module, 'main'):
                continue  # documentation of an action plugin alone
            try:
                module.main()
            except Captured as exc:
                specs[info.name] = set(_names(exc.args[0]))
            assert info.name in specs, '%s: main() made no AnsibleModule' % info.name
    finally:
        basic.AnsibleModule.__init__ = original
    return specs


def _names(spec, prefix=''):
    for key, value in spec.items():
        yield prefix + key
        yield from _names(value.get('options') or {}, prefix + key + '.')


def test_every_ocid_option_has_a_row_and_a_kind():
    rows = set(_name(r) for r in ROWS)
    ocid_options = set('%s.%s' % (module, option) for module, options in _module_specs().items() for option in options
                       if option.rsplit('.', 1)[-1].endswith(('_id', '_ids')))
    assert ocid_options - rows == set()
    assert set(o.split('.', 1)[1] for o in ocid_options) <= set(_launch.OCID_OPTIONS)


def test_an_optional_ocid_left_empty_is_not_given_but_the_compartment_is_never_empty():
    assert _launch.ocid_option_problems(dict(hpc_island_id='', network_block_ids=[], compute_cluster_id=None)) == []
    assert _launch.ocid_option_problems(dict(compartment_id='')) == [
        ('compartment_id', "empty; give a compartment's or a tenancy's OCID")]
    assert _launch.ocid_option_problems(dict(compartment_id='ocid1.tenancy.oc1..aaaaaaaatenancy')) == []


@pytest.mark.parametrize('name, region, other', [
    ('Abcd:EU-FRANKFURT-1-AD-1', 'ap-tokyo-1', 'eu-frankfurt-1'),
    ('Abcd:EU-FRANKFURT-1-AD-1', 'nrt', 'eu-frankfurt-1'),        # the region given by its key
    ('Abcd:AP-TOKYO-1-AD-1', 'eu-frankfurt-1', 'ap-tokyo-1'),
    ('Abcd:AP-TOKYO-1-AD-1', 'ap-tokyo-1', None),
    ('Abcd:AP-TOKYO-1-AD-1', 'nrt', None),
    ('Abcd:PHX-AD-1', 'ap-tokyo-1', None),                        # no region identifier in the name: not judged
    ('Abcd:US-ASHBURN-AD-1', 'ap-tokyo-1', None),
    ('AP-TOKYO-1-AD-1', 'eu-frankfurt-1', None),                  # not a name of the known form: not judged
    ('Abcd:EU-FRANKFURT-1-AD-1', None, None),                     # no region known: not judged
])
def test_an_availability_domain_is_judged_by_its_name_only_where_the_name_says_its_region(name, region, other):
    problem = _launch.ad_region_problem(name, region)
    if other is None:
        assert problem is None
    else:
        assert problem.startswith("'%s' is not an availability domain of region " % name) and \
            ('its name is of region %s' % other) in problem
