# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocisim: a stateful, signature-checking local OCI API for the collection's tests.

See docs/ocisim.md.  Typical use outside pytest:

    sim = Simulator(manual_clock=False).start()
    sim.write_config("/tmp/ocisim/config")
"""

from __future__ import annotations

from .core import DEFAULT_DURATIONS, Clock, OciError
from .sim import Simulator

__all__ = ["Simulator", "Clock", "OciError", "DEFAULT_DURATIONS"]
