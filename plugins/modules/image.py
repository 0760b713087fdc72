#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: image
short_description: A cluster's custom images - made from an instance, adopted by their tags, pruned
version_added: 0.5.0
description:
  - Makes an OCI custom image from an instance (the builder of C(ocigpu.cluster.bake), see the collection's
    docs/baking.md), finds one again by its freeform tags, deletes one, and keeps the newest few of a cluster.
  - O(state=present) first looks for an image of O(compartment_id) that carries the tag C(ocigpu-cluster) of
    O(cluster_name) and every tag of O(match_tags). An AVAILABLE one (the newest) is adopted and nothing is
    made (RV(adopted), not changed). One that is still PROVISIONING (another run makes it) is waited for, never
    made twice. Otherwise, with O(instance_id), the module creates the image from that instance, with
    O(freeform_tags) and O(match_tags) as its freeform tags, and waits for the CreateImage work request and
    for the image to be AVAILABLE. Without O(instance_id) it only looks (RV(image) is null when none matches).
  - O(state=absent) deletes the image O(image_id); an image that does not carry this cluster's tag is refused.
  - O(state=pruned) keeps the newest O(keep) AVAILABLE images of the cluster that carry the tag O(prune_tag)
    and deletes the others, except those that an instance configuration of the compartment names (a node
    template, whose nodes would no longer launch). It returns what it kept, deleted and spared.
  - Why a module of this collection, when Oracle's C(oracle.oci) collection has an image module too? The collection
    depends on the OCI Python SDK alone, never on C(oracle.oci), and every OCI resource it manages goes through
    its own module_utils, with one retry policy, one waiter, the cluster tag, check mode that predicts, and the OCI
    simulator its tests run against. Images are part of the cluster's life cycle now (baked, adopted, pruned),
    so they are managed the same way.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.WAIT
  - ocigpu.cluster.oci.TAGS
options:
  state:
    description:
      - V(present) adopts or creates an image, V(absent) deletes O(image_id), V(pruned) keeps the newest O(keep).
    type: str
    choices: [present, absent, pruned]
    default: present
  instance_id:
    description:
      - The instance to make the image from, its OCID (C(ocid1.instance...)); RUNNING or STOPPED. Left out, the
        module only looks for a matching image.
    type: str
  display_name:
    description: Display name of the image made. Required with O(instance_id).
    type: str
  match_tags:
    description:
      - Freeform tags (besides C(ocigpu-cluster)) that an existing image must carry, each with this value, to be
        adopted; for the bake, C(ocigpu-bake-digest) (what the image was made from). Also written on the image made.
    type: dict
    default: {}
  image_id:
    description: The image to delete (O(state=absent)), its OCID (C(ocid1.image...)).
    type: str
  keep:
    description: With O(state=pruned), how many of the newest images to keep (0 deletes every one not spared).
    type: int
    default: 2
  prune_tag:
    description:
      - With O(state=pruned), only the cluster's images that carry this freeform tag (any value) are looked at;
        any other image of the cluster is never deleted.
    type: str
    default: ocigpu-bake-digest
  wait_timeout:
    description:
      - Seconds to wait for the image when O(wait=true); making a GPU image of a large boot volume takes tens
        of minutes. On timeout the task fails with the last state and work request percentage seen.
    type: int
    default: 3600
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Adopt the image of this bake digest, if there is one
  ocigpu.cluster.image:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    match_tags: {ocigpu-bake-digest: "{{ digest }}"}
  register: baked

- name: Make it from the builder
  ocigpu.cluster.image:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    instance_id: "{{ builder.instance.id }}"
    display_name: "gpu1-baked-{{ digest[:12] }}"
    match_tags: {ocigpu-bake-digest: "{{ digest }}"}
    freeform_tags: {ocigpu-collection: "0.5.0"}
  when: baked.image is none

- name: Keep the two newest baked images of the cluster
  ocigpu.cluster.image:
    cluster_name: gpu1
    compartment_id: "{{ compartment_ocid }}"
    state: pruned
    keep: 2
"""

RETURN = r"""
image:
  description:
    - The image adopted, made or deleted (null when none matches; a null id in check mode when one would be made).
  returned: always
  type: dict
  contains:
    id: {description: OCID., type: str}
    display_name: {description: Display name., type: str}
    lifecycle_state: {description: 'PROVISIONING, AVAILABLE, DISABLED or DELETED.', type: str}
    freeform_tags: {description: Freeform tags., type: dict}
    base_image_id: {description: The image the instance was launched from., type: str}
    time_created: {description: When it was made., type: str}
    size_in_mbs: {description: Size of the boot volume the image launches., type: int}
    billable_size_in_gbs: {description: Size OCI bills the image's storage by., type: int}
adopted:
  description: An existing image matched and was taken as it is (nothing made).
  returned: state=present
  type: bool
work_request_id:
  description: The CreateImage work request, when an image was made.
  returned: when an image was made
  type: str
kept:
  description: With O(state=pruned), the images kept (newest first), each as in RV(image).
  returned: state=pruned
  type: list
  elements: dict
deleted:
  description: With O(state=pruned), the images deleted (in check mode, those that would be).
  returned: state=pruned
  type: list
  elements: dict
spared:
  description: With O(state=pruned), older images kept because an instance configuration names them.
  returned: state=pruned
  type: list
  elements: dict
summary:
  description: One line that says what the module did, or in check mode what it would do.
  returned: always
  type: str
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import CLUSTER_TAG, InputError, attr, check_display_names

try:
    from oci.core.models import CreateImageDetails
except ImportError:
    pass  # OCIModule reports the missing library

FAILED_STATES = ('DELETED', 'DISABLED')


class Image(OCIModule):
    WAIT_TIMEOUT = 3600

    # Checked before any call: an OCID of another resource type (a VCN's, a name) in any of these.
    EARLY_CHECKS = ('compartment_id', 'instance_id', 'image_id')

    def validate(self):
        p = self.params
        bad = sorted(k for k, v in (p['match_tags'] or {}).items() if not isinstance(v, str) or not v)
        if bad:
            raise InputError('match_tags: %s must be non-empty strings (freeform tag values)' % ', '.join(bad))
        if CLUSTER_TAG in (p['match_tags'] or {}):
            raise InputError('match_tags: %s is cluster_name; leave it out' % CLUSTER_TAG)
        if p['state'] == 'present' and p['instance_id']:
            if not p['display_name']:
                raise InputError('display_name: required with instance_id (the name of the image made)')
            check_display_names('display_name', [p['display_name']])
        if p['state'] == 'absent' and not p['image_id']:
            raise InputError('image_id: required with state=absent')
        if p['state'] == 'pruned':
            if p['keep'] < 0:
                raise InputError('keep: %d; give 0 or more' % p['keep'])
            if not p['prune_tag'] or p['prune_tag'] == CLUSTER_TAG:
                raise InputError('prune_tag: give a tag that only the images to prune carry, such as ocigpu-bake-digest')

    # Reading ----------------------------------------------------------------------------
    def cluster_images(self):
        """The images of the compartment that carry this cluster's tag, newest first (platform images have none)."""
        items = self.session.list_all(self.session.compute.list_images, self.params['compartment_id'],
                                      sort_by='TIMECREATED', sort_order='DESC')
        mine = [i for i in items if attr(i, 'compartment_id') == self.params['compartment_id']
                and (attr(i, 'freeform_tags') or {}).get(CLUSTER_TAG) == self.cluster_name]
        return sorted(mine, key=lambda i: str(attr(i, 'time_created')), reverse=True)

    def matching(self, images):
        wanted = self.params['match_tags'] or {}
        return [i for i in images if all((attr(i, 'freeform_tags') or {}).get(k) == v for k, v in wanted.items())]

    def describe(self, image):
        if image is None:
            return None
        created = attr(image, 'time_created')
        return dict(id=attr(image, 'id'), display_name=attr(image, 'display_name'),
                    lifecycle_state=attr(image, 'lifecycle_state'), freeform_tags=attr(image, 'freeform_tags') or {},
                    base_image_id=attr(image, 'base_image_id'), time_created=str(created) if created else None,
                    size_in_mbs=attr(image, 'size_in_mbs'), billable_size_in_gbs=attr(image, 'billable_size_in_gbs'))

    def wait_available(self, image_id):
        return self.waiter.lifecycle(self.session.compute.get_image, image_id, ['AVAILABLE'], FAILED_STATES,
                                     what='image %s' % image_id)

    def execute(self):
        return getattr(self, 'state_' + self.params['state'])()

    # state=present -----------------------------------------------------------------------
    def tag_text(self):
        return ', '.join('%s=%s' % kv for kv in sorted(dict(self.params['match_tags'] or {}, **{CLUSTER_TAG: self.cluster_name}).items()))

    def state_present(self):
        p = self.params
        found = self.matching(self.cluster_images())
        ready = [i for i in found if attr(i, 'lifecycle_state') == 'AVAILABLE']
        if ready:
            image = ready[0]
            return dict(image=self.describe(image), adopted=True,
                        summary='adopted image %s (%s): it carries %s' % (image.id, image.display_name, self.tag_text()))
        making = [i for i in found if attr(i, 'lifecycle_state') == 'PROVISIONING']
        if making:
            image = making[0]
            if p['wait'] and not self.check_mode:
                image = self.wait_available(image.id)
            return dict(image=self.describe(image), adopted=True,
                        summary='adopted image %s (%s), which another run is making%s' % (
                            image.id, image.display_name, '' if image.lifecycle_state == 'PROVISIONING' else ': now AVAILABLE'))
        if not p['instance_id']:
            return dict(image=None, adopted=False, summary='no image of the compartment carries %s' % self.tag_text())
        instance = self.session.get_or_none(self.session.compute.get_instance, p['instance_id'])
        if instance is None or instance.lifecycle_state in ('TERMINATING', 'TERMINATED'):
            raise InputError('instance_id: instance %s not found (or terminated)' % p['instance_id'])
        tags = dict(self.tags(), **(p['match_tags'] or {}))
        self.changed = True
        self.diff['after'] = dict(display_name=p['display_name'], instance_id=p['instance_id'], freeform_tags=tags)
        if self.check_mode:
            return dict(image=dict(id=None, display_name=p['display_name'], lifecycle_state=None, freeform_tags=tags,
                                   base_image_id=instance.image_id, time_created=None, size_in_mbs=None,
                                   billable_size_in_gbs=None),
                        adopted=False, summary='would make image %s from instance %s (%s)' % (
                            p['display_name'], instance.id, instance.display_name))
        details = CreateImageDetails(compartment_id=p['compartment_id'], instance_id=p['instance_id'],
                                     display_name=p['display_name'], freeform_tags=tags,
                                     defined_tags=p['defined_tags'] or None)
        response = self.session.create(self.session.compute.create_image, details)
        image = response.data
        work_request_id = response.headers.get('opc-work-request-id')
        if p['wait']:
            if work_request_id:
                self.waiter.work_request(work_request_id, what='the CreateImage work request of %s' % image.id)
            image = self.wait_available(image.id)
        return dict(image=self.describe(image), adopted=False, work_request_id=work_request_id,
                    summary='made image %s (%s) from instance %s%s' % (
                        image.id, image.display_name, p['instance_id'],
                        '' if image.lifecycle_state == 'AVAILABLE' else ' (%s)' % image.lifecycle_state))

    # state=absent ------------------------------------------------------------------------
    def state_absent(self):
        image_id = self.params['image_id']
        image = self.session.get_or_none(self.session.compute.get_image, image_id)
        if image is None or image.lifecycle_state == 'DELETED':
            return dict(image=None, summary='image %s is already gone' % image_id)
        self.refuse_foreign(image)
        described = self.describe(image)
        self.diff['before'] = described
        self.changed = True
        if self.check_mode:
            return dict(image=described, summary='would delete image %s (%s)' % (image_id, image.display_name))
        self.delete(image)
        return dict(image=described, summary='deleted image %s (%s)' % (image_id, image.display_name))

    def refuse_foreign(self, image):
        if attr(image, 'compartment_id') != self.params['compartment_id'] or \
                (attr(image, 'freeform_tags') or {}).get(CLUSTER_TAG) != self.cluster_name:
            raise InputError('image_id: image %s (%s) is not an image of cluster %s in this compartment (tag %s); '
                             'the module deletes only its cluster\'s images' % (
                                 image.id, image.display_name, self.cluster_name, CLUSTER_TAG))

    def delete(self, image):
        self.session.call_response(self.session.compute.delete_image, image.id)
        if self.params['wait']:
            self.waiter.gone(self.session.compute.get_image, image.id, what='image %s' % image.id)

    # state=pruned ------------------------------------------------------------------------
    def named_by_configurations(self):
        """The image OCIDs that the compartment's instance configurations launch from."""
        named = set()
        summaries = self.session.list_all(self.session.compute_management.list_instance_configurations,
                                          self.params['compartment_id'])
        for summary in summaries:
            if attr(summary, 'lifecycle_state') not in (None, 'ACTIVE'):
                continue
            full = self.session.get_or_none(self.session.compute_management.get_instance_configuration, summary.id)
            launch = attr(attr(full, 'instance_details'), 'launch_details')
            image_id = attr(attr(launch, 'source_details'), 'image_id')
            if image_id:
                named.add(image_id)
        return named

    def state_pruned(self):
        p = self.params
        images = [i for i in self.cluster_images()
                  if attr(i, 'lifecycle_state') == 'AVAILABLE' and p['prune_tag'] in (attr(i, 'freeform_tags') or {})]
        kept, older = images[:p['keep']], images[p['keep']:]
        named = self.named_by_configurations() if older else set()
        spared = [i for i in older if i.id in named]
        doomed = [i for i in older if i.id not in named]
        if doomed:
            self.changed = True
            self.diff['before'] = {'ids': [i.id for i in images]}
            self.diff['after'] = {'ids': [i.id for i in kept + spared]}
        if not self.check_mode:
            for image in doomed:
                self.delete(image)
        verb = 'would delete' if self.check_mode else 'deleted'
        summary = 'kept %d image%s of cluster %s; %s %d%s' % (
            len(kept), '' if len(kept) == 1 else 's', self.cluster_name, verb, len(doomed),
            '; spared %d that an instance configuration names' % len(spared) if spared else '')
        return dict(kept=[self.describe(i) for i in kept], deleted=[self.describe(i) for i in doomed],
                    spared=[self.describe(i) for i in spared], summary=summary)


def main():
    Image(dict(
        state=dict(type='str', choices=['present', 'absent', 'pruned'], default='present'),
        instance_id=dict(type='str'),
        display_name=dict(type='str'),
        match_tags=dict(type='dict', default={}),
        image_id=dict(type='str'),
        keep=dict(type='int', default=2),
        prune_tag=dict(type='str', default='ocigpu-bake-digest'),
        wait_timeout=dict(type='int', default=Image.WAIT_TIMEOUT),
    )).run()


if __name__ == '__main__':
    main()
