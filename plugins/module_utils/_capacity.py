# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Where the GPU nodes' hosts come from (docs/capacity.md), without Ansible: whether an OCI error says that
a capacity source (a reservation, or an availability domain's on-demand hosts) had no host for the nodes, and
how that reads. The sources' checked form is plugin_utils/_capacity_sources.py's (the capacity_sources filter).
"""

from __future__ import annotations

import re

NAME = re.compile(r'^[a-z][a-z0-9-]{0,19}$')  # a source's name
RESERVATION = 'reservation'
ON_DEMAND = 'on-demand'

# OCI's answers when a source has no host: "Out of host capacity." (a 500 InternalError of the launch or
# create call, or the error of its failed work request), and the capacity-reservation forms of the same
# (a reservation whose hosts are all in use, or that has too few for the request).
STOCK_OUT = re.compile(
    r'out of host capacity'
    r'|insufficient capacity'
    r'|not enough (?:host )?capacity'
    r'|capacity reservation\b.{0,160}?\b(?:full|exhausted|insufficient|not enough|no (?:more )?(?:available )?capacity)',
    re.IGNORECASE)


def is_stock_out(text):
    """Whether an error text (OCI's message, a work request's errors, an exception as text) says that
    the source had no host: never true of throttling, a timeout or any other 5xx."""
    return bool(text) and STOCK_OUT.search(str(text)) is not None


def ad_suffix(availability_domain):
    """'ad-1' from 'Uocm:AP-TOKYO-1-AD-1', else None."""
    found = re.search(r'AD-(\d+)$', availability_domain or '', re.IGNORECASE)
    return 'ad-%s' % found.group(1) if found else None


def describe_failure(source):
    """How a stock-out of a source reads in a job's comment: 'reservation r1 full', 'ad-1 out of host capacity'."""
    if source.get('kind') == RESERVATION:
        return 'reservation %s full' % source['name']
    return '%s out of host capacity' % source['name']
