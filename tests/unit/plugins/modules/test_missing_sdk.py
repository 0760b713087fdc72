# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Without the oci SDK every OCI module fails with Ansible's missing-library message; without netaddr the network
module fails with the same kind of message."""
from __future__ import annotations

import json
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ansible_collections.ocigpu.cluster.plugins.modules import (
    cluster_info, cluster_network, compute_cluster, image_info, instance, instance_configuration, network)

ARGS = dict(cluster_name='c1', compartment_id='ocid1.compartment.oc1..x', display_name='x')


@pytest.mark.parametrize('module', [network, instance, instance_configuration, cluster_network, compute_cluster,
                                    image_info, cluster_info], ids=lambda m: m.__name__.rsplit('.', 1)[-1])
def test_missing_oci(module, monkeypatch, capsys):
    monkeypatch.setattr(_oci, 'HAS_OCI', False)
    monkeypatch.setattr(_oci, 'OCI_IMPORT_ERROR', 'Traceback: No module named oci')
    args = dict((k, v) for k, v in ARGS.items() if k in ('compartment_id',) or module not in (image_info,))
    if module in (network, compute_cluster, cluster_network, instance_configuration, cluster_info):
        args.pop('display_name')
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    result = json.loads(capsys.readouterr().out)
    assert result['failed'] and "Failed to import the required Python library (oci)" in result['msg']


def test_missing_netaddr(monkeypatch, capsys):
    """The network module checks CIDRs with netaddr; without it the message names the library and the Python."""
    from ansible_collections.ocigpu.cluster.plugins.module_utils import _network
    monkeypatch.setattr(_network, 'netaddr', None)
    with patch_module_args(dict(cluster_name='c1', compartment_id='ocid1.compartment.oc1..x', ssh_source_cidrs=['10.9.0.0/16'])):
        with pytest.raises(SystemExit):
            network.main()
    result = json.loads(capsys.readouterr().out)
    assert result['failed'] and "Failed to import the required Python library (netaddr)" in result['msg']
    assert sys.executable in result['msg']
