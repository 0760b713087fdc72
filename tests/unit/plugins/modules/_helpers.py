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


def run_module(module, args, capsys, check=False):
    """Run a module's main() with these arguments; its JSON result."""
    # Imported here: the OCI module tests import this file without needing the module test kit.
    import json

    import pytest
    from ansible.module_utils.testing import patch_module_args

    args = dict(args)
    if check:
        args['_ansible_check_mode'] = True
    capsys.readouterr()
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)
