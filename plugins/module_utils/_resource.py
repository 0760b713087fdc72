# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""What every resource module shares, without Ansible: the cluster tag and OCI's name limits, input errors,
finding the one live resource by name and tag, and comparing what is wanted with what is there.

The Ansible side (the argument specs, OCIModule and ResourceModule's present/absent state machine) is in
_module.py; the controller's package imports this file where ansible-core is not installed.
"""

from __future__ import annotations

from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import DEAD_STATES

CLUSTER_TAG = 'ocigpu-cluster'
# OCI's own limits on names and tags (the API refuses longer ones with 400 InvalidParameter).
MAX_DISPLAY_NAME = 255
MAX_TAG_VALUE = 256


class InputError(Exception):
    """Invalid user input. The message starts with the option's name."""


def _shown(text, width=40):
    return repr(text if len(text) <= width else text[:width] + '...')


def cluster_name_problem(name):
    """Why OCI (or the collection's tag lookup) cannot take this cluster name, or None.

    Every resource is found again by the freeform tag ocigpu-cluster=<cluster_name>: an empty name
    would tag, and find, everything that is tagged with an empty value.
    """
    if not (name or '').strip():
        return 'empty; name the cluster (it names and tags every resource, e.g. gpu1)'
    if len(name) > MAX_TAG_VALUE:
        return '%d characters; it is the value of the freeform tag %s, and OCI takes at most %d' % (
            len(name), CLUSTER_TAG, MAX_TAG_VALUE)
    return None


def check_cluster_name(name, option='cluster_name'):
    problem = cluster_name_problem(name)
    if problem:
        raise InputError('%s: %s' % (option, problem))


def check_display_names(option, names):
    """Every display name a module would send is 1 to 255 characters, as OCI requires.

    option is the module option the names come from (display_name, or cluster_name for names made of it).
    """
    for name in names:
        if not name:
            raise InputError('%s: empty; OCI display names are 1 to %d characters' % (option, MAX_DISPLAY_NAME))
        if len(name) > MAX_DISPLAY_NAME:
            raise InputError('%s: makes the display name %s, %d characters long; OCI takes at most %d' % (
                option, _shown(name), len(name), MAX_DISPLAY_NAME))


def cluster_tags(cluster_name, extra=None):
    tags = dict(extra or {})
    tags[CLUSTER_TAG] = cluster_name
    return tags


def attr(res, name, default=None):
    """Read an attribute from an SDK model or a dict."""
    if res is None:
        return default
    if isinstance(res, dict):
        return res.get(name, default)
    return getattr(res, name, default)


def is_live(res):
    return attr(res, 'lifecycle_state') not in DEAD_STATES


def pick_tagged(items, display_name, cluster_name, what):
    """The one live item with this display name and cluster tag, or None.

    More than one is an error: the collection never makes two, so a second one was made by hand
    and the module must not guess which to manage.
    """
    found = [i for i in items
             if is_live(i) and attr(i, 'display_name') == display_name
             and (attr(i, 'freeform_tags') or {}).get(CLUSTER_TAG) == cluster_name]
    if len(found) > 1:
        raise InputError('%s: %d live resources named %s carry the tag %s=%s (%s); remove the extra ones' % (
            what, len(found), display_name, CLUSTER_TAG, cluster_name, ', '.join(attr(i, 'id') for i in found)))
    return found[0] if found else None


def current_with_tags(res, desired):
    """The desired keys read from res; tags only as far as the desired tags go.

    OCI and tag defaults add tags of their own (Oracle-Tags.CreatedBy, ...), which are not a
    difference worth an update.
    """
    current = {}
    for key, want in desired.items():
        have = attr(res, key)
        if key == 'freeform_tags' and isinstance(want, dict):
            have = dict((k, (have or {}).get(k)) for k in want)
        elif key == 'defined_tags' and isinstance(want, dict):
            have = dict((ns, dict((k, ((have or {}).get(ns) or {}).get(k)) for k in keys))
                        for ns, keys in want.items())
        current[key] = have
    return current


def compare(desired, current, updatable):
    """Return (changes, blocked): attributes to update, and changed attributes that cannot be."""
    changes = {}
    blocked = []
    for key, want in desired.items():
        if want is None:
            continue
        have = current.get(key)
        if _normalise(want) != _normalise(have):
            if key in updatable:
                changes[key] = want
            else:
                blocked.append(key)
    return changes, sorted(blocked)


def _normalise(value):
    if isinstance(value, dict):
        return dict((k, _normalise(v)) for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value
