# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The package_lists action answers on the controller only when the play knows every package is installed.

Run through ansible-playbook on this machine (connection local), since the action plugin is Ansible's
controller code: a local answer must carry the action's reason, anything else the module's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integration._helpers import ROOT, VENV_BIN

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Ask about the packages
      ocigpu.cluster.package_lists:
        packages: {packages}
      register: answer
      vars: {extra}

    - name: Print the answer
      ansible.builtin.debug:
        msg: "ANSWER {{{{ answer | to_json }}}}"
"""


def answer(tmp_path, packages, extra):
    play = tmp_path / 'play.yml'
    play.write_text(PLAY.format(packages=json.dumps(packages), extra=json.dumps(extra)))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, '.build', 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_STDOUT_CALLBACK='default')
    out = subprocess.run([os.path.join(VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', str(play)],
                         env=env, capture_output=True, text=True, check=True, cwd=str(tmp_path)).stdout
    line = next(line for line in out.splitlines() if '"msg": "ANSWER ' in line)
    return json.loads(json.loads('{' + line.strip() + '}')['msg'][len('ANSWER '):])


def test_known_packages_are_answered_without_the_host(tmp_path):
    result = answer(tmp_path, ['bash', 'coreutils'], {'ocigpu_installed_packages': ['bash', 'coreutils', 'dash']})
    assert result['missing'] == [] and result['refreshed'] is False
    assert result['reason'] == 'every package is installed (ocigpu_installed_packages, read this run)'


def test_an_unknown_or_pinned_package_or_no_list_runs_the_module(tmp_path):
    """The module's own answers: it looks at this machine's dpkg (bash is installed here, as on any Debian)."""
    for packages, extra in ((['bash'], {'ocigpu_installed_packages': ['coreutils']}),
                            (['bash'], {}),
                            (['bash'], {'ocigpu_installed_packages': None})):
        result = answer(tmp_path, packages, extra)
        assert 'ocigpu_installed_packages' not in result['reason'], (packages, extra, result)
    assert answer(tmp_path, ['bash'], {})['missing'] == []


def test_only_plain_names_all_in_the_list_count_as_known():
    from ansible_collections.ocigpu.cluster.plugins.action.package_lists import all_known
    assert all_known(['munge', 'slurmd'], ['munge', 'slurmd', 'bash'])
    assert not all_known(['munge', 'slurmd'], ['munge'])
    assert not all_known(['slurmd=23.11.4-1'], ['slurmd'])
    assert not all_known([], ['munge'])
    assert not all_known(['munge'], None)
    assert not all_known('munge', ['munge'])
