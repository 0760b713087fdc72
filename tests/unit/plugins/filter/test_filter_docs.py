# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`ansible-doc -t filter` shows each filter's own documentation.

A filter file that exports several filters and embeds DOCUMENTATION makes ansible-doc show that one block
for every filter of the file, whatever sidecar .yml files are beside it (nccl_gate showed nccl_parse's
docs). The filters are taken from each file's FilterModule().filters(), the docs from ansible-doc run
against the collection as tests see it (.build/collections), as a user's ansible-doc would show them."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[4]
COLLECTIONS = ROOT / '.build' / 'collections'
ANSIBLE_DOC = pathlib.Path(sys.executable).parent / 'ansible-doc'
FILTER_FILES = sorted(p.stem for p in (ROOT / 'plugins' / 'filter').glob('*.py') if not p.name.startswith('_'))


def _exported():
    """Filter name -> the file (stem) that exports it."""
    names = {}
    for stem in FILTER_FILES:
        module = importlib.import_module('ansible_collections.ocigpu.cluster.plugins.filter.%s' % stem)
        for name in module.FilterModule().filters():
            assert name not in names, '%s is exported by %s and %s' % (name, names[name], stem)
            names[name] = stem
    return names


@pytest.fixture(scope='module')
def docs():
    names = sorted(_exported())
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_NOCOLOR='1')
    result = subprocess.run([str(ANSIBLE_DOC), '-t', 'filter', '-j'] + ['ocigpu.cluster.%s' % n for n in names],
                            cwd=str(ROOT), env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_filter_shows_its_own_docs(docs):
    exported = _exported()
    assert len(exported) >= 17
    wrong = {}
    for name, stem in sorted(exported.items()):
        entry = docs.get('ocigpu.cluster.%s' % name) or {}
        shown = (entry.get('doc') or {}).get('name')
        if shown != name:
            wrong[name] = 'plugins/filter/%s.py shows %r' % (stem, shown)
    assert not wrong, wrong


def test_every_filter_has_examples_and_return(docs):
    missing = sorted(name for name, entry in docs.items() if not entry.get('examples') or not entry.get('return'))
    assert not missing, 'filters without EXAMPLES or RETURN in ansible-doc: %s' % missing


@pytest.mark.parametrize('stem', FILTER_FILES)
def test_a_file_of_several_filters_embeds_no_documentation(stem):
    """A file that exports more than one filter documents each in a sidecar <filter>.yml; a file of one
    filter may embed its DOCUMENTATION or have a sidecar, not both."""
    module = importlib.import_module('ansible_collections.ocigpu.cluster.plugins.filter.%s' % stem)
    names = sorted(module.FilterModule().filters())
    embedded = hasattr(module, 'DOCUMENTATION')
    sidecars = [n for n in names if (ROOT / 'plugins' / 'filter' / ('%s.yml' % n)).is_file()]
    if len(names) > 1:
        assert not embedded, '%s.py exports %s and embeds DOCUMENTATION, which ansible-doc shows for all of them' % (stem, names)
        assert sidecars == names, '%s.py: filters without a sidecar .yml: %s' % (stem, sorted(set(names) - set(sidecars)))
    else:
        assert embedded != bool(sidecars), '%s.py: DOCUMENTATION embedded and in a sidecar, or in neither' % stem
    for name in sidecars:
        with open(ROOT / 'plugins' / 'filter' / ('%s.yml' % name), encoding='utf-8') as handle:
            assert yaml.safe_load(handle)['DOCUMENTATION']['name'] == name
