# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.services: several systemd units in one call, against a stand-in systemctl."""
from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import services

from tests.unit.plugins.modules._helpers import run_module

# A systemctl that keeps its units in state.json and records each call in calls.log.
FAKE = r'''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'calls.log'), 'a') as log:
    log.write(' '.join(sys.argv[1:]) + '\n')
with open(os.path.join(here, 'state.json')) as f:
    units = json.load(f)
args = [a for a in sys.argv[1:] if a != '--']
verb = args[0]
def unit(name):
    return units.get(name, {{'LoadState': 'not-found', 'ActiveState': 'inactive', 'UnitFileState': ''}})
if verb == 'show':
    blocks = []
    for name in args[2:]:
        u = unit(name)
        blocks.append('\n'.join('%s=%s' % (k, u.get(k, 'no')) for k in
                                 ('LoadState', 'ActiveState', 'UnitFileState', 'NeedDaemonReload')))
    print('\n\n'.join(blocks))
elif verb == 'daemon-reload':
    for u in units.values():
        if isinstance(u, dict):
            u.pop('NeedDaemonReload', None)
    with open(os.path.join(here, 'state.json'), 'w') as f:
        json.dump(units, f)
else:
    name = args[1]
    if name in units.get('_failing', []):
        sys.stderr.write('Job for %s failed.\n' % name)
        sys.exit(1)
    u = units[name]
    u.update({{'start': {{'ActiveState': 'active'}}, 'stop': {{'ActiveState': 'inactive'}},
              'enable': {{'UnitFileState': 'enabled'}}, 'disable': {{'UnitFileState': 'disabled'}}}}[verb])
    with open(os.path.join(here, 'state.json'), 'w') as f:
        json.dump(units, f)
'''


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """The stand-in's folder: write state.json, read calls.log."""
    fake = tmp_path / 'systemctl'
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, os.environ['PATH']))
    return tmp_path


def setup(folder, **units):
    (folder / 'state.json').write_text(json.dumps(
        {name: dict(zip(('LoadState', 'ActiveState', 'UnitFileState'), value.split())) if isinstance(value, str)
         else value for name, value in units.items()}))


def calls(folder):
    path = folder / 'calls.log'
    return [line for line in path.read_text().splitlines() if not line.startswith('show')] if path.exists() else []


def run(capsys, items, check=False, **extra):
    return run_module(services, dict(services=items, **extra), capsys, check=check)


def test_starts_and_enables_what_differs_then_changes_nothing(systemd, capsys):
    setup(systemd, munge='loaded active enabled', slurmd='loaded inactive disabled')
    items = [{'name': 'munge', 'state': 'started', 'enabled': True},
             {'name': 'slurmd', 'state': 'started', 'enabled': True}]
    first = run(capsys, items)
    assert first['changed'] is True
    assert (first['started'], first['enabled']) == (['slurmd'], ['slurmd'])
    assert calls(systemd) == ['enable -- slurmd', 'start -- slurmd']
    assert first['status']['slurmd'] == {'active_state': 'inactive', 'unit_file_state': 'disabled'}
    second = run(capsys, items)
    assert second['changed'] is False and calls(systemd) == ['enable -- slurmd', 'start -- slurmd']


def test_static_and_activating_units_count_as_enabled_and_running(systemd, capsys):
    setup(systemd, a='loaded activating static', b='loaded reloading indirect')
    result = run(capsys, [{'name': 'a', 'state': 'started', 'enabled': True},
                          {'name': 'b', 'state': 'started', 'enabled': True}])
    assert result['changed'] is False and calls(systemd) == []


def test_stops_and_disables(systemd, capsys):
    setup(systemd, firewalld='loaded active enabled', other='loaded inactive static')
    result = run(capsys, [{'name': 'firewalld', 'state': 'stopped', 'enabled': False},
                          {'name': 'other', 'state': 'stopped', 'enabled': False}])
    assert (result['stopped'], result['disabled']) == (['firewalld'], ['firewalld'])
    assert calls(systemd) == ['disable -- firewalld', 'stop -- firewalld']


def test_a_field_left_out_is_left_alone(systemd, capsys):
    setup(systemd, munge='loaded inactive disabled')
    result = run(capsys, [{'name': 'munge', 'enabled': True}])
    assert (result['enabled'], result['started']) == (['munge'], [])
    assert calls(systemd) == ['enable -- munge']


def test_check_mode_reports_and_changes_nothing(systemd, capsys):
    setup(systemd, munge='loaded inactive disabled')
    result = run(capsys, [{'name': 'munge', 'state': 'started', 'enabled': True},
                          {'name': 'slurmd', 'state': 'started', 'enabled': True}], check=True, daemon_reload=True)
    # slurmd is not known yet (its package would be installed first): reported, with a warning.
    assert (result['started'], result['enabled']) == (['munge', 'slurmd'], ['munge', 'slurmd'])
    assert result['missing'] == ['slurmd']
    assert calls(systemd) == []


def test_refuses_unknown_and_masked_units_before_changing_anything(systemd, capsys):
    setup(systemd, munge='loaded inactive disabled', slurmd='masked inactive masked')
    result = run(capsys, [{'name': 'munge', 'state': 'started', 'enabled': True},
                          {'name': 'slurmd', 'state': 'started'},
                          {'name': 'nosuch', 'state': 'started'}])
    assert result['failed'] is True
    assert 'slurmd is masked' in result['msg'] and 'systemd knows no unit nosuch' in result['msg']
    assert calls(systemd) == []


def test_refuses_bad_items_before_calling_systemctl(systemd, capsys):
    setup(systemd)
    result = run(capsys, [{'name': 'a', 'state': 'running'}, {'name': 'b', 'enabled': 'yes'},
                          {'name': 'c', 'restart': True}, {'state': 'started'}])
    assert result['failed'] is True
    for part in ('a: state must be started or stopped', 'b: enabled must be true or false',
                 'c: unknown keys restart', 'has no name'):
        assert part in result['msg']
    assert not (systemd / 'calls.log').exists()


def test_daemon_reload_runs_first_and_is_no_change(systemd, capsys):
    setup(systemd, munge='loaded active enabled')
    result = run(capsys, [{'name': 'munge', 'state': 'started'}], daemon_reload=True)
    assert result['changed'] is False
    assert (systemd / 'calls.log').read_text().splitlines()[0] == 'daemon-reload'


def test_a_failed_start_names_the_unit_and_what_was_done(systemd, capsys):
    setup(systemd, a='loaded inactive enabled', b='loaded inactive enabled', _failing=['b'])
    result = run(capsys, [{'name': 'a', 'state': 'started'}, {'name': 'b', 'state': 'started'}])
    assert result['failed'] is True
    assert 'systemctl start -- b failed' in result['msg'] and 'Job for b failed' in result['msg']
    assert result['started'] == ['a', 'b']


def test_reloads_when_a_unit_changed_on_disk_then_starts(systemd, capsys):
    setup(systemd, munge='loaded active enabled',
          slurmd={'LoadState': 'loaded', 'ActiveState': 'inactive', 'UnitFileState': 'enabled',
                  'NeedDaemonReload': 'yes'})
    items = [{'name': 'munge', 'state': 'started'}, {'name': 'slurmd', 'state': 'started'}]
    check = run(capsys, items, check=True)
    assert (check['changed'], check['daemon_reloaded'], calls(systemd)) == (True, True, [])
    result = run(capsys, items)
    assert (result['daemon_reloaded'], result['started']) == (True, ['slurmd'])
    assert calls(systemd) == ['daemon-reload', 'start -- slurmd']
    again = run(capsys, items)
    assert (again['changed'], again['daemon_reloaded']) == (False, False)
