# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which roles a configure re-run runs again after an edit of the collection (docs/rerun.md), and what
role_records' fingerprints of the code cost.

For each file given (relative to the checkout), a copy of the checkout gets one line appended to it;
the roles whose fingerprint changes are those configure.yml runs again, on every host where they
apply. Nothing else differs between the two runs (same variables, facts and groups).

    .venv/bin/python tests/perf/rerun_after_edit.py controller/ocigpu_control/service.py plugins/modules/nccl_health.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, '.build', 'collections')]

from ansible_collections.ocigpu.cluster.plugins.action import role_records as action  # noqa: E402

PARTS = ('roles', 'plugins', 'controller', 'playbooks', 'meta', 'galaxy.yml')


def code_prints(root, roles):
    """Each role's fingerprint of its files and code (the other inputs are the same in both runs)."""
    return action.fingerprints(roles, action.code_inputs(root, roles))


def main(files):
    roles = sorted(name for name in os.listdir(os.path.join(ROOT, 'roles'))
                   if os.path.isdir(os.path.join(ROOT, 'roles', name, 'tasks')))
    with tempfile.TemporaryDirectory() as top:
        for part in PARTS:
            src = os.path.join(ROOT, part)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(top, part), ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
            elif os.path.exists(src):
                shutil.copy2(src, os.path.join(top, part))

        def best(work):
            times = []
            for _round in range(20):
                start = time.perf_counter()
                work()
                times.append(time.perf_counter() - start)
            return '%.1f ms (best of 20), %.1f ms (median)' % (1000 * min(times), 1000 * sorted(times)[len(times) // 2])
        print('%d roles, per host: the code part of their fingerprints takes %s; each role folder and all of plugins/ '
              '(as before) %s' % (len(roles), best(lambda: code_prints(top, roles)),
                                  best(lambda: [action.tree_digest(os.path.join(top, p)) for p in ['plugins'] + ['roles/' + r for r in roles]])))
        before = code_prints(top, roles)
        for rel in files:
            path = os.path.join(top, rel)
            with open(path) as handle:
                text = handle.read()
            with open(path, 'w') as handle:
                handle.write(text + '\n# an edit\n')
            after = code_prints(top, roles)
            with open(path, 'w') as handle:
                handle.write(text)
            print('%s: %s' % (rel, ' '.join(role for role in roles if after[role] != before[role]) or 'none'))


if __name__ == '__main__':
    main(sys.argv[1:])
