# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity_sources filter: gpu_capacity_sources in its one checked form, or the reason it is refused."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.filter.capacity import FilterModule

capacity_sources = FilterModule().filters()['capacity_sources']
AD1, AD2 = 'Uocm:AP-TOKYO-1-AD-1', 'Uocm:AP-TOKYO-1-AD-2'
R1 = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaar1'


def test_no_sources_is_the_plans_availability_domain():
    assert capacity_sources([], AD1) == [dict(name='ad-1', kind='on-demand', availability_domain=AD1,
                                              capacity_reservation_id=None, fault_domains=[])]


def test_sources_in_order_with_their_names():
    found = capacity_sources([dict(name='r1', capacity_reservation_id=R1), dict(availability_domain=AD1),
                              dict(availability_domain=AD2, fault_domains=['FAULT-DOMAIN-1'])], AD1)
    assert [(s['name'], s['kind'], s['availability_domain']) for s in found] == [
        ('r1', 'reservation', None), ('ad-1', 'on-demand', AD1), ('ad-2', 'on-demand', AD2)]
    assert found[0]['capacity_reservation_id'] == R1 and found[2]['fault_domains'] == ['FAULT-DOMAIN-1']


def test_a_bad_source_is_refused_with_its_place():
    with pytest.raises(AnsibleFilterError, match=r'gpu_capacity_sources\[2\]: unknown key\(s\) availability_domian'):
        capacity_sources([dict(availability_domain=AD1), dict(availability_domian=AD2)], AD1)
    with pytest.raises(AnsibleFilterError, match='more than one source'):
        capacity_sources([dict(availability_domain=AD1), dict(availability_domain=AD1)], AD1)
