# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The control plane of an ocigpu.cluster Slurm cluster on OCI, run on the controller (docs/architecture.md):

- ``programs``: the command line Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram run (with
  ``requests`` and ``settings`` only: the hand-over folder, the heartbeat, the configuration's
  defaults and the log), the watchdog, and the entry point of the service and the pull server;
- ``service``: the autoscaler service: each pass observes Slurm, OCI and its records, ``decide`` maps
  every node to a named action (pure; the self-healing loop's steps as a table of transitions), and the
  service applies them;
- ``state``: the state file, its declared keys and schema version;
- ``scaler``: the resume and suspend of cluster networks through the collection's OCI core;
- ``heal``: the self-healing loop's doing; ``static``: replacing static nodes through the cluster
  network's pool; ``topology``: topology.conf after a resume;
- ``pull_server``: the TLS server new nodes configure themselves from.

It imports the collection's shared OCI core (``ansible_collections.ocigpu.cluster.plugins.module_utils``,
which imports nothing from Ansible) and never Ansible itself; the slurm_autoscaler role installs both
as one wheel (controller/build_wheel.py).
"""
