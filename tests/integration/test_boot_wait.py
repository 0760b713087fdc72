# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/boot_wait.yml: configure.yml (and so site.yml) waits for every host to answer and for
cloud-init to finish, and names every host that did not in one message (issue 28).

The inventory holds one host that answers (this machine, connection local, no cloud-init here) and
two that never do (addresses of 198.18.0.0/15 where no host is), with a timeout of a few seconds."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from tests.integration._helpers import COLLECTION_PLAYBOOKS, ROOT, VENV_BIN

INVENTORY = """\
[bastion]
ctl ansible_connection=local ansible_python_interpreter={python}

[gpu_nodes]
gpu-a ansible_host=198.18.255.201 ansible_user=nobody
gpu-b ansible_host=198.18.255.202 ansible_user=nobody
"""


def run_wait(tmp_path, inventory, *args, path=None, playbook='boot_wait.yml', extra_env=None):
    """Run boot_wait.yml (or another playbook, by its absolute path) with the inventory and a 3 s timeout."""
    (tmp_path / 'hosts.ini').write_text(inventory.format(python=sys.executable))
    env = dict(os.environ, PATH=path or os.environ['PATH'], **(extra_env or {}),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_RETRY_FILES_ENABLED='0', ANSIBLE_HOST_KEY_CHECKING='0', ANSIBLE_LOCALHOST_WARNING='0',
               # Nothing answers at those addresses: fail each SSH attempt fast.
               ANSIBLE_SSH_ARGS='-o ConnectTimeout=2 -o BatchMode=yes')
    cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), '-i', str(tmp_path / 'hosts.ini'),
           os.path.join(COLLECTION_PLAYBOOKS, playbook), '-e', 'boot_wait_timeout=3'] + list(args)
    # cwd outside the checkout: the repository's ansible.cfg (fact cache, callbacks) stays out of it.
    out = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120, check=False)
    print(out.stdout[-6000:], out.stderr[-2000:])
    return out


def named_not_ready(stdout):
    """The hosts part of the one message that names the hosts that are not ready."""
    return stdout.split('(boot_wait_timeout):', 1)[1].split('\n', 1)[0]


def test_the_timeout_names_every_host_that_did_not_answer_in_one_message(tmp_path):
    out = run_wait(tmp_path, INVENTORY)
    assert out.returncode != 0
    failures = [line for line in out.stdout.splitlines() if line.startswith(('fatal:', 'failed:'))]
    assert len(failures) == 1, 'one failure, not one per host: %s' % failures
    message = out.stdout[out.stdout.index(failures[0]):]
    assert re.search(r'2 of 3 hosts are not ready after 3 s', message), message
    named = named_not_ready(message)
    assert 'gpu-a: did not answer SSH' in named and 'gpu-b: did not answer SSH' in named and 'ctl:' not in named, named
    assert 'boot_wait_timeout' in message


def test_hosts_that_answer_pass_and_cloud_init_absent_counts_as_ready(tmp_path):
    out = run_wait(tmp_path, INVENTORY, '--limit', 'ctl')
    assert out.returncode == 0, out.stdout[-3000:]
    assert 'cloud-init is not installed' in out.stdout
    assert re.search(r'ctl\s+:\s+ok=\d+\s+changed=0\s+unreachable=0\s+failed=0', out.stdout)


def task_results(stdout, task):
    """{host: status} of one task's lines in the default callback's output."""
    part = stdout.split('TASK [%s]' % task, 1)[1].split('\nTASK [', 1)[0]
    return dict((m.group(2), m.group(1)) for m in re.finditer(r'^(ok|skipping|fatal|changed): \[([^\]]+)\]', part, re.M))


def test_a_host_reached_before_is_asked_once_and_one_that_no_longer_answers_still_waits(tmp_path):
    """A host whose facts are cached (a re-run) gets cloud-init's wait at once, with no
    wait_for_connection (a new SSH connection); a cached host that does not answer falls back to the
    wait and is named like the others."""
    cache = dict(ANSIBLE_CACHE_PLUGIN='jsonfile', ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / 'facts'), ANSIBLE_GATHERING='smart')
    gather = tmp_path / 'gather.yml'
    gather.write_text('- hosts: ctl\n  gather_facts: false\n  tasks:\n    - ansible.builtin.setup:\n        gather_subset: [min]\n')
    assert run_wait(tmp_path, INVENTORY, playbook=str(gather), extra_env=cache).returncode == 0
    # gpu-a was "reached before" too: the same cached facts under its name.
    # (ansible-core names the cache file <format prefix><host>: s1_ctl.)
    ctl_file = [f for f in (tmp_path / 'facts').iterdir() if f.name.endswith('ctl')]
    assert len(ctl_file) == 1, list((tmp_path / 'facts').iterdir())
    (tmp_path / 'facts' / (ctl_file[0].name[:-len('ctl')] + 'gpu-a')).write_text(ctl_file[0].read_text())
    out = run_wait(tmp_path, INVENTORY, extra_env=cache)
    assert task_results(out.stdout, 'Wait until cloud-init has finished on the hosts that answer') == {
        'ctl': 'ok', 'gpu-a': 'fatal', 'gpu-b': 'skipping'}, out.stdout
    assert task_results(out.stdout, 'Wait until the host answers SSH') == {
        'ctl': 'skipping', 'gpu-a': 'ok', 'gpu-b': 'ok'}, out.stdout
    assert out.returncode != 0
    named = named_not_ready(out.stdout)
    assert 'gpu-a: did not answer SSH' in named and 'gpu-b: did not answer SSH' in named and 'ctl:' not in named, named


def fake_cloud_init(tmp_path, script):
    """A PATH whose cloud-init runs the script (the local host's commands see this PATH)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'cloud-init').write_text('#!/bin/sh\n' + script + '\n')
    (bin_dir / 'cloud-init').chmod(0o755)
    return '%s:%s' % (bin_dir, os.environ['PATH'])


def test_cloud_init_still_running_is_named(tmp_path):
    out = run_wait(tmp_path, INVENTORY, '--limit', 'ctl', path=fake_cloud_init(tmp_path, 'sleep 30'))
    assert out.returncode != 0
    assert '1 of 1 hosts are not ready after 3 s (boot_wait_timeout): ctl: cloud-init still running' in out.stdout


def test_cloud_init_that_ended_in_error_is_reported_not_fatal(tmp_path):
    out = run_wait(tmp_path, INVENTORY, '--limit', 'ctl', path=fake_cloud_init(tmp_path, 'echo "status: error"; exit 1'))
    assert out.returncode == 0, out.stdout[-3000:]
    assert 'cloud-init finished with errors' in out.stdout


def test_the_wait_is_skipped_with_its_tag(tmp_path):
    out = run_wait(tmp_path, INVENTORY, '--skip-tags', 'boot_wait')
    assert out.returncode == 0, out.stdout[-3000:]
    assert 'gpu-a' not in out.stdout.split('PLAY RECAP')[0]


def test_configure_waits_for_the_hosts_before_it_reads_them():
    with open(os.path.join(COLLECTION_PLAYBOOKS, 'configure.yml'), encoding='utf-8') as f:
        plays = yaml.safe_load(f)
    names = [p.get('ansible.builtin.import_playbook') or p.get('hosts') for p in plays]
    assert names.index('boot_wait.yml') < names.index('bastion:gpu_nodes'), names
