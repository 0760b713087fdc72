# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The configuration file's defaults, the log, and the one Slurm command a program may run itself (the
hand-back of failed nodes). Standard library only: the programs Slurm calls load this and requests.py,
not the OCI SDK; scaler.check_config adds the checks that need the hostlists.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys

# The service (service.py).
SERVICE_DEFAULTS = dict(
    poll_interval=1.0,           # seconds between looks at the request folder
    reconcile_interval=30,       # seconds between comparisons of Slurm's nodes with OCI
    takeover_after=20,           # seconds a node powers up with no request before the service resumes it
    max_resume_attempts=5,       # failed resumes in a row before a job is held
    retry_backoff=[60, 120, 300, 600],  # seconds before a requeued job may start again, by attempt
    scontrol_retry_seconds=300,  # how long an scontrol that cannot reach slurmctld is tried again
    reconfigure_delay=5,         # seconds one scontrol reconfigure waits for the other placements of a burst
    reconfigure_hold=60,         # seconds at most a reconfigure for placements waits for resumed nodes still booting
    squeue='squeue',
)
DEFAULTS = dict(
    auth=dict(auth_type='instance_principal'),
    wait_timeout=1800,
    max_nodes_per_cluster_network=0,
    state_file='/var/lib/ocigpu-autoscaler/state.json',
    log_file='/var/log/ocigpu-autoscaler/autoscaler.log',
    scontrol='scontrol',
    resume_fail_reason_prefix='ocigpu-autoscaler',
    node_setup_command=[],
    freeform_tags={},
    pull={},
    # {conf, inputs, places}: topology.conf, the slurm role's topology.json, the places found (service)
    topology={},
    # Where the nodes' hosts come from, in order (docs/autoscaling.md, "Capacity failover"):
    # [{name, kind, availability_domain, instance_configuration_id, capacity_reservation_id}]; empty: one
    # on-demand source, availability_domain with instance_configuration_id (scaler.check_config makes it).
    capacity_sources=[],
    capacity_cooldown=600,       # seconds a source that ran out of hosts is not tried again
    **SERVICE_DEFAULTS
)
REQUIRED = ('cluster_name', 'compartment_id', 'availability_domain', 'subnet_id', 'instance_configuration_id', 'nodes')

log = logging.getLogger('ocigpu.autoscaler')


class ConfigError(ValueError):
    """The configuration file cannot be read, or lacks a required key."""


def with_defaults(data):
    """The configuration with its defaults; raise ConfigError naming the missing keys."""
    config = dict(DEFAULTS)
    config.update(data or {})
    missing = [k for k in REQUIRED if not config.get(k)]
    if missing:
        raise ConfigError('config: %s missing' % ', '.join(missing))
    return config


def load(path):
    """Read the JSON the role writes, with its defaults (what a program needs to hand a request over)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (IOError, OSError, ValueError) as exc:
        raise ConfigError('config: cannot read %s: %s' % (path, exc))
    return with_defaults(data)


def scontrol_fail_command(scontrol, hostlist, reason):
    """Hand failed nodes back to Slurm: powered down at once, so their jobs are requeued."""
    reason = re.sub(r'["\n]', ' ', reason)[:200]
    return [scontrol, 'update', 'nodename=%s' % hostlist, 'state=POWER_DOWN_FORCE', 'reason=%s' % reason]


def setup_logging(path, level=logging.INFO):
    handler = logging.StreamHandler(sys.stderr)
    if path:
        directory = os.path.dirname(path)
        if directory and not os.path.isdir(directory):
            os.makedirs(directory, 0o750)
        handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter('%(asctime)s %(process)d %(levelname)s %(message)s'))
    log.handlers[:] = [handler]
    log.setLevel(level)
