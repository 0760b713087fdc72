# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's code that a role's fingerprint covers (role_records; docs/rerun.md).

A role's code is, besides its own folder:
- the collection's plugins its files name: ``ocigpu.cluster.<name>`` in its YAML and templates (a
  module and its action plugin, a filter or test by the name its file gives it, a lookup), and a bare
  module name as a task's key in its tasks/ or handlers/ (a role of a collection finds its own
  collection's modules first);
- the roles it includes or imports by their full name (``name:`` or ``role:``
  ``ocigpu.cluster.<role>``), with their code;
- the collection's files it takes from outside its folder: a path that leaves the role
  (``{{ role_path }}/../../<path>``, or ``../../../<path>`` from its files/ or templates/), and the paths
  it declares as ``__<role>_code`` in its vars/main.yml, for what no path in its files shows (a
  package that a build packs whole, a bundle of the whole collection);
- the collection's Python files that any of these import (``from
  ansible_collections.ocigpu.cluster.plugins... import``), followed to the end.

The roles' files are scanned each time (regular expressions over a few megabytes, read once for the
hashes too), so that nothing has to be kept in step by hand.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re

import yaml

# Where the plugins that a role's YAML and templates can name live.
PLUGIN_DIRS = ('modules', 'action', 'lookup', 'filter', 'test')
# Filters and tests go by the names their file's filters() or tests() gives them.
JINJA_DIRS = ('filter', 'test')
# Each pattern starts with its literal text, which Python's re finds fast; what comes before a match is
# checked after (a leading \b or look-behind makes it try every position).
NAMED = re.compile(r'ocigpu\.cluster\.(\w+)')
# Before a role's name: where include_role, import_role and meta's dependencies take it.
ROLE_WORD = re.compile(r'''(?:name|role):[ \t]*['"]?$''')
TASK_KEY = re.compile(r'^[ \t]*(?:-[ \t]+)?(\w+):', re.M)
# An import of the collection's Python files: found by the name, then the word before it says how.
IMPORT = re.compile(r'ansible_collections\.ocigpu\.cluster\.(plugins(?:\.\w+)*)(?:[ \t]+import[ \t]+(\([^)]*\)|[\w \t,]+))?')
IMPORT_WORD = re.compile(r'\b(from|import)[ \t]+$')
# A path out of the role: {{ role_path }}/../../<path>, or ../../../<path> from its files/ or templates/.
OUTSIDE = re.compile(r'\.\./\.\./(\.\./)?(\w[\w.-]*(?:/[\w.-]+)*)')
ROLE_PATH = re.compile(r'role_path[ \t]*}}/$')
JINJA_NAMES = re.compile(r'''def (?:filters|tests)\(self\):(.*)''', re.S)
JINJA_NAME = re.compile(r'''['"](\w+)['"]\s*:''')
ANSIBLE_TEXT = ('.yml', '.yaml', '.j2')


def declared_key(role):
    """The name of a role's declaration of the code it takes from outside its folder."""
    return '__%s_code' % role


def tree_digest(path):
    """A short hash of a file or of a folder's files (names and contents), without Python caches."""
    return _digest([(name, _read(os.path.join(path, name) if name else path)) for name in _listing(path)])


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read()


def _listing(path):
    """The files of a folder, relative to it and sorted, without Python caches; [''] for a file, [] for
    nothing."""
    if os.path.isfile(path):
        return ['']
    names = []
    for top, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        below = top[len(path):].lstrip(os.sep)
        names.extend(os.path.join(below, name) for name in sorted(files) if not name.endswith('.pyc'))
    return names


def _digest(files):
    digest = hashlib.sha256()
    if len(files) == 1 and files[0][0] == '':
        digest.update(files[0][1])
        return digest.hexdigest()[:16]
    for name, data in files:
        digest.update(name.encode('utf-8') + b'\0')
        digest.update(data)
        digest.update(b'\0')
    return digest.hexdigest()[:16]


def outside(text):
    """[((start, end), path)] of the paths out of the role's folder that a role's text names, each a
    path of the collection."""
    found = []
    for match in OUTSIDE.finditer(text) if '../../' in text else []:
        start = match.start()
        if match.group(1):
            # From the role's files/ or templates/; not the tail of a longer climb or of another path.
            before = text[start - 1] if start else ' '
            seen = not (before.isalnum() or before in '._/')
        else:
            seen = bool(ROLE_PATH.search(text, max(0, start - 16), start))
        if seen:
            found.append((match.span(), os.path.normpath(match.group(2).rstrip('./'))))
    return found


def _names(text):
    """The names of an import list: '(a, b as c)' -> ['a', 'b']."""
    return [part.split()[0] for part in text.strip('() \t\n').replace('\n', ' ').split(',') if part.split()]


class Collection:
    """One collection's files, read at most once, and what each role's code is."""

    def __init__(self, root):
        self.root = root
        self._trees = {}
        self._bytes = {}
        self._plugins = None
        self._roles = {}
        self._direct_of = {}
        self._imported = {}

    def _listing(self, rel):
        if rel not in self._trees:
            full = os.path.join(self.root, rel)
            self._trees[rel] = _listing(full) if os.path.exists(full) else None
        return self._trees[rel]

    def _data(self, rel):
        if rel not in self._bytes:
            self._bytes[rel] = _read(os.path.join(self.root, rel))
        return self._bytes[rel]

    def files(self, rel):
        """[(path relative to the collection, bytes)] of a file or folder of the collection, each file
        read once whatever folders it is seen in."""
        return [(path, self._data(path)) for path in (os.path.join(rel, name) if name else rel for name in self._listing(rel) or [])]

    def digest(self, rel):
        """The hash of a file or folder of the collection ('missing' where there is none), as tree_digest."""
        if self._listing(rel) is None:
            return 'missing'
        return _digest([(name, self._data(os.path.join(rel, name) if name else rel)) for name in self._listing(rel)])

    def _text(self, rel):
        files = self.files(rel)
        return files[0][1].decode('utf-8', 'replace') if files else ''

    def plugins(self):
        """{name: [plugin files]} of the plugins that a role can name."""
        if self._plugins is None:
            self._plugins = {}
            for kind in PLUGIN_DIRS:
                folder = os.path.join(self.root, 'plugins', kind)
                for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                    if not name.endswith('.py') or name.startswith('_'):
                        continue
                    rel = 'plugins/%s/%s' % (kind, name)
                    names = {name[:-3]}
                    if kind in JINJA_DIRS:
                        found = JINJA_NAMES.search(self._text(rel))
                        names.update(JINJA_NAME.findall(found.group(1)) if found else [])
                    for plugin in names:
                        self._plugins.setdefault(plugin, []).append(rel)
        return self._plugins

    def declared(self, role):
        """The paths a role declares as __<role>_code in its vars/main.yml (globs expanded)."""
        text = self._text('roles/%s/vars/main.yml' % role)
        key = declared_key(role)
        found = key + ':' in text and re.search(r'^%s:.*(?:\n(?:[ \t#-].*)?)*' % re.escape(key), text, re.M)
        if not found:
            return []
        paths = (yaml.safe_load(found.group(0)) or {}).get(key) or []
        if not isinstance(paths, list) or not all(isinstance(p, str) and p and not p.startswith('/') and '..' not in p
                                                  for p in paths):
            raise ValueError('%s in roles/%s/vars/main.yml must be a list of paths relative to the collection' % (key, role))
        expanded = []
        for path in paths:
            if any(c in path for c in '*?['):
                expanded.extend(sorted(os.path.relpath(p, self.root) for p in glob.glob(os.path.join(self.root, path))))
            else:
                expanded.append(path.rstrip('/'))
        return expanded

    def _imports(self, text):
        """The collection's files that a Python (or any) text imports."""
        found = []
        if 'ansible_collections.ocigpu.cluster' not in text:
            return found
        for match in IMPORT.finditer(text):
            word = IMPORT_WORD.search(text, max(0, match.start() - 12), match.start())
            if not word or (word.group(1) == 'from') != bool(match.group(2)):
                continue
            dotted, names = match.group(1), _names(match.group(2) or '')
            base = dotted.replace('.', '/')
            hits = []
            for name in names:
                for candidate in (base + '/' + name + '.py', base + '/' + name):
                    if os.path.exists(os.path.join(self.root, candidate)):
                        hits.append(candidate)
                        break
            if not hits and os.path.isfile(os.path.join(self.root, base + '.py')):
                hits.append(base + '.py')
            found.extend(hits)
        return found

    def role_code(self, role):
        """The collection's paths (files or folders, relative to the collection) that role's code covers
        beside its own folder, sorted; none inside another."""
        if role not in self._roles:
            # The roles it includes, theirs, and so on (a cycle ends where it began).
            reached, todo, paths = {role}, [role], set()
            while todo:
                found, included = self._direct(todo.pop())
                paths.update(found)
                for other in sorted(included - reached):
                    if os.path.isdir(os.path.join(self.root, 'roles', other)):
                        reached.add(other)
                        todo.append(other)
                        paths.add('roles/' + other)
            self._roles[role] = self._closed(paths, 'roles/' + role)
        return sorted(self._roles[role])

    def _direct(self, role):
        """What a role's own files name: (the collection's paths, the roles it includes)."""
        if role not in self._direct_of:
            self._direct_of[role] = self._scan(role)
        return self._direct_of[role]

    def _scan(self, role):
        own = 'roles/' + role
        plugins = self.plugins()
        paths, roles = set(), set()
        for rel, data in self.files(own):
            text = data.decode('utf-8', 'replace')
            if rel.endswith(ANSIBLE_TEXT) and 'ocigpu.cluster.' in text:
                for match in NAMED.finditer(text):
                    paths.update(plugins.get(match.group(1), []))
                    if ROLE_WORD.search(text, max(0, match.start() - 12), match.start()):
                        roles.add(match.group(1))
            if rel.endswith(ANSIBLE_TEXT) and rel[len(own) + 1:].split('/')[0] in ('tasks', 'handlers'):
                for name in TASK_KEY.findall(text):
                    paths.update(f for f in plugins.get(name, []) if f.startswith(('plugins/modules/', 'plugins/action/')))
            paths.update(path for _span, path in outside(text))
            paths.update(self._imports(text))
        paths.update(self.declared(role))
        return paths, roles

    def _closed(self, paths, own):
        """paths with the collection's Python files they import, to the end; without own (a role's
        folder) and what is in it, nor a path inside another."""
        paths = set(paths)
        # All imports are under plugins/: none to look for when it is there whole.
        todo = sorted(paths) if 'plugins' not in paths else []
        while todo:
            for rel, data in self.files(todo.pop()):
                if rel.endswith('.py'):
                    if rel not in self._imported:
                        self._imported[rel] = self._imports(data.decode('utf-8', 'replace'))
                    for found in self._imported[rel]:
                        if found not in paths:
                            paths.add(found)
                            todo.append(found)
        paths = set(p for p in paths if p != own and not p.startswith(own + '/'))
        return set(p for p in paths if not any(p.startswith(q + '/') for q in paths if q != p))
