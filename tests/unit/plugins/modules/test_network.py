# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.modules import network

from tests.unit.plugins.modules._helpers import live, mutations

SSH = ['203.0.113.0/24']


def test_lifecycle(run, ocisim, base):
    args = dict(base, ssh_source_cidrs=SSH)
    first = run(network, args, diff=True)
    assert first['changed']
    net = first['network']
    assert all(net[k] for k in ('vcn_id', 'public_subnet_id', 'private_subnet_id', 'internet_gateway_id',
                                'nat_gateway_id', 'service_gateway_id', 'public_route_table_id',
                                'private_route_table_id', 'public_security_list_id', 'private_security_list_id'))
    assert net['private_subnet_domain_name']
    assert len(live(ocisim, 'vcns')) == 1 and len(live(ocisim, 'subnets')) == 2
    sl = ocisim.state.get(net['public_security_list_id'])
    ssh = [r for r in sl['ingressSecurityRules'] if r.get('tcpOptions')]
    assert [(r['source'], r['tcpOptions']['destinationPortRange']['min']) for r in ssh] == [('203.0.113.0/24', 22)]
    assert not any(r['source'] == '0.0.0.0/0' for r in sl['ingressSecurityRules'])
    private_rt = ocisim.state.get(net['private_route_table_id'])
    assert {r['networkEntityId'] for r in private_rt['routeRules']} == {net['nat_gateway_id'], net['service_gateway_id']}

    # Re-run: nothing changes, nothing is written.
    ocisim.calls.reset()
    again = run(network, args)
    assert not again['changed'] and again['network'] == net
    assert mutations(ocisim) == 0

    # Check mode with a new rule: predicted, simulator untouched.
    rule = dict(args, extra_ingress_rules=[dict(subnet='private', source='10.0.0.0/24', port_min=9100)])
    ocisim.calls.reset()
    predicted = run(network, rule, check=True, diff=True)
    assert predicted['changed'] and mutations(ocisim) == 0
    assert 'private_security_list' in predicted['diff']['after']
    assert len(ocisim.state.get(net['private_security_list_id'])['ingressSecurityRules']) == 1

    # Update: the rule is added in place.
    updated = run(network, rule)
    assert updated['changed'] and updated['network']['private_security_list_id'] == net['private_security_list_id']
    rules = ocisim.state.get(net['private_security_list_id'])['ingressSecurityRules']
    assert any(r.get('tcpOptions', {}) and r['tcpOptions']['destinationPortRange']['min'] == 9100 for r in rules)
    assert not run(network, rule)['changed']

    # A changed CIDR cannot be applied in place.
    bad = run(network, dict(rule, vcn_cidr='10.1.0.0/16', public_subnet_cidr='10.1.0.0/24',
                            private_subnet_cidr='10.1.1.0/24'), fail=True)
    assert 'cidr_block' in bad['msg'] and 'in place' in bad['msg']

    # Delete, then delete again.
    gone = run(network, dict(base, state='absent'))
    assert gone['changed']
    assert live(ocisim, 'vcns') == [] and live(ocisim, 'subnets') == []
    for kind in ('route_tables', 'security_lists', 'internet_gateways', 'nat_gateways', 'service_gateways'):
        assert live(ocisim, kind) == [], kind
    ocisim.calls.reset()
    assert not run(network, dict(base, state='absent'))['changed']
    assert mutations(ocisim) == 0


def test_check_mode_on_empty_tenancy_creates_nothing(run, ocisim, base):
    result = run(network, dict(base, ssh_source_cidrs=SSH), check=True)
    assert result['changed'] and result['network']['vcn_id'] is None
    assert mutations(ocisim) == 0 and live(ocisim, 'vcns') == []


def test_seed_002_private_subnet_and_open_ssh_when_asked(run, ocisim, base):
    result = run(network, dict(base, private_subnet_cidr='10.0.2.0/24', ssh_source_cidrs=['0.0.0.0/0']))
    assert ocisim.state.get(result['network']['private_subnet_id'])['cidrBlock'] == '10.0.2.0/24'
    sl = ocisim.state.get(result['network']['public_security_list_id'])
    assert any(r['source'] == '0.0.0.0/0' and r.get('tcpOptions') for r in sl['ingressSecurityRules'])


def test_two_clusters_do_not_adopt_each_other(run, ocisim, base):
    a = run(network, dict(base, ssh_source_cidrs=SSH))['network']
    b = run(network, dict(base, cluster_name='c2', ssh_source_cidrs=SSH))['network']
    assert a['vcn_id'] != b['vcn_id'] and len(live(ocisim, 'vcns')) == 2
