# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/strategy/mitogen_linear.py: Mitogen's linear strategy with Mitogen's CPU placement turned
off, and a clear error where Mitogen is not installed. Each check loads the plugin in a child Python:
loading it changes Mitogen's module state for the whole process."""
from __future__ import annotations

import json
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


BOOT = '''
import mitogen.ssh
def boot(check, args):
    conn = mitogen.ssh.Connection.__new__(mitogen.ssh.Connection)
    conn.options = mitogen.ssh.Options(max_message_size=1 << 20, hostname='node1', check_host_keys=check, ssh_args=args)
    conn.get_preamble = lambda: b''  # the code sent after the first stage: it needs a live router
    return conn.get_boot_command()
'''


@pytest.mark.parametrize('check, args, strict', [
    # The inventory's own choice is the one ssh reads (ssh keeps the first value).
    ('enforce', ['-o', 'StrictHostKeyChecking=accept-new', '-o', 'HostKeyAlias=ocid1.instance.x'], ['StrictHostKeyChecking=accept-new']),
    ('enforce', ['-oStrictHostKeyChecking=accept-new'], ['-oStrictHostKeyChecking=accept-new']),
    # No choice of the host's own (or one only inside a ProxyCommand's inner ssh): Mitogen's stays.
    ('enforce', ['-o', 'HostKeyAlias=ocid1.instance.x'], ['StrictHostKeyChecking yes']),
    ('enforce', ['-o', 'ProxyCommand=ssh -o StrictHostKeyChecking=accept-new -W %h:%p bastion'], ['StrictHostKeyChecking yes']),
    # host_key_checking off: Mitogen's "no" and /dev/null stay first, as before.
    ('ignore', ['-o', 'StrictHostKeyChecking=accept-new'], ['StrictHostKeyChecking no', 'StrictHostKeyChecking=accept-new']),
])
def test_the_hosts_own_host_key_check_is_the_one_ssh_reads(check, args, strict):
    pytest.importorskip('ansible_mitogen', reason='Mitogen is not installed (tests/requirements.txt has it)')
    code = ('import json\n' + LOAD + BOOT +
            'print(json.dumps(boot(%r, %r)))\n' % (check, args) +
            'mitogen.ssh.Connection.get_boot_command = mod._mitogen_boot_command\n'
            'print(json.dumps(boot(%r, %r)))\n' % (check, args))
    out = run(code)
    assert out.returncode == 0, out.stderr
    patched, original = (json.loads(line) for line in out.stdout.splitlines())
    options = [patched[i + 1] for i in range(len(patched) - 1) if patched[i] == '-o' and 'StrictHostKeyChecking' in patched[i + 1]
               and not patched[i + 1].startswith('ProxyCommand')]
    options += [a for a in patched if a.startswith('-oStrictHostKeyChecking')]
    assert options == strict, patched
    # Only Mitogen's own option may go; the rest of the command line is Mitogen's, unchanged.
    removed = [a for a in original if a not in patched]
    assert removed in ([], ['StrictHostKeyChecking yes']), (original, patched)
    assert original.index('node1') - patched.index('node1') == (2 if removed else 0)
