# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_storage refuses what OCI would refuse only after a part was made - a VCN's OCID as the subnet, an
availability domain of another region, an export path OCI does not take - before it makes anything."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import file_storage, network
from tests.unit.plugins.modules._helpers import live, mutations


@pytest.fixture
def home(ocisim, run, base, ad):
    """Valid arguments, on the private subnet of a real network."""
    net = run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']
    return dict(base, availability_domain=ad, subnet_id=net['private_subnet_id'], allowed_cidrs=['10.0.0.0/16'])


def refused(run, ocisim, args, calls=0):
    """Run file_storage; it fails, makes nothing, and makes at most `calls` reads first."""
    ocisim.calls.reset()
    result = run(file_storage, args, fail=True)
    print(result['msg'])
    assert mutations(ocisim) == 0, ocisim.calls.as_dict()
    assert ocisim.calls.total() <= calls, ocisim.calls.as_dict()
    assert live(ocisim, 'file_systems') == [] and live(ocisim, 'mount_targets') == []
    return result['msg']


def test_the_vcns_ocid_as_the_subnet_makes_no_file_system(run, ocisim, home):
    vcn = ocisim.state.find('vcns', displayName='c1-vcn')[0]['id']
    msg = refused(run, ocisim, dict(home, subnet_id=vcn))
    assert msg == "subnet_id: %s is the OCID of a vcn, not of a subnet: give a subnet's OCID (ocid1.subnet...)" % vcn
    assert ocisim.calls.count('POST /fileSystems') == 0


def test_a_subnet_that_does_not_exist_makes_no_file_system(run, ocisim, home):
    missing = home['subnet_id'][:-6] + 'aaaaaa'
    msg = refused(run, ocisim, dict(home, subnet_id=missing), calls=2)
    assert msg.startswith('subnet_id: subnet %s not found' % missing)


def test_an_availability_domain_of_another_region_is_refused_by_its_name(run, ocisim, home):
    other = home['availability_domain'].replace('AP-TOKYO-1', 'EU-FRANKFURT-1')
    msg = refused(run, ocisim, dict(home, availability_domain=other))
    assert msg.startswith("availability_domain: '%s' is not an availability domain of region ap-tokyo-1: its name is of "
                          "region eu-frankfurt-1" % other)
    # With state=absent too: the parts would be looked for in that region's name.
    refused(run, ocisim, dict(home, availability_domain=other, state='absent'))


@pytest.mark.parametrize('name', ['Abcd:AP-TOKYO-1-AD-9', 'Abcd:PHX-AD-1', 'Abcd:US-ASHBURN-AD-1'])
def test_an_availability_domain_the_name_cannot_judge_is_refused_by_the_region(run, ocisim, home, name):
    """Names of the oldest regions (PHX, US-ASHBURN) do not hold the region's identifier, and a number
    is not known from the name: ListAvailabilityDomains decides, before anything is made."""
    msg = refused(run, ocisim, dict(home, availability_domain=name), calls=1)
    assert msg.startswith("availability_domain: '%s' is not an availability domain of region ap-tokyo-1; it has: " % name)


@pytest.mark.parametrize('path, why', [
    ('/home/../root', "OCI takes no element '.' or '..'; did you mean /root?"),
    ('/home/./alice', "OCI takes no element '.' or '..'; did you mean /home/alice?"),
    ('/..', "OCI takes no element '.' or '..'"),
    ('/home/', "it ends in '/'; did you mean /home?"),
    ('/' + 'a' * 256, 'an element is over 255 bytes'),
    ('/' + '/'.join(['a' * 200] * 6), 'it is over 1024 bytes'),
])
def test_an_export_path_oci_refuses_is_refused_first(run, ocisim, home, path, why):
    msg = refused(run, ocisim, dict(home, export_path=path))
    assert msg.startswith('export_path: %r is not an export path: ' % path) and why in msg, msg


def test_a_good_export_path_of_several_elements_is_made(run, ocisim, home):
    fs = run(file_storage, dict(home, export_path='/mnt/home'))['file_storage']
    assert fs['export']['path'] == '/mnt/home' and fs['mount_source'].endswith(':/mnt/home')
