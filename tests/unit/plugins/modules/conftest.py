# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the collection's modules in-process against the simulator.

`run(module, args, check=False, diff=False, fail=False)` calls module.main() with the simulator's
auth options added, returns the parsed result, and asserts that it failed or succeeded as told.
Retries and waiters sleep on the simulator clock (no wall-clock sleeps)."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils import _internal as ansible_internal
from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci


@pytest.fixture
def run(ocisim, monkeypatch, capsys):
    monkeypatch.setattr(_oci.CLOCK, 'sleep', ocisim.clock.sleep)
    monkeypatch.setattr(_oci.CLOCK, 'monotonic', ocisim.clock.now)
    # A module's warn() returns its warnings with the result only on the module side: once another
    # test has loaded controller code in this process (the inventory and filter tests do),
    # is_controller is True and the warnings go to the controller's display instead.
    monkeypatch.setattr(ansible_internal, 'is_controller', False)

    def _run(module, args, check=False, diff=False, fail=False):
        full = dict(ocisim.auth_args(), **args)
        if check:
            full['_ansible_check_mode'] = True
        if diff:
            full['_ansible_diff'] = True
        capsys.readouterr()
        ansible_warnings._global_warnings.clear()
        with patch_module_args(full):
            with pytest.raises(SystemExit):
                module.main()
        result = json.loads(capsys.readouterr().out)
        if fail:
            assert result.get('failed'), result
        else:
            assert not result.get('failed'), result
        return result
    return _run


@pytest.fixture
def ssh_key():
    raw = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode('ascii') + ' admin@example'


@pytest.fixture
def base(ocisim):
    """Arguments every resource module needs."""
    return dict(cluster_name='c1', compartment_id=ocisim.compartment_id)


@pytest.fixture
def ad(ocisim):
    return sorted(ocisim.availability_domains)[0]
