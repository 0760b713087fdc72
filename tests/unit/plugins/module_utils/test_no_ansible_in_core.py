# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils is the modules' library behind one file of Ansible glue, _module.py: every other file imports
without Ansible, as the controller's package does on a host that has no ansible-core."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
MODULE_UTILS = os.path.join(ROOT, 'plugins', 'module_utils')
GLUE = '_module.py'
PACKAGE = 'ansible_collections.ocigpu.cluster.plugins.module_utils'
ANSIBLE_IMPORT = re.compile(r'^\s*(from\s+ansible(\.|\s+import\b)|import\s+ansible(\.|\s|,|$))', re.MULTILINE)

# Run in a fresh interpreter on the test's sys.path (pytest.ini puts the checkout and .build/collections on it): a
# finder first on sys.meta_path refuses `ansible` and `ansible.*`, then each file is imported; prints {module name:
# the error, or null}, and under the key `ansible` whether the finder did refuse it.
IMPORT_ALL = r'''
import importlib, json, sys, traceback

class NoAnsible(object):
    def find_spec(self, name, path=None, target=None):
        if name == 'ansible' or name.startswith('ansible.'):
            raise ImportError('ansible is not installed here (blocked by the test): %s' % name)
        return None

sys.meta_path.insert(0, NoAnsible())
sys.path[:] = json.loads(sys.argv[1])
result = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
        result[name] = None
    except Exception:
        result[name] = traceback.format_exc(limit=-3)
try:
    import ansible.module_utils.basic
    result['ansible'] = 'imported'
except ImportError:
    result['ansible'] = 'refused' if not any(m == 'ansible' or m.startswith('ansible.') for m in sys.modules) else 'loaded'
print(json.dumps(result))
'''


def core_files():
    return sorted(f for f in os.listdir(MODULE_UTILS) if f.endswith('.py') and f not in (GLUE, '__init__.py'))


def test_every_file_but_the_glue_imports_without_ansible():
    names = ['%s.%s' % (PACKAGE, f[:-3]) for f in core_files()]
    assert len(names) > 5
    proc = subprocess.run([sys.executable, '-c', IMPORT_ALL, json.dumps(sys.path)] + names,
                          cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result.pop('ansible') == 'refused'
    failed = dict((name, error) for name, error in result.items() if error)
    assert not failed, '\n'.join('%s:\n%s' % item for item in sorted(failed.items()))
    assert sorted(result) == sorted(names)


def test_the_glue_is_the_only_file_that_names_ansible():
    with_ansible = []
    for f in sorted(os.listdir(MODULE_UTILS)):
        if f.endswith('.py'):
            with open(os.path.join(MODULE_UTILS, f)) as source:
                if ANSIBLE_IMPORT.search(source.read()):
                    with_ansible.append(f)
    assert with_ansible == [GLUE]
