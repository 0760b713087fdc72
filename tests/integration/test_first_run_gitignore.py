# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""provision.yml against the simulator process: the first run writes a .gitignore beside the cluster's
lock file (where ansible-playbook runs) that keeps private keys and the NCCL reports out of git; a
.gitignore that is there is never changed, and the lines it lacks are printed instead."""
from __future__ import annotations

import os

import pytest

from tests.integration._helpers import COLLECTION_PLAYBOOKS, playbook, ssh_public_key

pytestmark = pytest.mark.slow

PROVISION = os.path.join(COLLECTION_PLAYBOOKS, 'provision.yml')
KEY = ssh_public_key()
LINES = ['*.mpi_ed25519', '*.mpi_ed25519.pub', '*.pem', 'nccl-reports']


def plan(**changes):
    return dict(dict(cluster_name='gi', ssh_source_cidrs=['203.0.113.0/24'], ssh_authorized_keys=[KEY],
                     gpu_node_count=1, gpu_drain=False), **changes)


def test_the_first_run_writes_a_gitignore_and_never_changes_one(simulator, tmp_path):
    run_dir = tmp_path
    assert not (run_dir / '.gitignore').exists()
    playbook(PROVISION, simulator, tmp_path, **plan())
    written = (run_dir / '.gitignore').read_text()
    assert [line for line in written.splitlines() if line and not line.startswith('#')] == LINES
    assert oct((run_dir / '.gitignore').stat().st_mode & 0o777) == '0o644'

    # A re-run, the lock file in a folder whose .gitignore lacks lines: that file is left as it is and the
    # lines it lacks are named; the first folder's file is not touched either.
    other = tmp_path / 'clusters' / 'gi'
    other.mkdir(parents=True)
    mine = '# my repository\n/nccl-reports/\n*.pem\n'
    (other / '.gitignore').write_text(mine)
    (run_dir / '.gitignore').write_text(written + 'my-own-line\n')
    out = playbook(PROVISION, simulator, tmp_path, **plan(ocigpu_lock_file=str(other / 'gi.lock.yml')))
    assert (other / '.gitignore').read_text() == mine
    assert (run_dir / '.gitignore').read_text() == written + 'my-own-line\n'
    assert '%s/.gitignore was left as it is. Add these lines to it' % other in out['stdout']
    assert '*.mpi_ed25519  *.mpi_ed25519.pub (commit cluster.yml' in out['stdout']
