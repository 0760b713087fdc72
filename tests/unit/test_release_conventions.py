# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The release metadata agrees with itself: galaxy.yml's version, the plugins' version_added, the
releases in changelogs/changelog.yaml, meta/runtime.yml's requires_ansible and tombstones, and the
roles' meta/main.yml.

antsibull-changelog lists a plugin as new in the release whose version its version_added names, so a
version_added newer than galaxy.yml's version, or one of a release that did not ship the plugin, puts
it in the wrong release notes or in none. A plugin that a release shipped and that is gone needs a
tombstone, or a user's playbook fails with "couldn't resolve module" instead of what to use."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLUGINS = ROOT / 'plugins'
# changelog.yaml's plugin types -> plugin_routing's keys and the folders under plugins/
TYPES = {'module': ('modules', 'modules'), 'filter': ('filter', 'filter'), 'inventory': ('inventory', 'inventory'),
         'lookup': ('lookup', 'lookup'), 'strategy': ('strategy', 'strategy'), 'callback': ('callback', 'callback'),
         'test': ('test', 'test')}


def _load(path):
    with open(path, encoding='utf-8') as handle:
        return yaml.safe_load(handle) or {}


def _version(text):
    return tuple(int(part) for part in str(text).split('.'))


GALAXY = _load(ROOT / 'galaxy.yml')
RUNTIME = _load(ROOT / 'meta' / 'runtime.yml')
RELEASES = _load(ROOT / 'changelogs' / 'changelog.yaml').get('releases') or {}


def _released():
    """(type, name) -> the first release whose changelog lists the plugin."""
    shipped = {}
    for version in sorted(RELEASES, key=_version):
        release = RELEASES[version]
        for entry in release.get('modules') or []:
            shipped.setdefault(('module', entry['name']), version)
        for kind, entries in (release.get('plugins') or {}).items():
            for entry in entries or []:
                shipped.setdefault((kind, entry['name']), version)
    return shipped


def _embedded(path, name):
    tree = ast.parse(path.read_text(encoding='utf-8'))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, 'id', None) == name for t in node.targets):
            return yaml.safe_load(node.value.value)
    return None


def _plugins():
    """(type, name) -> (file, DOCUMENTATION, RETURN) of every documented plugin of the collection."""
    found = {}
    for kind, (dummy, folder) in TYPES.items():
        for path in sorted((PLUGINS / folder).glob('*.py')) if (PLUGINS / folder).is_dir() else []:
            doc = _embedded(path, 'DOCUMENTATION')
            if doc:
                found[(kind, doc.get('module') or doc['name'])] = (path, doc, _embedded(path, 'RETURN'))
        for path in sorted((PLUGINS / folder).glob('*.yml')) if (PLUGINS / folder).is_dir() else []:
            side = _load(path)
            doc = side['DOCUMENTATION']
            found[(kind, doc['name'])] = (path, doc, side.get('RETURN'))
    return found


def _added(tree, where):
    """(where, version_added) of every option, suboption and return value below tree."""
    for key, value in (tree or {}).items():
        if not isinstance(value, dict):
            continue
        if 'version_added' in value:
            yield '%s.%s' % (where, key), value['version_added']
        for nested in ('suboptions', 'options', 'contains'):
            yield from _added(value.get(nested), '%s.%s' % (where, key))


PLUGIN_DOCS = _plugins()
SHIPPED = _released()


def test_galaxy_version_is_not_older_than_the_last_release():
    last = max(RELEASES, key=_version)
    assert _version(GALAXY['version']) >= _version(last), (GALAXY['version'], last)


@pytest.mark.parametrize('key', sorted(PLUGIN_DOCS), ids=lambda k: '%s:%s' % k)
def test_version_added_is_the_release_that_shipped_it(key):
    """A plugin a release listed says that release; one no release listed is new in galaxy.yml's version.
    No option or return value says a version newer than galaxy.yml's, or older than its plugin's."""
    path, doc, returns = PLUGIN_DOCS[key]
    expected = SHIPPED.get(key, GALAXY['version'])
    assert str(doc.get('version_added')) == str(expected), (
        '%s: version_added %s, but %s' % (path.relative_to(ROOT), doc.get('version_added'),
                                          'changelog.yaml lists it in %s' % expected if key in SHIPPED
                                          else 'no release lists it, so it is new in %s' % expected))
    for where, version in list(_added(doc.get('options'), 'options')) + list(_added(returns, 'return')):
        assert _version(expected) <= _version(version) <= _version(GALAXY['version']), (
            '%s: %s version_added %s (plugin %s, collection %s)' % (path.relative_to(ROOT), where, version, expected,
                                                                    GALAXY['version']))


def test_every_released_plugin_exists_or_has_a_tombstone():
    routing = RUNTIME.get('plugin_routing') or {}
    missing, contradictions = [], []
    for (kind, name), version in sorted(SHIPPED.items()):
        tombstone = ((routing.get(TYPES[kind][0]) or {}).get(name) or {}).get('tombstone')
        if (kind, name) in PLUGIN_DOCS:
            if tombstone:
                contradictions.append('%s %s' % (kind, name))
            continue
        if not tombstone:
            missing.append('%s %s (released in %s)' % (kind, name, version))
            continue
        assert _version(version) < _version(tombstone['removal_version']) <= _version(GALAXY['version']), (kind, name)
        assert tombstone.get('warning_text'), '%s %s: the tombstone says nothing about what to use' % (kind, name)
    assert not missing, 'released plugins gone from plugins/ without a tombstone in meta/runtime.yml: %s' % missing
    assert not contradictions, 'tombstoned plugins that still exist: %s' % contradictions


def test_tombstones_are_for_released_plugins():
    routing = RUNTIME.get('plugin_routing') or {}
    by_key = {value[0]: kind for kind, value in TYPES.items()}
    for key, entries in routing.items():
        for name, route in (entries or {}).items():
            if 'tombstone' in route:
                assert (by_key[key], name) in SHIPPED, '%s %s: a tombstone for a plugin no release shipped' % (key, name)


def test_roles_require_what_the_collection_requires():
    floor = re.fullmatch(r'>=\s*(\d+)\.(\d+)(?:\.\d+)?', RUNTIME['requires_ansible'].strip())
    assert floor, RUNTIME['requires_ansible']
    wanted = '%s.%s' % floor.groups()
    wrong = {}
    for meta in sorted((ROOT / 'roles').glob('*/meta/main.yml')):
        info = _load(meta)['galaxy_info']
        if str(info.get('min_ansible_version')) != wanted:
            wrong[meta.parent.parent.name] = info.get('min_ansible_version')
    assert not wrong, 'min_ansible_version other than %s (requires_ansible %s): %s' % (wanted, RUNTIME['requires_ansible'], wrong)


def test_role_platforms_are_ones_the_required_ansible_core_can_manage():
    """ansible-core 2.19 runs modules on Python 3.8 or newer: Oracle Linux 7 (2.7, 3.6) is out, and Oracle
    Linux 8's dnf bindings exist for its Python 3.6 only, so its package tasks cannot run."""
    wrong = {}
    for meta in sorted((ROOT / 'roles').glob('*/meta/main.yml')):
        for platform in _load(meta)['galaxy_info'].get('platforms') or []:
            if platform['name'] == 'EL':
                old = [v for v in platform['versions'] if str(v) != 'all' and int(str(v)) < 9]
                if old:
                    wrong[meta.parent.parent.name] = old
    assert not wrong, wrong
