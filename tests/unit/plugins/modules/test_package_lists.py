# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""package_lists: when the apt lists are refreshed, what counts as installed, and what it reports."""
from __future__ import annotations

import os
import time

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.modules import package_lists
from tests.unit.plugins.modules._helpers import run_module

HOUR = 3600
INDEX = 'deb.debian.org_debian_dists_trixie_main_binary-amd64_Packages'


class Host(object):
    """A fake Debian (or EL) host: the lists folder, the periodic stamp and the package database.

    Stands in for AnsibleModule.run_command and get_bin_path and records every command run."""

    def __init__(self, root, tools=('apt-get', 'dpkg-query'), installed=None, update_rc=0, rpm=None):
        self.lists = root / 'lists'
        self.lists.mkdir()
        self.stamp = root / 'periodic' / 'update-success-stamp'
        self.tools = tools
        self.installed = installed or {}  # name -> (version, status)
        self.rpm = rpm or {}  # capability -> [version-release]
        self.update_rc = update_rc
        self.calls = []

    def age(self, path, seconds):
        when = time.time() - seconds
        os.utime(str(path), (when, when))

    def index(self, age, name=INDEX):
        path = self.lists / name
        path.write_text('Package: x\n')
        self.age(path, age)
        self.age(self.lists, age)

    def fresh_stamp(self):
        """What apt's Post-Invoke-Success hook leaves after an update: a stamp touched just now."""
        self.stamp.parent.mkdir(exist_ok=True)
        self.stamp.write_text('')

    def bin(self, name):
        return '/usr/bin/' + name if name in self.tools else None

    def run(self, argv):
        self.calls.append(list(argv))
        tool = os.path.basename(argv[0])
        if tool == 'apt-get':
            if self.update_rc:
                return self.update_rc, 'Hit:1 http://deb.debian.org/debian trixie InRelease\n', (
                    'E: The repository \'http://mirror.invalid/debian trixie Release\' does not have a Release file.\n')
            self.index(0)
            return 0, 'Reading package lists...\n', ''
        if tool == 'dpkg-query':
            names = [n.split(':')[0] for n in argv[argv.index('--') + 1:]]  # dpkg prints no :arch
            rows = ['%s\tamd64\t%s\t%s' % (n, self.installed[n][1], self.installed[n][0])
                    for n in names if n in self.installed]
            return (0 if len(rows) == len(names) else 1), ''.join(r + '\n' for r in rows), ''
        if tool == 'rpm':
            versions = self.rpm.get(argv[-1])
            return (0, '\n'.join(versions) + '\n', '') if versions else (1, 'no package provides %s\n' % argv[-1], '')
        raise AssertionError('unexpected command %s' % argv)

    def commands(self):
        return [os.path.basename(c[0]) + (' ' + c[1] if c[0].endswith('apt-get') else '') for c in self.calls]


def _run(host, monkeypatch, capsys, check=False, **args):
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda self, argv, **kw: host.run(argv))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path', lambda self, name, required=False, *a, **kw: host.bin(name))
    result = run_module(package_lists, dict(args, lists_dir=str(host.lists)), capsys, check=check)
    if not result.get('failed'):
        assert result['changed'] is False
    return result


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


# ------------------------------------------------------------------- when the lists are refreshed


def test_fresh_image_without_lists_but_with_a_new_stamp_is_refreshed(host, monkeypatch, capsys):
    """The bug: an image ran apt-get update, then removed the lists. The stamp (and the folder) is
    new, so a refresh judged by either was skipped and the install found no package."""
    host.fresh_stamp()
    assert time.time() - host.stamp.stat().st_mtime < HOUR  # a stamp-based check calls this fresh
    assert time.time() - host.lists.stat().st_mtime < HOUR  # and so does the lists folder's own time
    result = _run(host, monkeypatch, capsys, packages=['network-manager'])
    assert result['refreshed'] is True
    assert result['reason'] == 'no package index in %s' % host.lists
    assert result['missing'] == ['network-manager']
    assert host.commands() == ['dpkg-query', 'apt-get update']


def test_lists_left_without_a_packages_index_count_as_missing(host, monkeypatch, capsys):
    host.fresh_stamp()
    for name in ('lock', 'deb.debian.org_debian_dists_trixie_InRelease'):
        (host.lists / name).write_text('')
    (host.lists / 'partial').mkdir()
    result = _run(host, monkeypatch, capsys, packages=['network-manager'])
    assert result['refreshed'] is True and result['reason'].startswith('no package index')


def test_stale_lists_are_refreshed(host, monkeypatch, capsys):
    host.index(2 * HOUR)
    host.fresh_stamp()  # ignored: only the lists count
    result = _run(host, monkeypatch, capsys, packages=['network-manager'])
    assert result['refreshed'] is True
    assert result['reason'] == 'the lists last changed 7200 s ago, not within max_age (3600 s)'
    assert host.commands() == ['dpkg-query', 'apt-get update']


def test_fresh_lists_are_not_refreshed(host, monkeypatch, capsys):
    host.index(10 * 60)
    result = _run(host, monkeypatch, capsys, packages=['network-manager'])
    assert result['refreshed'] is False and result['missing'] == ['network-manager']
    assert result['reason'] == 'the lists last changed 600 s ago, within max_age (3600 s)'
    assert host.commands() == ['dpkg-query']


def test_max_age_sets_the_limit(host, monkeypatch, capsys):
    host.index(10 * 60)
    assert _run(host, monkeypatch, capsys, packages=['x'], max_age=300)['refreshed'] is True
    host.index(10 * 60)
    assert _run(host, monkeypatch, capsys, packages=['x'], max_age=86400)['refreshed'] is False
    host.index(10 * 60)
    assert _run(host, monkeypatch, capsys, packages=['x'], max_age=0)['refreshed'] is True


def test_an_index_with_the_archive_old_time_counts_from_when_the_folder_got_it(host, monkeypatch, capsys):
    """apt stamps a downloaded index with the archive's Last-Modified time, which may be weeks old;
    moving it into the lists folder is what happened on this host."""
    host.index(20 * 24 * HOUR)
    host.age(host.lists, 60)
    result = _run(host, monkeypatch, capsys, packages=['x'])
    assert result['refreshed'] is False and result['reason'].startswith('the lists last changed 60 s ago')


def test_compressed_indexes_count(host, monkeypatch, capsys):
    host.index(60, name=INDEX + '.lz4')
    assert _run(host, monkeypatch, capsys, packages=['x'])['refreshed'] is False


def test_without_packages_the_lists_alone_decide(host, monkeypatch, capsys):
    result = _run(host, monkeypatch, capsys)
    assert result['refreshed'] is True and result['missing'] == []
    assert host.commands() == ['apt-get update']  # nothing to ask dpkg
    host.calls = []
    result = _run(host, monkeypatch, capsys)
    assert result['refreshed'] is False and host.commands() == []


def test_check_mode_refreshes_too(host, monkeypatch, capsys):
    host.fresh_stamp()
    result = _run(host, monkeypatch, capsys, check=True, packages=['network-manager'])
    assert result['refreshed'] is True and result['missing'] == ['network-manager']
    assert 'apt-get update' in host.commands()
    assert (host.lists / INDEX).exists()


# ------------------------------------------------------------------- what counts as installed


def test_all_installed_does_no_package_manager_work(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, installed={'network-manager': ('1.52.1-1', 'install ok installed'),
                                     'iproute2': ('6.15.0-1', 'hold ok installed')})
    host.fresh_stamp()  # and no lists at all: still nothing to do
    result = _run(host, monkeypatch, capsys, packages=['network-manager', 'iproute2'])
    assert result == dict(result, refreshed=False, missing=[], reason='every package is installed')
    assert host.commands() == ['dpkg-query']
    assert not list(host.lists.iterdir())


def test_removed_packages_with_config_files_left_are_missing(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, installed={'sudo': ('1.9.16p2-3', 'deinstall ok config-files'),
                                     'tzdata': ('2026c-0', 'install ok installed')})
    result = _run(host, monkeypatch, capsys, packages=['sudo', 'tzdata'])
    assert result['missing'] == ['sudo'] and result['refreshed'] is True


def test_an_architecture_qualified_name_is_found(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, installed={'libc6': ('2.41-12', 'install ok installed')})
    host.index(60)
    result = _run(host, monkeypatch, capsys, packages=['libc6:amd64', 'libc6:arm64'])
    assert result['missing'] == ['libc6:arm64']


@pytest.mark.parametrize('pin, installed, ok', [
    ('24.11.5-4', '24.11.5-4', True),
    ('24.11.5', '24.11.5-4', True),
    ('24.11', '24.11.5-4', True),
    ('24.1', '24.11.5-4', False),  # another version, not a shorter form of it
    ('24.11.5-4', '24.11.4-1', False),
    ('24.11.5-4', '24.11.5-40', False),
    ('24.1*', '24.11.5-4', True),  # apt's own wildcard
    ('1.9.16p2', '1.9.16p2-3+deb13u2', True),
    ('2.3', '1:2.3-1', False),  # the epoch is part of the version
])
def test_pinned_versions(tmp_path, monkeypatch, capsys, pin, installed, ok):
    host = Host(tmp_path, installed={'slurmd': (installed, 'install ok installed')})
    host.index(60)
    result = _run(host, monkeypatch, capsys, packages=['slurmd=' + pin, 'slurm-client'])
    assert result['missing'] == (['slurm-client'] if ok else ['slurmd=' + pin, 'slurm-client'])
    assert host.calls[0][-2:] == ['slurm-client', 'slurmd']  # asked by name, without the pin


def test_a_pinned_package_at_its_version_needs_nothing(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, installed={'slurmd': ('24.11.5-4', 'install ok installed')})
    result = _run(host, monkeypatch, capsys, packages=['slurmd=24.11.5-4'])
    assert result['missing'] == [] and result['refreshed'] is False and host.commands() == ['dpkg-query']


# ------------------------------------------------------------------- failures and other hosts


def test_a_failed_update_fails_with_its_message(host, monkeypatch, capsys):
    host.update_rc = 100
    result = _run(host, monkeypatch, capsys, packages=['network-manager'])
    assert result['failed'] is True and result['rc'] == 100
    assert result['msg'].startswith('apt-get update failed (rc=100): E: The repository')
    assert result['missing'] == ['network-manager']


def test_an_update_that_leaves_no_index_warns(host, monkeypatch, capsys):
    monkeypatch.setattr(host, 'index', lambda age, name=INDEX: None)  # sources without this architecture
    warnings = []
    monkeypatch.setattr(AnsibleModule, 'warn', lambda self, msg: warnings.append(msg))
    result = _run(host, monkeypatch, capsys, packages=['x'])
    assert result['refreshed'] is True
    assert warnings == ['apt-get update left no package index in %s: check the apt sources' % host.lists]


def test_a_negative_max_age_is_refused(host, monkeypatch, capsys):
    result = _run(host, monkeypatch, capsys, max_age=-1)
    assert result['failed'] is True and 'max_age' in result['msg'] and host.calls == []


def test_without_apt_rpm_tells_what_is_missing(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, tools=('rpm',), rpm={'NetworkManager': ['1.48.10-2.el9']})
    result = _run(host, monkeypatch, capsys, packages=['NetworkManager', 'rdma-core'])
    assert result == dict(result, refreshed=False, missing=['rdma-core'],
                          reason='no apt-get on this host: nothing to refresh')
    assert host.commands() == ['rpm', 'rpm']


def test_without_apt_or_rpm_nothing_is_known_installed(tmp_path, monkeypatch, capsys):
    host = Host(tmp_path, tools=())
    result = _run(host, monkeypatch, capsys, packages=['a', 'b=1'])
    assert result['refreshed'] is False and result['missing'] == ['a', 'b=1'] and host.calls == []
