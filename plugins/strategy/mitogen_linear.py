# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: mitogen_linear
short_description: Mitogen's linear strategy, with the processes placed on CPUs by the kernel
description:
  - An optional speed-up for C(configure.yml) and the other playbooks. Ansible starts a Python process
    on the host for every task; the L(Mitogen,https://mitogen.networkgenomics.com/ansible_detailed.html)
    library keeps one per host (and per become user) for a whole play, so a task costs less. The
    roles do the same work. Turn it on with C(ANSIBLE_STRATEGY=ocigpu.cluster.mitogen_linear) after
    C(pip install mitogen); docs/playbooks.md has the figures measured with it.
  - The on-demand nodes' pull (the slurm_autoscaler role's C(ocigpu-pull)) installs Mitogen beside ansible-core
    and runs its playbooks against the node with this strategy unless C(slurm_autoscaler_pull_mitogen) is empty.
  - This plugin is Mitogen's own C(mitogen_linear) strategy with two changes, the reason it exists.
    Mitogen pins its processes to CPUs itself; on a controller with two or three CPUs it keeps CPU 0
    for its connection multiplexer and pins every worker, and every process a worker starts (ssh
    among them), to CPU 1, so one CPU does all the work. Here Mitogen's placement is swapped for its
    base policy, which places nothing, so the kernel spreads the processes over every CPU. The
    plugin also spares you from looking up where pip put Mitogen's strategy plugins.
  - The second change is for the host keys. With Ansible's C(host_key_checking) on (its default),
    Mitogen puts C(-o StrictHostKeyChecking yes) in front of the host's own ssh arguments, and ssh keeps
    the first value it reads, so the C(StrictHostKeyChecking=accept-new) that the C(gpu_nodes) inventory
    and C(provision.yml) give every host was never read, and a host whose key was not yet known was
    refused. Where the host's ssh arguments name a C(StrictHostKeyChecking), this plugin leaves Mitogen's
    out, as Ansible's own ssh connection adds none. With C(host_key_checking) off nothing changes.
  - The boot wait (C(boot_wait.yml), the first play of C(configure.yml)), C(validate.yml) and the plays
    with background jobs (provisioning, teardown, the diagnostics bundle) keep Ansible's default
    strategy whatever is set here.
author:
  - ocigpu.cluster maintainers (@ocigpu)
version_added: 0.4.0
requirements:
  - mitogen (tested with 0.3.54)
"""

from ansible.errors import AnsibleError
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

try:
    import ansible_mitogen.affinity
    import ansible_mitogen.strategy
except ImportError as exc:  # Mitogen is optional: the error says how to get it when the plugin is used.
    MITOGEN_IMPORT_ERROR = exc
else:
    MITOGEN_IMPORT_ERROR = None
    # Read by the multiplexer, the top-level process and each worker as they start, all after this.
    ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

    import re

    import mitogen.ssh

    _STRICT_OPTION = re.compile(r'^(-o\s*)?StrictHostKeyChecking\b', re.IGNORECASE)
    _mitogen_boot_command = mitogen.ssh.Connection.get_boot_command

    def _boot_command_keeping_the_hosts_check(self):
        """Mitogen's ssh command line, less its own StrictHostKeyChecking=yes where the host's ssh
        arguments choose one (as Ansible's ssh connection leaves ssh's checks to them)."""
        bits = _mitogen_boot_command(self)
        if self.options.check_host_keys == 'enforce' and any(_STRICT_OPTION.match(arg) for arg in self.options.ssh_args or ()):
            for i in range(len(bits) - 1):
                if bits[i] == '-o' and bits[i + 1] == 'StrictHostKeyChecking yes':
                    del bits[i:i + 2]
                    break
        return bits

    # In the multiplexer, which starts the ssh processes: it is forked from this process after this.
    mitogen.ssh.Connection.get_boot_command = _boot_command_keeping_the_hosts_check


if MITOGEN_IMPORT_ERROR is None:
    class StrategyModule(ansible_mitogen.strategy.StrategyMixin, LinearStrategyModule):
        """Mitogen's linear strategy; the kernel places the processes."""
else:
    class StrategyModule(LinearStrategyModule):  # type: ignore[no-redef]
        """Stands in for the strategy when Mitogen is missing, and says so."""

        def __init__(self, *args, **kwargs):
            raise AnsibleError('The ocigpu.cluster.mitogen_linear strategy needs the mitogen Python package on the '
                               'controller (pip install mitogen; tested with 0.3.54): %s' % MITOGEN_IMPORT_ERROR)
