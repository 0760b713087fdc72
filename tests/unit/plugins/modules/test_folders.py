# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.folders: several folders with owner, group and mode in one call."""
from __future__ import annotations

import os
import stat

from ansible_collections.ocigpu.cluster.plugins.modules import folders

from tests.unit.plugins.modules._helpers import run_module


def run(capsys, specs, check=False):
    return run_module(folders, {'folders': specs}, capsys, check=check)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_creates_missing_folders_with_parents_then_changes_nothing(tmp_path, capsys):
    a, b = str(tmp_path / 'etc' / 'slurm'), str(tmp_path / 'etc' / 'slurm' / 'prolog.d')
    specs = [{'path': a, 'mode': '0750'}, {'path': b, 'mode': '0700'}]
    first = run(capsys, specs)
    assert first['changed'] is True
    assert first['created'] == [str(tmp_path / 'etc'), a, b]
    assert (mode_of(a), mode_of(b), mode_of(str(tmp_path / 'etc'))) == (0o750, 0o700, 0o750)
    second = run(capsys, specs)
    assert (second['changed'], second['created'], second['changed_folders']) == (False, [], [])


def test_sets_the_mode_of_an_existing_folder(tmp_path, capsys):
    path = tmp_path / 'spool'
    path.mkdir(mode=0o777)
    os.chmod(path, 0o777)
    result = run(capsys, [{'path': str(path), 'mode': '0755', 'owner': str(os.getuid()), 'group': str(os.getgid())}])
    assert result['changed'] is True and result['changed_folders'] == [str(path)]
    assert mode_of(str(path)) == 0o755


def test_check_mode_reports_and_changes_nothing(tmp_path, capsys):
    existing = tmp_path / 'old'
    existing.mkdir()
    os.chmod(existing, 0o777)
    new = tmp_path / 'new' / 'deep'
    result = run(capsys, [{'path': str(existing), 'mode': '0755'}, {'path': str(new), 'mode': '0755'}], check=True)
    assert result['changed'] is True
    assert result['created'] == [str(tmp_path / 'new'), str(new)]
    assert result['changed_folders'] == [str(existing)]
    assert not (tmp_path / 'new').exists() and mode_of(str(existing)) == 0o777


def test_refuses_a_file_in_the_way_before_changing_anything(tmp_path, capsys):
    (tmp_path / 'conf').write_text('x')
    first = tmp_path / 'first'
    result = run(capsys, [{'path': str(first), 'mode': '0755'}, {'path': str(tmp_path / 'conf')},
                          {'path': 'relative/path'}])
    assert result['failed'] is True
    assert 'exists and is not a folder' in result['msg'] and 'relative/path is not an absolute path' in result['msg']
    assert not first.exists()


def test_paths_take_the_module_defaults_and_a_dict_overrides_them(tmp_path, capsys):
    plain, own = str(tmp_path / 'conf'), str(tmp_path / 'log')
    result = run_module(folders, {'folders': [plain, {'path': own, 'mode': '0700'}], 'mode': '0750',
                                  'owner': str(os.getuid())}, capsys)
    assert result['changed'] is True and result['created'] == [plain, own]
    assert (mode_of(plain), mode_of(own)) == (0o750, 0o700)


def test_refuses_malformed_items_before_changing_anything(tmp_path, capsys):
    first = tmp_path / 'first'
    result = run_module(folders, {'folders': [str(first), {'path': str(tmp_path / 'x'), 'mod': '0755'}, 42]},
                        capsys)
    assert result['failed'] is True
    assert 'unknown keys mod' in result['msg'] and '42 is neither a path nor a dict with a path' in result['msg']
    assert not first.exists()


def test_refuses_an_unknown_owner_or_group_before_creating_anything(tmp_path, capsys):
    first, second = tmp_path / 'first', tmp_path / 'second'
    result = run(capsys, [{'path': str(first)}, {'path': str(second), 'owner': 'no-such-user-ocigpu',
                                                 'group': 'no-such-group-ocigpu'}])
    assert result['failed'] is True
    assert 'no user named no-such-user-ocigpu' in result['msg'] and 'no group named no-such-group-ocigpu' in result['msg']
    assert not first.exists() and not second.exists()
