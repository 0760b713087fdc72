# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mitogen's linear strategy for the test runs, without Mitogen's CPU placement.

Mitogen places its processes on CPUs itself (ansible_mitogen/affinity.py). On a machine with two or
three CPUs it keeps CPU 0 for its connection multiplexer and pins the Ansible process, every worker
and every process they start to CPU 1: ssh, ``podman exec`` of the podman connection, the test VM's
qemu, and through conmon the containers themselves. With three scenarios at a time on the 2-CPU test
machine, CPU 0 sat 95 % idle while CPU 1 ran all of them (/proc/stat per CPU; ``taskset -p`` showed
mask 2 on conmon, qemu and the workers).

This is Mitogen's own ``mitogen_linear`` with the placement policy swapped for Mitogen's base
policy, whose methods do nothing, before any process is placed: the kernel spreads the processes.
.config/molecule/config.yml and tests/perf/configure_bench.sh (STRATEGY=mitogen_linear) load it
through ANSIBLE_STRATEGY_PLUGINS.
"""
from __future__ import annotations

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# Read by the multiplexer, the top-level process and each worker when they start, all after this.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()


class StrategyModule(ansible_mitogen.strategy.StrategyMixin,
                     ansible_mitogen.loaders.strategy_loader.get('linear', class_only=True)):
    """Mitogen's linear strategy; the processes are placed by the kernel."""
