# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module whose call OCI refuses for want of a policy names the statement that is most likely missing
(through the simulator and the real SDK; the wording is tested in module_utils/test_oci_errors.py)."""
from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.modules import file_storage, network

REFUSED = 'Authorization failed or requested resource not found.'


def test_the_network_module_names_the_statement(run, ocisim, base):
    """Through the simulator and the real SDK: the first call of a first run that OCI refuses."""
    ocisim.faults.add(route='POST /vcns', status=404, code='NotAuthorizedOrNotFound', message=REFUSED)
    result = run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']), fail=True)
    assert 'to manage virtual-network-family in compartment' in result['msg'], result['msg']
    assert result['status'] == 404 and result['code'] == 'NotAuthorizedOrNotFound' and result['operation'] == 'create_vcn'


def test_the_file_storage_module_names_the_statement(run, ocisim, base, ad):
    net = run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']
    ocisim.faults.add(route='POST /fileSystems', status=404, code='NotAuthorizedOrNotFound', message=REFUSED)
    result = run(file_storage, dict(base, availability_domain=ad, subnet_id=net['private_subnet_id'],
                                    allowed_cidrs=['10.0.0.0/16']), fail=True)
    assert 'to manage file-family in compartment' in result['msg'], result['msg']
    assert result['operation'] == 'create_file_system'
