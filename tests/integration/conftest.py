# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`simulator`: the OCI simulator as its own process (real time, durations scaled by 0.01) for one test;
its info line (endpoint, config_file, profile, region, compartment_id, ...)."""
from __future__ import annotations

import pytest

from tests.integration._helpers import start_simulator


@pytest.fixture
def simulator(tmp_path):
    proc, info = start_simulator(tmp_path)
    try:
        yield info
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# The longest tests first (by a full `make test` run beside the demos: about 400, 220 and 160 s; the
# chain of killed provision runs takes about 1.25 times the one killed while its cluster network
# provisions, which took about 140 s), the rest in their own order: with `--dist load
# --maxschedchunk 1` (make test) the two workers take one test at a time, so none is left alone with a
# long test at the end.
LONGEST_FIRST = (
    'test_provision_plan.py::test_resize_grows_shrinks_by_chosen_nodes_and_replaces_a_node',
    'test_provision_kill.py::test_provision_killed_at_each_point_in_turn',
    'test_provision_kill.py::test_resize_killed_up_and_down_then_re_run_leaves_exactly_the_cluster',
    'test_teardown_autoscaled.py::',
    'test_provision_kill.py::test_provision_killed_while_the_cluster_network_provisions',
)


def _rank(item):
    # The file's name and the test's (a parameter may hold a '/': 'POST /subnets').
    name = item.path.name + item.nodeid[item.nodeid.index('::'):]
    for rank, prefix in enumerate(LONGEST_FIRST):
        if name.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(items):
    items.sort(key=_rank)  # stable: the order within a rank stays
