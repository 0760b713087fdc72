# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.files: several files with content, owner, group and mode in one call."""
from __future__ import annotations

import base64
import os
import stat

from ansible_collections.ocigpu.cluster.plugins.modules import files

from tests.unit.plugins.modules._helpers import run_module


def run(capsys, specs, check=False, diff=False, **top):
    args = dict(top, files=specs)
    if diff:
        args['_ansible_diff'] = True
    return run_module(files, args, capsys, check=check)


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def leftovers(folder):
    """Staged copies the module left beside its files (there should be none)."""
    return sorted(name for name in os.listdir(folder) if name.startswith('.'))


def test_writes_new_and_changed_files_then_changes_nothing(tmp_path, capsys):
    a, b = tmp_path / 'slurm.conf', tmp_path / 'cgroup.conf'
    b.write_text('old\n')
    os.chmod(b, 0o600)
    specs = [{'dest': str(a), 'content': 'ClusterName=demo\n'}, {'dest': str(b), 'content': 'new\n', 'mode': '0640'}]
    first = run(capsys, specs, mode='0644')
    assert first['changed'] is True
    assert first['changed_files'] == first['written'] == [str(a), str(b)]
    assert (a.read_text(), b.read_text()) == ('ClusterName=demo\n', 'new\n')
    assert (mode_of(str(a)), mode_of(str(b))) == (0o644, 0o640)
    assert leftovers(str(tmp_path)) == []
    second = run(capsys, specs, mode='0644')
    assert (second['changed'], second['changed_files'], second['written']) == (False, [], [])


def test_only_the_mode_differs(tmp_path, capsys):
    path = tmp_path / 'unit'
    path.write_text('same\n')
    os.chmod(path, 0o666)
    result = run(capsys, [{'dest': str(path), 'content': 'same\n'}], mode='0644')
    assert result['changed'] is True
    assert (result['changed_files'], result['written']) == ([str(path)], [])
    assert mode_of(str(path)) == 0o644


def test_check_mode_reports_with_a_diff_and_changes_nothing(tmp_path, capsys):
    old, new, attrs = tmp_path / 'old', tmp_path / 'new', tmp_path / 'attrs'
    old.write_text('one\n')
    attrs.write_text('x\n')
    os.chmod(attrs, 0o600)
    specs = [{'dest': str(old), 'content': 'two\n'}, {'dest': str(new), 'content': 'fresh\n'},
             {'dest': str(attrs), 'content': 'x\n', 'mode': '0644'}]
    result = run(capsys, specs, check=True, diff=True)
    assert result['changed'] is True
    assert result['changed_files'] == [str(old), str(new), str(attrs)]
    assert result['written'] == [str(old), str(new)]
    assert [(d['before'], d['after']) for d in result['diff']] == [('one\n', 'two\n'), ('', 'fresh\n')]
    assert old.read_text() == 'one\n' and not new.exists() and mode_of(str(attrs)) == 0o600


def test_a_failed_validation_changes_no_file(tmp_path, capsys):
    good, bad = tmp_path / 'good.conf', tmp_path / 'bad.conf'
    good.write_text('v1\n')
    bad.write_text('ok\n')
    specs = [{'dest': str(good), 'content': 'v2\n', 'validate': 'grep -q v2 %s'},
             {'dest': str(bad), 'content': 'broken\n', 'validate': 'grep -q ^ok %s'}]
    result = run(capsys, specs)
    assert result['failed'] is True
    assert 'bad.conf: the new content fails "grep -q ^ok %s" (rc=1)' in result['msg']
    assert 'no file was changed' in result['msg']
    assert (good.read_text(), bad.read_text()) == ('v1\n', 'ok\n')
    assert leftovers(str(tmp_path)) == []


def test_a_passing_validation_writes(tmp_path, capsys):
    path = tmp_path / 'sudoers'
    result = run(capsys, [{'dest': str(path), 'content': 'Defaults secure_path=/opt\n', 'validate': 'grep -q secure_path %s',
                           'mode': '0440'}])
    assert result['written'] == [str(path)] and mode_of(str(path)) == 0o440


def test_bad_items_are_refused_before_anything_changes(tmp_path, capsys):
    first = tmp_path / 'first'
    (tmp_path / 'folder').mkdir()
    specs = [{'dest': str(first), 'content': 'x'},
             {'dest': 'relative/conf', 'content': 'x'},
             {'dest': str(tmp_path / 'folder'), 'content': 'x'},
             {'dest': str(tmp_path / 'missing' / 'conf'), 'content': 'x'},
             {'dest': str(tmp_path / 'typo'), 'content': 'x', 'mdoe': '0644'},
             {'dest': str(tmp_path / 'number'), 'content': 3},
             {'dest': str(first), 'content': 'y'},
             {'dest': str(tmp_path / 'both'), 'content': 'x', 'content_b64': 'eA=='},
             {'dest': str(tmp_path / 'key'), 'content_b64': 'not base64!'}]
    result = run(capsys, specs)
    assert result['failed'] is True
    for text in ('relative/conf is not an absolute path', 'folder is a folder', 'the folder of %s is missing' % (tmp_path / 'missing' / 'conf'),
                 'typo: unknown keys mdoe', 'number: content must be text, got int', '%s is given twice' % first,
                 'both: give content or content_b64, not both', 'key: content_b64 is not base64'):
        assert text in result['msg']
    assert not first.exists()


def test_a_missing_folder_is_allowed_in_check_mode(tmp_path, capsys):
    """In check mode an earlier task that creates the folder has not run."""
    path = tmp_path / 'later' / 'conf'
    result = run(capsys, [{'dest': str(path), 'content': 'x\n'}], check=True)
    assert result['changed'] is True and result['written'] == [str(path)]


def test_bytes_in_base64_are_written_without_a_diff(tmp_path, capsys):
    """A munge key: any bytes, owner-only, and never shown."""
    key = bytes(range(256)) * 4
    path = tmp_path / 'munge.key'
    spec = [{'dest': str(path), 'content_b64': base64.b64encode(key).decode(), 'mode': '0400'}]
    first = run(capsys, spec, diff=True)
    assert first['written'] == [str(path)] and not first.get('diff')
    assert path.read_bytes() == key and mode_of(str(path)) == 0o400
    assert run(capsys, spec)['changed'] is False


def test_state_absent_removes_a_file_after_the_others_are_written(tmp_path, capsys):
    gone, kept = tmp_path / 'gres.conf', tmp_path / 'slurm.conf'
    gone.write_text('Name=gpu\n')
    specs = [{'dest': str(kept), 'content': 'x\n'}, {'dest': str(gone), 'state': 'absent'},
             {'dest': str(tmp_path / 'never'), 'state': 'absent'}]
    check = run(capsys, specs, check=True)
    assert (check['changed'], check['removed']) == (True, [str(gone)]) and gone.exists()
    first = run(capsys, specs)
    assert (first['removed'], first['written']) == ([str(gone)], [str(kept)]) and not gone.exists()
    second = run(capsys, specs)
    assert (second['changed'], second['removed']) == (False, [])


def test_a_failed_validation_removes_nothing(tmp_path, capsys):
    gone = tmp_path / 'old.conf'
    gone.write_text('x')
    result = run(capsys, [{'dest': str(tmp_path / 'new.conf'), 'content': 'bad', 'validate': 'false %s'},
                          {'dest': str(gone), 'state': 'absent'}])
    assert result['failed'] is True and gone.exists()


def test_an_unknown_owner_or_a_file_as_folder_is_refused_before_anything_is_staged(tmp_path, capsys):
    good, blocker = tmp_path / 'good', tmp_path / 'blocker'
    blocker.write_text('a file, not a folder\n')
    result = run(capsys, [{'dest': str(good), 'content': 'x\n'},
                          {'dest': str(tmp_path / 'other'), 'content': 'y\n', 'owner': 'no-such-user-ocigpu'}])
    assert result['failed'] is True and 'no user named no-such-user-ocigpu' in result['msg']
    result = run(capsys, [{'dest': str(good), 'content': 'x\n'}, {'dest': str(blocker / 'inside'), 'content': 'y\n'}])
    assert result['failed'] is True and 'blocker/inside' in result['msg']
    assert not good.exists() and leftovers(str(tmp_path)) == []


def test_unset_attributes_come_from_the_replaced_file_or_the_umask(tmp_path, capsys):
    kept, fresh = tmp_path / 'kept', tmp_path / 'fresh'
    kept.write_text('old\n')
    os.chmod(kept, 0o600)
    umask = os.umask(0o027)
    try:
        run(capsys, [{'dest': str(kept), 'content': 'new\n'}, {'dest': str(fresh), 'content': 'new\n'}])
    finally:
        os.umask(umask)
    assert (mode_of(str(kept)), mode_of(str(fresh))) == (0o600, 0o640)
    assert kept.read_text() == 'new\n'


def test_a_new_file_has_its_mode_before_it_is_in_place(tmp_path, capsys, monkeypatch):
    """The staged copy gets the final mode before the rename, and the file in place is never given
    another mode: a new key is never readable by others, not even for a moment."""
    key = tmp_path / 'munge.key'
    renamed, chmods = [], []
    rename, chmod = os.rename, os.chmod

    def spy_rename(src, dst):
        renamed.append((os.fsdecode(dst), mode_of(src)))
        rename(src, dst)

    def spy_chmod(path, mode, *args, **kwargs):
        if not isinstance(path, int) and os.fsdecode(path) == str(key):
            chmods.append(mode)
        chmod(path, mode, *args, **kwargs)
    monkeypatch.setattr(os, 'rename', spy_rename)
    monkeypatch.setattr(os, 'chmod', spy_chmod)
    run(capsys, [{'dest': str(key), 'content_b64': base64.b64encode(b'\0secret').decode()}], mode='0400')
    assert renamed == [(str(key), 0o400)] and key.read_bytes() == b'\0secret'
    assert all(mode & 0o077 == 0 for mode in chmods), chmods


def test_folders_come_first_and_are_created_with_their_parents(tmp_path, capsys):
    lib = tmp_path / 'opt' / 'health'
    metrics = tmp_path / 'var' / 'metrics'
    specs = [{'dest': str(lib / 'check.py'), 'content': 'print(1)\n'}]
    top = {'folders': [str(lib), {'path': str(metrics), 'mode': '0700'}], 'folder_mode': '0755', 'mode': '0644'}
    check = run(capsys, specs, check=True, **top)
    assert check['changed'] is True and check['changed_files'] == [str(lib / 'check.py')]
    assert check['created'] == [str(tmp_path / 'opt'), str(lib), str(tmp_path / 'var'), str(metrics)]
    assert not (tmp_path / 'opt').exists()
    first = run(capsys, specs, **top)
    assert first['created'] == check['created'] and first['written'] == [str(lib / 'check.py')]
    assert (mode_of(str(lib)), mode_of(str(tmp_path / 'opt')), mode_of(str(metrics))) == (0o755, 0o755, 0o700)
    assert mode_of(str(lib / 'check.py')) == 0o644 and (lib / 'check.py').read_text() == 'print(1)\n'
    os.chmod(metrics, 0o777)
    second = run(capsys, specs, **top)
    assert (second['created'], second['changed_folders'], second['changed_files']) == ([], [str(metrics)], [])
    assert second['changed'] is True and mode_of(str(metrics)) == 0o700
    assert run(capsys, specs, **top)['changed'] is False


def test_a_bad_folder_or_a_missing_one_refuses_everything(tmp_path, capsys):
    (tmp_path / 'plain').write_text('x')
    specs = [{'dest': str(tmp_path / 'new' / 'a.conf'), 'content': 'a\n'},
             {'dest': str(tmp_path / 'nowhere' / 'b.conf'), 'content': 'b\n'}]
    result = run(capsys, specs, folders=[str(tmp_path / 'new'), str(tmp_path / 'plain'), 'relative'])
    assert result['failed'] is True
    for part in ('plain exists and is not a folder', 'relative is not an absolute path',
                 'the folder of %s is missing' % (tmp_path / 'nowhere' / 'b.conf')):
        assert part in result['msg']
    assert not (tmp_path / 'new').exists()
