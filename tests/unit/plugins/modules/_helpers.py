# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the module tests."""
from __future__ import annotations

import base64

MUTATING = ('POST *', 'PUT *', 'DELETE *')


def mutations(sim):
    return sum(sim.calls.count(p) for p in MUTATING)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def live(sim, kind):
    """Stored resources of a kind that are not dead (default VCN children left out)."""
    return [r for r in getattr(sim.state, kind).values()
            if r.get('lifecycleState') not in ('TERMINATED', 'TERMINATING', 'DELETED') and not r.get('_default')]
