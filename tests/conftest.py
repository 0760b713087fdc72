# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared pytest fixtures.

`ocisim`: a running OCI simulator (tests/ocisim) with fresh state for each test and a manual
clock.  While a test holds it, the SDK's waiters (oci.waiter) and retry back-off (oci.retry)
sleep on the simulator clock instead of real time: `oci.wait_until` and the composite
operations finish instantly as far as the wall clock is concerned, and every sleep they asked for
is recorded in `ocisim.sdk_sleeps`.  See docs/ocisim.md for the whole interface."""

from __future__ import annotations

import types

import pytest

from tests.ocisim import Simulator


@pytest.fixture(scope="session")
def _ocisim_server(tmp_path_factory):
    sim = Simulator(manual_clock=True)
    sim.start()
    sim.write_config(str(tmp_path_factory.mktemp("ocisim") / "config"))
    yield sim
    sim.stop()


def _sdk_time(sim):
    """A stand-in for the `time` module inside oci.waiter and oci.retry.retry."""
    def sleep(seconds):
        sim.sdk_sleeps.append(seconds)
        sim.clock.advance(seconds)
    return types.SimpleNamespace(time=sim.clock.now, sleep=sleep, monotonic=sim.clock.now)


@pytest.fixture
def ocisim(_ocisim_server, monkeypatch):
    """The simulator, reset for this test (same endpoint, config file and API key all session long)."""
    import oci  # pylint: disable=import-outside-toplevel

    sim = _ocisim_server
    sim.reset(drop_command_hook=True)
    sim.sdk_sleeps = []
    fake_time = _sdk_time(sim)
    monkeypatch.setattr(oci.waiter, "time", fake_time)
    monkeypatch.setattr(oci.retry.retry, "time", fake_time)
    yield sim
    sim.faults.clear()
