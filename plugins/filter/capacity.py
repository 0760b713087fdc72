# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: capacity_sources
short_description: The GPU nodes' capacity sources of cluster.yml in their one checked form
version_added: 0.5.0
description:
  - Takes C(gpu_capacity_sources) - an ordered list of sources, each a capacity reservation
    (C(capacity_reservation_id)) or an availability domain's on-demand hosts (C(availability_domain)), with an
    optional C(name) and C(fault_domains) - and returns each source with its kind and name filled in
    (docs/capacity.md).
  - An empty list is one source, the on-demand hosts of O(availability_domain) (the plan's AD), so that a
    cluster.yml without sources keeps its one availability domain.
  - Names default to C(ad-N) for an availability domain (from the AD's name) and C(reservation-N) for the N-th
    reservation. A reservation's availability domain may be left out; the preflight reads it from the reservation.
  - A source that cannot be read - an unknown or misspelt key, no reservation and no AD, an OCID that is no
    capacity reservation's, a bad name or two sources of one name - is refused with the source's place and the
    reason, the same words as the cluster settings' check.
options:
  _input:
    description: The sources (C(gpu_capacity_sources)).
    type: list
    elements: dict
    required: true
  availability_domain:
    description: The plan's availability domain, the one source of an empty list.
    type: str
"""

EXAMPLES = r"""
- name: The capacity sources, in order
  ansible.builtin.set_fact:
    capacity_sources: "{{ gpu_capacity_sources | ocigpu.cluster.capacity_sources(availability_domain) }}"
"""

RETURN = r"""
_value:
  description: The sources in order.
  type: list
  elements: dict
  contains:
    name: {description: The source's name (given, or C(ad-N) / C(reservation-N))., type: str}
    kind: {description: C(reservation) or C(on-demand)., type: str}
    availability_domain: {description: The AD (null for a reservation whose AD is not given)., type: str}
    capacity_reservation_id: {description: The reservation's OCID (null for an AD's on-demand hosts)., type: str}
    fault_domains: {description: The fault domains given (for single instances only)., type: list}
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.ocigpu.cluster.plugins.plugin_utils._capacity_sources import normalize_sources
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError


def capacity_sources(sources, availability_domain=None):
    try:
        return normalize_sources(sources, availability_domain or None)
    except InputError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {'capacity_sources': capacity_sources}
