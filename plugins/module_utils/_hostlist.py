# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Slurm hostlist syntax: ``gpu-[1-3,7],cpu-1`` to node names and back.

A name that is not a hostlist, or a range that is not one, raises InputError naming it.
"""

from __future__ import annotations

import re

from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError


def _split_top(expr):
    """Split on commas that are outside brackets."""
    parts, depth, cur = [], 0, ''
    for ch in expr:
        if ch == '[':
            depth += 1
        elif ch == ']':
            depth -= 1
            if depth < 0:
                raise InputError('hostlist: unbalanced "]" in %r' % expr)
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    if depth != 0:
        raise InputError('hostlist: unbalanced "[" in %r' % expr)
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _expand_one(name):
    m = re.match(r'^([^\[]*)\[([^\]]*)\](.*)$', name)
    if not m:
        if not re.match(r'^[A-Za-z0-9._-]+$', name):
            raise InputError('hostlist: %r is not a node name' % name)
        return [name]
    prefix, ranges, rest = m.groups()
    out = []
    for item in ranges.split(','):
        item = item.strip()
        rm = re.match(r'^(\d+)(?:-(\d+))?$', item)
        if not rm:
            raise InputError('hostlist: %r in %r is not a number or a range' % (item, name))
        lo, hi = rm.group(1), rm.group(2) or rm.group(1)
        if int(hi) < int(lo):
            raise InputError('hostlist: range %s is backwards in %r' % (item, name))
        width = len(lo) if lo.startswith('0') and len(lo) > 1 else 0
        tails = _expand_one(rest) if rest else ['']
        for n in range(int(lo), int(hi) + 1):
            out.extend(prefix + str(n).zfill(width) + tail for tail in tails)
    return out


def expand_hostlist(expr):
    """Slurm hostlist -> node names in order, duplicates removed: 'gpu-[1-3,7],cpu-1'."""
    seen, names = set(), []
    for part in _split_top(expr or ''):
        for name in _expand_one(part):
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def _natural(name):
    m = re.match(r'^(.*?)(\d+)$', name)
    return (m.group(1), int(m.group(2)), name) if m else (name, -1, name)


def compress_hostlist(names):
    """Node names -> the shortest simple hostlist: ['gpu-1','gpu-2','gpu-3','gpu-7'] -> 'gpu-[1-3,7]'."""
    groups, order, plain = {}, [], []
    for name in sorted(set(names), key=_natural):
        m = re.match(r'^(.*?)(\d+)$', name)
        if not m:
            plain.append(name)
            continue
        prefix, digits = m.groups()
        width = len(digits) if digits.startswith('0') and len(digits) > 1 else 0
        key = (prefix, width)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    parts = list(plain)
    for prefix, width in order:
        nums = groups[(prefix, width)]
        runs, start, prev = [], nums[0], nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(str(start).zfill(width) if start == prev else '%s-%s' % (str(start).zfill(width), str(prev).zfill(width)))
            if n is not None:
                start = prev = n
        parts.append('%s%s' % (prefix, runs[0]) if len(runs) == 1 and '-' not in runs[0] else '%s[%s]' % (prefix, ','.join(runs)))
    return ','.join(parts)
