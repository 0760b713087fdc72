# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's collection loader for unit tests that need the collection's plugins by their full names
(the inventory plugin through the plugin loader, the collection's filters in the roles' templates)."""

from __future__ import annotations

import os
import sys

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           '.build', 'collections')


def install():
    """Install the loader once per process.

    Packages imported earlier from the plain `ansible_collections` namespace (pytest's pythonpath)
    are dropped so that the loader re-creates them with the collection's metadata. Modules already
    imported (module_utils that other tests hold and patch) stay, so everyone keeps sharing them."""
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
    from ansible.plugins.loader import init_plugin_loader
    if not any(isinstance(f, _AnsibleCollectionFinder) for f in sys.meta_path):
        for name, module in list(sys.modules.items()):
            if (name == 'ansible_collections' or name.startswith('ansible_collections.')) and \
                    hasattr(module, '__path__'):
                del sys.modules[name]
        init_plugin_loader([COLLECTIONS])
