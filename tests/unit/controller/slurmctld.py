# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmctld running its power-saving programs, for the tests of what a resume or a suspend does: each
call runs the program (which hands a request over) and then carries that request out as the autoscaler
service does (Service.resume or Service.suspend, in this process, that request alone), recording the
scontrol commands given."""
from __future__ import annotations

import json
import os
import threading
import time

from ocigpu_control import programs, requests, service
from ocigpu_control import scaler as _autoscale


class Slurm(object):
    """A call returns 1 when the service handed the nodes back to Slurm (a failed resume) or the suspend
    failed, else 0: the exit status the programs gave when they did the work themselves."""

    def __init__(self, path, factory=_autoscale.Autoscaler):
        self.path = path
        self.factory = factory
        self.commands = []
        self._lock = threading.Lock()

    def _run(self, argv):
        with self._lock:
            self.commands.append(argv)
        return 0

    def __call__(self, action, hostlist):
        config = programs.load_config(self.path)
        requests.beat(config, time.time())  # the service this stands for is alive
        mine = []

        def run(argv):
            mine.append(argv)
            return self._run(argv)
        svc = service.Service(config, self.factory, service.Slurm(config, run=run, read=lambda argv: (1, ''), sleep=lambda s: None))
        before = set(rid for rid, _path in svc.waiting())
        assert programs.main(['--config', self.path, action, hostlist], run=run) == 0
        (_rid, path), = [(rid, path) for rid, path in svc.waiting() if rid not in before]
        with open(path) as f:
            request = json.load(f)
        try:
            if action == 'resume':
                svc.resume(request)
                return 1 if [c for c in mine if 'state=POWER_DOWN_FORCE' in c] else 0
            return 0 if svc.suspend(request) else 1
        finally:
            os.remove(path)

    def power_downs(self):
        return [c for c in self.commands if 'state=POWER_DOWN_FORCE' in c]

    def addresses(self):
        """'nodename=<name>' for each node given an address, in the order told (one command may tell many)."""
        return ['nodename=%s' % n for c in self.commands if len(c) > 3 and c[3].startswith('nodeaddr=')
                for n in c[2][len('nodename='):].split(',')]
