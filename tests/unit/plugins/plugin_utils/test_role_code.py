# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's fingerprint covers the collection's code that the role uses or ships, and no other
(plugins/plugin_utils/_role_code.py, through role_records; docs/rerun.md): an edit re-runs only the roles
it can change."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ansible_collections.ocigpu.cluster.plugins.action import role_records as action
from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _role_code

ROOT = Path(__file__).resolve().parents[4]
# What the fingerprints read of a checkout.
PARTS = ('roles', 'plugins', 'controller', 'playbooks', 'meta', 'galaxy.yml')
ROLES = sorted(p.name for p in (ROOT / 'roles').iterdir() if (p / 'tasks').is_dir())


@pytest.fixture(scope='module')
def tree(tmp_path_factory):
    """A copy of the checkout's parts that the fingerprints read, to edit."""
    top = tmp_path_factory.mktemp('collection')
    for part in PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, top / part, ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
        elif src.exists():
            shutil.copy2(src, top / part)
    return top


class _Task:
    args = None
    async_val = 0
    check_mode = False
    diff = False
    action = 'ocigpu.cluster.role_records'

    def __init__(self, args):
        self.args = args

    def get_path(self):
        return ''


def fingerprints(root, monkeypatch):
    """Every role's fingerprint as role_records computes them (no comparison on a node), for the
    collection at root."""
    monkeypatch.setattr(action, 'COLLECTION_ROOT', str(root))
    monkeypatch.setattr(action, 'AnsibleCollectionConfig', type('Config', (), {'collection_paths': []}))
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = _Task({'roles': ROLES, 'compare': False})
    plugin._templar = type('T', (), {'template': staticmethod(lambda value: value)})()
    plugin._connection = type('C', (), {'_shell': type('S', (), {'tmpdir': 'set'})()})()
    plugin._supports_check_mode = True
    result = plugin.run(task_vars={'inventory_hostname': 'n1'})
    assert not result.get('failed'), result
    return result['fingerprints']


def rerun_after_edit(tree, monkeypatch, rel):
    """The roles whose fingerprint an edit of one file changes (the edit is undone after)."""
    path = tree / rel
    before = fingerprints(tree, monkeypatch)
    text = path.read_text()
    path.write_text(text + '\n# an edit\n')
    try:
        after = fingerprints(tree, monkeypatch)
    finally:
        path.write_text(text)
    return set(role for role in ROLES if after[role] != before[role])


# The pull bundle (slurm_autoscaler, files/build-pull-bundle.sh) serves the whole collection to the
# on-demand nodes: the role that builds it runs again after any edit of the collection.
BUNDLE = {'slurm_autoscaler'}


def test_an_edit_of_the_service_reruns_only_the_role_that_installs_it(tree, monkeypatch):
    assert rerun_after_edit(tree, monkeypatch, 'controller/ocigpu_control/service.py') == {'slurm_autoscaler'}


@pytest.mark.parametrize('rel, callers', [
    # Called by name (ocigpu.cluster.nccl_health) in nccl_tests alone.
    ('plugins/modules/nccl_health.py', {'nccl_tests'}),
    # A filter file, by the names its filters() gives (nccl_pairs, nccl_gate...).
    ('plugins/filter/nccl.py', {'nccl_tests'}),
    ('plugins/filter/rdma.py', {'node_health', 'rdma_network'}),
    # A module and its action plugin: both count.
    ('plugins/action/artifact_lock.py', {'containerd_rootless', 'enroot', 'pyxis', 'slurm_autoscaler'}),
    ('plugins/modules/firewalld_zones.py', {'firewall'}),
    # Called by no role (provision.yml's): none but the bundle's.
    ('plugins/modules/compute_cluster.py', set()),
])
def test_an_edit_of_a_plugin_reruns_only_the_roles_that_call_it(tree, monkeypatch, rel, callers):
    assert rerun_after_edit(tree, monkeypatch, rel) == callers | BUNDLE


def test_an_edit_of_a_module_utils_file_reruns_the_roles_that_copy_or_import_it(tree, monkeypatch):
    changed = rerun_after_edit(tree, monkeypatch, 'plugins/module_utils/_health.py')
    # node_health copies it (files: src ../../../plugins/module_utils/_health.py); nvme_scratch calls
    # node_facts, which imports it through _node and _observe; nccl_tests calls nccl_health.
    assert {'node_health', 'nvme_scratch', 'nccl_tests'} | BUNDLE <= changed
    assert not changed & {'cluster_user', 'common', 'containerd_rootless', 'enroot', 'mpi_ssh', 'pyxis', 'shared_home'}


def test_an_edit_of_an_included_role_reruns_the_role_that_includes_it(tree, monkeypatch):
    # slurm_autoscaler includes ocigpu.cluster.mpi_ssh's key tasks.
    assert rerun_after_edit(tree, monkeypatch, 'roles/mpi_ssh/tasks/key.yml') == {'mpi_ssh'} | BUNDLE


def test_an_edit_of_a_role_reruns_that_role(tree, monkeypatch):
    assert rerun_after_edit(tree, monkeypatch, 'roles/common/tasks/main.yml') == {'common'} | BUNDLE


def test_an_edit_of_a_roles_declaration_or_defaults_reruns_the_firewall(tree, monkeypatch):
    # The firewall opens the firewall_ports of the other roles' declarations (__firewall_code).
    assert rerun_after_edit(tree, monkeypatch, 'roles/slurm/defaults/main.yml') == {'slurm', 'firewall'} | BUNDLE


def _role(root, name, files):
    for rel, text in files.items():
        path = root / 'roles' / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_bare_module_names_declared_code_and_imports(tmp_path):
    (tmp_path / 'plugins' / 'modules').mkdir(parents=True)
    (tmp_path / 'plugins' / 'module_utils').mkdir()
    (tmp_path / 'plugins' / 'filter').mkdir()
    (tmp_path / 'plugins' / 'modules' / 'probe.py').write_text(
        'from ansible_collections.ocigpu.cluster.plugins.module_utils import _a as a, _b\n')
    (tmp_path / 'plugins' / 'module_utils' / '_a.py').write_text(
        'from ansible_collections.ocigpu.cluster.plugins.module_utils._c import (\n    X,\n    Y,\n)\n')
    for name in ('_b', '_c', '_unused'):
        (tmp_path / 'plugins' / 'module_utils' / (name + '.py')).write_text('X = Y = 1\n')
    (tmp_path / 'plugins' / 'filter' / 'many.py').write_text(
        'class FilterModule:\n    def filters(self):\n        return {"one": 1, "two": 2}\n')
    (tmp_path / 'tools' / 'pkg').mkdir(parents=True)
    (tmp_path / 'tools' / 'pkg' / 'x.py').write_text('import ansible_collections.ocigpu.cluster.plugins.module_utils._unused\n')
    _role(tmp_path, 'a', {
        # A role of the collection finds its own modules by their bare name.
        'tasks/main.yml': '- name: Probe\n  probe: {}\n- ansible.builtin.debug:\n    msg: "{{ x | ocigpu.cluster.two }}"\n',
        'vars/main.yml': '__a_code:\n  # the package the role builds\n  - tools/pkg\n__a_other: 1\n',
    })
    _role(tmp_path, 'b', {
        # Outside the role: its files' ../../../, role_path's ../../; and a role it includes.
        'vars/main.yml': 'src: ../../../plugins/module_utils/_b.py\nx: "{{ role_path }}/../../tools"\n',
        'tasks/main.yml': '- ansible.builtin.include_role:\n    name: ocigpu.cluster.a\n',
    })
    code = _role_code.Collection(str(tmp_path))
    assert code.role_code('a') == ['plugins/filter/many.py', 'plugins/module_utils/_a.py', 'plugins/module_utils/_b.py',
                                   'plugins/module_utils/_c.py', 'plugins/module_utils/_unused.py',
                                   'plugins/modules/probe.py', 'tools/pkg']
    assert code.role_code('b') == ['plugins/filter/many.py', 'plugins/module_utils/_a.py', 'plugins/module_utils/_b.py',
                                   'plugins/module_utils/_c.py', 'plugins/module_utils/_unused.py',
                                   'plugins/modules/probe.py', 'roles/a', 'tools']


def test_roles_that_include_each_other_cover_each_others_code(tmp_path):
    (tmp_path / 'plugins' / 'modules').mkdir(parents=True)
    for name in ('one', 'two'):
        (tmp_path / 'plugins' / 'modules' / (name + '.py')).write_text('')
    _role(tmp_path, 'a', {'tasks/main.yml': '- ocigpu.cluster.one: {}\n- ansible.builtin.import_role:\n    name: ocigpu.cluster.b\n'})
    _role(tmp_path, 'b', {'tasks/main.yml': '- ocigpu.cluster.two: {}\n- ansible.builtin.include_role:\n    name: "ocigpu.cluster.a"\n'})
    code = _role_code.Collection(str(tmp_path))
    assert code.role_code('a') == ['plugins/modules/one.py', 'plugins/modules/two.py', 'roles/b']
    assert code.role_code('b') == ['plugins/modules/one.py', 'plugins/modules/two.py', 'roles/a']


@pytest.mark.parametrize('value', ['/etc', '../x', '{a: 1}', '[1]'])
def test_a_bad_declaration_is_refused(tmp_path, value):
    _role(tmp_path, 'a', {'vars/main.yml': '__a_code: %s\n' % (value if value.startswith(('{', '[')) else '[%s]' % value)})
    with pytest.raises(ValueError, match='__a_code in roles/a/vars/main.yml'):
        _role_code.Collection(str(tmp_path)).role_code('a')


# Any path in the roles that climbs out of the role's folder must be one the scan sees (and that exists),
# or the role's fingerprint would miss what it copies.
CLIMB = re.compile(r'(?:\.\./)+[\w.-]*')


def test_every_path_out_of_a_role_is_seen_and_exists():
    code = _role_code.Collection(str(ROOT))
    unseen = []
    for role in ROLES:
        for path in (ROOT / 'roles' / role).rglob('*'):
            if not path.is_file() or path.suffix not in ('.yml', '.yaml', '.j2'):
                continue
            text = path.read_text()
            seen = [span for span, _path in _role_code.outside(text)]
            for match in CLIMB.finditer(text):
                if match.group(0).count('../') >= 2 and not any(a <= match.start() and match.end() <= b for a, b in seen):
                    unseen.append('%s: %s' % (path.relative_to(ROOT), match.group(0)))
        for rel in code.role_code(role):
            assert (ROOT / rel).exists(), '%s: %s does not exist' % (role, rel)
    assert not unseen, unseen


def test_the_declarations_name_paths_that_exist():
    code = _role_code.Collection(str(ROOT))
    for role in ROLES:
        for rel in code.declared(role):
            assert (ROOT / rel).exists(), '%s: %s in %s does not exist' % (role, rel, _role_code.declared_key(role))
