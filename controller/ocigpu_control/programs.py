# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The command line of Slurm power saving on OCI: the programs the slurm_autoscaler role installs run
main() with the configuration file (--config) and an action (resume, suspend, resume-fail, status,
nodes, service, pull-server) and, from Slurm, a hostlist; a resume reads the jobs of Slurm's resume file
(SLURM_RESUME_FILE). resume, suspend and resume-fail only hand a request to the service (requests.py);
the work is service.py's and scaler.py's.
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


NOT_RUNNING = 'the autoscaler service is not running'

USAGE = """usage: %(prog)s [--config PATH] resume|suspend|resume-fail|status|nodes [HOSTLIST]
  resume HOSTLIST       hand the nodes to the autoscaler service, which makes (or adopts) their cluster
                        network and sets their addresses; with the service not running, hand them back
  suspend HOSTLIST      hand the nodes to the service, which releases them and terminates cluster
                        networks whose nodes are all released
  resume-fail HOSTLIST  same as suspend (Slurm's ResumeFailProgram)
  status                print the autoscaled cluster networks as JSON, and the service's heartbeat
  nodes                 print as JSON one object per instance that carries a Slurm name of this cluster
                        (on-demand and static, terminated ones OCI still lists): its state, cluster
                        network, availability and fault domain, local block; the heartbeat on stderr
                        (read by `ocigpu status`)
  watchdog              with the service not running, hand back the nodes of the resumes it left in
                        flight (run every 20 s by ocigpu-autoscaler-watchdog.timer)
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
    if not argv or argv[0] not in ('resume', 'suspend', 'resume-fail', 'status', 'nodes', 'service', 'watchdog') or (
            argv[0] not in ('status', 'nodes', 'service', 'watchdog') and len(argv) != 2) or (
            argv[0] == 'nodes' and len(argv) != 1) or (
            argv[0] == 'watchdog' and len(argv) != 1):
        sys.stderr.write(USAGE % dict(prog=prog))
        return 2
    action, hostlist = argv[0], (argv[1] if len(argv) > 1 else '')
    try:
        config = load(config_path)
    except ConfigError as exc:
        sys.stderr.write('%s: %s\n' % (prog, exc))
        return 2
    if action in ('status', 'nodes', 'service'):
        from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
        from ocigpu_control.scaler import check_config
        try:
            config = check_config(config)
        except InputError as exc:
            sys.stderr.write('%s: %s\n' % (prog, exc))
            return 2
    setup_logging(config['log_file'])
    if action == 'service':
        from ocigpu_control import service
        slurm = service.Slurm(config, run=run, read=read)
        service.Service(config, autoscaler_factory or _shared_autoscalers(config), slurm).serve()
        return 0
    if action == 'status':
        return _status(config, autoscaler_factory or _autoscaler, out)
    if action == 'nodes':
        return _nodes(config, out)
    if action == 'watchdog':
        return watchdog(config, run)
    return hand_over(config, action, hostlist, run)


def watchdog(config, run):
    """The service's watchdog (a systemd timer, as the service's user): when the heartbeat is older than
    requests.stale_after, hand back the nodes of the resumes the service left in flight, so that Slurm
    requeues their jobs within a minute of its death rather than at ResumeTimeout or at the next program
    Slurm runs. Nothing to do while the service beats; always exits 0 (each outcome is logged)."""
    if requests.service_alive(config):
        return 0
    _hand_back_in_flight(config, run)
    return 0


def _autoscaler(config):
    from ocigpu_control.scaler import Autoscaler
    return Autoscaler(config)


def _shared_autoscalers(config):
    """The service's factory of Autoscalers: all on one OCI session (its clients and its throttle-aware
    retries) and one set of listings of the compartment (cloud.py), whichever thread asks."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
    from ocigpu_control.cloud import Listings
    from ocigpu_control.scaler import Autoscaler
    session = _oci.OCISession(dict(config['auth']))
    listings = Listings(session, config['compartment_id'])

    def factory(conf):
        return Autoscaler(conf, session=session, listings=listings)
    return factory


def _beat_text(config):
    found = requests.heartbeat(config)
    if found is None:
        return 'no heartbeat (%s missing or unreadable)' % requests.heartbeat_path(config)
    return 'last heartbeat %ds ago from pid %s (%s after %ds)' % (
        found['age'], found.get('pid'), 'alive' if found['age'] <= requests.stale_after(config) else 'not running',
        requests.stale_after(config))


def _status(config, autoscaler_factory, out):
    """The autoscaled cluster networks as JSON on stdout; the service's heartbeat on stderr."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
    from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
    from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitError
    sys.stderr.write('service: %s\n' % _beat_text(config))
    log.info('status')
    try:
        out.write(json.dumps(autoscaler_factory(config).status(), indent=1) + '\n')
    except (InputError, WaitError, _oci.OCIConfigError, _oci.ServiceError) as exc:
        log.error('status failed: %s', getattr(exc, 'message', None) or exc)
        return 1
    return 0


def _nodes(config, out, view=None):
    """The OCI view of this cluster's nodes as JSON on stdout (view.py); the service's heartbeat on stderr.
    Exit 1, with OCI's message on stderr, when OCI cannot be asked."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
    from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError
    from ocigpu_control.view import NodesView
    sys.stderr.write('service: %s\n' % _beat_text(config))
    try:
        records = (view or NodesView(config)).nodes()
    except (InputError, _oci.OCIConfigError, _oci.ServiceError) as exc:
        message = getattr(exc, 'message', None) or str(exc)
        log.error('nodes failed: %s', message)
        sys.stderr.write('ocigpu-slurm-autoscaler: OCI cannot be asked: %s\n' % message)
        return 1
    out.write(json.dumps(records, indent=1) + '\n')
    return 0


def hand_over(config, action, hostlist, run):
    """Write the request for the service. When the service is not running (no heartbeat within
    requests.stale_after), a resume hands its nodes back to Slurm at once instead, and so does every
    program for the resumes the dead service left in flight: Slurm requeues their jobs. A suspend is
    written all the same: the service carries it out when it comes back."""
    alive = requests.service_alive(config)
    if not alive:
        _hand_back_in_flight(config, run)
    if action == 'resume' and not alive:
        status = run(scontrol_fail_command(config['scontrol'], hostlist, '%s: %s' % (
            config['resume_fail_reason_prefix'], NOT_RUNNING)))
        log.error('resume %s: %s (%s); %s', hostlist, NOT_RUNNING, _beat_text(config),
                  'handing %s back to Slurm failed (scontrol exited %s)' % (hostlist, status) if status else
                  '%s handed back to Slurm (state=POWER_DOWN_FORCE)' % hostlist)
        return 1
    jobs = read_resume_file(os.environ.get('SLURM_RESUME_FILE')) if action == 'resume' else []
    rid = requests.submit(config, action, hostlist, jobs)
    log.info('%s %s: handed to the autoscaler service (request %s%s)', action, hostlist, rid,
             '; jobs %s' % ', '.join('%s: %s' % (j['job_id'], j['nodes']) for j in jobs) if jobs else '')
    if not alive:
        log.warning('%s %s: %s (%s); the request waits for it', action, hostlist, NOT_RUNNING, _beat_text(config))
    return 0


def _hand_back_in_flight(config, run):
    """The resumes a dead service left: their nodes are handed back and their requests removed (the
    suspend Slurm runs for the handed-back nodes ends what was made, once the service is back)."""
    for path, request in requests.in_flight_resumes(config):
        what = request['nodes']
        status = run(scontrol_fail_command(config['scontrol'], what, '%s: %s' % (
            config['resume_fail_reason_prefix'], NOT_RUNNING)))
        if status:
            log.error('resume %s (request %s): %s; handing %s back to Slurm failed (scontrol exited %s)',
                      what, request.get('id'), NOT_RUNNING, what, status)
            continue
        try:
            os.remove(path)
        except OSError:
            pass
        log.error('resume %s (request %s): %s (%s); %s handed back to Slurm (state=POWER_DOWN_FORCE)',
                  what, request.get('id'), NOT_RUNNING, _beat_text(config), what)
