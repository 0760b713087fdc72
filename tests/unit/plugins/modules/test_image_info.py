# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.modules import image_info


def test_by_os_and_shape_newest_first(run, ocisim):
    result = run(image_info, dict(compartment_id=ocisim.compartment_id, operating_system='Oracle Linux',
                                  operating_system_version='9', shape='BM.GPU4.8'))
    names = [i['display_name'] for i in result['images']]
    assert names[0] == 'Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0'
    assert 'Oracle-Linux-9.5-Gen2-GPU-2025.06.17-0' in names and not any('8.10' in n for n in names)
    newest = run(image_info, dict(compartment_id=ocisim.compartment_id, operating_system='Oracle Linux',
                                  shape='BM.GPU4.8', newest_only=True))
    assert len(newest['images']) == 1


def test_by_exact_name_and_id(run, ocisim):
    by_name = run(image_info, dict(compartment_id=ocisim.compartment_id, display_name='Oracle-Linux-8.10-2025.09.16-0'))
    assert [i['display_name'] for i in by_name['images']] == ['Oracle-Linux-8.10-2025.09.16-0']
    by_id = run(image_info, dict(compartment_id=ocisim.compartment_id, image_id=by_name['images'][0]['id']))
    assert by_id['images'] == by_name['images']
    missing = run(image_info, dict(compartment_id=ocisim.compartment_id, image_id='ocid1.image.oc1..nope'), fail=True)
    assert missing['msg'].startswith('image_id:')
    none = run(image_info, dict(compartment_id=ocisim.compartment_id, display_name='Ubuntu-99'))
    assert none['images'] == []
