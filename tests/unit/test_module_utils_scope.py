# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils is the modules' library: AnsiballZ ships the files a module imports to the target with it,
and the roles copy a few of them onto the nodes. It holds only code that a module or another plugin uses, and stays
small. Code that one controller-side plugin alone uses lives in plugins/plugin_utils, and code that only the control
plane runs lives in its package, controller/ocigpu_control (which still imports the shared core from here).

Read from the source with `ast`, nothing is imported: the plugins (modules, inventory, action, filter, lookup, test,
strategy, plugin_utils, ...) are the roots; a module_utils file counts when a root imports it, directly or through
another module_utils file; a top-level name counts when a root uses it, or a used name of module_utils does, or a
program that a role ships beside its copy of the file does (roles/node_health's checks import the copy of _health.py
as ocigpu_health, read from the role's vars). Names used only by controller/ or tests/ do not count."""

from __future__ import annotations

import ast
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE_UTILS = ROOT / 'plugins' / 'module_utils'
PACKAGE = 'ansible_collections.ocigpu.cluster.plugins.module_utils'
MAX_LINES = 5000


def module_utils_names():
    return sorted(p.stem for p in MODULE_UTILS.glob('*.py') if p.name != '__init__.py')


def parse(path):
    return ast.parse(path.read_text(encoding='utf-8'), str(path))


def imports(tree, plain=None):
    """{local name: ('file', stem) or ('name', stem, name)} for the module_utils imports anywhere in tree;
    plain: {top-level module name: stem}, the names a role's copies are imported by on a node."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == PACKAGE:
            out.update((a.asname or a.name, ('file', a.name)) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE + '.'):
            stem = node.module[len(PACKAGE) + 1:].split('.')[0]
            out.update((a.asname or a.name, ('name', stem, a.name)) for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + '.') and alias.asname:
                    out[alias.asname] = ('file', alias.name[len(PACKAGE) + 1:].split('.')[0])
                elif (plain or {}).get(alias.name):
                    out[alias.asname or alias.name] = ('file', plain[alias.name])
    return out


def imported_files(tree):
    return {target[1] for target in imports(tree).values()}


def top_level(tree):
    """{name: the statement defining it} for the defs, classes and assignments at a file's top level."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                out.update((n.id, node) for n in ast.walk(target) if isinstance(n, ast.Name))
    return out


def uses(nodes, names, stem=None, own=()):
    """The (stem, name) pairs the statements use: through an import, or a name of their own file (stem, own)."""
    found = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Name):
                target = names.get(node.id)
                if target and target[0] == 'name':
                    found.add(target[1:])
                elif target is None and stem and node.id in own:
                    found.add((stem, node.id))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                target = names.get(node.value.id)
                if target and target[0] == 'file':
                    found.add((target[1], node.attr))
    return found


def plugin_files():
    """Every Python file of plugins/ outside module_utils: the modules and the other plugins."""
    return sorted(p for p in (ROOT / 'plugins').rglob('*.py') if MODULE_UTILS not in p.parents)


def node_copies():
    """{module name on the node: module_utils stem} for the files the roles copy onto hosts (src in plugins/module_utils)."""
    found = {}

    def walk(value):
        if isinstance(value, dict):
            src, dest = value.get('src'), value.get('dest')
            if isinstance(src, str) and isinstance(dest, str) and '/plugins/module_utils/' in src and dest.endswith('.py'):
                found[dest.rsplit('/', 1)[-1][:-3]] = src.rsplit('/', 1)[-1][:-3]
            value = list(value.values())
        if isinstance(value, list):
            for item in value:
                walk(item)
    for path in sorted(ROOT.glob('roles/*/vars/*.yml')) + sorted(ROOT.glob('roles/*/defaults/*.yml')):
        walk(yaml.safe_load(path.read_text(encoding='utf-8')))
    return found


def node_programs(copies):
    """The role files (Python programs) that import one of the copies, parsed."""
    out = []
    for path in sorted(ROOT.glob('roles/*/files/*')):
        try:
            tree = parse(path)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if imports(tree, copies):
            out.append(tree)
    return out


def unused_names():
    """{(stem, name)} of the top-level names of module_utils that no plugin and no program a role ships uses."""
    trees = {stem: parse(MODULE_UTILS / (stem + '.py')) for stem in module_utils_names()}
    files = {}
    for stem, tree in trees.items():
        defined = top_level(tree)
        # What runs when the file is imported: every top-level statement but the definitions (and the imports).
        loose = [n for n in tree.body if n not in defined.values() and not isinstance(n, (ast.Import, ast.ImportFrom))]
        files[stem] = (imports(tree), defined, loose)
    copies = node_copies()
    todo = set()
    for tree in [parse(p) for p in plugin_files()] + node_programs(copies):
        names = imports(tree, copies)
        todo |= uses([tree], names)
        todo |= {(t[1], None) for t in names.values() if t[0] == 'file'}
        todo |= {t[1:] for t in names.values() if t[0] == 'name'}
    loaded, used = set(), set()
    while todo:
        stem, name = todo.pop()
        if stem not in files:
            continue
        names, defined, loose = files[stem]
        if stem not in loaded:
            loaded.add(stem)
            todo |= uses(loose, names, stem, defined)
        if name is None or (stem, name) in used:
            continue
        used.add((stem, name))
        if name in defined:
            todo |= uses([defined[name]], names, stem, defined)
        elif names.get(name, ('file',))[0] == 'name':
            todo.add(names[name][1:])  # a name the file imports from another one, used through it
    return {(stem, name) for stem, (names, defined, loose) in files.items()
            for name in defined if (stem, name) not in used and not name.startswith('__')}


def test_every_module_utils_file_is_imported_by_a_plugin():
    graph = {stem: imported_files(parse(MODULE_UTILS / (stem + '.py'))) for stem in module_utils_names()}
    reached = set()
    todo = set().union(*(imported_files(parse(p)) for p in plugin_files()))
    while todo:
        stem = todo.pop()
        if stem in graph and stem not in reached:
            reached.add(stem)
            todo |= graph[stem]
    assert reached, 'no plugin imports module_utils: is the package name %s still right?' % PACKAGE
    unimported = sorted(set(graph) - reached)
    assert not unimported, ('no module or plugin imports %s: move it beside what uses it (plugins/plugin_utils for the '
                            'controller-side plugins, controller/ocigpu_control for the control plane)' % unimported)


def test_every_top_level_name_is_used_by_a_plugin():
    unused = unused_names()
    assert ('_topology', 'place_of') not in unused and ('_module', 'OCIModule') not in unused, 'the reading works'
    found = sorted('%s.%s' % key for key in unused)
    assert not found, ('no module, plugin or program a role ships uses %s: move it to what uses it '
                       '(controller/ocigpu_control, plugins/plugin_utils) or delete it' % found)


def test_module_utils_stays_small():
    counts = {p.name: len(p.read_text(encoding='utf-8').splitlines()) for p in MODULE_UTILS.glob('*.py')}
    biggest = ', '.join('%s %d' % (name, n) for name, n in sorted(counts.items(), key=lambda kv: -kv[1])[:5])
    assert sum(counts.values()) <= MAX_LINES, ('plugins/module_utils has %d lines, over %d; the biggest files: %s'
                                               % (sum(counts.values()), MAX_LINES, biggest))
