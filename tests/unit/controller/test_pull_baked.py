# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's pull on a baked image: the bundle's digests, the manifest check (refused, run in full,
the baked roles skipped), --bake on a builder (in a folder standing for its root) and --digest."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import time
from types import SimpleNamespace

import pytest
import yaml

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
_PROGRAM = pathlib.Path(__file__).resolve().parents[3] / 'roles' / 'slurm_autoscaler' / 'files' / 'ocigpu_pull.py'
_spec = importlib.util.spec_from_file_location('ocigpu_pull_baked', str(_PROGRAM))
ocigpu_pull = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ocigpu_pull)

CORE = 'ansible-core==2.19.14'
BAKED = ['containerd_rootless', 'enroot', 'pyxis', 'rdma_exporter']
FILES = {
    'pull.json': json.dumps(dict(ansible_core=CORE, skip_tags=['nvme_scratch'], playbook='ocigpu.cluster.configure',
                                 collections=['ocigpu.cluster 1.2.3', 'ansible.posix 2.0.0'])),
    'node-vars.yml': 'slurm_cluster_name: as\n',
    'ocigpu.lock.yml': 'artifacts:\n  enroot: {sha256: aa}\n',
    'collections/ansible_collections/ocigpu/cluster/MANIFEST.json': '{"collection_info": {"version": "1.2.3"}}',
    'collections/ansible_collections/ocigpu/cluster/roles/enroot/tasks/main.yml': '- name: enroot\n',
    'collections/ansible_collections/ansible/posix/plugins/modules/mount.py': '# mount\n',
}


def make_bundle(path, **changes):
    """A bundle as build-pull-bundle.sh lays it out; changes: {member: text} (None: left out)."""
    files = dict(FILES, **changes)
    with tarfile.open(str(path), 'w:gz') as tar:
        for name in sorted(files):
            if files[name] is None:
                continue
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def digests_of(tmp_path, **changes):
    folder = tmp_path / ('x%d' % len(list(tmp_path.iterdir())))
    folder.mkdir()
    ocigpu_pull.safe_extract(make_bundle(tmp_path / (folder.name + '.tar.gz'), **changes), str(folder))
    return ocigpu_pull.bundle_digests(str(folder))


def test_a_bundles_digests_are_stable_and_follow_the_lock_file_the_collections_and_the_settings(tmp_path):
    first, again = digests_of(tmp_path), digests_of(tmp_path)
    assert first == again and set(first) == {'collection_digest', 'lock_digest', 'settings_digest', 'bundle_digest'}
    assert all(len(v) == 64 and int(v, 16) >= 0 for v in first.values())
    # Python's byte-code caches are not part of the collection
    pyc = 'collections/ansible_collections/ansible/posix/plugins/modules/__pycache__/mount.cpython-312.pyc'
    assert digests_of(tmp_path, **{pyc: 'cache', 'collections/ansible_collections/ocigpu/cluster/x.pyc': 'c'}) == first

    def changed(**changes):
        other = digests_of(tmp_path, **changes)
        assert other['bundle_digest'] != first['bundle_digest']
        return sorted(k for k in first if k != 'bundle_digest' and other[k] != first[k])
    assert changed(**{'ocigpu.lock.yml': 'artifacts:\n  enroot: {sha256: bb}\n'}) == ['lock_digest']
    assert changed(**{'collections/ansible_collections/ocigpu/cluster/roles/enroot/tasks/main.yml': '- name: other\n'}) \
        == ['collection_digest']
    # a file renamed, same bytes
    assert changed(**{'collections/ansible_collections/ansible/posix/plugins/modules/mount.py': None,
                      'collections/ansible_collections/ansible/posix/plugins/modules/mount2.py': '# mount\n'}) == ['collection_digest']
    assert changed(**{'node-vars.yml': 'slurm_cluster_name: bs\n'}) == ['settings_digest']
    assert changed(**{'pull.json': FILES['pull.json'].replace('nvme_scratch', 'firewall')}) == ['settings_digest']
    # the boundary between node-vars.yml and pull.json counts
    assert digests_of(tmp_path, **{'node-vars.yml': 'a', 'pull.json': 'b'})['settings_digest'] \
        != digests_of(tmp_path, **{'node-vars.yml': 'ab', 'pull.json': ''})['settings_digest']


# The pull against a controller that serves the bundle and records what it is told -------------------

class FakeController(object):
    def __init__(self, archive):
        self.archive = archive
        self.calls = []

    def __call__(self, server, cert, timeout=60):
        return self

    def request(self, method, path, body=None, out=None, privileged=False):
        self.calls.append((method, path, body))
        if path == '/v1/bundle':
            shutil.copyfile(self.archive, out)
            return out
        if path == '/v1/join':
            return dict(name='gpu-1', conf_server='10.0.0.2:6817', munge_key_b64='bXVuZ2U=')
        return dict(name='gpu-1', request='r1', message=body['message'])


DOC = dict(id='ocid1.instance.oc1..x', freeformTags={'ocigpu-slurm-node': 'gpu-1', 'ocigpu-pull-server': '10.0.0.2:8740',
                                                     'ocigpu-pull-cert': 'ab' * 32})


def baked_node(tmp_path, manifest_changes=None, bundle_changes=None, venv_core=CORE, manifest_text=None, configure_run=None):
    """A pull on an image whose manifest is the one --bake writes for the bundle, with manifest_changes;
    what it ran, told and logged. configure_run(argv, log_file, seen): the playbook run's output and
    exit status (none and 0 by default)."""
    archive = make_bundle(tmp_path / 'served.tar.gz', **(bundle_changes or {}))
    baked_venv = tmp_path / 'baked-venv'
    (baked_venv / 'bin').mkdir(parents=True)
    (baked_venv / 'bin' / 'ansible-playbook').write_text('')
    manifest = None
    if manifest_changes is not None:
        manifest = dict(format=2, cluster='as', collection='ocigpu.cluster 1.2.3', roles=BAKED, join_tag='node_join',
                        baked_at='2026-11-29T04:00:00Z',
                        venv=str(baked_venv), ansible_core=venv_core, **digests_of(tmp_path))
        manifest.update(manifest_changes)
        (tmp_path / 'baked.json').write_text(json.dumps(manifest))
    if manifest_text is not None:
        (tmp_path / 'baked.json').write_text(manifest_text)
    opts = SimpleNamespace(imds_url='http://imds.invalid/opc/v2', wait=30, poll=1, prefix=str(tmp_path / 'prefix'),
                           state_dir=str(tmp_path / 'state'), log_file=str(tmp_path / 'pull.log'), timeout=10,
                           manifest=str(tmp_path / 'baked.json'))
    os.makedirs(opts.prefix)
    ctl = FakeController(archive)
    seen = SimpleNamespace(configure=[], venvs=[], started=[], ctl=ctl, order=[])

    def venv_fn(prefix, settings, log):
        seen.venvs.append(prefix)
        return '/venv'

    def configure(argv, bundle, log, log_file, **kwargs):
        seen.configure.append(argv)
        seen.order.append('playbook')
        seen.kwargs = kwargs
        if configure_run:
            log('configure: %s', ' '.join(argv))
            return configure_run(argv, log_file, kwargs.get('seen'))
        return 0

    def active(argv, bundle, log, log_file):
        seen.order.append('active check')
        return 0
    seen.rc, seen.timings = ocigpu_pull.pull(opts, ocigpu_pull.Log(opts.log_file), fetch_imds=lambda url: DOC, controller_cls=ctl,
                                             venv_fn=venv_fn, configure_fn=configure, start_fn=lambda log: seen.started.append(1) or 0,
                                             check_fn=lambda log: seen.order.append('passive checks') or (0, ''), active_fn=active)
    seen.log = open(opts.log_file).read()
    seen.manifest = manifest
    return seen


def skipped(argv):
    return argv[argv.index('--skip-tags') + 1].split(',') if '--skip-tags' in argv else []


def selected(argv):
    return argv[argv.index('--tags') + 1].split(',') if '--tags' in argv else []


@pytest.mark.parametrize('digest', ['lock_digest', 'collection_digest'])
def test_a_baked_image_for_another_lock_file_or_collection_is_refused_and_nothing_runs(tmp_path, digest):
    node = baked_node(tmp_path, {digest: 'f' * 64})
    assert node.rc == 1 and node.timings['baked'] is False
    assert node.configure == [] and node.venvs == [] and node.started == []
    # no join (no secret fetched), one report to the controller, with the reason in one line
    assert [c[:2] for c in node.ctl.calls] == [('GET', '/v1/bundle'), ('POST', '/v1/failed')]
    message = node.ctl.calls[-1][2]['message']
    assert node.ctl.calls[-1][2]['name'] == 'gpu-1' and node.ctl.calls[-1][2]['instance_id'] == DOC['id']
    ours = node.manifest['lock_digest'] if digest == 'collection_digest' else digests_of(tmp_path)['lock_digest']
    theirs = 'f' * 12 if digest == 'lock_digest' else ours
    assert message.startswith('baked image made for ocigpu.cluster 1.2.3')
    assert ' lock %s, this cluster serves ocigpu.cluster 1.2.3' % theirs[:12] in message
    assert message.endswith(' lock %s: re-bake (ansible-playbook ocigpu.cluster.bake) or give the node template the stock image'
                            % ours[:12])
    if digest == 'collection_digest':
        # same version, other files: the message says so rather than naming one version twice
        assert 'ocigpu.cluster 1.2.3 files ffffffffffff lock' in message
    assert len(message) <= 300  # what the controller keeps of it
    assert 'pull: refusing this image: baked image made for' in node.log and 'slurmd stays stopped' in node.log


def test_a_baked_image_of_another_collection_version_names_both(tmp_path):
    node = baked_node(tmp_path, dict(collection='ocigpu.cluster 1.2.2', collection_digest='e' * 64))
    message = node.ctl.calls[-1][2]['message']
    assert message.startswith('baked image made for ocigpu.cluster 1.2.2 lock ') and 'serves ocigpu.cluster 1.2.3 lock' in message
    assert node.rc == 1 and node.configure == []


def test_a_current_baked_image_runs_only_the_per_node_steps_with_the_baked_venv(tmp_path):
    node = baked_node(tmp_path, {})
    assert node.rc == 0 and node.timings['baked'] is True and node.started == [1]
    argv, = node.configure
    assert argv[:2] == [str(tmp_path / 'baked-venv' / 'bin' / 'ansible-playbook'), 'ocigpu.cluster.configure']
    assert node.venvs == []
    # configure.yml's tasks tagged node_join, less what the bundle's settings skip
    assert selected(argv) == ['node_join'] and skipped(argv) == ['boot_wait', 'nvme_scratch']
    assert [c[1] for c in node.ctl.calls] == ['/v1/bundle', '/v1/join']
    assert ('pull: baked image current (bundle %s): only the per-node steps (--tags node_join) of the baked roles '
            'containerd_rootless, enroot, pyxis, rdma_exporter' % node.manifest['bundle_digest'][:12]) in node.log
    assert 'ansible: the baked %s in %s' % (CORE, tmp_path / 'baked-venv') in node.log


ACTIVE = {'pull.json': FILES['pull.json'][:-1] + ', "active_check": {"playbook": "ocigpu.cluster.validate"}}'}


def check_run(fail_in=None):
    """A run of configure.yml then validate.yml as ansible-playbook prints it; failing in 'configure' or 'check'."""
    def run(argv, log_file, seen):
        lines = ['PLAY [Configure the cluster\'s hosts] ***', 'TASK [ocigpu.cluster.slurm : Enable slurmd] ***', 'ok: [gpu-1]']
        if fail_in == 'configure':
            lines += ['fatal: [gpu-1]: FAILED! => {"msg": "munge did not start"}']
        lines += [ocigpu_pull.CHECK_PLAY_LINE + ' ***', 'TASK [Check that there are GPU nodes] ***', 'ok: [localhost]',
                  'TASK [ocigpu.cluster.nccl_tests : Fail the nodes that fell short] ***']
        if fail_in == 'check':
            lines += ['fatal: [gpu-1]: FAILED! => {"msg": "gpu-1 failed the active NCCL check: busbw 120.5 GB/s"}']
        with open(log_file, 'a') as f:
            for line in lines:
                if line.startswith(ocigpu_pull.CHECK_PLAY_LINE):
                    time.sleep(0.2)  # the per-node steps' time
                    if seen is not None:
                        seen[ocigpu_pull.CHECK_PLAY_LINE] = time.time()
                f.write(line + '\n')
        time.sleep(0.3)  # the check's
        return 2 if fail_in else 0
    return run


def test_on_a_current_baked_image_the_active_check_runs_in_the_configure_run_before_the_passive_checks(tmp_path):
    node = baked_node(tmp_path, digests_of(tmp_path, **ACTIVE), bundle_changes=ACTIVE, configure_run=check_run())
    assert node.rc == 0 and node.started == [1]
    argv, = node.configure
    # one ansible-playbook: configure.yml's per-node steps, then validate.yml's active check, the settings' skips
    assert argv[1:3] == ['ocigpu.cluster.configure', 'ocigpu.cluster.validate']
    assert selected(argv) == ['node_join', 'health'] and skipped(argv) == ['boot_wait', 'nvme_scratch']
    assert 'nccl_tests_fail_on_gate=true' in argv and 'validate_health_strategy=linear' in argv
    assert node.order == ['playbook', 'passive checks']
    # the run's time split where the check's first play began
    assert 0.3 <= node.timings['active_check'] < 1 and 0.2 <= node.timings['configure'] < 1
    assert node.kwargs == dict(seen={ocigpu_pull.CHECK_PLAY_LINE: node.kwargs['seen'][ocigpu_pull.CHECK_PLAY_LINE]})
    assert 'pull: the active NCCL check passes' in node.log
    # Without the setting, the per-node steps alone; on the stock image, the check is its own run after the passive checks.
    (tmp_path / 'plain').mkdir()
    (tmp_path / 'stock').mkdir()
    assert selected(baked_node(tmp_path / 'plain', {}).configure[0]) == ['node_join']
    stock = baked_node(tmp_path / 'stock', None, bundle_changes=ACTIVE)
    assert selected(stock.configure[0]) == [] and stock.order == ['playbook', 'passive checks', 'active check']


@pytest.mark.parametrize('where', ['configure', 'check'])
def test_a_failure_in_the_run_of_both_is_told_as_the_part_it_failed_in(tmp_path, where):
    node = baked_node(tmp_path, digests_of(tmp_path, **ACTIVE), bundle_changes=ACTIVE, configure_run=check_run(fail_in=where))
    assert node.rc == 1 and node.started == [] and node.order == ['playbook']
    message = node.ctl.calls[-1][2]['message']
    if where == 'check':
        assert message == ('active NCCL check failed: ocigpu.cluster.nccl_tests : Fail the nodes that fell short: '
                           'gpu-1 failed the active NCCL check: busbw 120.5 GB/s')
    else:
        assert message == 'configure failed (exit 2): ocigpu.cluster.slurm : Enable slurmd: munge did not start'


def test_a_manifest_of_the_earlier_format_is_refused(tmp_path):
    # format 1: the image held a few roles whole and a pull ran every other step; a node from it now
    # would run the per-node steps alone over an image that lacks the rest.
    node = baked_node(tmp_path, dict(format=1))
    assert node.rc == 1 and node.configure == [] and node.venvs == [] and node.started == []
    message = node.ctl.calls[-1][2]['message']
    assert message == ('baked image manifest %s is not format 2 (an earlier collection baked it): re-bake '
                       '(ansible-playbook ocigpu.cluster.bake) or give the node template the stock image' % (tmp_path / 'baked.json'))


def test_a_baked_venv_of_another_ansible_core_is_made_again(tmp_path):
    node = baked_node(tmp_path, {}, venv_core='ansible-core==2.18.0')
    assert node.rc == 0 and node.venvs == [str(tmp_path / 'prefix')]
    assert node.configure[0][0] == '/venv/bin/ansible-playbook'
    assert selected(node.configure[0]) == ['node_join'] and skipped(node.configure[0]) == ['boot_wait', 'nvme_scratch']


def test_a_baked_venv_without_the_mitogen_the_settings_ask_for_is_made_again(tmp_path):
    # baked without Mitogen, for a bundle that asks for it: the baked roles are current, the venv is not
    wants = {'pull.json': json.dumps(dict(json.loads(FILES['pull.json']), mitogen='mitogen==0.3.54'))}
    (tmp_path / 'a').mkdir()
    node = baked_node(tmp_path / 'a', digests_of(tmp_path / 'a', **wants), bundle_changes=wants)
    assert node.rc == 0 and node.timings['baked'] is True and node.venvs == [str(tmp_path / 'a' / 'prefix')]
    assert selected(node.configure[0]) == ['node_join']
    # baked with another Mitogen than the bundle's (none)
    (tmp_path / 'b').mkdir()
    node = baked_node(tmp_path / 'b', {'mitogen': 'mitogen==0.3.53'})
    assert node.rc == 0 and node.timings['baked'] is True and node.venvs == [str(tmp_path / 'b' / 'prefix')]
    # and with the same one, the baked venv serves
    (tmp_path / 'c').mkdir()
    node = baked_node(tmp_path / 'c', dict(digests_of(tmp_path / 'c', **wants), mitogen='mitogen==0.3.54'), bundle_changes=wants)
    assert node.rc == 0 and node.venvs == [] and node.configure[0][0] == str(tmp_path / 'c' / 'baked-venv' / 'bin' / 'ansible-playbook')
    # that stand-in venv lacks Mitogen's files: Ansible's default strategy, said in the timings
    assert node.timings['strategy'] == 'linear' and 'ansible: strategy linear' in node.log


def test_the_runs_use_mitogens_strategy_only_where_the_venv_has_mitogen(tmp_path):
    bundle, venv = tmp_path / 'bundle', tmp_path / 'venv'
    bundle.mkdir()
    (venv / 'lib' / 'python3.13' / 'site-packages').mkdir(parents=True)
    facts = ('gathering = smart\nfact_caching = jsonfile\nfact_caching_connection = %s\nfact_caching_timeout = 3600\n'
             'callbacks_enabled = ansible.posix.profile_tasks\n' % (bundle / 'facts'))
    assert ocigpu_pull.write_ansible_cfg(str(bundle), str(venv)) == 'linear'
    assert (bundle / 'ansible.cfg').read_text() == '[defaults]\nstrategy = linear\n' + facts
    (venv / 'lib' / 'python3.13' / 'site-packages' / 'ansible_mitogen').mkdir()
    assert ocigpu_pull.write_ansible_cfg(str(bundle), str(venv)) == 'ocigpu.cluster.mitogen_linear'
    assert (bundle / 'ansible.cfg').read_text() == '[defaults]\nstrategy = ocigpu.cluster.mitogen_linear\n' + facts
    # the facts (what the metadata service told root among them) are root's alone
    assert (bundle / 'facts').stat().st_mode & 0o777 == 0o700
    # the runs read that file whatever their environment names (and they start in the bundle folder)
    seen = {}

    def popen(argv, **kw):
        seen.update(kw)
        return SimpleNamespace(stdout=iter([b'PLAY RECAP\n']), wait=lambda: 0)
    assert ocigpu_pull.run_configure(['ansible-playbook'], str(bundle), lambda *a: None, None, run=popen) == 0
    assert seen['env']['ANSIBLE_CONFIG'] == str(bundle / 'ansible.cfg') and seen['cwd'] == str(bundle)


def test_settings_changed_since_the_bake_run_every_step_again(tmp_path):
    node = baked_node(tmp_path, {}, bundle_changes={'node-vars.yml': 'slurm_cluster_name: as\ncluster_users: true\n'})
    assert node.rc == 0 and node.timings['baked'] is False
    assert selected(node.configure[0]) == [] and skipped(node.configure[0]) == ['boot_wait', 'nvme_scratch']
    assert 'settings changed since the bake: every step runs again' in node.log


def test_without_a_manifest_the_pull_is_as_before(tmp_path):
    node = baked_node(tmp_path)
    assert node.rc == 0 and node.timings['baked'] is False and skipped(node.configure[0]) == ['boot_wait', 'nvme_scratch']
    assert selected(node.configure[0]) == [] and 'baked' not in node.log


def test_an_unreadable_manifest_is_refused(tmp_path):
    node = baked_node(tmp_path, manifest_text='{"format": 1, ')
    assert node.rc == 1 and node.configure == [] and node.venvs == []
    message = node.ctl.calls[-1][2]['message']
    assert message.startswith('baked image manifest %s unreadable' % (tmp_path / 'baked.json'))
    assert message.endswith('give the node template the stock image')


# --bake on a builder, its root a temporary folder -------------------------------------------------

def builder_root(root):
    for rel, text in (('etc/ssh/ssh_host_ed25519_key', 'private'), ('etc/ssh/ssh_host_ed25519_key.pub', 'public'),
                      ('etc/ssh/sshd_config', 'Port 22\n'), ('etc/machine-id', 'abc123\n'), ('var/lib/dbus/machine-id', 'abc123\n'),
                      ('var/lib/cloud/instances/ocid1.instance.oc1..b/user-data.txt', '#!/bin/bash\n'),
                      ('var/log/cloud-init.log', 'log'), ('var/log/cloud-init-output.log', 'log'), ('var/log/messages', 'kept'),
                      ('root/.ansible/galaxy_cache/x', 'x'), ('root/.ansible/tmp/ansible-tmp-1/AnsiballZ_command.py', 'x'),
                      ('tmp/bundle.tar.gz', 'x'), ('tmp/other-local/y', 'y'), ('tmp/ansible_command_payload_1/y', 'y'),
                      ('home/opc/.ssh/authorized_keys', 'ssh-ed25519 AAAA operator\n')):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    os.symlink('/var/lib/cloud/instances/ocid1.instance.oc1..b', str(root / 'var/lib/cloud/instance'))


def bake_opts(tmp_path, archive, cluster='as'):
    root = tmp_path / 'root'
    builder_root(root)
    opts = SimpleNamespace(bake=archive, cluster=cluster, manifest=str(root / 'etc/ocigpu/baked.json'), root=str(root),
                           prefix=str(root / 'opt/ocigpu-pull'), state_dir=str(root / 'var/lib/ocigpu-pull'),
                           log_file=str(root / 'var/log/ocigpu-pull.log'))
    for folder in (opts.prefix, opts.state_dir):
        os.makedirs(folder)
    open(os.path.join(opts.prefix, 'bundle.tar.gz'), 'w').close()
    return opts


def test_bake_runs_the_bake_playbook_writes_the_manifest_then_cleans(tmp_path):
    opts = bake_opts(tmp_path, make_bundle(tmp_path / 'served.tar.gz'))
    root = pathlib.Path(opts.root)
    runs, commands = [], []

    def venv_fn(prefix, settings, log):
        os.makedirs(os.path.join(prefix, 'venv', 'bin'))
        return os.path.join(prefix, 'venv')

    def configure(argv, bundle, log, log_file):
        runs.append(dict(argv=argv, inventory=open(os.path.join(bundle, 'inventory.ini')).read(),
                         local=json.load(open(os.path.join(bundle, 'local-vars.json')))))
        log('bake run: %s', ' '.join(argv))
        result = argv[argv.index('-e') + 1].split('=', 1)[1]
        with open(result, 'w') as f:
            json.dump(dict(roles=['pyxis', 'containerd_rootless', 'enroot'], packages=['slurm']), f)
        return 0
    rc, manifest = ocigpu_pull.bake(opts, ocigpu_pull.Log(opts.log_file), venv_fn=venv_fn, configure_fn=configure,
                                    run=lambda argv, **kw: commands.append(argv))
    assert rc == 0
    run, = runs
    venv = os.path.join(opts.prefix, 'venv')
    bundle = os.path.join(opts.prefix, 'bundle')
    assert run['argv'][:4] == [venv + '/bin/ansible-playbook', 'ocigpu.cluster.bake_node', '-i', bundle + '/inventory.ini']
    # configure.yml's steps less the per-node ones (node_join) and those the bundle's settings skip
    assert run['argv'][4:] == ['-e', 'ocigpu_bake_result_file=' + opts.state_dir + '/bake.json', '-e', 'ocigpu_baking=true',
                               '--skip-tags', 'node_join,nvme_scratch',
                               '-e', '@' + bundle + '/node-vars.yml', '-e', '@' + bundle + '/local-vars.json']
    assert run['inventory'].startswith('[gpu_nodes]\nbake ansible_connection=local')
    assert run['local'] == dict(ocigpu_lock_file=bundle + '/ocigpu.lock.yml', ocigpu_artifacts_strict=False)
    # no join variable (the munge key, the MPI keys, slurmctld's address) among the extra vars
    extra = [run['argv'][i + 1] for i, a in enumerate(run['argv']) if a == '-e']
    assert not any('join' in a or 'munge' in a for a in extra)
    written = json.loads((root / 'etc/ocigpu/baked.json').read_text())
    assert written == manifest
    assert oct(os.stat(opts.manifest).st_mode & 0o777) == '0o644'
    assert set(written) == {'format', 'cluster', 'collection', 'collection_digest', 'lock_digest', 'settings_digest', 'roles',
                            'join_tag', 'bundle_digest', 'baked_at', 'venv', 'ansible_core', 'mitogen'}
    assert written['format'] == 2 and written['join_tag'] == 'node_join' and written['cluster'] == 'as' and written['collection'] == 'ocigpu.cluster 1.2.3'
    assert written['roles'] == ['containerd_rootless', 'enroot', 'pyxis'] and written['venv'] == venv
    assert written['ansible_core'] == CORE and written['mitogen'] == '' and written['baked_at'].endswith('Z')
    assert {k: written[k] for k in ('collection_digest', 'lock_digest', 'settings_digest', 'bundle_digest')} == digests_of(tmp_path)
    # the cleaning
    gone = ['opt/ocigpu-pull/bundle', 'opt/ocigpu-pull/bundle.tar.gz', 'var/lib/ocigpu-pull/bake.json', 'var/log/ocigpu-pull.log',
            'etc/ssh/ssh_host_ed25519_key', 'etc/ssh/ssh_host_ed25519_key.pub', 'var/lib/dbus/machine-id', 'var/lib/cloud/instances',
            'var/lib/cloud/instance', 'var/log/cloud-init.log', 'var/log/cloud-init-output.log', 'root/.ansible/galaxy_cache',
            'tmp/bundle.tar.gz', 'tmp/other-local']
    assert [rel for rel in gone if os.path.lexists(str(root / rel))] == []
    assert (root / 'etc/machine-id').read_text() == ''
    # The Ansible task that runs the bake keeps its own files (it removes them when it ends).
    kept = ['etc/ssh/sshd_config', 'var/log/messages', 'home/opc/.ssh/authorized_keys', 'opt/ocigpu-pull/venv/bin', 'tmp',
            'etc/ocigpu/baked.json', 'root/.ansible/tmp/ansible-tmp-1/AnsiballZ_command.py', 'tmp/ansible_command_payload_1']
    assert [rel for rel in kept if not (root / rel).exists()] == []
    assert commands == []  # the journal is the real machine's: vacuumed only when the root is /


def test_with_the_active_check_on_the_bake_builds_nccl_tests_into_the_image(tmp_path):
    # The bundle's settings ask the nodes for the active check: the bake playbook is told to build its
    # nccl-tests (bake_node.yml's play), so that no node compiles it at its join.
    runs = []

    def configure(argv, bundle, log, log_file):
        runs.append(argv)
        with open(argv[argv.index('-e') + 1].split('=', 1)[1], 'w') as f:
            json.dump(dict(roles=['slurm']), f)
        return 0
    for name, changes in (('plain', {}), ('active', ACTIVE)):
        (tmp_path / name).mkdir()
        opts = bake_opts(tmp_path / name, make_bundle(tmp_path / name / 'served.tar.gz', **changes))
        rc, manifest = ocigpu_pull.bake(opts, ocigpu_pull.Log(opts.log_file), venv_fn=lambda *a: '/venv',
                                        configure_fn=configure, run=lambda argv, **kw: None)
        assert rc == 0 and manifest
    plain, active = runs
    assert 'ocigpu_bake_active_check=true' not in plain
    assert active[active.index('ocigpu_bake_active_check=true') - 1] == '-e'
    # the playbook's play that reads it builds through the role's bake tasks, and only without a program of the node's
    plays = yaml.safe_load(open(os.path.join(ROOT, 'playbooks', 'bake_node.yml')))
    build, = [p for p in plays if p.get('name') == "Build the active check's nccl-tests into the image"]
    task, = build['tasks']
    assert task['ansible.builtin.include_role'] == dict(name='ocigpu.cluster.nccl_tests', tasks_from='bake')
    assert task['when'] == ['ocigpu_bake_active_check | default(false) | bool', "not (nccl_tests_active_binary | default(''))"]
    assert [p['name'] for p in plays].index(build['name']) < [p['name'] for p in plays].index("Leave the image for the nodes' own steps")


def test_a_failed_bake_writes_no_manifest_and_cleans_nothing(tmp_path):
    opts = bake_opts(tmp_path, make_bundle(tmp_path / 'served.tar.gz'))
    rc, manifest = ocigpu_pull.bake(opts, ocigpu_pull.Log(opts.log_file), venv_fn=lambda *a: '/venv',
                                    configure_fn=lambda *a: 2, run=lambda argv, **kw: pytest.fail('no cleaning'))
    assert rc == 2 and manifest is None and not os.path.exists(opts.manifest)
    assert os.path.exists(os.path.join(opts.root, 'etc/ssh/ssh_host_ed25519_key'))
    assert 'ocigpu.cluster.bake_node failed (exit 2); no manifest written' in open(opts.log_file).read()


def test_digest_prints_the_digests_the_bake_writes_for_the_same_bundle(tmp_path, capsys):
    archive = make_bundle(tmp_path / 'served.tar.gz')
    assert ocigpu_pull.main(['--digest', archive]) == 0
    printed = json.loads(capsys.readouterr().out)
    opts = bake_opts(tmp_path, archive)

    def configure(argv, bundle, log, log_file):
        with open(argv[argv.index('-e') + 1].split('=', 1)[1], 'w') as f:
            json.dump(dict(roles=BAKED), f)
        return 0
    rc, manifest = ocigpu_pull.bake(opts, ocigpu_pull.Log(opts.log_file), venv_fn=lambda *a: '/venv', configure_fn=configure,
                                    run=lambda argv, **kw: None)
    assert rc == 0 and printed == {k: manifest[k] for k in ('collection_digest', 'lock_digest', 'settings_digest', 'bundle_digest')}
    # and a node pulling this bundle on that image finds it current
    state, found = ocigpu_pull.baked_check(opts.manifest, printed, json.loads(FILES['pull.json']))
    assert state == 'skip' and found['roles'] == BAKED


def test_the_command_line_bakes_and_prints_the_manifest_and_says_why_it_cannot(tmp_path, capsys, monkeypatch):
    archive = make_bundle(tmp_path / 'served.tar.gz')
    opts = bake_opts(tmp_path, archive)
    real = ocigpu_pull.bake

    def configure(argv, bundle, log, log_file):
        with open(argv[argv.index('-e') + 1].split('=', 1)[1], 'w') as f:
            json.dump(dict(roles=['enroot']), f)
        return 0
    monkeypatch.setattr(ocigpu_pull, 'bake', lambda o, log: real(o, log, venv_fn=lambda *a: '/venv', configure_fn=configure))
    args = ['--prefix', opts.prefix, '--state-dir', opts.state_dir, '--log-file', opts.log_file, '--manifest', opts.manifest,
            '--root', opts.root]
    assert ocigpu_pull.main(['--bake', archive, '--cluster', 'prod'] + args) == 0
    printed = capsys.readouterr().out
    manifest = json.loads(printed[printed.index('\n{') + 1:])
    assert manifest == json.load(open(opts.manifest)) and manifest['cluster'] == 'prod' and manifest['roles'] == ['enroot']
    # a bake is no pull: no marker that would keep the image's nodes from pulling, no timings
    assert os.listdir(opts.state_dir) == []
    assert ocigpu_pull.main(['--bake', str(tmp_path / 'missing.tar.gz')] + args) == 1
    assert 'bake: failed: ' in capsys.readouterr().out
    assert ocigpu_pull.main(['--digest', str(tmp_path / 'missing.tar.gz')]) == 1
    assert '--digest %s: ' % (tmp_path / 'missing.tar.gz') in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ocigpu_pull.main(['--digest', archive, '--bake', archive])


def test_a_playbook_run_notes_when_each_line_it_watches_for_first_appears(tmp_path):
    out = [b'PLAY [Configure the cluster\'s hosts] ***\n', (ocigpu_pull.CHECK_PLAY_LINE + ' ***\n').encode(),
           b'fatal: [gpu-1]: FAILED! => {"msg": "x"}\n', (ocigpu_pull.CHECK_PLAY_LINE + ' ***\n').encode()]

    class Proc(object):
        def __init__(self, argv, **kwargs):
            self.stdout = iter(out)

        def wait(self):
            return 2
    seen = {ocigpu_pull.CHECK_PLAY_LINE: None, 'PLAY RECAP': None}
    before = time.time()
    rc = ocigpu_pull.run_configure(['ansible-playbook'], str(tmp_path), lambda *a: None, str(tmp_path / 'pull.log'),
                                   run=Proc, seen=seen)
    assert rc == 2 and before <= seen[ocigpu_pull.CHECK_PLAY_LINE] <= time.time() and seen['PLAY RECAP'] is None
    assert open(str(tmp_path / 'pull.log')).read() == b''.join(out).decode()
    # validate.yml's first play is the one the pull watches for
    playbook = pathlib.Path(__file__).resolve().parents[3] / 'playbooks' / 'validate.yml'
    first = [line for line in playbook.read_text().splitlines() if line.startswith('- name: ')][0]
    assert ocigpu_pull.CHECK_PLAY_LINE == 'PLAY [%s]' % first[len('- name: '):]


def test_the_pull_records_the_processor_time_of_its_configure_run(tmp_path):
    # The run's children (ansible-playbook, its modules) busy for 0.3 s of processor time, then 0.4 s idle:
    # the record is the processor time, which nodes that share processors take from each other.
    def run(argv, log_file, seen):
        subprocess.check_call([sys.executable, '-c', 'import time\nt = time.process_time()\n'
                               'while time.process_time() - t < 0.3:\n    pass'])
        time.sleep(0.4)
        return 0
    node = baked_node(tmp_path, digests_of(tmp_path), configure_run=run)
    assert node.rc == 0
    assert 0.25 <= node.timings['configure_cpu'] < 0.6 <= node.timings['configure']
