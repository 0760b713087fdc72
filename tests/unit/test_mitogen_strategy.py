# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/infra/mitogen/strategy/mitogen_linear.py: Mitogen's linear strategy with Mitogen's CPU
placement turned off (on two CPUs it pinned every molecule scenario to one of them)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGIN = os.path.join(ROOT, 'tests', 'infra', 'mitogen', 'strategy', 'mitogen_linear.py')

pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')

# In a child Python: loading the plugin changes Mitogen's module state for the whole process.
CHECK = '''
import importlib.util, sys
import ansible_mitogen.affinity, ansible_mitogen.strategy
print(type(ansible_mitogen.affinity.policy).__name__)
spec = importlib.util.spec_from_file_location('mitogen_linear_under_test', sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(type(ansible_mitogen.affinity.policy).__name__)
print(issubclass(mod.StrategyModule, ansible_mitogen.strategy.StrategyMixin))
print([c.__module__ for c in mod.StrategyModule.__mro__][2])
'''


def test_the_plugin_swaps_the_placement_policy_for_the_one_that_places_nothing():
    out = subprocess.run([sys.executable, '-c', CHECK, PLUGIN], capture_output=True, text=True, check=True)
    before, after, mixin, base = out.stdout.split()
    assert before == 'LinuxPolicy', 'Mitogen places processes itself on Linux: %s' % before
    assert after == 'Policy'
    assert mixin == 'True'
    assert base.endswith('strategy.linear'), base
