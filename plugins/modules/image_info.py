#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: image_info
short_description: Find OCI images by name, operating system and shape
version_added: 0.1.0
description:
  - Lists the available images of a compartment (platform images included) that match a display name,
    an operating system and version, and a shape, newest first.
  - Uses the same lookup as the O(ocigpu.cluster.instance#module:image_name) and
    O(ocigpu.cluster.instance#module:image_os) options of M(ocigpu.cluster.instance).
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.READ_ONLY
  - ocigpu.cluster.oci.ATTRIBUTES
options:
  compartment_id:
    description: Compartment to list images in, its OCID (C(ocid1.compartment...) or the tenancy's); any other is refused before any call to OCI.
    type: str
    required: true
  image_id:
    description: Return this one image, by its OCID (C(ocid1.image...)); any other is refused before any call to OCI.
    type: str
  display_name:
    description: Exact display name, for example C(Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0).
    type: str
  operating_system:
    description: Operating system, for example C(Oracle Linux).
    type: str
  operating_system_version:
    description: Operating system version, for example C(9).
    type: str
  shape:
    description: Only images that run on this shape.
    type: str
  newest_only:
    description: Return only the newest match.
    type: bool
    default: false
  freeform_tags:
    description:
      - Only images that carry every one of these freeform tags with the value given (a cluster's baked
        images carry C(ocigpu-cluster) and C(ocigpu-bake-digest), docs/baking.md).
    type: dict
    default: {}
    version_added: 0.5.0
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Newest Oracle Linux 9 image for BM.GPU4.8
  ocigpu.cluster.image_info:
    compartment_id: "{{ compartment_ocid }}"
    operating_system: Oracle Linux
    operating_system_version: "9"
    shape: BM.GPU4.8
    newest_only: true
  register: images

- name: Show its OCID
  ansible.builtin.debug:
    msg: "{{ images.images[0].id }}"
"""

RETURN = r"""
images:
  description: Matching images, newest first.
  returned: always
  type: list
  elements: dict
  contains:
    id: {description: Image OCID., type: str}
    display_name: {description: Display name., type: str}
    operating_system: {description: Operating system., type: str}
    operating_system_version: {description: Operating system version., type: str}
    time_created: {description: Creation time., type: str}
    freeform_tags: {description: The image's freeform tags., type: dict, version_added: 0.5.0}
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError


class ImageInfo(OCIModule):

    def execute(self):
        p = self.params
        if p['image_id']:
            image = self.session.get_or_none(self.session.compute.get_image, p['image_id'])
            if image is None:
                raise InputError('image_id: image %s not found' % p['image_id'])
            images = [dict(_launch._image_dict(image), freeform_tags=dict(image.freeform_tags or {}))]
        else:
            found = _launch.list_images(self.session, p['compartment_id'], p['operating_system'],
                                        p['operating_system_version'], p['shape'], p['display_name'])
            want = p['freeform_tags'] or {}
            found = [i for i in found if all((i.freeform_tags or {}).get(k) == v for k, v in want.items())]
            images = sorted((dict(_launch._image_dict(i), freeform_tags=dict(i.freeform_tags or {})) for i in found),
                            key=lambda i: i['time_created'] or '', reverse=True)
        if p['newest_only']:
            images = images[:1]
        return {'images': images}


def main():
    ImageInfo(dict(
        compartment_id=dict(type='str', required=True),
        image_id=dict(type='str'),
        display_name=dict(type='str'),
        operating_system=dict(type='str'),
        operating_system_version=dict(type='str'),
        shape=dict(type='str'),
        newest_only=dict(type='bool', default=False),
        freeform_tags=dict(type='dict', default={}),
    ), wait=False, tags=False, mutually_exclusive=[('image_id', 'display_name')]).run()


if __name__ == '__main__':
    main()
