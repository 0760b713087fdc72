# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The control plane of an ocigpu.cluster Slurm cluster on OCI, run on the controller (docs/architecture.md):

- ``programs``: the command line Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram run, and
  the entry point of the service and the pull server;
- ``service``: the autoscaler service that carries their requests out and reconciles Slurm with OCI;
- ``scaler``: the resume and suspend of cluster networks through the collection's OCI core;
- ``heal``: the self-healing loop; ``static``: replacing static nodes through the cluster network's pool;
- ``pull_server``: the TLS server new nodes configure themselves from.

It imports the collection's shared OCI core (``ansible_collections.ocigpu.cluster.plugins.module_utils``,
which imports nothing from Ansible) and never Ansible itself; the slurm_autoscaler role installs both
as one wheel (controller/build_wheel.py).
"""
