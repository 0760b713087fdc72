# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The command line of Slurm power saving on OCI: the programs the slurm_autoscaler role installs run
main() with the configuration file (--config) and an action (resume, suspend, resume-fail, status,
service, pull-server) and, from Slurm, a hostlist; a resume reads the jobs of Slurm's resume file
(SLURM_RESUME_FILE). The logic is scaler.py's, the service's service.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Standard library only: a resume, suspend or resume-fail hands its request over without loading the
# OCI SDK; the status, service and pull-server actions import scaler.py and the rest when they run.
from ocigpu_control import requests
from ocigpu_control.settings import ConfigError, load, log, scontrol_fail_command, setup_logging


def load_config(path):
    """Read the JSON written by the role; fill defaults; raise InputError naming a missing key or a bad
    hostlist (scaler.check_config)."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
    from ocigpu_control.scaler import check_config
    try:
        return check_config(load(path))
    except ConfigError as exc:
        raise InputError(str(exc))


def read_resume_file(path):
    """The jobs of Slurm's resume file: [{'job_id', 'nodes'}] (nodes: the job's nodes_resume hostlist)."""
    if not path:
        return []
    try:
        with open(path) as f:
            data = json.load(f)
    except (IOError, OSError, ValueError) as exc:
        log.warning('resume file %s unreadable (%s): the nodes are resumed as one group', path, exc)
        return []
    return [dict(job_id=int(j['job_id']), nodes=j.get('nodes_resume') or j.get('nodes_alloc') or '')
            for j in data.get('jobs') or [] if j.get('job_id')]


def _run(argv):
    log.info('run: %s', ' '.join(argv))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    out = proc.stdout.decode('utf-8', 'replace').strip()
    if proc.returncode != 0:
        log.error('%s exited %d: %s', argv[0], proc.returncode, out)
    return proc.returncode


def _read(argv):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    return proc.returncode, proc.stdout.decode('utf-8', 'replace')


USAGE = """usage: %(prog)s [--config PATH] resume|suspend|resume-fail|status [HOSTLIST]
  resume HOSTLIST       create (or adopt) the nodes' cluster network, then set their addresses in Slurm
  suspend HOSTLIST      release the nodes; terminate cluster networks whose nodes are all released
  resume-fail HOSTLIST  same as suspend (Slurm's ResumeFailProgram)
  status                print the autoscaled cluster networks as JSON
  service               carry out the requests the programs hand over, and reconcile Slurm with OCI
  pull-server           serve the pull path (bundle and join) to on-demand nodes
"""


def main(argv=None, autoscaler_factory=None, run=_run, out=None, read=_read):
    """Entry point of the installed program; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    prog = 'ocigpu-slurm-autoscaler'
    config_path = os.environ.get('OCIGPU_AUTOSCALER_CONFIG', '/etc/ocigpu-autoscaler/autoscaler.json')
    if argv[:1] == ['--config'] and len(argv) > 1:
        config_path, argv = argv[1], argv[2:]
    if argv == ['pull-server']:  # the pull path's server shares this program's configuration
        from ocigpu_control import pull_server
        return pull_server.main(['--config', config_path])
    if not argv or argv[0] not in ('resume', 'suspend', 'resume-fail', 'status', 'service') or (
            argv[0] not in ('status', 'service') and len(argv) != 2):
        sys.stderr.write(USAGE % dict(prog=prog))
        return 2
    action, hostlist = argv[0], (argv[1] if len(argv) > 1 else '')
    try:
        config = load(config_path)
    except ConfigError as exc:
        sys.stderr.write('%s: %s\n' % (prog, exc))
        return 2
    if action in ('status', 'service') or not config['service']:
        from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
        try:
            config = load_config(config_path)
        except InputError as exc:
            sys.stderr.write('%s: %s\n' % (prog, exc))
            return 2
    setup_logging(config['log_file'])
    if action == 'service':
        from ocigpu_control import service
        slurm = service.Slurm(config, run=run, read=read)
        service.Service(config, autoscaler_factory or _autoscaler, slurm).serve()
        return 0
    if config['service'] and action != 'status':
        jobs = read_resume_file(os.environ.get('SLURM_RESUME_FILE')) if action == 'resume' else []
        rid = requests.submit(config, action, hostlist, jobs)
        log.info('%s %s: handed to the autoscaler service (request %s%s)', action, hostlist, rid,
                 '; jobs %s' % ', '.join('%s: %s' % (j['job_id'], j['nodes']) for j in jobs) if jobs else '')
        return 0
    return _inline(config, action, hostlist, autoscaler_factory or _autoscaler, run, out)


def _autoscaler(config):
    from ocigpu_control.scaler import Autoscaler
    return Autoscaler(config)


def _inline(config, action, hostlist, autoscaler_factory, run, out):
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
    from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import compress_hostlist
    from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
    from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitError
    from ocigpu_control.scaler import ResumeFailed, scontrol_address_commands
    log.info('%s %s', action, hostlist)
    scontrol = config['scontrol']
    try:
        scaler = autoscaler_factory(config)
        if action == 'status':
            out.write(json.dumps(scaler.status(), indent=1) + '\n')
            return 0
        if action in ('suspend', 'resume-fail'):
            result = scaler.suspend(hostlist, action=action)
            log.info('%s %s: %s', action, hostlist, json.dumps(result))
            return 0
        mapping = scaler.resume(hostlist)
    except ResumeFailed as exc:
        log.info('resume %s: failure details %s', hostlist, json.dumps(exc.details, default=str))
        status = run(scontrol_fail_command(scontrol, hostlist, '%s: %s' % (
            config['resume_fail_reason_prefix'], exc.message)))
        log.error('resume %s failed: %s; %s; %s', hostlist, exc.message, exc.outcome,
                  'handing %s back to Slurm failed (scontrol exited %s)' % (hostlist, status) if status else
                  '%s handed back to Slurm (state=POWER_DOWN_FORCE)' % hostlist)
        return 1
    except (InputError, WaitError, _oci.OCIConfigError, _oci.ServiceError) as exc:
        log.error('%s %s failed: %s', action, hostlist, getattr(exc, 'message', None) or exc)
        if action == 'resume':
            run(scontrol_fail_command(scontrol, hostlist, '%s: %s' % (
                config['resume_fail_reason_prefix'], getattr(exc, 'message', None) or exc)))
        return 1
    status = 0
    for cmd in scontrol_address_commands(scontrol, mapping):
        status = run(cmd) or status
    if config['node_setup_command']:
        env_nodes = json.dumps(mapping)
        cmd = list(config['node_setup_command']) + [compress_hostlist(m['name'] for m in mapping)]
        os.environ['OCIGPU_AUTOSCALER_NODES'] = env_nodes
        status = run(cmd) or status
    log.info('resume %s: %s', hostlist, json.dumps(mapping))
    return 1 if status else 0
