# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small model of slurmctld's power saving, enough to drive the autoscaler service: CLOUD nodes with
their state flags and reason, jobs that hold nodes, and the scontrol/squeue commands the service gives.
It follows what Slurm 24.11 does with them: POWER_DOWN_FORCE requeues the nodes' jobs and powers the
nodes down, RESUME on a DOWN powered-down node leaves it idle and powered down, ResumeTimeout sets a
node DOWN with reason "ResumeTimeout reached". `answering = False` makes every command fail, as while
slurmctld restarts."""
from __future__ import annotations

import re
import threading
import time

from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import compress_hostlist, expand_hostlist


class FakeSlurm(object):

    def __init__(self, names):
        self.lock = threading.Lock()
        self.nodes = dict((n, dict(state={'IDLE', 'CLOUD', 'POWERED_DOWN'}, reason='', addr=None)) for n in names)
        self.jobs = {}
        self.commands = []
        self.answering = True
        self.refused = 0
        self.reconfigured = 0
        self.powered_up = []  # names POWER_UP asked for (slurmctld would run the resume program)

    # what the test does as slurmctld
    def allocate(self, job_id, names):
        """A job gets powered-down nodes: they power up and the job configures."""
        with self.lock:
            self.jobs[job_id] = dict(nodes=list(names), state='CONFIGURING', comment='', start_after=None, held=False)
            for n in names:
                self.nodes[n]['state'] = {'IDLE', 'CLOUD', 'POWERING_UP'}
                self.nodes[n]['reason'] = ''

    def resume_timeout(self, names):
        with self.lock:
            for n in names:
                self.nodes[n]['state'] = {'DOWN', 'CLOUD', 'POWERED_DOWN'}
                self.nodes[n]['reason'] = 'ResumeTimeout reached'
                self._requeue(n)

    def set_down(self, names, reason):
        with self.lock:
            for n in names:
                self.nodes[n]['state'] = {'DOWN', 'CLOUD', 'POWERED_DOWN'}
                self.nodes[n]['reason'] = reason

    def register(self, names):
        """The nodes' slurmd registered: powered up, idle, nothing else."""
        with self.lock:
            for n in names:
                self.nodes[n]['state'] = {'IDLE', 'CLOUD'}
                self.nodes[n]['reason'] = ''

    def drain_by_checks(self, name, reason):
        """The node's health check drained it (slurmd's HealthCheckProgram)."""
        with self.lock:
            self.nodes[name]['state'] = self.nodes[name]['state'] | {'DRAIN'}
            self.nodes[name]['reason'] = reason

    def add_static(self, addresses, started=0.0):
        """Static nodes of the cluster network ({name: address}): registered, idle, never powered down."""
        with self.lock:
            for n, addr in addresses.items():
                self.nodes[n] = dict(state={'IDLE'}, reason='', addr=addr, slurmd_start=started)

    def lose(self, name):
        """The node's slurmd stopped answering (its instance went)."""
        with self.lock:
            self.nodes[name]['state'] = self.nodes[name]['state'] | {'NOT_RESPONDING'}

    def register_static(self, name, started):
        """A static node's (new) slurmd registered at the time started; a drain stays."""
        with self.lock:
            self.nodes[name]['state'] = self.nodes[name]['state'] - {'NOT_RESPONDING', 'DOWN'}
            self.nodes[name]['slurmd_start'] = started

    def states(self):
        with self.lock:
            return dict((n, '+'.join(sorted(v['state']))) for n, v in self.nodes.items())

    def _requeue(self, name):
        for job in self.jobs.values():
            if name in job['nodes'] and job['state'] in ('CONFIGURING', 'RUNNING'):
                job['state'] = 'PENDING'
                job['nodes'] = []

    # the commands
    def run(self, argv):
        with self.lock:
            self.commands.append(list(argv))
            if not self.answering:
                self.refused += 1
                return 1
            args = dict(a.split('=', 1) for a in argv[2:] if '=' in a)
            if argv[1] == 'reconfigure':
                self.reconfigured += 1
                return 0
            if argv[1] == 'hold':
                self.jobs[int(argv[2])]['held'] = True
                return 0
            if 'jobid' in args:
                job = self.jobs[int(args['jobid'])]
                if 'comment' in args:
                    job['comment'] = args['comment']
                if 'starttime' in args:
                    if job['state'] != 'PENDING':
                        return 1  # Slurm: "Job is no longer pending execution"
                    job['start_after'] = int(re.match(r'now(?:\+(\d+))?$', args['starttime']).group(1) or 0)
                return 0
            names = expand_hostlist(args['nodename'])
            addrs = args['nodeaddr'].split(',') if 'nodeaddr' in args else []
            if addrs and len(addrs) != len(names):
                return 1  # slurmctld: "update_node: nodecount mismatch"
            for i, n in enumerate(names):
                node = self.nodes[n]
                if 'nodeaddr' in args:
                    node['addr'] = addrs[i]
                elif args.get('state') == 'POWER_DOWN_FORCE':
                    node['state'] = {'IDLE', 'CLOUD', 'POWERED_DOWN'}
                    node['reason'] = args.get('reason', '')
                    self._requeue(n)
                elif args.get('state') == 'RESUME':
                    node['state'] = (node['state'] - {'DOWN', 'DRAIN'}) | {'IDLE'}
                    node['reason'] = ''
                elif args.get('state') == 'POWER_UP':
                    if 'POWERED_DOWN' not in node['state']:
                        return 1
                    node['state'] = (node['state'] - {'POWERED_DOWN'}) | {'POWERING_UP'}
                    self.powered_up.append(n)
                elif args.get('state') == 'DRAIN':
                    node['state'] = node['state'] | {'DRAIN'}
                    node['reason'] = args.get('reason', '')
            return 0

    def read(self, argv):
        with self.lock:
            self.commands.append(list(argv))
            if not self.answering:
                self.refused += 1
                return 1, 'slurm_load_node error: Unable to contact slurm controller (connect failure)'
            if argv[0].endswith('squeue'):
                return 0, ''.join('%d %s\n' % (i, compress_hostlist(j['nodes'])) for i, j in sorted(self.jobs.items())
                                  if j['state'] in ('PENDING', 'CONFIGURING') and j['nodes'])
            lines = []
            for n in expand_hostlist(argv[-1]):
                v = self.nodes[n]
                reason = ' Reason=%s [slurm@2026-11-26T00:00:00]' % v['reason'] if v['reason'] else ''
                started = v.get('slurmd_start')
                lines.append('NodeName=%s Arch=x86_64 CoresPerSocket=1 NodeAddr=%s State=%s ThreadsPerCore=1 '
                             'SlurmdStartTime=%s%s Comment=(null)'
                             % (n, v['addr'] or n, '+'.join(sorted(v['state'], key=lambda s: (s not in ('IDLE', 'DOWN'), s))),
                                time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(started)) if started else 'None', reason))
            return 0, '\n'.join(lines) + '\n'
