# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""File Storage's export paths in the simulator, through the real SDK: refused as OCI's "Paths in File
Systems" says (no element '.' or '..', no empty or trailing element, at most 1024 bytes, elements of at
most 255 bytes), so a module that let one through fails here as it would on OCI."""

from __future__ import annotations

import oci
import pytest
from oci.core import models as core

fsm = oci.file_storage.models


@pytest.fixture
def export(ocisim):
    cfg = oci.config.from_file(ocisim.config_file, ocisim.profile)
    vn = oci.core.VirtualNetworkClient(cfg, service_endpoint=ocisim.endpoint)
    fss = oci.file_storage.FileStorageClient(cfg, service_endpoint=ocisim.endpoint)
    comp, ad = ocisim.compartment_id, list(ocisim.availability_domains)[0]
    vcn = vn.create_vcn(core.CreateVcnDetails(compartment_id=comp, cidr_blocks=["10.9.0.0/16"])).data
    subnet = vn.create_subnet(core.CreateSubnetDetails(compartment_id=comp, vcn_id=vcn.id, cidr_block="10.9.1.0/24")).data
    mt = fss.create_mount_target(fsm.CreateMountTargetDetails(compartment_id=comp, availability_domain=ad,
                                                              subnet_id=subnet.id)).data

    def make(path):
        fs = fss.create_file_system(fsm.CreateFileSystemDetails(compartment_id=comp, availability_domain=ad)).data
        return fss.create_export(fsm.CreateExportDetails(export_set_id=mt.export_set_id, file_system_id=fs.id,
                                                         path=path)).data
    return make


@pytest.mark.parametrize("path", ["/home/../root", "/home/./alice", "/..", "/home/", "/home//alice", "home",
                                  "/" + "a" * 256, "/" + "/".join(["a" * 200] * 6)])
def test_a_path_oci_refuses_is_refused(export, path):
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        export(path)
    assert refused.value.status == 400 and "Invalid export path" in refused.value.message


@pytest.mark.parametrize("path", ["/home", "/mnt/home", "/a.b/c..d/.e", "/" + "a" * 255])
def test_a_path_oci_takes_is_taken(export, path):
    assert export(path).path == path
