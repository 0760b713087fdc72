# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tests' byte code cache for modules imported from a zip (tests/infra/vm/ocigpu_zipimport_cache.py):
a library is compiled once per source, the cached code is what runs, and nothing is installed where the
cache folder is missing."""
from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import zipfile
import zipimport

import pytest

HOOK = os.path.join(os.path.dirname(__file__), '..', 'infra', 'vm', 'ocigpu_zipimport_cache.py')


@pytest.fixture
def hook(monkeypatch):
    """The hook's module (importing it installs nothing); zipimport as it was before, and restored after."""
    original = getattr(zipimport._compile_source, 'ocigpu_original', zipimport._compile_source)
    monkeypatch.setattr(zipimport, '_compile_source', original)
    spec = importlib.util.spec_from_file_location('ocigpu_zipimport_cache_under_test', HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert zipimport._compile_source is original
    return module


def import_from_zip(tmp_path, name, source):
    """Import NAME from a fresh zip holding SOURCE, as AnsiballZ's modules are imported."""
    archive = tmp_path / ('%s-%d.zip' % (name, len(list(tmp_path.glob('*.zip')))))
    with zipfile.ZipFile(archive, 'w') as z:
        z.writestr('%s.py' % name, source)
    importer = zipimport.zipimporter(str(archive))
    spec = importlib.util.spec_from_loader(name, importer)
    module = importlib.util.module_from_spec(spec)
    try:
        importer.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def test_compiled_once_then_read_from_the_cache(hook, tmp_path, monkeypatch):
    cache = tmp_path / 'cache'
    cache.mkdir()
    hook.install(str(cache))
    assert import_from_zip(tmp_path, 'zc_one', 'VALUE = 41 + 1\n').VALUE == 42
    assert len(os.listdir(cache)) == 1

    # The second import runs the cached code: compiling again would fail.
    def refuse(pathname, source):
        raise AssertionError('compiled again: %s' % pathname)
    monkeypatch.setattr(zipimport._compile_source, 'ocigpu_original', refuse, raising=False)
    hook.install(str(cache))
    assert import_from_zip(tmp_path, 'zc_one', 'VALUE = 41 + 1\n').VALUE == 42

    # Another source under the same name is compiled (and fails here, as compiling is refused).
    with pytest.raises(AssertionError, match='compiled again'):
        import_from_zip(tmp_path, 'zc_one', 'VALUE = 0\n')


def test_a_second_install_replaces_the_first(hook, tmp_path):
    first, second = tmp_path / 'a', tmp_path / 'b'
    first.mkdir()
    second.mkdir()
    hook.install(str(first))
    hook.install(str(second))
    assert import_from_zip(tmp_path, 'zc_two', 'VALUE = 2\n').VALUE == 2
    assert os.listdir(first) == [] and len(os.listdir(second)) == 1


def test_nothing_is_installed_without_the_folder(hook, tmp_path):
    before = zipimport._compile_source
    hook.install(str(tmp_path / 'missing'))
    assert zipimport._compile_source is before


def test_a_file_others_may_write_is_not_run(hook, tmp_path):
    cache = tmp_path / 'cache'
    cache.mkdir()
    hook.install(str(cache))
    assert import_from_zip(tmp_path, 'zc_three', 'VALUE = 3\n').VALUE == 3
    (cached,) = list(cache.iterdir())
    # Planted code in a file every user may write: compiled again from the source, and the file replaced.
    cached.write_bytes(marshal.dumps(compile('VALUE = 666\n', 'planted', 'exec')))
    cached.chmod(0o666)
    assert import_from_zip(tmp_path, 'zc_three', 'VALUE = 3\n').VALUE == 3
    assert not cached.stat().st_mode & 0o022
    assert import_from_zip(tmp_path, 'zc_three', 'VALUE = 3\n').VALUE == 3
