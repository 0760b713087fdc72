# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ocigpu.cluster.package_lists: answers without contacting the host when the play
already knows every package is installed.

configure.yml reads the installed package names once a run (node_facts installed_packages=true) and
sets ocigpu_installed_packages. When every entry of packages is a plain name among them, nothing can be
missing and nothing needs refreshing, so the module would only say so: this answers the same
(missing=[], refreshed=false) and saves one remote call per role on a re-run. Anything else (a pinned
name=version, a name not in the list, no list) runs the module as usual.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase


def all_known(packages, known):
    """Whether every entry of packages is a plain name in known (the installed packages); False when either
    is not a list, when packages is empty, or for an entry such as name=version."""
    return (isinstance(known, list) and isinstance(packages, list) and bool(packages)
            and all(isinstance(name, str) for name in packages) and set(packages) <= set(known))


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # not used
        if all_known(self._task.args.get('packages'), task_vars.get('ocigpu_installed_packages')):
            result.update(changed=False, refreshed=False, missing=[],
                          reason='every package is installed (ocigpu_installed_packages, read this run)')
            return result
        result.update(self._execute_module(module_name='ocigpu.cluster.package_lists',
                                           module_args=self._task.args, task_vars=task_vars))
        return result
