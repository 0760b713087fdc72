# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/slurm_autoscaler: the slurm_settings entry point run by ansible-playbook (the real shape_facts
filter), its result rendered into the slurm role's slurm.conf; the configuration JSON and the installed
program rendered from the role's templates, and the program run as Slurm would run it (a subprocess
importing only the package the role installs) against the simulator."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import oci
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci, _shapes
from ocigpu_control import scaler as _autoscale
from ocigpu_control import programs as _autoscale_cli
from ocigpu_control import service as _autoscale_service
from tests.unit.roles.test_slurm_templates import GPU_NODES, conf, render, trust

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / 'roles' / 'slurm_autoscaler'
REQUIRED = dict(slurm_autoscaler_cluster_name='as', slurm_autoscaler_compartment_id='ocid1.compartment.oc1..x',
                slurm_autoscaler_availability_domain='Abcd:AP-TOKYO-1-AD-1', slurm_autoscaler_subnet_id='ocid1.subnet.oc1..s',
                slurm_autoscaler_instance_configuration_id='ocid1.instanceconfiguration.oc1..i')


def role_templar(**overrides):
    loader = DataLoader()
    loader.set_basedir(str(ROLE / 'templates'))
    variables = trust(yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text()))
    variables.update(trust(yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())))
    variables.update(trust(dict(REQUIRED, **overrides)))
    # The one value that needs the collection's filter (run for real in the playbook test below).
    variables['__slurm_autoscaler_shape_facts'] = _shapes.get_shape(variables['slurm_autoscaler_shape'])
    variables.update(ansible_managed='managed', role_path=str(ROLE))
    return Templar(loader=loader, variables=variables)


def role_render(name, **overrides):
    program = overrides.pop('program', None)
    templar = role_templar(**overrides)
    if program is not None:
        templar.available_variables = dict(templar.available_variables, program=program)
    return templar.template(trust_as_template((ROLE / 'templates' / name).read_text()))


PLAY = """
- hosts: all
  gather_facts: false
  vars:
    slurm_config: {SlurmctldParameters: "enable_configless,reboot_from_controller", MaxJobCount: 5000}
    slurm_autoscaler_nodes: "gpu-[1-4]"
    slurm_autoscaler_shape: "%s"
  tasks:
    - name: Compute the settings
      ansible.builtin.include_role:
        name: ocigpu.cluster.slurm_autoscaler
        tasks_from: slurm_settings
    - name: Compute them again (a re-run must not add a second node line)
      ansible.builtin.include_role:
        name: ocigpu.cluster.slurm_autoscaler
        tasks_from: slurm_settings
    - name: Save them
      ansible.builtin.copy:
        content: "{{ {'keys': slurm_autoscaler_slurm_conf_keys, 'nodes': slurm_autoscaler_slurm_node_lines,
                     'gres': slurm_autoscaler_slurm_gres_lines} | to_json }}"
        dest: "%s"
        mode: "0644"
"""


@pytest.mark.parametrize('shape, node_line', [
    ('BM.GPU4.8', 'NodeName=gpu-[1-4] CPUs=128 RealMemory=1992294 Gres=gpu:a100:8 State=CLOUD'),
    ('BM.GPU.H100.8', 'NodeName=gpu-[1-4] CPUs=224 RealMemory=1992294 Gres=gpu:h100:8 State=CLOUD'),
])
def test_slurm_settings_entry_point_feeds_the_slurm_role(tmp_path, shape, node_line):
    out = tmp_path / 'settings.json'
    play = tmp_path / 'play.yml'
    play.write_text(PLAY % (shape, out))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'),
               ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_HOME=str(tmp_path / 'ansible'))
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', 'ansible_python_interpreter=%s' % sys.executable, str(play)],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    assert proc.returncode == 0, proc.stdout.decode()
    got = json.loads(out.read_text())
    assert got['nodes'] == [node_line]
    # configless: the controller's gres.conf names the CLOUD nodes' GPUs, once
    gpu_type = node_line.split('Gres=gpu:')[1].split(':')[0]
    assert got['gres'] == ['NodeName=gpu-[1-4] AutoDetect=off Name=gpu Type=%s File=/dev/nvidia[0-7]' % gpu_type]
    keys = got['keys']
    assert keys['SlurmctldParameters'] == 'enable_configless,reboot_from_controller,idle_on_node_suspend'
    assert keys['MaxJobCount'] == 5000 and keys['SuspendTime'] == 600 and keys['ResumeTimeout'] == 2400

    text = render('slurm.conf.j2', GPU_NODES, slurm_config=keys, slurm_extra_nodes=got['nodes'])
    c = conf(text)
    assert c['ResumeProgram'] == '/usr/local/sbin/ocigpu-slurm-resume'
    assert c['SuspendProgram'] == '/usr/local/sbin/ocigpu-slurm-suspend'
    assert c['ResumeFailProgram'] == '/usr/local/sbin/ocigpu-slurm-resume-fail'
    assert (c['SuspendTime'], c['ResumeTimeout'], c['SuspendTimeout'], c['TreeWidth']) == ('600', '2400', '600', '65533')
    assert c['PrivateData'] == 'cloud' and c['MaxJobCount'] == '5000'
    assert c['SlurmctldParameters'] == 'enable_configless,reboot_from_controller,idle_on_node_suspend'
    assert node_line in render('nodes.conf.j2', GPU_NODES, slurm_config=keys, slurm_extra_nodes=got['nodes']).splitlines()
    assert 'PartitionName=compute Nodes=ALL' in text


def test_overrides_and_omit():
    keys = role_templar(slurm_autoscaler_slurm_config={'TreeWidth': 'omit', 'SuspendExcParts': 'debug'},
                        slurm_autoscaler_node_options='CPUs=8 RealMemory=1000').template(
        trust_as_template('{{ __slurm_autoscaler_slurm_config | to_json }}||{{ __slurm_autoscaler_node_line }}'))
    conf_json, line = keys.split('||')
    conf_keys = json.loads(conf_json)
    assert 'TreeWidth' not in conf_keys and conf_keys['SuspendExcParts'] == 'debug'
    assert line == 'NodeName=gpu-[1-16] CPUs=8 RealMemory=1000 State=CLOUD'


def test_config_json_has_everything_the_program_needs():
    data = json.loads(role_render('autoscaler.json.j2', slurm_autoscaler_auth_type='api_key',
                                  slurm_autoscaler_config_file='/etc/ocigpu-autoscaler/oci_config',
                                  slurm_autoscaler_max_nodes_per_cluster_network=8))
    config = _autoscale.check_config(data)
    assert config['auth'] == dict(auth_type='api_key', config_file='/etc/ocigpu-autoscaler/oci_config',
                                  config_profile=None, region=None, service_endpoint=None)
    assert config['max_nodes_per_cluster_network'] == 8 and config['wait_timeout'] == 1800
    assert config['node_names'][0] == 'gpu-1' and len(config['node_names']) == 16
    assert config['state_file'] == '/var/lib/ocigpu-autoscaler/state.json'
    assert config['log_file'] == '/var/log/ocigpu-autoscaler/autoscaler.log'
    assert config['scontrol'] == '/usr/bin/scontrol' and config['node_setup_command'] == []
    default_auth = json.loads(role_render('autoscaler.json.j2'))['auth']
    assert default_auth['auth_type'] == 'instance_principal'


def test_installed_program_runs_from_the_installed_package(ocisim, tmp_path, monkeypatch):
    """Lay out what the role installs (the control plane's wheel, installed by pip without a virtual
    environment, the config and the program) and run the program."""
    lib = tmp_path / 'lib'
    built = json.loads(subprocess.run([sys.executable, str(ROOT / 'controller' / 'build_wheel.py'), '--out', str(tmp_path / 'dist')],
                                      stdout=subprocess.PIPE, check=True).stdout)
    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '--no-deps', '--no-index', '--target', str(lib), built['path']],
                   check=True)
    _vcn, subnet = ocisim.seed_network(ocisim.compartment_id, '10.0.0.0/16', subnet_prefix=24, name='as')
    seeded = ocisim.seed_cluster('as', 2, shape='BM.GPU4.8', freeform_tags={
        'ocigpu-cluster': 'as', 'ocigpu-slurm-nodes': 'gpu-[1-2]', 'ocigpu-autoscaler': 'true'})
    auth = ocisim.auth_args()
    config = json.loads(role_render(
        'autoscaler.json.j2', slurm_autoscaler_cluster_name='as', slurm_autoscaler_compartment_id=ocisim.compartment_id,
        slurm_autoscaler_subnet_id=subnet['id'], slurm_autoscaler_auth_type='api_key',
        slurm_autoscaler_config_file=auth['config_file'], slurm_autoscaler_region=auth['region'],
        slurm_autoscaler_service_endpoint=auth['service_endpoint'],
        slurm_autoscaler_state_dir=str(tmp_path / 'state'), slurm_autoscaler_log_dir=str(tmp_path / 'log')))
    config_path = tmp_path / 'autoscaler.json'
    config_path.write_text(json.dumps(config))
    program = tmp_path / 'ocigpu-slurm-autoscaler'
    program.write_text(role_render('program.j2', program={'name': 'ocigpu-slurm-autoscaler', 'action': ''},
                                   slurm_autoscaler_venv_enabled=False, slurm_autoscaler_python=sys.executable,
                                   slurm_autoscaler_install_dir=str(tmp_path),
                                   slurm_autoscaler_config_dir=str(tmp_path)))
    program.chmod(0o755)
    assert program.read_text().startswith('#!%s\n' % sys.executable)
    env = {'PATH': os.environ['PATH'], 'HOME': str(tmp_path)}  # no PYTHONPATH: only the installed package is importable
    proc = subprocess.run([str(program), 'status'], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    status = json.loads(proc.stdout)
    assert [(s['id'], s['nodes'], s['lifecycle_state']) for s in status] == [(seeded['id'], 'gpu-[1-2]', 'RUNNING')]
    assert 'status' in (tmp_path / 'log' / 'autoscaler.log').read_text()
    # The service (and its self-healing loop) imports from the package alone too, with Ansible
    # unimportable (the controller's venv has no ansible-core): `status` does not load it.
    proc = subprocess.run([sys.executable, '-c', 'import sys; sys.path.insert(0, sys.argv[1]); sys.modules["ansible"] = None; '
                           'from ocigpu_control import service, pull_server, heal, static', str(lib)],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert proc.returncode == 0, proc.stderr.decode()

    # The suspend program (the same template) terminates it; the waiter polls on the simulator clock,
    # so the subprocess is run in-process through the same entry point the template calls.
    monkeypatch.setattr(_oci.CLOCK, 'sleep', ocisim.clock.sleep)
    monkeypatch.setattr(_oci.CLOCK, 'monotonic', ocisim.clock.now)
    # The program hands the suspend over (with the service not running too), and the service carries it out.
    assert _autoscale_cli.main(['--config', str(config_path), 'suspend', 'gpu-[1-2]']) == 0
    svc = _autoscale_service.Service(_autoscale_cli.load_config(str(config_path)), _autoscale.Autoscaler, None)
    assert svc.pick_up() == 1
    svc.wait(60)
    assert svc.waiting() == []
    cm = ocisim.client(oci.core.ComputeManagementClient)
    assert cm.get_cluster_network(seeded['id']).data.lifecycle_state == 'TERMINATED'
    bad = subprocess.run([str(program), 'resume'], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert bad.returncode == 2 and b'usage:' in bad.stderr


def _node_vars_content(tmp_path, node_vars_text, extra):
    """node-vars.yml as the pull bundle task writes it, from a node variables file and
    slurm_autoscaler_pull_node_vars."""
    from tests.unit import _collection_loader
    _collection_loader.install()  # the lookup by its full name, ansible.builtin.file
    tasks = yaml.safe_load((ROLE / 'tasks' / 'pull.yml').read_text())
    task = next(t for t in tasks if t['name'] == "Write the bundle's settings and node variables on this machine")
    item = next(i for i in task['loop'] if i['name'] == 'node-vars.yml')
    path = tmp_path / 'node-vars-source.yml'
    path.write_text(node_vars_text)
    variables = trust(dict(slurm_autoscaler_pull_node_vars_file=str(path), slurm_autoscaler_pull_node_vars=extra))
    templar = Templar(loader=DataLoader(), variables=variables)
    templar.available_variables = dict(variables, **templar.template(trust(task['vars'])))
    return templar.template(trust_as_template(item['content']))


def test_node_vars_of_the_bundle_are_the_file_as_it_is_or_merged_with_the_extra_ones(tmp_path):
    text = '# the GPU nodes\nnccl_tests_gpus: 8\nsecret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3132\n'
    # Nothing added: the file's text, vault tags and comments included.
    assert _node_vars_content(tmp_path, text, {}) == text.rstrip('\n')  # the file lookup drops the last newline
    merged = yaml.safe_load(_node_vars_content(tmp_path, 'nccl_tests_gpus: 8\nshared_home_source: old:/x\n',
                                               {'shared_home_source': '10.0.1.7:/home'}))
    assert merged == {'nccl_tests_gpus': 8, 'shared_home_source': '10.0.1.7:/home'}
    assert yaml.safe_load(_node_vars_content(tmp_path, '', {'shared_home_source': '10.0.1.7:/home'})) == \
        {'shared_home_source': '10.0.1.7:/home'}


# -- vault-encrypted values and the nodes' variables (issue 45, review F10) ------------------------

_NODE_VARS_TASKS = ("Read the nodes' variables file as it is on disk",
                    "Refuse vault-encrypted values in the nodes' variables file",
                    "Write the bundle's settings and node variables on this machine")


def _vault(tmp_path, *args):
    """ansible-vault of the venv, with the password file tmp_path/vault-pass."""
    password = tmp_path / 'vault-pass'
    password.write_text('correct horse\n')
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-vault')] + list(args)
                          + ['--vault-password-file', str(password)],
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    return proc.stdout


def _bundle_node_vars(tmp_path, node_vars_text, node_vars=None, cluster_vars=None):
    """pull.yml's own node-variables tasks (as they stand in the role) in a play on this machine, with
    the vault password given: (the run, node-vars.yml as written or None)."""
    tasks = [t for t in yaml.safe_load((ROLE / 'tasks' / 'pull.yml').read_text()) if t.get('name') in _NODE_VARS_TASKS]
    stage = tmp_path / 'stage'
    stage.mkdir()
    source = tmp_path / 'node-vars-source.yml'
    source.write_text(node_vars_text)
    play = [dict(hosts='localhost', gather_facts=False, tasks=tasks, vars=dict(
        __slurm_autoscaler_pull_stage=str(stage), __slurm_autoscaler_pull_settings={},
        slurm_autoscaler_pull_node_vars_file=str(source), slurm_autoscaler_pull_node_vars=node_vars or {}))]
    (tmp_path / 'play.yml').write_text(yaml.safe_dump(play))
    argv = ['-i', 'localhost,', '-c', 'local', '-e', 'ansible_python_interpreter=%s' % sys.executable,
            '--vault-password-file', str(tmp_path / 'vault-pass')]
    if cluster_vars is not None:
        (tmp_path / 'cluster.yml').write_text(cluster_vars)
        argv += ['-e', '@' + str(tmp_path / 'cluster.yml')]
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_HOME=str(tmp_path / 'ansible'),
               ANSIBLE_NOCOLOR='1')
    env = {k: v for k, v in env.items() if k != 'ANSIBLE_VAULT_PASSWORD_FILE'}
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook')] + argv
                          + [str(tmp_path / 'play.yml')], cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    written = stage / 'node-vars.yml'
    return proc, (written.read_text() if written.exists() else None)


@pytest.mark.parametrize('node_vars', [{}, {'shared_home_source': '10.0.1.7:/home'}])
def test_a_vault_value_in_node_vars_file_is_refused_by_name(tmp_path, node_vars):
    """A real vault-encrypted value in node_vars_file: the run stops before the bundle is written, naming
    the key, whether or not configure.yml adds variables (before: with added variables, from_yaml
    failed on the !vault tag; without, the ciphertext was served to the VCN and no node could read it)."""
    vaulted = _vault(tmp_path, 'encrypt_string', 'nvapi-not-for-the-vcn', '--name', 'enroot_nvcr_api_key')
    assert vaulted.startswith('enroot_nvcr_api_key: !vault |')
    proc, written = _bundle_node_vars(tmp_path, 'nccl_tests_gpus: 8\n' + vaulted, node_vars)
    assert proc.returncode != 0, proc.stdout
    said = ' '.join(proc.stdout.split())
    assert 'holds vault-encrypted values: enroot_nvcr_api_key. The controller serves' in said, proc.stdout
    assert 'could not determine a constructor' not in proc.stdout
    assert written is None


def test_a_node_vars_file_encrypted_whole_is_refused(tmp_path):
    """The file lookup decrypts a file encrypted as a whole: it would have been served decrypted."""
    source = tmp_path / 'whole.yml'
    source.write_text('enroot_nvcr_api_key: nvapi-not-for-the-vcn\n')
    _vault(tmp_path, 'encrypt', str(source))
    proc, written = _bundle_node_vars(tmp_path, source.read_text())
    assert proc.returncode != 0 and written is None
    assert 'holds vault-encrypted values: the whole file' in ' '.join(proc.stdout.split()), proc.stdout


def test_a_vault_value_from_cluster_yml_reaches_the_nodes_in_plain_text(tmp_path):
    """cluster.yml's values that configure.yml hands to the joining nodes (shared_home_source) work
    vault-encrypted too: the node, which has no vault password, gets the value, not the ciphertext.
    A plain node_vars_file passes the check and is merged."""
    vaulted = _vault(tmp_path, 'encrypt_string', '10.0.1.7:/export/home', '--name', 'shared_home_source')
    proc, written = _bundle_node_vars(tmp_path, 'nccl_tests_gpus: 8\n# no secrets here\n',
                                      {'shared_home_source': '{{ shared_home_source }}', 'cluster_users': True},
                                      cluster_vars=vaulted)
    assert proc.returncode == 0, proc.stdout
    assert yaml.safe_load(written) == {'nccl_tests_gpus': 8, 'shared_home_source': '10.0.1.7:/export/home',
                                       'cluster_users': True}
    assert '$ANSIBLE_VAULT' not in written


# The pull bundle (files/build-pull-bundle.sh): served to the whole VCN, so an allow-list -----------

def _dirty_collection(tmp_path):
    """A copy of the collection's folder as an operator's runs leave a checkout: keys, settings,
    inventories, lock files and the fact cache beside the collection's own files."""
    coll = tmp_path / 'collections' / 'ansible_collections' / 'ocigpu' / 'cluster'
    coll.mkdir(parents=True)
    for part in ('plugins', 'roles', 'playbooks', 'meta'):
        shutil.copytree(str(ROOT / part), str(coll / part), ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    shutil.copy(str(ROOT / 'galaxy.yml'), str(coll / 'galaxy.yml'))
    planted = ['tokyo.mpi_ed25519', 'tokyo.mpi_ed25519.pub', 'cluster.yml', 'cluster.gpu_nodes.yml', 'tokyo.lock.yml',
               '.cache/facts/gpu-1', 'inventory/hosts.ini', 'docs/x.md', 'tests/unit/x.py', 'notes.txt']
    for name in planted:
        (coll / name).parent.mkdir(parents=True, exist_ok=True)
        (coll / name).write_text('secret\n')
    return coll


def _build_bundle(tmp_path, coll):
    for name, text in (('pull.json', '{}\n'), ('node-vars.yml', '{}\n'), ('lock.yml', 'artifacts: {}\n')):
        (tmp_path / name).write_text(text)
    out = tmp_path / 'bundle.tar.gz'
    run = subprocess.run(['bash', str(ROLE / 'files' / 'build-pull-bundle.sh'), str(out), str(tmp_path / 'pull.json'),
                          str(tmp_path / 'node-vars.yml'), str(tmp_path / 'lock.yml'), str(coll)],
                         capture_output=True, text=True, check=False)
    return run, out


def test_the_pull_bundle_carries_only_what_a_node_needs(tmp_path):
    """Before the fix the whole folder went in but for a short deny-list: the MPI key, cluster.yml, the
    inventory, the lock file and the fact cache were served to any host of the VCN."""
    import tarfile
    run, out = _build_bundle(tmp_path, _dirty_collection(tmp_path))
    assert run.returncode == 0, run.stderr
    with tarfile.open(str(out)) as tar:
        names = sorted(n[2:] if n.startswith('./') else n for n in tar.getnames())
    top = sorted(set(n.split('/')[0] for n in names if n and n != '.'))
    assert top == ['collections', 'node-vars.yml', 'ocigpu.lock.yml', 'pull.json']
    inside = sorted(set(n.split('/')[4] for n in names if n.count('/') >= 4))
    assert inside == ['galaxy.yml', 'meta', 'playbooks', 'plugins', 'roles']
    for secret in ('mpi_ed25519', 'cluster.yml', 'gpu_nodes.yml', 'tokyo.lock', '.cache', 'facts/gpu-1', 'hosts.ini'):
        assert not [n for n in names if secret in n], secret
    # what a node runs is there
    assert 'collections/ansible_collections/ocigpu/cluster/playbooks/configure.yml' in names


@pytest.mark.parametrize('planted', ['roles/common/files/id_ed25519', 'plugins/cluster.yml', 'roles/x.pem',
                                     'playbooks/old.lock.yml', 'roles/common/.cache/facts'])
def test_the_pull_bundle_is_not_built_with_a_secret_inside_a_collection_part(tmp_path, planted):
    coll = _dirty_collection(tmp_path)
    (coll / planted).parent.mkdir(parents=True, exist_ok=True)
    (coll / planted).write_text('secret\n')
    run, out = _build_bundle(tmp_path, coll)
    assert run.returncode != 0 and not out.exists()
    assert 'refusing to build' in run.stderr and planted.split('/')[2 if '.cache' in planted else -1] in run.stderr


def test_the_pull_server_runs_as_slurms_user_hardened_and_its_log_rotates():
    """Before the fix the unit had no User= (root) and ProtectSystem=full alone; pull-server.log never rotated."""
    unit = role_render('ocigpu-pull-server.service.j2')
    lines = set(line.strip() for line in unit.splitlines())
    assert {'User=slurm', 'Group=slurm', 'NoNewPrivileges=yes', 'CapabilityBoundingSet=', 'ProtectSystem=strict',
            'ReadWritePaths=/var/log/ocigpu-autoscaler -/var/lib/ocigpu-autoscaler/requests', 'ProtectHome=read-only',
            'PrivateTmp=yes', 'PrivateDevices=yes', 'ProtectKernelTunables=yes', 'ProtectKernelModules=yes',
            'ProtectControlGroups=yes', 'RestrictSUIDSGID=yes', 'LockPersonality=yes',
            'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX', 'TasksMax=320', 'MemoryMax=1G'} <= lines
    # the autoscaler's unit keeps in step (but for what its node setup command may need)
    service = set(line.strip() for line in role_render('ocigpu-autoscaler.service.j2').splitlines())
    assert {'User=slurm', 'NoNewPrivileges=yes', 'RestrictSUIDSGID=yes', 'ProtectKernelTunables=yes',
            'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX'} <= service
    rotate = role_render('logrotate.j2')
    assert '/var/log/ocigpu-autoscaler/pull-server.log' in rotate and 'copytruncate' in rotate
    assert 'su slurm slurm' in rotate
    # The server reads root's files that its group may read, in a folder only root writes; never munge's own key.
    templar = role_templar()
    pull = templar.template(trust_as_template('{{ __slurm_autoscaler_pull_config }}'))
    assert pull['munge_key'] == '/opt/ocigpu-autoscaler/pull/munge.key'
    folders = templar.template(trust_as_template('{{ __slurm_autoscaler_manages.pull_folders }}'))
    assert [(f['path'], f['owner'], f.get('group', f['owner']), f['mode']) for f in folders] == [
        ('/opt/ocigpu-autoscaler/pull', 'root', 'slurm', '0750'), ('/var/lib/ocigpu-autoscaler/requests', 'slurm', 'slurm', '0700')]
