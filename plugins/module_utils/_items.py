# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks shared by the modules whose main option is a list of dicts (files, folders, services)."""
from __future__ import annotations


def unknown_keys(name, item, fields):
    """The problem of an item (called `name` in the message) with keys other than `fields`; None without."""
    unknown = sorted(set(item) - set(fields))
    return '%s: unknown keys %s' % (name, ', '.join(unknown)) if unknown else None


def item_problem(item, key, fields):
    """What is wrong with one item: no text under `key`, or keys other than `fields`; None when nothing."""
    name = item.get(key)
    if not isinstance(name, str) or not name:
        return '%r has no %s' % (sorted(item), key)
    return unknown_keys(name, item, fields)
