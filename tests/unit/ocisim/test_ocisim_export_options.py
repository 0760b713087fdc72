# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""File Storage's export options in the simulator, through the real SDK: kept in order and returned
as given, defaulted as OCI's ClientOptions and CreateExportDetails say when left out (identitySquash
ROOT for an option; everyone, root kept, any port for an export made without options), refused when
malformed, and applied first match first (client_options_for), as OCI applies them to NFS requests."""

from __future__ import annotations

import oci
import pytest
from oci.core import models as core

from tests.ocisim.filestorage import client_options_for

fsm = oci.file_storage.models


@pytest.fixture
def parts(ocisim):
    cfg = oci.config.from_file(ocisim.config_file, ocisim.profile)
    vn = oci.core.VirtualNetworkClient(cfg, service_endpoint=ocisim.endpoint)
    fss = oci.file_storage.FileStorageClient(cfg, service_endpoint=ocisim.endpoint)
    comp, ad = ocisim.compartment_id, list(ocisim.availability_domains)[0]
    vcn = vn.create_vcn(core.CreateVcnDetails(compartment_id=comp, cidr_blocks=["10.9.0.0/16"])).data
    subnet = vn.create_subnet(core.CreateSubnetDetails(compartment_id=comp, vcn_id=vcn.id,
                                                       cidr_block="10.9.1.0/24")).data
    fs = fss.create_file_system(fsm.CreateFileSystemDetails(compartment_id=comp, availability_domain=ad)).data
    mt = fss.create_mount_target(fsm.CreateMountTargetDetails(compartment_id=comp, availability_domain=ad,
                                                              subnet_id=subnet.id)).data

    def export(options, path="/home"):
        return fss.create_export(fsm.CreateExportDetails(export_set_id=mt.export_set_id, file_system_id=fs.id,
                                                         path=path, export_options=options)).data
    return fss, export


def test_options_are_kept_in_order_and_defaulted_as_oci_does(parts, ocisim):
    fss, export = parts
    made = export([fsm.ClientOptions(source="10.9.1.2/32", identity_squash="NONE"),
                   fsm.ClientOptions(source="10.9.0.0/16"),
                   fsm.ClientOptions(source="10.9.9.9", identity_squash="ALL", anonymous_uid=4000, anonymous_gid=4000,
                                     require_privileged_source_port=False, access="READ_ONLY")])
    got = fss.get_export(made.id).data.export_options
    assert [(o.source, o.identity_squash, o.anonymous_uid, o.anonymous_gid, o.require_privileged_source_port, o.access)
            for o in got] == [("10.9.1.2/32", "NONE", 65534, 65534, True, "READ_WRITE"),
                              ("10.9.0.0/16", "ROOT", 65534, 65534, True, "READ_WRITE"),
                              ("10.9.9.9", "ALL", 4000, 4000, False, "READ_ONLY")]
    stored = ocisim.state.get(made.id)
    # The first option that holds the client's address is the one applied.
    assert client_options_for(stored, "10.9.1.2")["identitySquash"] == "NONE"
    assert client_options_for(stored, "10.9.1.3")["identitySquash"] == "ROOT"
    assert client_options_for(stored, "10.9.9.9")["identitySquash"] == "ROOT"  # 10.9.0.0/16 comes first
    assert client_options_for(stored, "172.16.0.1") is None
    # An update replaces the list, in its order; an empty list hides the export from every client.
    fss.update_export(made.id, fsm.UpdateExportDetails(export_options=[fsm.ClientOptions(source="10.9.0.0/16")]))
    assert [o.identity_squash for o in fss.get_export(made.id).data.export_options] == ["ROOT"]
    fss.update_export(made.id, fsm.UpdateExportDetails(export_options=[]))
    assert fss.get_export(made.id).data.export_options == []
    assert client_options_for(ocisim.state.get(made.id), "10.9.1.2") is None


def test_an_export_made_without_options_is_open_to_every_client_with_root_kept(parts):
    fss, export = parts
    made = export(None)
    [option] = fss.get_export(made.id).data.export_options
    assert (option.source, option.identity_squash, option.require_privileged_source_port, option.access,
            option.allowed_auth) == ("0.0.0.0/0", "NONE", False, "READ_WRITE", ["SYS"])


@pytest.mark.parametrize("option, message", [
    (fsm.ClientOptions(source="the-vcn"), "source 'the-vcn' must be a single"),
    (fsm.ClientOptions(source="10.9.0.0/16", identity_squash="SOME"), "identitySquash one of NONE, ROOT, ALL"),
    (fsm.ClientOptions(source="10.9.0.0/16", anonymous_uid=-1), "anonymousUid must be an integer"),
    (fsm.ClientOptions(source="10.9.0.0/16", allowed_auth=["NONE"]), "allowedAuth"),
])
def test_malformed_options_are_refused(parts, option, message):
    fss, export = parts
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        export([option])
    assert refused.value.status == 400 and message in refused.value.message


# Export paths are refused as OCI's "Paths in File Systems" says (no element '.' or '..', no empty or
# trailing element, at most 1024 bytes, elements of at most 255 bytes), so a module that let one
# through fails here as it would on OCI.
@pytest.mark.parametrize("path", ["/home/../root", "/home/./alice", "/..", "/home/", "/home//alice", "home",
                                  "/" + "a" * 256, "/" + "/".join(["a" * 200] * 6)])
def test_a_path_oci_refuses_is_refused(parts, path):
    export = parts[1]
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        export(None, path)
    assert refused.value.status == 400 and "Invalid export path" in refused.value.message


@pytest.mark.parametrize("path", ["/home", "/mnt/home", "/a.b/c..d/.e", "/" + "a" * 255])
def test_a_path_oci_takes_is_taken(parts, path):
    export = parts[1]
    assert export(None, path).path == path
