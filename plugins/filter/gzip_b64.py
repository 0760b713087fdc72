# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gzip_b64
short_description: Gzip a text and encode it in base64, the same bytes every time
version_added: 0.2.0
description:
  - Compresses the UTF-8 bytes of a text with gzip (no file name, time 0, so that the same text
    gives the same output) and returns them in base64, wrapped at 76 characters.
  - provision.yml carries the pull path's program this way in the node template's user_data,
    which OCI limits to 32,000 bytes; the user_data unpacks it with C(base64 -d | gunzip).
options:
  _input:
    description: The text.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: A file as a compressed block of a shell script
  ansible.builtin.set_fact:
    blob: "{{ lookup('ansible.builtin.file', 'program.py') | ocigpu.cluster.gzip_b64 }}"
"""

RETURN = r"""
_value:
  description: The base64 text, in lines of 76 characters.
  type: str
"""

import base64
import gzip


def gzip_b64(text):
    data = gzip.compress(text.encode('utf-8'), compresslevel=9, mtime=0)
    encoded = base64.b64encode(data).decode('ascii')
    return '\n'.join(encoded[i:i + 76] for i in range(0, len(encoded), 76))


class FilterModule(object):
    def filters(self):
        return {'gzip_b64': gzip_b64}
