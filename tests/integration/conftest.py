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
