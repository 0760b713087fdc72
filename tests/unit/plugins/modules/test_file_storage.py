# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shared file system on OCI File Storage (issue 31): file system, mount target and export against the
simulator - created in order and adopted on a re-run, tags and client options changed in place, what OCI
cannot change refused before any call, deleted in the reverse order, check mode, and bad input refused
before the first call."""
from __future__ import annotations

import ipaddress
import pathlib

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.ocigpu.cluster.plugins.modules import cluster_info, file_storage, network
from tests.ocisim.filestorage import client_options_for
from tests.unit.plugins.modules._helpers import live, mutations

SSH = ['203.0.113.0/24']
ROOT = pathlib.Path(__file__).resolve().parents[4]


@pytest.fixture
def home(ocisim, run, base, ad):
    """Valid arguments, on the private subnet of a real network."""
    net = run(network, dict(base, ssh_source_cidrs=SSH))['network']
    return dict(base, availability_domain=ad, subnet_id=net['private_subnet_id'], allowed_cidrs=['10.0.0.0/16'])


def test_created_in_order_adopted_changed_in_place_and_deleted(run, ocisim, home, base):
    first = run(file_storage, home)
    fs = first['file_storage']
    assert first['changed']
    assert [fs[p]['lifecycle_state'] for p in ('file_system', 'mount_target', 'export')] == ['ACTIVE'] * 3
    assert fs['file_system']['display_name'] == 'c1-home' and fs['mount_target']['display_name'] == 'c1-home-mt'
    subnet = ocisim.state.get(home['subnet_id'])
    assert ipaddress.ip_address(fs['mount_target']['ip_address']) in ipaddress.ip_network(subnet['cidrBlock'])
    assert fs['mount_source'] == fs['mount_target']['ip_address'] + ':/home'
    export = ocisim.state.get(fs['export']['id'])
    assert export['fileSystemId'] == fs['file_system']['id'] and export['exportSetId'] == fs['mount_target']['export_set_id']
    assert export['exportOptions'][0]['source'] == '10.0.0.0/16' and export['exportOptions'][0]['identitySquash'] == 'NONE'
    assert ocisim.state.get(fs['file_system']['id'])['freeformTags'] == {'ocigpu-cluster': 'c1'}

    # cluster_info finds the file system and the mount target, and counts them as billable.
    info = run(cluster_info, dict(base))
    assert sorted((p['kind'], p['id']) for p in info['file_storage']) == [
        ('file_system', fs['file_system']['id']), ('mount_target', fs['mount_target']['id'])]
    assert info['billable'] == 2

    # A re-run adopts all three and calls nothing that changes.
    ocisim.calls.reset()
    again = run(file_storage, home)
    assert not again['changed'] and mutations(ocisim) == 0 and again['file_storage'] == fs

    # Tags and client options change in place; check mode only predicts.
    changed = dict(home, freeform_tags={'team': 'ml'}, allowed_cidrs=['10.0.0.0/16', '192.168.0.0/16'])
    predicted = run(file_storage, changed, check=True, diff=True)
    assert predicted['changed'] and mutations(ocisim) == 0
    assert predicted['diff']['after']['export']['export_options'][1]['source'] == '192.168.0.0/16'
    result = run(file_storage, changed)
    assert result['changed'] and result['file_storage']['file_system']['id'] == fs['file_system']['id']
    assert ocisim.state.get(fs['mount_target']['id'])['freeformTags']['team'] == 'ml'
    assert [o['source'] for o in ocisim.state.get(fs['export']['id'])['exportOptions']] == ['10.0.0.0/16', '192.168.0.0/16']
    assert not run(file_storage, changed)['changed']

    # What OCI cannot change is refused before anything changes.
    ocisim.calls.reset()
    moved = run(file_storage, dict(changed, export_path='/scratch'), fail=True)
    assert moved['msg'].startswith('export_path: the file system is exported as /home') and mutations(ocisim) == 0
    other = run(network, dict(base, cluster_name='c2', ssh_source_cidrs=SSH, vcn_cidr='10.1.0.0/16',
                              public_subnet_cidr='10.1.0.0/24', private_subnet_cidr='10.1.1.0/24'))['network']
    ocisim.calls.reset()
    blocked = run(file_storage, dict(changed, subnet_id=other['private_subnet_id']), fail=True)
    assert blocked['msg'].startswith('subnet_id: the mount target') and mutations(ocisim) == 0

    # While the mount target holds an address in the private subnet, the network cannot go.
    failed = run(network, dict(base, ssh_source_cidrs=SSH, state='absent'), fail=True)
    assert 'mount target' in failed['msg']

    # Deleted in the reverse order (OCI refuses any other), then nothing left; a second run does nothing.
    gone = run(file_storage, dict(home, state='absent'))
    assert gone['changed'] and gone['file_storage']['file_system']['id'] == fs['file_system']['id']
    assert live(ocisim, 'exports') == [] and live(ocisim, 'mount_targets') == [] and live(ocisim, 'file_systems') == []
    assert run(cluster_info, dict(base))['billable'] == 0
    ocisim.calls.reset()
    assert not run(file_storage, dict(home, state='absent'))['changed'] and mutations(ocisim) == 0
    assert run(network, dict(base, ssh_source_cidrs=SSH, state='absent'))['changed']


def test_check_mode_creates_nothing(run, ocisim, home):
    ocisim.calls.reset()
    result = run(file_storage, home, check=True)
    assert result['changed'] and mutations(ocisim) == 0
    assert result['file_storage']['file_system']['id'] is None and result['file_storage']['mount_source'] is None


def test_a_missing_part_is_made_again_and_the_others_adopted(run, ocisim, home):
    fs = run(file_storage, home)['file_storage']
    # Someone deleted the export by hand: only the export is made again.
    ocisim.state.exports[fs['export']['id']]['lifecycleState'] = 'DELETED'
    ocisim.calls.reset()
    again = run(file_storage, home)['file_storage']
    assert ocisim.calls.count('POST *') == 1 and ocisim.calls.count('POST /exports') == 1
    assert again['file_system']['id'] == fs['file_system']['id'] and again['mount_target']['id'] == fs['mount_target']['id']
    assert again['export']['id'] != fs['export']['id'] and again['mount_source'] == fs['mount_source']


@pytest.mark.parametrize('change, option', [
    (dict(export_path='home'), 'export_path'),
    (dict(export_path='/home/'), 'export_path'),
    (dict(export_path='/home//alice'), 'export_path'),
    (dict(allowed_cidrs=['10.0.0.0/33']), 'allowed_cidrs'),
    (dict(allowed_cidrs=['the-vcn']), 'allowed_cidrs'),
    (dict(allowed_cidrs=['10.0.0.5/16']), 'allowed_cidrs'),
    (dict(allowed_cidrs=[]), 'allowed_cidrs'),
    (dict(hostname_label='1home'), 'hostname_label'),
    (dict(subnet_id=None), 'subnet_id'),
    (dict(availability_domain=None), 'availability_domain'),
    (dict(display_name='h' * 253), 'display_name'),
    (dict(cluster_name=''), 'cluster_name'),
])
def test_bad_input_is_refused_before_any_call(run, ocisim, home, change, option):
    ocisim.calls.reset()
    result = run(file_storage, dict(home, **change), fail=True)
    assert result['msg'].startswith(option + ':'), result['msg']
    assert mutations(ocisim) == 0


# The shared home's export as provision.yml makes it: the controller keeps root, root on every other
# host of the VCN is nobody on the file system (so it cannot rewrite the directory of users).
SQUASHED = [{'source': '10.0.0.2/32', 'identity_squash': 'NONE'}, {'source': '10.0.0.0/16', 'identity_squash': 'ROOT'}]


def test_root_is_squashed_for_the_network_and_kept_for_the_controller(run, ocisim, home):
    args = dict(home, allowed_cidrs=None, export_options=SQUASHED)
    fs = run(file_storage, args)['file_storage']
    export = ocisim.state.get(fs['export']['id'])
    assert [(o['source'], o['identitySquash'], o['anonymousUid'], o['anonymousGid'], o['requirePrivilegedSourcePort'],
             o['access']) for o in export['exportOptions']] == [
        ('10.0.0.2/32', 'NONE', 65534, 65534, True, 'READ_WRITE'),
        ('10.0.0.0/16', 'ROOT', 65534, 65534, True, 'READ_WRITE')]
    assert fs['export']['export_options'][1] == dict(source='10.0.0.0/16', access='READ_WRITE', identity_squash='ROOT',
                                                     anonymous_uid=65534, anonymous_gid=65534,
                                                     require_privileged_source_port=True)
    # OCI applies the first option whose source holds the client: the controller keeps root, a GPU
    # node is squashed, a host outside the VCN does not see the export.
    assert client_options_for(export, '10.0.0.2')['identitySquash'] == 'NONE'
    assert client_options_for(export, '10.0.1.57')['identitySquash'] == 'ROOT'
    assert client_options_for(export, '192.168.1.1') is None
    ocisim.calls.reset()
    assert not run(file_storage, args)['changed'] and mutations(ocisim) == 0


def test_an_export_open_to_root_is_squashed_in_place(run, ocisim, home):
    """A cluster provisioned before the squash: a re-run changes the export's options, not the export."""
    before = run(file_storage, home)['file_storage']
    assert before['export']['export_options'][0]['identity_squash'] == 'NONE'
    args = dict(home, allowed_cidrs=None, export_options=SQUASHED)
    predicted = run(file_storage, args, check=True, diff=True)
    assert predicted['changed']
    assert predicted['diff']['after']['export']['export_options'][1]['identity_squash'] == 'ROOT'
    ocisim.calls.reset()
    after = run(file_storage, args)['file_storage']
    assert ocisim.calls.count('PUT /exports/*') == 1 and ocisim.calls.count('POST *') == 0
    assert after['export']['id'] == before['export']['id']
    assert [o['identity_squash'] for o in after['export']['export_options']] == ['NONE', 'ROOT']


@pytest.mark.parametrize('change, message', [
    (dict(export_options=SQUASHED), 'export_options: give it or allowed_cidrs, not both'),
    (dict(allowed_cidrs=None, export_options=[]), 'allowed_cidrs: required'),
    (dict(allowed_cidrs=None, export_options=[{'source': 'the-controller'}]), 'export_options: [0].source'),
    (dict(allowed_cidrs=None, export_options=[{'source': '10.0.0.5/16'}]), 'export_options: [0].source'),
    (dict(allowed_cidrs=None, export_options=[{'source': '10.0.0.0/16', 'anonymous_uid': -1}]),
     'export_options: [0].anonymous_uid -1'),
])
def test_bad_export_options_are_refused_before_any_call(run, ocisim, home, change, message):
    ocisim.calls.reset()
    result = run(file_storage, dict(home, **change), fail=True)
    assert result['msg'].startswith(message), result['msg']
    assert mutations(ocisim) == 0


def _file_storage_task(path, name):
    """The file_storage task of a playbook (or of a task file), as written."""
    doc = yaml.safe_load((ROOT / path).read_text())
    tasks = [t for play in doc for t in play.get('tasks', [])] if 'hosts' in doc[0] else doc
    tasks += [b for t in tasks for b in t.get('block', [])]
    return next(t for t in tasks if t.get('name', '').startswith(name))['ocigpu.cluster.file_storage']


def test_provision_squashes_root_but_the_controllers_and_configure_reads_the_same_options():
    args = _file_storage_task('playbooks/provision.yml', 'Create the shared file system')
    assert 'allowed_cidrs' not in args

    def render(ip):
        variables = {'_bastion': {'instance': {'private_ip': ip}}, 'vcn_cidr': '10.0.0.0/16'}
        return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(args['export_options']))
    assert render('10.0.0.2') == SQUASHED
    # a check run that would make the bastion: no address yet, the VCN squashed all the same
    assert render(None) == SQUASHED[1:]
    # configure.yml's read-only look at the export names the same options, so it reports no change
    read = _file_storage_task('playbooks/tasks/shared_home_source.yml', 'Read the file system')
    assert 'allowed_cidrs' not in read and read['export_options'] == [
        {'source': '{{ _fss_cluster.bastion.private_ip }}/32', 'identity_squash': 'NONE'},
        {'source': '{{ vcn_cidr }}', 'identity_squash': 'ROOT'}]
