# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/strategy/mitogen_linear.py: Mitogen's linear strategy with Mitogen's CPU placement turned
off, and a clear error where Mitogen is not installed. Each check loads the plugin in a child Python:
loading it changes Mitogen's module state for the whole process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLUGIN = os.path.join(ROOT, 'plugins', 'strategy', 'mitogen_linear.py')

LOAD = '''
import importlib.util, sys
spec = importlib.util.spec_from_file_location('mitogen_linear_under_test', sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
'''


def run(code):
    return subprocess.run([sys.executable, '-c', code, PLUGIN], capture_output=True, text=True, check=False)


def test_with_mitogen_the_placement_policy_is_the_one_that_places_nothing():
    pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')
    out = run('import ansible_mitogen.affinity, ansible_mitogen.strategy\n'
              'print(type(ansible_mitogen.affinity.policy).__name__)\n' + LOAD +
              'print(type(ansible_mitogen.affinity.policy).__name__)\n'
              'print(issubclass(mod.StrategyModule, ansible_mitogen.strategy.StrategyMixin))\n'
              'print(mod.StrategyModule.__mro__[2].__module__)\n')
    assert out.returncode == 0, out.stderr
    before, after, mixin, base = out.stdout.split()
    assert before == 'LinuxPolicy', 'Mitogen places processes itself on Linux: %s' % before
    assert after == 'Policy'
    assert mixin == 'True'
    assert base == 'ansible.plugins.strategy.linear'


def test_without_mitogen_the_plugin_loads_and_using_it_says_what_to_install():
    # None in sys.modules makes every import of the package fail, as on a controller without it.
    out = run('import sys\nsys.modules["ansible_mitogen"] = None\n' + LOAD +
              'try:\n    mod.StrategyModule(None)\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('AnsibleError '), out.stdout
    assert 'needs the mitogen Python package on the controller (pip install mitogen' in out.stdout
