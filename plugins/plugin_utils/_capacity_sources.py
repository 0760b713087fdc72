# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The capacity sources of cluster.yml (``gpu_capacity_sources``, docs/capacity.md) in their one checked
form, for the capacity_sources filter and the settings check (controller side). The list is ordered: the
first source that holds a cluster network gets it. The preflight and cluster_network modules and the
autoscaler service take this form as it is.
"""

from __future__ import annotations

import re

from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import NAME, ON_DEMAND, RESERVATION, ad_suffix
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError

KEYS = ('name', 'availability_domain', 'capacity_reservation_id', 'fault_domains')


def normalize_sources(sources, default_availability_domain=None, option='gpu_capacity_sources'):
    """The ordered sources as [{name, kind, availability_domain, capacity_reservation_id, fault_domains}].

    An empty list is one source: the default availability domain's on-demand capacity (the plan's AD).
    A reservation's availability_domain may be left out (the preflight reads it from the reservation,
    and refuses one that differs from a given one). Names default to ad-N for an AD (from its name) and
    reservation-N for the N-th reservation; they must be unique. InputError names what is wrong."""
    if sources is None or sources == []:
        if not default_availability_domain:
            return []
        sources = [dict(availability_domain=default_availability_domain)]
    if not isinstance(sources, list):
        raise InputError('%s: a list of sources, each a capacity_reservation_id or an availability_domain' % option)
    found, reservations = [], 0
    for index, item in enumerate(sources, 1):
        where = '%s[%d]' % (option, index)
        if not isinstance(item, dict):
            raise InputError('%s: a dict with capacity_reservation_id or availability_domain, not %r' % (where, item))
        unknown = sorted(set(item) - set(KEYS))
        if unknown:
            raise InputError('%s: unknown key(s) %s; a source takes %s' % (where, ', '.join(unknown), ', '.join(KEYS)))
        reservation = item.get('capacity_reservation_id') or None
        ad = item.get('availability_domain') or None
        if reservation is not None and not re.match(r'^ocid1\.capacityreservation\.', str(reservation)):
            raise InputError('%s: capacity_reservation_id %r is not a capacity reservation OCID '
                             '(ocid1.capacityreservation...)' % (where, reservation))
        if reservation is None and ad is None:
            raise InputError('%s: give a capacity_reservation_id or an availability_domain' % where)
        fault_domains = item.get('fault_domains') or []
        if not isinstance(fault_domains, list) or not all(
                isinstance(fd, str) and re.match(r'^FAULT-DOMAIN-[1-3]$', fd) for fd in fault_domains):
            raise InputError('%s: fault_domains is a list of FAULT-DOMAIN-1, -2 or -3' % where)
        if reservation is not None:
            reservations += 1
        name = item.get('name')
        if name is None:
            name = 'reservation-%d' % reservations if reservation else (ad_suffix(ad) or 'ad-%d' % index)
        if not isinstance(name, str) or not NAME.match(name):
            raise InputError('%s: name %r: lower-case letters, digits and dashes, 1 to 20 characters, '
                             'starting with a letter' % (where, name))
        found.append(dict(name=name, kind=RESERVATION if reservation else ON_DEMAND, availability_domain=ad,
                          capacity_reservation_id=reservation, fault_domains=list(fault_domains)))
    names = [s['name'] for s in found]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        raise InputError('%s: the name(s) %s are given to more than one source; name the sources (name: ...)' % (
            option, ', '.join(twice)))
    return found
