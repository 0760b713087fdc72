# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.modules import compute_cluster
from tests.unit.plugins.modules._helpers import live, mutations


def test_lifecycle(run, ocisim, base, ad):
    args = dict(base, availability_domain=ad)
    first = run(compute_cluster, args)
    cc = first['compute_cluster']
    assert first['changed'] and cc['lifecycle_state'] == 'ACTIVE' and cc['display_name'] == 'c1-compute-cluster'
    ocisim.calls.reset()
    assert not run(compute_cluster, args)['changed'] and mutations(ocisim) == 0

    tagged = dict(args, freeform_tags={'team': 'ml'})
    predicted = run(compute_cluster, tagged, check=True, diff=True)
    assert predicted['changed'] and mutations(ocisim) == 0
    assert predicted['diff']['before']['freeform_tags'] == {'team': None, 'ocigpu-cluster': 'c1'}
    assert run(compute_cluster, tagged)['changed']
    assert ocisim.state.get(cc['id'])['freeformTags']['team'] == 'ml'
    assert not run(compute_cluster, tagged)['changed']

    ocisim.calls.reset()
    blocked = run(compute_cluster, dict(tagged, availability_domain=ad[:-1] + '9'), fail=True)
    assert blocked['msg'].startswith('availability_domain: cannot change') and mutations(ocisim) == 0

    assert run(compute_cluster, dict(base, state='absent'))['changed']
    assert live(ocisim, 'compute_clusters') == []
    ocisim.calls.reset()
    assert not run(compute_cluster, dict(base, state='absent'))['changed'] and mutations(ocisim) == 0


def test_check_mode_create(run, ocisim, base, ad):
    result = run(compute_cluster, dict(base, availability_domain=ad), check=True)
    assert result['changed'] and result['compute_cluster']['id'] is None and mutations(ocisim) == 0
