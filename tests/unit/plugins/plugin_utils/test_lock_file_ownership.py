# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""artifact_lock never writes over a file it did not write (cluster.yml, a README), and says in words
why it cannot write the lock file (a missing or unwritable folder)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

import pytest

from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _artifacts as art

A = 'a' * 64
CLUSTER_YML = """\
# My cluster
cluster_name: tokyo
compartment_id: ocid1.compartment.oc1..aaaaaaaaexample
gpu_node_count: 16
ssh_source_cidrs: [203.0.113.0/24]
"""
README = """\
Our GPU cluster
===============

Run ansible-playbook ocigpu.cluster.site -e @cluster.yml from this folder.
"""


ROOT = pathlib.Path(__file__).resolve().parents[4]
PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ocigpu.cluster.artifact_lock:
        artifacts:
          - {name: x/1.0/x.tgz, url: "https://example.invalid/x.tgz", known: "%s"}
"""


def items():
    return art.normalize([dict(name='x/1.0/x.tgz', url='https://example.invalid/x.tgz', known=A)])


@pytest.mark.parametrize('name, text, why', [
    ('cluster.yml', CLUSTER_YML, 'it holds other keys than artifacts: cluster_name, compartment_id, gpu_node_count'),
    ('README.md', README, 'it is not'),
    ('notes.yml', '- a list\n- of things\n', 'it is not a YAML mapping'),
    ('other.yml', 'artifacts: {}\nmine: true\n', 'it holds other keys than artifacts: artifacts, mine'),
])
def test_a_file_it_did_not_write_is_left_as_it_is(tmp_path, name, text, why):
    path = tmp_path / name
    path.write_text(text)
    before = os.stat(path)
    with pytest.raises(art.ArtifactError) as caught:
        art.lock_artifacts(str(path), items(), fetch=None, download=None)
    message = str(caught.value)
    assert message.startswith('refusing to write the lock file over %s: it is not a lock file written by ocigpu.cluster'
                              % path), message
    assert why in message and 'a path of its own' in message
    assert path.read_text() == text and os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert sorted(os.listdir(tmp_path)) == [name]  # no temporary file left either
    # Check mode refuses it the same way (the real run would).
    with pytest.raises(art.ArtifactError, match='refusing to write the lock file over'):
        art.lock_artifacts(str(path), items(), write=False)


def test_its_own_lock_files_are_taken(tmp_path):
    # Written by the collection (the header's first line)...
    path = tmp_path / 'tokyo.lock.yml'
    art.lock_artifacts(str(path), items())
    assert path.read_text().startswith(art.MARKER)
    more = art.normalize([dict(name='y/1/y.tgz', url='https://example.invalid/y.tgz', known=A)])
    assert art.lock_artifacts(str(path), more)[2] == ['y/1/y.tgz']
    # ...its header removed by hand (the artifacts mapping alone), or empty (made with touch).
    bare = tmp_path / 'bare.lock.yml'
    bare.write_text('artifacts:\n  x/1.0/x.tgz: {sha256: %s, source: table}\n' % A)
    assert art.lock_artifacts(str(bare), items())[1] == {'x/1.0/x.tgz': 'lock'}
    empty = tmp_path / 'empty.lock.yml'
    empty.write_text('')
    assert art.lock_artifacts(str(empty), items())[2] == ['x/1.0/x.tgz']
    assert empty.read_text().startswith(art.MARKER)


def test_a_missing_folder_is_said_in_words(tmp_path):
    path = tmp_path / 'no-such-folder' / 'tokyo.lock.yml'
    with pytest.raises(art.ArtifactError) as caught:
        art.lock_artifacts(str(path), items())
    assert str(caught.value) == 'cannot write the lock file %s: folder %s does not exist' % (path, path.parent)


def test_an_unwritable_folder_is_said_in_words(tmp_path, monkeypatch):
    # The tests may run as root, whom a folder's mode does not stop: the refusal is made as the kernel
    # would make it for another user.
    folder = tmp_path / 'read-only'
    folder.mkdir()
    path = folder / 'tokyo.lock.yml'
    real_access = os.access
    monkeypatch.setattr(os, 'access', lambda p, mode: False if str(p) == str(folder) else real_access(p, mode))
    with pytest.raises(art.ArtifactError) as caught:
        art.lock_artifacts(str(path), items(), fetch=None, download=None)
    assert str(caught.value) == 'cannot write the lock file %s: folder %s is not writable by this user' % (path, folder)
    # Check mode writes nothing, so it needs no write access.
    assert art.lock_artifacts(str(path), items(), write=False)[0] == {'x/1.0/x.tgz': A}


def test_a_write_that_fails_anyway_is_said_in_words(tmp_path, monkeypatch):
    path = tmp_path / 'tokyo.lock.yml'

    def refuse(**_kwargs):
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(tempfile, 'mkstemp', refuse)
    with pytest.raises(art.ArtifactError) as caught:
        art.lock_artifacts(str(path), items())
    assert str(caught.value) == ('cannot write the lock file %s: folder %s is not writable by this user (Permission denied)'
                                 % (path, tmp_path))


def test_the_task_aimed_at_the_cluster_vars_leaves_them_as_they_are(tmp_path):
    """As a user would: ocigpu_lock_file set to cluster.yml (the file passed with -e @cluster.yml)."""
    (tmp_path / 'cluster.yml').write_text(CLUSTER_YML)
    (tmp_path / 'play.yml').write_text(PLAY % A)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='False',
               ANSIBLE_HOME=str(tmp_path / 'ansible'), ANSIBLE_NOCOLOR='1')
    proc = subprocess.run([str(pathlib.Path(sys.executable).parent / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local',
                           '-e', 'ansible_python_interpreter=%s' % sys.executable, '-e', '@cluster.yml',
                           '-e', 'ocigpu_lock_file=cluster.yml', 'play.yml'],
                          cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    assert proc.returncode == 2, proc.stdout
    assert 'refusing to write the lock file over %s' % (tmp_path / 'cluster.yml') in proc.stdout, proc.stdout
    assert (tmp_path / 'cluster.yml').read_text() == CLUSTER_YML
