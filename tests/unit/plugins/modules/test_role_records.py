# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu.cluster.role_records: a record of what a role left, and the verify that compares it."""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from ansible_collections.ocigpu.cluster.plugins.action import role_records as action
from ansible_collections.ocigpu.cluster.plugins.module_utils import _observe, _records
from ansible_collections.ocigpu.cluster.plugins.modules import role_records

from tests.unit.plugins.modules._helpers import run_module

ROOT = Path(__file__).resolve().parents[4]

# A systemctl whose `show` answers from units.json, as the real one does (blocks separated by a blank line).
FAKE_SYSTEMCTL = r'''#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
units = json.load(open(os.path.join(here, 'units.json')))
names = [a for a in sys.argv[1:] if a not in ('show', '-p', '--') and '=' not in a and ',' not in a]
blocks = []
for name in names:
    active, enabled = units.get(name, ('inactive', ''))
    blocks.append('Id=%s\nActiveState=%s\nUnitFileState=%s' % (name, active, enabled))
print('\n\n'.join(blocks))
'''


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node: a records folder, a config folder and a stand-in systemctl (units.json)."""
    (tmp_path / 'bin').mkdir()
    fake = tmp_path / 'bin' / 'systemctl'
    fake.write_text(FAKE_SYSTEMCTL.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    (tmp_path / 'bin' / 'units.json').write_text(json.dumps({'munge.service': ['active', 'enabled']}))
    monkeypatch.setenv('PATH', '%s:%s' % (tmp_path / 'bin', os.environ['PATH']))
    etc = tmp_path / 'etc'
    (etc / 'slurm' / 'conf.d').mkdir(parents=True)
    (etc / 'slurm' / 'slurm.conf').write_text('ClusterName=demo\n')
    (etc / 'slurm' / 'conf.d' / 'a.conf').write_text('a\n')
    (etc / 'hosts').write_text('127.0.0.1 localhost\n')
    return tmp_path


def items(node):
    return {'paths': [str(node / 'etc' / 'slurm'), str(node / 'etc' / 'hosts')], 'units': ['munge.service'],
            'users': ['root', 'no-such-user-here']}


def record(capsys, node, prints, check=False, roles=None, inputs=None):
    return run_module(role_records, dict(state='record', path=str(node / 'records'), fingerprints=prints,
                                         roles=roles if roles is not None else {'slurm': items(node)},
                                         inputs=inputs or {'var:x': '1', 'role:slurm': 'r1'}), capsys, check=check)


def verify(capsys, node, prints, inputs=None):
    return run_module(role_records, dict(path=str(node / 'records'), roles=prints,
                                         inputs=inputs or {'var:x': '1', 'role:slurm': 'r1'}), capsys)


def test_a_recorded_role_is_current_until_its_node_state_changes(node, capsys):
    first = record(capsys, node, {'slurm': 'f1'})
    assert first['changed'] is True and first['recorded'] == ['slurm']
    assert stat.S_IMODE(os.stat(node / 'records' / 'slurm.json').st_mode) == 0o600
    # Recording the same again writes nothing.
    assert record(capsys, node, {'slurm': 'f1'})['changed'] is False
    assert verify(capsys, node, {'slurm': 'f1'})['current'] == ['slurm']

    # A file edited by hand in the recorded folder tree: slurm must run again, and the reason names it.
    (node / 'etc' / 'slurm' / 'conf.d' / 'a.conf').write_text('b\n')
    result = verify(capsys, node, {'slurm': 'f1'})
    assert result['stale'] == ['slurm'] and result['current'] == []
    assert str(node / 'etc' / 'slurm' / 'conf.d' / 'a.conf') in result['reasons']['slurm']
    assert result['changed'] is False


@pytest.mark.parametrize('change, named', [
    (lambda n: os.chmod(n / 'etc' / 'hosts', 0o600), 'paths'),
    (lambda n: (n / 'etc' / 'slurm' / 'new.conf').write_text('x'), 'paths'),
    (lambda n: (n / 'etc' / 'hosts').unlink(), 'paths'),
    (lambda n: (n / 'bin' / 'units.json').write_text(json.dumps({'munge.service': ['inactive', 'enabled']})), 'units'),
    (lambda n: (n / 'bin' / 'units.json').write_text(json.dumps({'munge.service': ['active', 'disabled']})), 'units'),
])
def test_each_kind_of_drift_makes_the_role_stale(node, capsys, change, named):
    record(capsys, node, {'slurm': 'f1'})
    change(node)
    result = verify(capsys, node, {'slurm': 'f1'})
    assert result['stale'] == ['slurm'] and result['reasons']['slurm'].startswith('on the node: ' + named)


def test_changed_inputs_are_named_and_a_missing_record_is_said(node, capsys):
    record(capsys, node, {'slurm': 'f1'})
    result = verify(capsys, node, {'slurm': 'f2', 'common': 'c1'},
                    inputs={'var:x': '2', 'role:slurm': 'r1', 'role:common': 'c'})
    assert result['stale'] == ['common', 'slurm']
    assert result['reasons'] == {'common': 'no record of an earlier run', 'slurm': 'inputs changed: var:x'}


def test_a_record_keeps_its_own_roles_code_and_names_the_file_that_changed(node, capsys):
    inputs = {'var:x': '1', 'role:slurm': 'r1', 'role:slurm:plugins/modules/slurm_node.py': 'm1',
              'role:common': 'c', 'role:common:plugins/filter/disks.py': 'd'}
    assert role_records.relevant(inputs, 'slurm') == {'var:x': '1', 'role:slurm': 'r1', 'role:slurm:plugins/modules/slurm_node.py': 'm1'}
    record(capsys, node, {'slurm': 'f1'}, inputs=inputs)
    result = verify(capsys, node, {'slurm': 'f2'}, inputs=dict(inputs, **{'role:slurm:plugins/modules/slurm_node.py': 'm2',
                                                                          'role:common:plugins/filter/disks.py': 'd2'}))
    assert result['reasons'] == {'slurm': 'inputs changed: role:slurm:plugins/modules/slurm_node.py'}


def test_check_mode_records_nothing(node, capsys):
    result = record(capsys, node, {'slurm': 'f1'}, check=True)
    assert result['changed'] is True and result['recorded'] == ['slurm']
    assert not (node / 'records').exists()


@pytest.mark.parametrize('roles, prints, message', [
    ({'slurm': {'paths': ['etc/slurm']}}, {'slurm': 'f1'}, 'must be absolute paths'),
    ({'slurm': {'files': ['/etc']}}, {'slurm': 'f1'}, 'unknown kinds files'),
    ({'slurm': {'paths': ['/etc']}}, {}, 'slurm: no fingerprint'),
    ({'Bad-Name': {}}, {'Bad-Name': 'f'}, 'Not role names'),
])
def test_bad_input_is_refused_before_anything_is_written(node, capsys, roles, prints, message):
    result = record(capsys, node, prints, roles=roles)
    assert result['failed'] is True and message in result['msg']
    assert not (node / 'records').exists()


def test_parsers():
    assert _observe.parse_dpkg_query('munge\t0.5.15-2\tii \nslurm-wlm\t23.11\trc \nlibc6:amd64\t2.36\tii \n') == \
        {'munge': '0.5.15-2', 'libc6': '2.36'}
    mountinfo = ('22 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p1 rw\n'
                 '90 22 253:0 / /mnt/local\\040disk rw - xfs /dev/mapper/vg-lv rw\n')
    assert _records.parse_mountinfo(mountinfo) == {'/': '/dev/nvme0n1p1 ext4', '/mnt/local disk': '/dev/mapper/vg-lv xfs'}
    assert _observe.parse_systemctl_show('Id=a.service\nActiveState=active\nUnitFileState=enabled\n\n'
                                         'Id=b.timer\nActiveState=inactive\nUnitFileState=disabled') == \
        {'a.service': 'active/enabled', 'b.timer': 'inactive/disabled'}


def test_sysctls_and_home_paths(tmp_path, monkeypatch):
    (tmp_path / 'kernel').mkdir()
    (tmp_path / 'kernel' / 'unprivileged_userns_clone').write_text('1\n')
    assert _records.observe_sysctls(['kernel.unprivileged_userns_clone', 'no.such'], proc=str(tmp_path)) == \
        {'kernel.unprivileged_userns_clone': '1', 'no.such': None}
    monkeypatch.setenv('HOME', str(tmp_path))
    (tmp_path / 'f').write_text('x')
    seen = _records.observe_paths(['~/f'])
    assert list(seen) == [str(tmp_path / 'f')] and seen[str(tmp_path / 'f')].startswith('file:')


# The controller side.

def test_fingerprints_follow_the_inputs_and_each_role_its_own_files():
    inputs = {'role:slurm': 's', 'role:common': 'c', 'var:x': '1'}
    base = action.fingerprints(['slurm', 'common'], inputs)
    assert action.fingerprints(['slurm', 'common'], dict(inputs, **{'var:x': '2'})) != base
    other = action.fingerprints(['slurm', 'common'], dict(inputs, **{'role:common': 'c2'}))
    assert other['slurm'] == base['slurm'] and other['common'] != base['common']


def test_volatile_facts_and_observations_are_not_inputs():
    facts = {'hostname': 'gpu-1', 'memtotal_mb': 1000, 'uptime_seconds': 5, 'memfree_mb': 10,
             'default_ipv4': {'address': '10.0.0.2', 'interface': 'eth0', 'macaddress': 'm'},
             'ocigpu_node': {'shape': 'BM.GPU4.8', 'imds': {'reachable': True},
                             'nvme': {'disks': [{'by_id': 'a', 'size_bytes': 1, 'mounted': True, 'signatures': []}]},
                             'rdma': {'interfaces': ['rdma0'], 'devices': [{'name': 'mlx5_0', 'port_state': 'ACTIVE'}]}}}
    moved = json.loads(json.dumps(facts))
    moved.update(uptime_seconds=900, memfree_mb=3)
    moved['ocigpu_node']['imds'] = {'reachable': False}
    moved['ocigpu_node']['nvme']['disks'][0].update(mounted=False, signatures=[{'type': 'xfs'}])
    moved['ocigpu_node']['rdma']['devices'][0]['port_state'] = 'DOWN'
    assert action.fact_inputs(moved) == action.fact_inputs(facts)
    moved['memtotal_mb'] = 2000
    assert action.fact_inputs(moved) != action.fact_inputs(facts)
    assert not action.is_input_var('ocigpu_installed_packages') and not action.is_input_var('_registered')
    assert not action.is_input_var('configure_skip_unchanged')
    assert not action.is_input_var('__slurm_packages') and action.is_input_var('slurm_partitions')
    assert not action.is_input_var('ansible_host') and not action.is_input_var('hostvars')


def test_tree_digest_leaves_out_python_caches(tmp_path):
    (tmp_path / 'a.py').write_text('x = 1\n')
    before = action.tree_digest(str(tmp_path))
    (tmp_path / '__pycache__').mkdir()
    (tmp_path / '__pycache__' / 'a.cpython-311.pyc').write_bytes(b'\0')
    assert action.tree_digest(str(tmp_path)) == before
    (tmp_path / 'a.py').write_text('x = 2\n')
    assert action.tree_digest(str(tmp_path)) != before


# Every fact a role or configure.yml's roles read must be an input, or one the roles set themselves:
# a fact left out would let a re-run skip a role whose output it changes.
FACT_READ = re.compile(r"ansible_facts(?:\[['\"](\w+)['\"]\]|\.(\w+))((?:\[['\"]\w+['\"]\]|\.\w+)?)")


def test_every_fact_the_roles_read_is_an_input():
    known = set(action.FACTS) | set(action.ROLE_SET_FACTS) | {'default_ipv4', 'ocigpu_node'}
    node_known = set(action.NODE_FACTS) | {'nvme', 'rdma'}
    unknown = set()
    # nccl_tests is validate.yml's, not configure.yml's.
    paths = [p for p in list((ROOT / 'roles').rglob('*.yml')) + list((ROOT / 'roles').rglob('*.j2'))
             if p.relative_to(ROOT / 'roles').parts[0] != 'nccl_tests']
    for path in paths:
        for match in FACT_READ.finditer(path.read_text()):
            name = match.group(1) or match.group(2)
            sub = match.group(3).strip(".[]'\"")
            if name not in known or (name == 'ocigpu_node' and sub and sub not in node_known):
                unknown.add('%s: %s%s' % (path.relative_to(ROOT), name, '.' + sub if sub else ''))
    assert not unknown, 'facts the role fingerprints leave out (plugins/action/role_records.py): %s' % sorted(unknown)


def test_secrets_are_hashed_slowly_and_salted_with_their_name():
    assert action.SECRET.search('slurm_accounting_db_password') and action.SECRET.search('enroot_nvcr_api_key')
    assert action.SECRET.search('slurm_munge_key_b64') and not action.SECRET.search('__slurm_munge_key_path')
    assert action.SECRET.search('__slurm_munge_ctl_b64') and not action.SECRET.search('slurm_partitions')
    one = action.secret_digest('a_password', 'hunter2')
    assert one == action.secret_digest('a_password', 'hunter2') != action.value_digest('hunter2')
    assert one != action.secret_digest('b_password', 'hunter2')


def test_the_roles_derived_variables_use_no_lookup():
    """The roles' __x variables are not rendered for the fingerprint: they must be made only from the
    role's files and from the inputs, never from a lookup (a file on the controller, a command)."""
    # Where the controller keeps its own files: what reaches the node does not depend on the path.
    allowed = {'__slurm_autoscaler_pull_stage'}
    found = []
    for path in (ROOT / 'roles').glob('*/vars/*.yml'):
        if path.parts[-3] == 'nccl_tests':
            continue
        text = path.read_text()
        for match in re.finditer(r'(?m)^(__\w+):(.*(?:\n[ #].*)*)', text):
            if re.search(r'\b(lookup|query|q)\(', match.group(2)) and match.group(1) not in allowed:
                found.append('%s: %s' % (path.relative_to(ROOT), match.group(1)))
    assert not found, found


class _Task:
    """The parts of a task that ActionBase.run and this action read."""

    def __init__(self, args):
        self.args = args
        self.async_val = 0
        self.check_mode = False
        self.diff = False
        self.action = 'ocigpu.cluster.role_records'

    def get_path(self):
        return str(ROOT / 'playbooks' / 'configure.yml') + ':1'


@pytest.fixture
def no_collection_paths(monkeypatch):
    """No collection finder outside ansible-playbook: the installed collections are none."""
    monkeypatch.setattr(action, 'AnsibleCollectionConfig', type('Config', (), {'collection_paths': []}))


def _action(args, calls):
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = _Task(args)
    plugin._templar = type('T', (), {'template': staticmethod(lambda value: value)})()
    plugin._connection = type('C', (), {'_shell': type('S', (), {'tmpdir': 'set'})()})()
    plugin._supports_check_mode = True

    def execute(module_name, module_args, task_vars):
        calls.append(module_args)
        return {'changed': False, 'current': ['slurm'], 'stale': [], 'reasons': {}}
    plugin._execute_module = execute
    return plugin


@pytest.mark.parametrize('compare', [True, 'yes'])
def test_verify_compares_on_the_node_by_default(compare, no_collection_paths):
    calls = []
    result = _action({'roles': ['slurm'], 'compare': compare}, calls).run(task_vars={'inventory_hostname': 'n1'})
    assert len(calls) == 1 and set(calls[0]['roles']) == {'slurm'} and 'compare' not in calls[0]
    assert result['current'] == ['slurm'] and result['fingerprints']['slurm'] == calls[0]['roles']['slurm']


def test_verify_without_compare_makes_no_remote_call_and_gives_the_same_fingerprints(no_collection_paths):
    calls = []
    compared = _action({'roles': ['slurm', 'common']}, calls).run(task_vars={'inventory_hostname': 'n1'})
    result = _action({'roles': ['slurm', 'common'], 'compare': False}, calls).run(task_vars={'inventory_hostname': 'n1'})
    assert len(calls) == 1
    assert result['stale'] == ['slurm', 'common'] and result['current'] == []
    assert result['reasons']['slurm'].startswith('not compared')
    assert result['fingerprints'] == compared['fingerprints'] and result['inputs'] == compared['inputs']
    bad = _action({'roles': ['slurm'], 'compare': 'maybe'}, calls).run(task_vars={})
    assert bad['failed'] and 'compare must be a boolean' in bad['msg'] and len(calls) == 1
