# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster settings' schema (playbooks/vars/cluster_schema.yml) and its check (ocigpu.cluster.cluster_settings):
an unknown or misspelt key, a wrong type or choice is refused before anything runs; role options, ansible_*
variables and what the collection itself passes as extra vars are accepted; the schema agrees with
cluster_defaults.yml, with the defaults the playbooks write in `| default(...)`, and with docs/quickstart.md."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest
import yaml

from ansible_collections.ocigpu.cluster.plugins.action import cluster_settings as action

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETTINGS, COLLECTION_VARS = action.load_schema()
ROLES = action.role_options()
PLAYBOOKS = ['site', 'provision', 'configure', 'validate', 'teardown', 'cluster_user', 'boot_wait']


def problems(**extra_vars):
    return action.check(extra_vars, SETTINGS, COLLECTION_VARS, ROLES)


GOOD = dict(cluster_name='tokyo-a100', compartment_id='ocid1.compartment.oc1..aaaa', ssh_source_cidrs=['203.0.113.10/32'],
            ssh_public_key_file='~/.ssh/id_ed25519.pub', gpu_shape='BM.GPU4.8', gpu_node_count=2)


def test_good_settings_pass():
    assert problems(**GOOD) == []


def test_an_unknown_key_is_refused():
    assert problems(**dict(GOOD, colour='blue')) == ['colour: unknown key']


def test_a_misspelt_key_is_refused_with_the_nearest_known_key():
    assert problems(**dict(GOOD, gpu_node_cont=16)) == ['gpu_node_cont: unknown key; did you mean gpu_node_count?']
    assert problems(autoscalling=True) == ['autoscalling: unknown key; did you mean autoscaling?']
    # A role option is known too.
    assert problems(slurm_partiton_name='gpu') == ['slurm_partiton_name: unknown key; did you mean slurm_partition_name?']


@pytest.mark.parametrize('name', ['config_file', 'config_profile', 'auth_type', 'region', 'service_endpoint'])
def test_the_modules_option_names_are_refused_with_the_cluster_settings_name(name):
    found = problems(**{name: 'x'})
    assert len(found) == 1 and found[0].startswith('%s: unknown key; did you mean oci_%s?' % (name, name)), found


def test_the_auth_keys_readme_shows_are_accepted():
    assert problems(oci_config_profile='TOKYO', oci_auth_type='instance_principal',
                    oci_service_endpoint='https://iaas.ap-tokyo-1.oraclecloud.com') == []


@pytest.mark.parametrize('name, value, text', [
    ('gpu_node_count', 'many', "gpu_node_count: 'many' is not a int"),
    ('gpu_drain', 'maybe', "gpu_drain: 'maybe' is not a bool"),
    ('ssh_source_cidrs', {'a': 1}, 'ssh_source_cidrs: '),
    ('boot_wait_timeout', 'soon', "boot_wait_timeout: 'soon' is not a int"),
])
def test_a_wrong_type_is_refused(name, value, text):
    found = problems(**{name: value})
    assert len(found) == 1 and found[0].startswith(text), found


@pytest.mark.parametrize('name, value', [
    ('oci_auth_type', 'instance_principle'), ('gpu_cluster_mode', 'rdma'), ('shared_home', 'nfs'),
    ('gpu_placement_constraint', 'SINGLE_RACK'),
])
def test_a_value_not_among_the_choices_is_refused(name, value):
    found = problems(**{name: value})
    assert found == ['%s: %r is not one of %s' % (name, value, ', '.join(repr(c) for c in SETTINGS[name]['choices']))]


def test_values_given_as_text_on_the_command_line_are_converted():
    # -e gpu_node_count=2 -e gpu_drain=false -e configure_skip_unchanged=false: strings.
    assert problems(gpu_node_count='2', gpu_drain='false', configure_skip_unchanged='false', bastion_ocpus='1.5') == []


def test_role_options_ansible_variables_and_own_variables_are_accepted():
    assert problems(slurm_partition_name='gpu', firewall_mode='disabled', nccl_tests_multi_node_enabled='false',
                    cluster_user_name='alice', ansible_python_interpreter='/usr/bin/python3',
                    ansible_ssh_common_args='-o ProxyJump=x') == []
    # What AWX and Automation Controller add to a job's extra vars.
    assert problems(awx_job_id=12, awx_user_name='admin', tower_job_id=12, tower_job_launch_type='manual') == []
    assert problems(my_home='/home/me', ocigpu_own_vars=['my_home']) == []
    assert problems(my_home='/home/me', ocigpu_own_vars='my_home') == []  # a string is a list of one
    assert problems(my_home='/home/me', my_dir='x', ocigpu_own_vars='my_dir, my_home') == []
    assert problems(my='/home/me', ocigpu_own_vars='my_home') == ['my: unknown key']  # a name, not a part of one


def test_a_template_or_a_vaulted_value_is_left_to_its_use():
    assert problems(gpu_node_count='{{ n }}', ssh_source_cidrs=['{{ my_ip }}/32'], ocigpu_own_vars=['n', 'my_ip'],
                    n=2, my_ip='203.0.113.10') == []


def test_every_problem_is_listed_one_line_each():
    found = problems(gpu_node_cont=2, gpu_cluster_mode='rdma', auth_type='instance_principal')
    assert [p.split(':')[0] for p in found] == ['auth_type', 'gpu_cluster_mode', 'gpu_node_cont']
    assert all('\n' not in p for p in found)


def test_what_the_collection_passes_as_extra_vars_is_accepted():
    """The on-demand nodes' configure run (roles/slurm_autoscaler/files/ocigpu_pull.py): the join answer,
    the local vars, and the node vars the controller adds; the demos' and the tests' extra vars."""
    program = ROOT / 'roles' / 'slurm_autoscaler' / 'files' / 'ocigpu_pull.py'
    spec = importlib.util.spec_from_file_location('ocigpu_pull_settings', str(program))
    pull = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pull)
    for keys in (dict(munge_key_b64='eA==', conf_server='10.0.0.2:6817', mpi_keys={'root': {}}), dict(munge_key_b64='', conf_server='')):
        assert problems(**pull.join_vars(keys, 'gpu-1')) == []
    assert "local_vars['ocigpu_imds_url']" in program.read_text()
    joined = dict(ocigpu_lock_file='/x/ocigpu.lock.yml',
                  ocigpu_artifacts_strict=False, ocigpu_imds_url='http://198.18.0.1/opc/v2',
                  shared_home_source='10.0.1.5:/home', cluster_users=True, ocigpu_vcn_cidr='10.0.0.0/16',
                  firewall_admin_cidrs=['203.0.113.0/24'], nccl_tests_fail_on_gate='true')
    assert problems(**joined) == []
    demo = dict(ocigpu_use_imds=False, slurm_proctrack_type='proctrack/linuxproc', node_health_interval=5,
                containerd_rootless_versions={'runc': '1'}, validate_hosts='gpu_nodes', validate_node_facts='false',
                slurm_autoscaler_heal_static='true', autoscaling_heal=True, slurm_conf_server='198.18.121.10:6817')
    assert problems(**demo) == []


def test_every_extra_var_the_docs_and_scripts_pass_is_known():
    """`-e name=...` in the docs, the demos and the tests, and in the programs of the roles (the pull and the bake
    on a node, whose extra vars configure.yml checks too), names a known key."""
    sources = [ROOT / 'README.md', *(ROOT / 'docs').rglob('*.md'), *(ROOT / 'tests').rglob('*.sh'),
               *(ROOT / 'tests').rglob('*.py'), *(ROOT / 'playbooks').glob('*.yml'), *(ROOT / 'roles').rglob('*.py')]
    unknown = set()
    for path in sources:
        if path.name == pathlib.Path(__file__).name or 'test_docs_snippets' in path.name:
            continue
        for name in re.findall(r"-e[ ',\"]+\"?'?([a-z][a-z0-9_]*)=", path.read_text(encoding='utf-8', errors='replace')):
            if problems(**{name: None}):
                unknown.add('%s (%s)' % (name, path.relative_to(ROOT)))
    assert not unknown, sorted(unknown)


def test_the_defaults_agree_with_cluster_defaults():
    defaults = yaml.safe_load((ROOT / 'playbooks' / 'vars' / 'cluster_defaults.yml').read_text())
    undeclared = sorted(set(defaults) - set(SETTINGS))
    assert not undeclared, 'keys of cluster_defaults.yml missing from cluster_schema.yml: %s' % undeclared
    differ = sorted('%s: %r != %r' % (k, v, SETTINGS[k].get('default')) for k, v in defaults.items()
                    if v != SETTINGS[k].get('default') or 'default' not in SETTINGS[k])
    assert not differ, differ


def test_the_defaults_agree_with_the_playbooks_default_filters():
    """A key that a playbook reads as `key | default(X)` has X as its default in the schema."""
    specs = dict(COLLECTION_VARS, **SETTINGS)
    differ = []
    for path in [*(ROOT / 'playbooks').glob('*.yml'), *(ROOT / 'playbooks' / 'tasks').glob('*.yml')]:
        for name, given in re.findall(r"\b([a-z][a-z0-9_]*)(?: \| (?:bool|int|string))? \| default\(([^(),]*)\)",
                                      path.read_text()):
            if name not in specs or 'default' not in specs[name]:
                continue
            value = yaml.safe_load(given)
            if value != specs[name].get('default'):
                differ.append('%s: %s has default(%s), the schema %r' % (path.name, name, given, specs[name].get('default')))
    assert not differ, differ


def test_the_schema_is_well_formed():
    for name, spec in {**SETTINGS, **COLLECTION_VARS}.items():
        assert set(spec) <= {'type', 'elements', 'choices', 'default', 'description'}, name
        assert spec.get('description'), '%s has no description' % name
        assert spec['type'] in ('str', 'int', 'float', 'bool', 'list', 'dict'), name
        assert (spec['type'] == 'list') == ('elements' in spec), name
        if 'default' in spec:
            assert action.check_value(name, spec['default'], spec) is None, name
            if 'choices' in spec:
                assert spec['default'] in spec['choices'], name
    assert not set(SETTINGS) & set(COLLECTION_VARS)
    assert not set(SETTINGS) & ROLES, 'a cluster setting named like a role option'


@pytest.mark.parametrize('playbook', PLAYBOOKS)
def test_every_playbook_checks_the_settings_first(playbook):
    """The first task of the first play (site.yml: of the first playbook it imports)."""
    plays = yaml.safe_load((ROOT / 'playbooks' / ('%s.yml' % playbook)).read_text())
    while 'ansible.builtin.import_playbook' in plays[0]:
        plays = yaml.safe_load((ROOT / 'playbooks' / plays[0]['ansible.builtin.import_playbook']).read_text())
    first = plays[0]
    assert first['hosts'] == 'localhost', playbook
    task = first['tasks'][0]
    assert 'ocigpu.cluster.cluster_settings' in task, playbook
    assert task.get('tags') == ['always'] or first.get('tags') in ('always', ['always']), playbook


def _table_rows():
    text = (ROOT / 'docs' / 'quickstart.md').read_text()
    section = text.split('Every key, with its default', 1)[1].split('\n\n', 2)[1]
    rows = []
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        rows.append((re.findall(r'`([a-z_]+)`', cells[0]), cells[1]))
    return rows


def _rendered(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if value == '':
        return '""'
    if value == []:
        return '[]'
    return str(value)


def test_the_quickstart_table_lists_exactly_the_settings_with_their_defaults():
    rows = _table_rows()
    listed = [k for keys, _cell in rows for k in keys]
    assert sorted(set(listed)) == sorted(listed), 'listed twice: %s' % sorted(k for k in listed if listed.count(k) > 1)
    assert sorted(listed) == sorted(SETTINGS), ('missing: %s; not settings: %s' % (
        sorted(set(SETTINGS) - set(listed)), sorted(set(listed) - set(SETTINGS))))
    wrong = []
    for keys, cell in rows:
        shown = re.findall(r'`([^`]*)`', cell)
        defaults = [SETTINGS[k] for k in keys]
        if all('default' in d for d in defaults):
            expected = [_rendered(d['default']) for d in defaults]
            # One value for several keys when they share it.
            if shown != expected and not (len(set(expected)) == 1 and shown == expected[:1]):
                wrong.append('%s: table %s, schema %s' % (keys, shown, expected))
        elif any('default' in d for d in defaults):
            wrong.append('%s: some with a default, some without: one row each' % keys)
        else:
            assert cell and cell != 'required' or keys[0] in ('cluster_name', 'compartment_id', 'ssh_source_cidrs'), keys
    assert not wrong, wrong


def test_capacity_sources_are_checked_source_by_source():
    """gpu_capacity_sources is a list of dicts; each source is checked as the playbooks read it
    (plugin_utils/_capacity_sources.normalize_sources): a misspelt key inside a source is refused with the nearest."""
    reservation = 'ocid1.capacityreservation.oc1.ap-tokyo-1.aaaar1'
    good = [dict(name='r1', capacity_reservation_id=reservation),
            dict(availability_domain='Uocm:AP-TOKYO-1-AD-2', fault_domains=['FAULT-DOMAIN-1'])]
    assert problems(**dict(GOOD, gpu_capacity_sources=good, gpu_capacity_cooldown_minutes=5)) == []
    assert problems(gpu_capacity_sources=[]) == []
    assert problems(gpu_capacity_sources=[dict(capacity_reservaton_id=reservation)]) == [
        'gpu_capacity_sources[1]: unknown key(s) capacity_reservaton_id; a source takes name, availability_domain, '
        'capacity_reservation_id, fault_domains; did you mean capacity_reservation_id?']
    found = problems(gpu_capacity_sources=[good[0], dict(availability_domian='Uocm:AP-TOKYO-1-AD-1')])
    assert len(found) == 1 and found[0].startswith('gpu_capacity_sources[2]: unknown key(s) availability_domian')
    assert found[0].endswith('did you mean availability_domain?')
    assert problems(gpu_capacity_sources=[dict(capacity_reservation_id='ocid1.instance.oc1..x')]) == [
        "gpu_capacity_sources[1]: capacity_reservation_id 'ocid1.instance.oc1..x' is not a capacity reservation OCID "
        "(ocid1.capacityreservation...)"]
    assert problems(gpu_capacity_sources=[dict(name='R 1', availability_domain='Uocm:AP-TOKYO-1-AD-1')])[0].startswith(
        "gpu_capacity_sources[1]: name 'R 1'")
    assert problems(gpu_capacity_sources=['ad-1'])[0].startswith('gpu_capacity_sources: ')
    assert problems(gpu_capacity_cooldown_minutes='soon') == ["gpu_capacity_cooldown_minutes: 'soon' is not a int"]
    # A template is checked where it is used.
    assert problems(gpu_capacity_sources=[dict(availability_domian='{{ ad }}')]) == []
