# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side (all of it) of ocigpu.cluster.artifact_lock: see plugins/plugin_utils/_artifacts.py."""
from __future__ import annotations

import os

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _artifacts

ARGS = ('lock_file', 'strict', 'artifacts')


def default_lock_file(given, task_vars, templar):
    """The lock file: the task's, else ocigpu_lock_file, else <cluster>.lock.yml (the inventory's cluster, else cluster_name)."""
    if given:
        return str(given)
    if task_vars.get('ocigpu_lock_file'):
        return str(templar.template(task_vars['ocigpu_lock_file']))
    cluster = task_vars.get('ocigpu_cluster') or task_vars.get('cluster_name')
    if not cluster:
        raise _artifacts.ArtifactError(
            'no lock file: set ocigpu_lock_file (or cluster_name, or use the gpu_nodes inventory, which names the cluster)')
    return '%s.lock.yml' % templar.template(cluster)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGS)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        lock_file = None
        try:
            lock_file = default_lock_file(args.get('lock_file'), task_vars or {}, self._templar)
            # Relative to where ansible-playbook runs, as the cluster's vars file is.
            lock_file = os.path.abspath(os.path.expanduser(lock_file))
            strict = boolean(args['strict'] if 'strict' in args
                             else self._templar.template((task_vars or {}).get('ocigpu_artifacts_strict', False)), strict=True)
            artifacts = _artifacts.normalize(args.get('artifacts'))
            sums, sources, added, warnings = _artifacts.lock_artifacts(
                lock_file, artifacts, strict=strict, write=not self._play_context.check_mode)
        except (_artifacts.ArtifactError, TypeError, ValueError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        except OSError as exc:  # what _artifacts does not put in words itself (the run's lock in the temporary folder)
            result.update(failed=True, msg='artifact_lock: %s: %s' % (exc.filename or lock_file, exc.strerror or exc))
            return result
        result.update(changed=bool(added), sums=sums, sources=sources, locked=added, lock_file=lock_file)
        if warnings:
            result['warnings'] = warnings
        return result
