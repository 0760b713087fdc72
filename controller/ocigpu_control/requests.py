# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The hand-over between the programs Slurm calls (and the pull server, and the service itself) and the
autoscaler service: a request is one JSON file in ``<state dir>/requests``, written whole (a rename) and
removed by the service when it has carried it out. Standard library only, so that a program that hands
a request over starts in a few tens of milliseconds.
"""

from __future__ import annotations

import json
import os
import time
import uuid


def request_dir(config):
    return os.path.join(os.path.dirname(config['state_file']) or '.', 'requests')


def _owned_like_parent(path):
    """As root (the pull server), a request belongs to the service's user, who owns the state folder."""
    if os.geteuid() == 0:
        st = os.stat(os.path.dirname(os.path.abspath(path)))
        os.chown(path, st.st_uid, st.st_gid)


def submit(config, action, hostlist, jobs=None, source='slurmctld', **extra):
    """Write a request for the service; return its id."""
    folder = request_dir(config)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
        _owned_like_parent(folder)
    # Ids sort in the order the requests were made (nanoseconds since the epoch first).
    rid = '%020d-%s-%s' % (time.time_ns(), action, uuid.uuid4().hex[:8])
    request = dict(extra, id=rid, action=action, nodes=hostlist, jobs=jobs or [], source=source, submitted=time.time())
    tmp = os.path.join(folder, '.%s.tmp' % rid)
    with open(tmp, 'w') as f:
        json.dump(request, f)
    _owned_like_parent(tmp)
    os.rename(tmp, os.path.join(folder, rid + '.json'))
    return rid
