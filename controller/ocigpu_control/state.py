# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The autoscaler's state file (``state_file``, ``/var/lib/ocigpu-autoscaler/state.json``): one JSON object
that the service's threads (and, before the service, the programs) read and rewrite under an flock.
Its keys are declared here, each with its meaning and its empty value; the module that writes each is
named. ``schema`` is the version of this layout: a file without it was written by the release before
(version 1, the same keys) and is migrated when read; the next write stores the version.

Owned by the service's user (Slurm's), mode 0600 in a folder of mode 0700: no other user reads it.
Standard library only.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import tempfile

SCHEMA = 2

# key: (its empty value, its meaning)
KEYS = {
    'schema': (SCHEMA, 'the version of this layout (SCHEMA); missing in the files of the release before (1)'),
    'released': ([], 'scaler.py: names a suspend or resume-fail released while their cluster network still '
                     'carries names in use (it is terminated when all are released)'),
    'attempts': ({}, "service.py: {job id: its failed resumes in a row}; the job is held at max_resume_attempts"),
    'pull_failures': ({}, "service.py: {job id: its new nodes' failed pulls}, counted apart from its resumes"),
    'capacity_waits': ([], 'service.py: job ids requeued for want of hosts, started again as soon as the service '
                           'ends a cluster network'),
    'cooling': ({}, 'scaler.py: {capacity source name: when its cooldown ends (seconds since the epoch)} of the '
                    'sources that ran out of hosts; they are skipped until then'),
    'stock_outs': ({}, 'scaler.py: {capacity source name: stock-outs met there}, for the metrics'),
    'capacity_failures': ({}, "service.py: {job id: its resumes in a row that found no host}, the back-off of a "
                              "job no source cooling says when to try again; never a hold"),
    'heal': ({}, 'heal.py: the self-healing loop, {nodes: {name: record of its step}, started: [times of the '
                 'last hour], paused, counts, last_drain_to_service}'),
    'static_replacements': ({}, 'static.py: {name: {old_id, before}} of the static nodes whose instance is '
                                'being replaced'),
}

log = logging.getLogger('ocigpu.autoscaler')


def migrate(state):
    """The state of any earlier layout in this one (in place; returned)."""
    version = state.get('schema', 1)
    if not isinstance(version, int) or version > SCHEMA:
        # A newer release's file (a downgrade): its keys are read as they are and its version is kept.
        log.warning('state: schema %r is not one this release knows (%d); keys read as they are', version, SCHEMA)
    else:
        # 1 -> 2: the same keys; the version is recorded. A later change of layout adds its step here.
        state['schema'] = SCHEMA
    for key, (empty, _meaning) in KEYS.items():
        if state.get(key) is None:
            state[key] = copy.deepcopy(empty)
    return state


class StateFile(object):
    """The state file, read-modify-written under an flock so the requests at work (and the programs of
    the release before) can overlap."""

    def __init__(self, path):
        self.path = path

    @contextlib.contextmanager
    def _flock(self, suffix):
        directory = os.path.dirname(self.path) or '.'
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
        with open(self.path + suffix, 'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield directory
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def deciding(self):
        """Held (across processes) while a resume takes its names back and picks the cluster networks it
        adopts, and while a suspend decides which to terminate and asks OCI to: a resume of one name of a
        cluster network and a suspend of another never decide on the same stale list of released names."""
        return self._flock('.decide')

    def update(self, fn):
        with self._flock('.lock') as directory:
            state = self.read()
            result = fn(state)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix='.state-')
            with os.fdopen(fd, 'w') as f:
                json.dump(state, f, indent=1, sort_keys=True)
            os.rename(tmp, self.path)
            return result

    def read(self):
        """The state, migrated to this layout, with every declared key (empty when missing)."""
        try:
            with open(self.path) as f:
                state = json.load(f)
        except (IOError, OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}
        return migrate(state)
