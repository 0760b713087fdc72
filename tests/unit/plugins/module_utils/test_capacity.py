# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity sources' one checked form, and what counts as a stock-out (docs/capacity.md)."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import describe_failure, is_stock_out
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
from ansible_collections.ocigpu.cluster.plugins.plugin_utils._capacity_sources import normalize_sources

AD1 = 'Uocm:AP-TOKYO-1-AD-1'
AD2 = 'Uocm:AP-TOKYO-1-AD-2'
RES = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaa'


def test_no_sources_is_the_plans_availability_domain():
    assert normalize_sources([], AD1) == [dict(name='ad-1', kind='on-demand', availability_domain=AD1,
                                               capacity_reservation_id=None, fault_domains=[])]
    assert normalize_sources(None, None) == []


def test_sources_keep_their_order_and_get_names():
    found = normalize_sources([{'capacity_reservation_id': RES}, {'availability_domain': AD1},
                               {'availability_domain': AD2, 'name': 'spare', 'fault_domains': ['FAULT-DOMAIN-2']}])
    assert [(s['name'], s['kind']) for s in found] == [
        ('reservation-1', 'reservation'), ('ad-1', 'on-demand'), ('spare', 'on-demand')]
    assert found[0]['availability_domain'] is None and found[2]['fault_domains'] == ['FAULT-DOMAIN-2']


@pytest.mark.parametrize('sources, words', [
    ([{'availability_domain': AD1}, {'availability_domain': AD1}], 'ad-1 are given to more than one source'),
    ([{'name': 'x'}], 'give a capacity_reservation_id or an availability_domain'),
    ([{'capacity_reservation_id': 'ocid1.instance.oc1..x'}], 'not a capacity reservation OCID'),
    ([{'availability_domain': AD1, 'zone': 'a'}], 'unknown key(s) zone'),
    ([{'availability_domain': AD1, 'name': 'Bad Name'}], "name 'Bad Name'"),
    ([{'availability_domain': AD1, 'fault_domains': ['FD-1']}], 'fault_domains is a list'),
    ('ad-1', 'a list of sources'),
])
def test_bad_sources_are_refused_with_the_reason(sources, words):
    with pytest.raises(InputError) as err:
        normalize_sources(sources, AD1)
    assert words in str(err.value)
    assert str(err.value).startswith('gpu_capacity_sources')


@pytest.mark.parametrize('text, stock_out', [
    ('Out of host capacity.', True),
    ('create of cluster network x (work request y) failed: Out of host capacity.', True),
    ('OCI API error 500 InternalError: Out of host capacity.', True),
    ('The capacity reservation ocid1.capacityreservation.x is full.', True),
    ('Insufficient capacity in the capacity reservation', True),
    ('OCI API error 500 InternalError: Internal server error', False),
    ('OCI API error 429 TooManyRequests: Too many requests for the user', False),
    ('timed out after 1800s waiting for cluster network x to be RUNNING', False),
    ('', False),
    (None, False),
])
def test_stock_out_is_told_from_other_errors(text, stock_out):
    assert is_stock_out(text) is stock_out


def test_a_failure_reads_by_the_kind_of_source():
    r1, ad1 = normalize_sources([{'capacity_reservation_id': RES, 'name': 'r1'}, {'availability_domain': AD1}])
    assert describe_failure(r1) == 'reservation r1 full'
    assert describe_failure(ad1) == 'ad-1 out of host capacity'
