# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A call OCI refuses for want of a policy names the statement that is most likely missing (_oci.py's
service_error_message, used by every module through _module.py), and points at docs/iam.md."""
from __future__ import annotations

import pytest
from oci.exceptions import ServiceError

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci

REFUSED = 'Authorization failed or requested resource not found.'


def refused(operation, status=404, code='NotAuthorizedOrNotFound', service='core'):
    return ServiceError(status, code, {'opc-request-id': 'req1'}, REFUSED, operation_name=operation, target_service=service)


@pytest.mark.parametrize('operation, statements', [
    ('create_vcn', ['manage virtual-network-family']),
    ('list_vcns', ['manage virtual-network-family']),
    ('create_internet_gateway', ['manage virtual-network-family']),
    ('list_services', ['manage virtual-network-family']),
    ('list_vnic_attachments', ['manage virtual-network-family']),
    ('create_instance_configuration', ['manage compute-management-family']),
    ('list_cluster_network_instances', ['manage compute-management-family']),
    ('detach_instance_pool_instance', ['manage compute-management-family']),
    ('create_cluster_network', ['manage compute-management-family', 'manage instance-family',
                                'use virtual-network-family', 'use volume-family']),
    ('launch_instance', ['manage instance-family', 'use virtual-network-family', 'use volume-family']),
    ('terminate_instance', ['manage instance-family']),
    ('list_images', ['manage instance-family']),
    ('create_file_system', ['manage file-family']),
    ('create_mount_target', ['manage file-family']),
    ('create_export', ['manage file-family']),
    ('create_compute_capacity_report', []),
    ('list_availability_domains', []),
])
def test_each_operation_names_its_family(operation, statements):
    assert list(_oci.missing_statements(operation)) == statements


def test_a_refused_create_names_the_missing_statement():
    msg = _oci.service_error_message(refused('create_vcn'))
    assert msg.startswith('OCI API error: ' + REFUSED + ' (404 NotAuthorizedOrNotFound). create_vcn refused')
    assert ('"Allow group <your group> to manage virtual-network-family in compartment <the cluster\'s compartment>"'
            in msg)
    assert 'check the OCIDs and the region' in msg and 'docs/iam.md' in msg


def test_a_launch_names_each_statement_it_needs():
    msg = _oci.service_error_message(refused('launch_instance'))
    for family in ('manage instance-family', 'use virtual-network-family', 'use volume-family'):
        assert 'to %s in compartment' % family in msg
    assert 'statements most likely missing' in msg


def test_an_operation_without_a_known_family_still_points_at_the_page():
    msg = _oci.service_error_message(refused('create_compute_capacity_report'))
    assert 'a policy statement that allows create_compute_capacity_report (core)' in msg and 'docs/iam.md' in msg
    assert _oci.service_error_message(refused('get_thing', status=403, code='NotAllowed')).count('docs/iam.md') == 1


def test_401_is_about_authentication_not_a_policy():
    msg = _oci.service_error_message(refused('list_vcns', status=401, code='NotAuthenticated'))
    assert 'did not authenticate' in msg and 'fingerprint' in msg and 'Allow group' not in msg


@pytest.mark.parametrize('status, code', [(404, 'NotFound'), (409, 'Conflict'), (500, 'InternalError'), (400, 'InvalidParameter')])
def test_other_errors_keep_oci_s_words_alone(status, code):
    assert _oci.service_error_message(refused('create_vcn', status=status, code=code)) == 'OCI API error: ' + REFUSED
