# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.image against the simulator's custom images: made from an instance, adopted by its tags (a second
run with the same tags makes nothing), waited for while another run makes it, deleted, and pruned to the newest few
(sparing the image a node template names); check mode calls nothing that changes."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import image, instance, instance_configuration, network
from tests.unit.plugins.modules._helpers import mutations

DIGEST = 'a' * 64


@pytest.fixture
def net(run, base):
    return run(network, dict(base, ssh_source_cidrs=['203.0.113.0/24']))['network']


@pytest.fixture
def builder(run, base, net, ssh_key):
    """A small instance to make images of (the bake's builder is the GPU shape; the module does not care)."""
    args = dict(base, display_name='c1-bake-builder', shape='VM.Standard.E5.Flex', shape_config=dict(ocpus=1, memory_in_gbs=16),
                image_os='Oracle Linux', image_os_version='9', subnet_id=net['private_subnet_id'], ssh_authorized_keys=[ssh_key])
    return run(instance, args)['instance']


def make_args(base, builder, digest=DIGEST, **extra):
    args = dict(base, instance_id=builder['id'], display_name='c1-baked-%s' % digest[:12],
                match_tags={'ocigpu-bake-digest': digest}, freeform_tags={'ocigpu-collection': '0.5.0'})
    args.update(extra)
    return args


def test_made_once_then_adopted(run, ocisim, base, builder):
    look = dict(base, match_tags={'ocigpu-bake-digest': DIGEST})
    ocisim.calls.reset()
    none = run(image, look)
    assert none['image'] is None and not none['changed'] and not none['adopted'] and mutations(ocisim) == 0
    assert 'no image of the compartment carries' in none['summary']

    predicted = run(image, make_args(base, builder), check=True)
    assert predicted['changed'] and predicted['image']['id'] is None and mutations(ocisim) == 0
    assert predicted['summary'].startswith('would make image c1-baked-aaaaaaaaaaaa from instance ')

    made = run(image, make_args(base, builder))
    img = made['image']
    assert made['changed'] and not made['adopted'] and img['lifecycle_state'] == 'AVAILABLE' and made['work_request_id']
    assert img['freeform_tags'] == {'ocigpu-cluster': 'c1', 'ocigpu-bake-digest': DIGEST, 'ocigpu-collection': '0.5.0'}
    assert img['base_image_id'] == builder['image_id'] and img['billable_size_in_gbs']
    assert ocisim.state.get(builder['id'])['lifecycleState'] == 'RUNNING'
    assert ocisim.calls.count('POST /images') == 1

    # The same inputs again: the image is adopted, nothing is made (with or without the builder, in check mode too).
    ocisim.calls.reset()
    for args, check in ((make_args(base, builder), False), (look, False), (make_args(base, builder), True)):
        again = run(image, args, check=check)
        assert not again['changed'] and again['adopted'] and again['image']['id'] == img['id'], again
        assert again['summary'].startswith('adopted image %s' % img['id'])
    assert mutations(ocisim) == 0

    # Another digest, or another cluster: not this image.
    assert run(image, dict(look, match_tags={'ocigpu-bake-digest': 'b' * 64}))['image'] is None
    assert run(image, dict(look, cluster_name='c2'))['image'] is None


def test_an_image_being_made_is_waited_for_never_made_twice(run, ocisim, base, builder):
    first = run(image, make_args(base, builder, wait=False))
    assert first['changed'] and first['image']['lifecycle_state'] == 'PROVISIONING'
    ocisim.calls.reset()
    second = run(image, make_args(base, builder))
    assert not second['changed'] and second['adopted'] and second['image']['id'] == first['image']['id']
    assert second['image']['lifecycle_state'] == 'AVAILABLE' and mutations(ocisim) == 0


def test_deleted_by_id_only_when_it_is_the_clusters(run, ocisim, base, builder):
    img = run(image, make_args(base, builder))['image']
    ocisim.calls.reset()
    predicted = run(image, dict(base, state='absent', image_id=img['id']), check=True)
    assert predicted['changed'] and predicted['summary'].startswith('would delete') and mutations(ocisim) == 0

    other = run(image, dict(base, cluster_name='c2', state='absent', image_id=img['id']), fail=True)
    assert other['msg'].startswith('image_id:') and 'not an image of cluster c2' in other['msg']
    platform = run(image, dict(base, state='absent', image_id=builder['image_id']), fail=True)
    assert 'not an image of cluster c1' in platform['msg'] and mutations(ocisim) == 0

    gone = run(image, dict(base, state='absent', image_id=img['id']))
    assert gone['changed'] and ocisim.state.get(img['id'])['lifecycleState'] == 'DELETED'
    again = run(image, dict(base, state='absent', image_id=img['id']))
    assert not again['changed'] and again['image'] is None


def test_pruned_to_the_newest_sparing_what_a_node_template_names(run, ocisim, base, builder, net, ad, ssh_key):
    made = [run(image, make_args(base, builder, digest=d * 64))['image'] for d in 'abcd']   # a is the oldest
    plain = run(image, make_args(base, builder, digest='e' * 64, display_name='c1-by-hand', match_tags={}))['image']
    # A node template launches from the oldest.
    run(instance_configuration, dict(base, shape='VM.Standard.E5.Flex', shape_config=dict(ocpus=1, memory_in_gbs=16),
                                     image_id=made[0]['id'], subnet_id=net['private_subnet_id'], availability_domain=ad,
                                     ssh_authorized_keys=[ssh_key]))
    ocisim.calls.reset()
    predicted = run(image, dict(base, state='pruned', keep=2), check=True)
    assert predicted['changed'] and mutations(ocisim) == 0
    assert [i['id'] for i in predicted['deleted']] == [made[1]['id']]
    assert predicted['summary'] == 'kept 2 images of cluster c1; would delete 1; spared 1 that an instance configuration names'

    pruned = run(image, dict(base, state='pruned', keep=2))
    assert [i['id'] for i in pruned['kept']] == [made[3]['id'], made[2]['id']]
    assert [i['id'] for i in pruned['deleted']] == [made[1]['id']]
    assert [i['id'] for i in pruned['spared']] == [made[0]['id']]
    state = dict((i['id'], ocisim.state.get(i['id'])['lifecycleState']) for i in made + [plain])
    assert state == {made[0]['id']: 'AVAILABLE', made[1]['id']: 'DELETED', made[2]['id']: 'AVAILABLE',
                     made[3]['id']: 'AVAILABLE', plain['id']: 'AVAILABLE'}

    ocisim.calls.reset()
    again = run(image, dict(base, state='pruned', keep=2))
    assert not again['changed'] and again['deleted'] == [] and mutations(ocisim) == 0


@pytest.mark.parametrize('args, text', [
    (dict(instance_id='ocid1.vcn.oc1.ap-tokyo-1.aaaa'), 'instance_id: '),
    (dict(instance_id='ocid1.instance.oc1.ap-tokyo-1.aaaa'), 'display_name: required with instance_id'),
    (dict(state='absent'), 'image_id: required with state=absent'),
    (dict(match_tags={'ocigpu-bake-digest': ''}), 'match_tags: ocigpu-bake-digest must be non-empty strings'),
    (dict(match_tags={'ocigpu-cluster': 'c1'}), 'match_tags: ocigpu-cluster is cluster_name'),
    (dict(state='pruned', keep=-1), 'keep: -1'),
    (dict(state='pruned', prune_tag='ocigpu-cluster'), 'prune_tag: '),
])
def test_bad_input_is_refused_before_any_call(run, ocisim, base, args, text):
    ocisim.calls.reset()
    result = run(image, dict(base, **args), fail=True)
    assert result['msg'].startswith(text), result['msg']
    assert ocisim.calls.total() == 0, ocisim.calls.as_dict()


def test_a_builder_that_is_gone_is_refused(run, ocisim, base, builder):
    run(instance, dict(base, display_name='c1-bake-builder', state='absent'))
    gone = run(image, make_args(base, builder), fail=True)
    assert gone['msg'].startswith('instance_id: instance %s not found' % builder['id'])


def test_image_info_finds_the_clusters_baked_images_by_their_tags(run, ocisim, base, builder):
    """provision.yml's lookup of the newest baked image (gpu_image_bake): image_info's freeform_tags keep the
    images that carry every tag given, with their tags in the answer."""
    from ansible_collections.ocigpu.cluster.plugins.modules import image_info

    made = run(image, make_args(base, builder))['image']
    run(image, make_args(base, builder, digest='b' * 64, cluster_name='c2'))
    look = dict(compartment_id=ocisim.compartment_id, freeform_tags={'ocigpu-cluster': 'c1'})
    found = run(image_info, look)['images']
    assert [i['id'] for i in found] == [made['id']]
    assert found[0]['freeform_tags']['ocigpu-bake-digest'] == DIGEST
    assert run(image_info, dict(look, freeform_tags={'ocigpu-cluster': 'c3'}))['images'] == []
    # Without the option, platform images too, each with its (empty) tags.
    everything = run(image_info, dict(compartment_id=ocisim.compartment_id))['images']
    assert made['id'] in [i['id'] for i in everything] and all('freeform_tags' in i for i in everything)
