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
import logging
import os
import tempfile
import threading
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


# The service's heartbeat -------------------------------------------------------------------------
# The service rewrites <state dir>/heartbeat.json every poll_interval seconds from a thread of its own
# (so a loop pass that waits on OCI, a termination say, does not read as a dead service). A program
# that finds it older than stale_after() (or missing) knows no one will carry its request out.

def heartbeat_path(config):
    return os.path.join(os.path.dirname(config['state_file']) or '.', 'heartbeat.json')


def stale_after(config):
    """Seconds after which a heartbeat says the service is gone: three polls and 30 s of slack."""
    return 3 * float(config['poll_interval']) + 30


def beat(config, started):
    """Write the heartbeat: the time, the service's pid and when it started (seconds since the epoch)."""
    path = heartbeat_path(config)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o700)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix='.heartbeat-')
    with os.fdopen(fd, 'w') as f:
        json.dump(dict(time=time.time(), pid=os.getpid(), started=started), f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


def heartbeat(config, now=None):
    """The last heartbeat with its age in seconds ({'time', 'pid', 'started', 'age'}), or None."""
    try:
        with open(heartbeat_path(config)) as f:
            found = json.load(f)
        found['age'] = max(0.0, (time.time() if now is None else now) - float(found['time']))
    except (IOError, OSError, ValueError, KeyError, TypeError):
        return None
    return found


def service_alive(config, now=None):
    found = heartbeat(config, now)
    return found is not None and found['age'] <= stale_after(config)


def keep_beating(config, stop):
    """Start the heartbeat thread of a service whose loop ends when `stop` (a threading.Event) is set."""
    started = time.time()

    def run():
        while True:
            try:
                beat(config, started)
            except (IOError, OSError) as exc:  # a full disk: the programs will hand the nodes back
                logging.getLogger('ocigpu.autoscaler').error('service: heartbeat not written: %s', exc)
            if stop.wait(float(config['poll_interval'])):
                return
    thread = threading.Thread(target=run, name='heartbeat')
    thread.daemon = True
    thread.start()
    return thread


def waiting(config):
    """The request files in the folder, oldest first: [(id, path)]."""
    folder = request_dir(config)
    if not os.path.isdir(folder):
        return []
    return sorted((f[:-5], os.path.join(folder, f)) for f in os.listdir(folder)
                  if f.endswith('.json') and not f.startswith('.'))


def in_flight_resumes(config):
    """The resume requests waiting in the folder: [(path, request)], oldest first."""
    found = []
    for rid, path in waiting(config):
        if '-resume-' not in rid:
            continue
        try:
            with open(path) as f:
                request = json.load(f)
        except (IOError, OSError, ValueError):
            continue
        if request.get('action') == 'resume' and request.get('nodes'):
            found.append((path, request))
    return found
