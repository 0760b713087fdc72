# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""File Storage (FileStorageClient, API version 20171215): file systems, mount targets with their
export sets, and exports.

As OCI does: a mount target takes a private IP of its subnet (so the subnet cannot be deleted while
it lives) and comes with an export set of its own; an export joins a file system to a mount
target's export set under a path that is unique in that set; a file system with exports, and a
mount target whose export set has exports, cannot be deleted. Everything is ACTIVE at once and
DELETED when deleted (no work requests)."""

from __future__ import annotations

import ipaddress
import re

from .core import conflict, invalid
from .network import allocate_ip, release_ip
from .resources import (apply_tags_and_name, base, check_display_names, get_reply, in_compartment, list_reply, owned,
                        required)
from .web import Reply

VERSION = "/20171215"
EXPORT_PATH = re.compile(r"^/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$")
ACCESS = ("READ_WRITE", "READ_ONLY")
# The fields a list answers with (the SDK's *Summary models): fewer than a get.
FS_SUMMARY = ("availabilityDomain", "compartmentId", "definedTags", "displayName", "freeformTags", "id", "isHydrated",
              "kmsKeyId", "lifecycleDetails", "lifecycleState", "meteredBytes", "timeCreated")
MT_SUMMARY = ("availabilityDomain", "compartmentId", "definedTags", "displayName", "exportSetId", "freeformTags", "id",
              "lifecycleState", "nsgIds", "privateIpIds", "subnetId", "timeCreated")
EXPORT_SUMMARY = ("exportSetId", "fileSystemId", "id", "isIdmapGroupsForSysAuth", "lifecycleState", "path", "timeCreated")


def _summary(fields):
    return lambda res: dict((k, res[k]) for k in fields if k in res)


SQUASH = ("NONE", "ROOT", "ALL")
AUTH = ("SYS", "KRB5", "KRB5I", "KRB5P")
# What OCI gives an export created without client options (CreateExportDetails.exportOptions), for a
# mount target with an IPv4 address: everyone, read-write, root kept, any source port.
DEFAULT_EXPORT_OPTIONS = [{"source": "0.0.0.0/0", "requirePrivilegedSourcePort": False, "access": "READ_WRITE",
                           "identitySquash": "NONE", "anonymousUid": 65534, "anonymousGid": 65534,
                           "isAnonymousAccessAllowed": False, "allowedAuth": ["SYS"]}]


def _ad(ctx, body):
    required(body, "availabilityDomain")
    if body["availabilityDomain"] not in ctx.sim.availability_domains:
        raise invalid("Invalid availability domain: {0}".format(body["availabilityDomain"]))
    return body["availabilityDomain"]


def _alive(res):
    return res["lifecycleState"] not in ("DELETING", "DELETED")


# ---------------------------------------------------------------- file systems
def create_file_system(ctx):
    body = ctx.body
    check_display_names(body)
    ad = _ad(ctx, body)
    fs = base(ctx, body, "filesystem", "FileSystem-", {
        "availabilityDomain": ad, "lifecycleState": "ACTIVE", "meteredBytes": 0, "kmsKeyId": body.get("kmsKeyId") or "",
        "isHydrated": True, "isTargetable": True, "lifecycleDetails": None})
    ctx.store.file_systems[fs["id"]] = fs
    return get_reply(fs)


def get_file_system(ctx):
    return get_reply(owned(ctx, "file_systems", ctx.params["fileSystemId"], "file system"))


def list_file_systems(ctx):
    required(ctx.query, "availabilityDomain")
    return list_reply(ctx, in_compartment(ctx, "file_systems"), filters=[("availabilityDomain", "availabilityDomain")],
                      view=_summary(FS_SUMMARY))


def _updater(collection, param, what):
    """PUT of a file system or a mount target: its display name and tags."""
    def update(ctx):
        res = owned(ctx, collection, ctx.params[param], what)
        check_display_names(ctx.body)
        apply_tags_and_name(res, ctx.body)
        return get_reply(res)
    return update


update_file_system = _updater("file_systems", "fileSystemId", "file system")


def delete_file_system(ctx):
    fs = owned(ctx, "file_systems", ctx.params["fileSystemId"], "file system")
    if not _alive(fs):
        return Reply(204)
    exports = [e["id"] for e in ctx.store.exports.values() if e["fileSystemId"] == fs["id"] and _alive(e)]
    if exports:
        raise conflict("The file system {0} has export {1}; delete its exports first.".format(fs["id"], exports[0]))
    fs["lifecycleState"] = "DELETED"
    return Reply(204)


# ---------------------------------------------------------------- mount targets and export sets
def create_mount_target(ctx):
    body = ctx.body
    check_display_names(body)
    ad = _ad(ctx, body)
    required(body, "subnetId")
    subnet = owned(ctx, "subnets", body["subnetId"], "subnet")
    if subnet["lifecycleState"] != "AVAILABLE":
        raise invalid("The subnet {0} is {1}.".format(subnet["id"], subnet["lifecycleState"]))
    if subnet.get("availabilityDomain") not in (None, ad):
        raise invalid("The subnet {0} is in {1}, not in {2}.".format(subnet["id"], subnet["availabilityDomain"], ad))
    store = ctx.store
    address = allocate_ip(subnet, body.get("ipAddress"))
    mt = base(ctx, body, "mounttarget", "MountTarget-", {
        "availabilityDomain": ad, "subnetId": subnet["id"], "lifecycleState": "ACTIVE", "lifecycleDetails": "",
        "nsgIds": list(body.get("nsgIds") or []), "idmapType": body.get("idmapType") or "NONE"})
    pip = {"id": store.ocids.new("privateip"), "availabilityDomain": ad, "compartmentId": mt["compartmentId"],
           "displayName": address, "freeformTags": {}, "definedTags": {}, "hostnameLabel": body.get("hostnameLabel"),
           "ipAddress": address, "isPrimary": True, "vlanId": None, "subnetId": subnet["id"],
           "timeCreated": mt["timeCreated"], "vnicId": None, "_tenancy": ctx.tenancy, "ipState": "ASSIGNED",
           "lifetime": "EPHEMERAL", "_mount_target": mt["id"]}
    store.private_ips[pip["id"]] = pip
    export_set = {"id": store.ocids.new("exportset"), "availabilityDomain": ad, "compartmentId": mt["compartmentId"],
                  "displayName": "{0} - export set".format(mt["displayName"]), "lifecycleState": "ACTIVE",
                  "timeCreated": mt["timeCreated"], "vcnId": subnet["vcnId"], "maxFsStatBytes": None,
                  "maxFsStatFiles": None, "_tenancy": ctx.tenancy}
    store.export_sets[export_set["id"]] = export_set
    mt.update(privateIpIds=[pip["id"]], exportSetId=export_set["id"])
    store.mount_targets[mt["id"]] = mt
    return get_reply(mt)


def get_mount_target(ctx):
    return get_reply(owned(ctx, "mount_targets", ctx.params["mountTargetId"], "mount target"))


def list_mount_targets(ctx):
    required(ctx.query, "availabilityDomain")
    return list_reply(ctx, in_compartment(ctx, "mount_targets"),
                      filters=[("availabilityDomain", "availabilityDomain"), ("exportSetId", "exportSetId")],
                      view=_summary(MT_SUMMARY))


update_mount_target = _updater("mount_targets", "mountTargetId", "mount target")


def delete_mount_target(ctx):
    store = ctx.store
    mt = owned(ctx, "mount_targets", ctx.params["mountTargetId"], "mount target")
    if not _alive(mt):
        return Reply(204)
    exports = [e["id"] for e in store.exports.values() if e["exportSetId"] == mt["exportSetId"] and _alive(e)]
    if exports:
        raise conflict("The mount target {0} has export {1} in its export set; delete its exports first.".format(
            mt["id"], exports[0]))
    subnet = store.subnets.get(mt["subnetId"])
    for pip_id in mt["privateIpIds"]:
        pip = store.private_ips.pop(pip_id, None)
        if pip and subnet:
            release_ip(subnet, pip["ipAddress"])
    export_set = store.export_sets.get(mt["exportSetId"])
    if export_set:
        export_set["lifecycleState"] = "DELETED"
    mt["lifecycleState"] = "DELETED"
    return Reply(204)


def get_export_set(ctx):
    return get_reply(owned(ctx, "export_sets", ctx.params["exportSetId"], "export set"))


# ---------------------------------------------------------------- exports
def _options(options):
    """The client options as OCI keeps them: in the order given (OCI applies, to each NFS request, the
    first whose source holds the client's address), each field defaulted as ClientOptions says when
    it is left out (identitySquash ROOT, access READ_WRITE, a privileged source port, anonymous ids
    65534), and refused when OCI would refuse it."""
    if not isinstance(options, list):
        raise invalid("exportOptions must be a list of ClientOptions.")
    out = []
    for i, option in enumerate(options):
        if not isinstance(option, dict):
            raise invalid("exportOptions[{0}] is not a ClientOptions object.".format(i))
        source = option.get("source")
        if not source:
            raise invalid("exportOptions[{0}].source is required.".format(i))
        try:
            if not isinstance(source, str):
                raise TypeError(source)
            ipaddress.ip_network(source)
        except (TypeError, ValueError):
            raise invalid("exportOptions[{0}].source '{1}' must be a single IPv4/IPv6 address or CIDR block.".format(
                i, source))
        access = option.get("access") or "READ_WRITE"
        squash = option.get("identitySquash") or "ROOT"
        if access not in ACCESS or squash not in SQUASH:
            raise invalid("exportOptions[{0}]: access is one of {1}, identitySquash one of {2}.".format(
                i, ", ".join(ACCESS), ", ".join(SQUASH)))
        ids = {}
        for key in ("anonymousUid", "anonymousGid"):
            value = option.get(key, 65534)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 32:
                raise invalid("exportOptions[{0}].{1} must be an integer from 0 to 4294967295.".format(i, key))
            ids[key] = value
        auth = list(option.get("allowedAuth") or ["SYS"])
        if any(a not in AUTH for a in auth):
            raise invalid("exportOptions[{0}].allowedAuth: each is one of {1}.".format(i, ", ".join(AUTH)))
        privileged = option.get("requirePrivilegedSourcePort", True)
        out.append({"source": source, "access": access, "identitySquash": squash,
                    "requirePrivilegedSourcePort": True if privileged is None else bool(privileged),
                    "anonymousUid": ids["anonymousUid"], "anonymousGid": ids["anonymousGid"],
                    "isAnonymousAccessAllowed": bool(option.get("isAnonymousAccessAllowed", False)),
                    "allowedAuth": auth})
    return out


def client_options_for(export, address):
    """The client options OCI applies to a request from this address (the first whose source holds
    it), or None: the export is invisible to that client."""
    ip = ipaddress.ip_address(address)
    for option in export["exportOptions"]:
        if ip in ipaddress.ip_network(option["source"], strict=False):
            return option
    return None


def create_export(ctx):
    body = ctx.body
    required(body, "exportSetId", "fileSystemId", "path")
    store = ctx.store
    export_set = owned(ctx, "export_sets", body["exportSetId"], "export set")
    fs = owned(ctx, "file_systems", body["fileSystemId"], "file system")
    if not (_alive(export_set) and _alive(fs)):
        raise invalid("The export set and the file system must be ACTIVE.")
    if export_set["availabilityDomain"] != fs["availabilityDomain"]:
        raise invalid("The file system {0} is in {1}, the export set in {2}.".format(
            fs["id"], fs["availabilityDomain"], export_set["availabilityDomain"]))
    path = body["path"]
    elements = path.split("/")[1:]
    if not EXPORT_PATH.match(path) or len(path.encode()) > 1024 or any(e in (".", "..") or len(e.encode()) > 255 for e in elements):
        # OCI's rules ("Paths in File Systems"): '/' then elements, none empty, '.' or '..', no trailing
        # '/', at most 1024 bytes, elements of at most 255 bytes.
        raise invalid("Invalid export path '{0}': it starts with '/', has no empty or trailing element, no element "
                      "'.' or '..', at most 1024 bytes and elements of at most 255 bytes.".format(path))
    for other in store.exports.values():
        if other["exportSetId"] == export_set["id"] and _alive(other) and other["path"] == path:
            raise conflict("The path {0} is already exported in export set {1}.".format(path, export_set["id"]))
    options = body.get("exportOptions")
    export = {"id": store.ocids.new("export"), "exportSetId": export_set["id"], "fileSystemId": fs["id"],
              "path": path, "lifecycleState": "ACTIVE", "timeCreated": store.stamp(), "isIdmapGroupsForSysAuth": False,
              "exportOptions": _options(options) if options is not None else [dict(o) for o in DEFAULT_EXPORT_OPTIONS],
              "_tenancy": ctx.tenancy}
    store.exports[export["id"]] = export
    return get_reply(export)


def get_export(ctx):
    return get_reply(owned(ctx, "exports", ctx.params["exportId"], "export"))


def list_exports(ctx):
    query = ctx.query
    if not (query.get("compartmentId") or query.get("exportSetId") or query.get("fileSystemId")):
        raise invalid("One of compartmentId, exportSetId or fileSystemId is required.")
    items = [e for e in ctx.store.exports.values() if e["_tenancy"] == ctx.tenancy]
    for param, field in (("exportSetId", "exportSetId"), ("fileSystemId", "fileSystemId")):
        if query.get(param):
            items = [e for e in items if e[field] == query[param]]
    if query.get("compartmentId"):
        sets = set(s["id"] for s in ctx.store.export_sets.values() if s["compartmentId"] == query["compartmentId"])
        items = [e for e in items if e["exportSetId"] in sets]
    return list_reply(ctx, items, default_sort="TIMECREATED", view=_summary(EXPORT_SUMMARY))


def update_export(ctx):
    export = owned(ctx, "exports", ctx.params["exportId"], "export")
    if ctx.body.get("exportOptions") is not None:
        export["exportOptions"] = _options(ctx.body["exportOptions"])
    return get_reply(export)


def delete_export(ctx):
    export = owned(ctx, "exports", ctx.params["exportId"], "export")
    export["lifecycleState"] = "DELETED"
    return Reply(204)


def register(router):
    for method, template, handler in (
            ("POST", "/fileSystems", create_file_system),
            ("GET", "/fileSystems", list_file_systems),
            ("GET", "/fileSystems/{fileSystemId}", get_file_system),
            ("PUT", "/fileSystems/{fileSystemId}", update_file_system),
            ("DELETE", "/fileSystems/{fileSystemId}", delete_file_system),
            ("POST", "/mountTargets", create_mount_target),
            ("GET", "/mountTargets", list_mount_targets),
            ("GET", "/mountTargets/{mountTargetId}", get_mount_target),
            ("PUT", "/mountTargets/{mountTargetId}", update_mount_target),
            ("DELETE", "/mountTargets/{mountTargetId}", delete_mount_target),
            ("GET", "/exportSets/{exportSetId}", get_export_set),
            ("POST", "/exports", create_export),
            ("GET", "/exports", list_exports),
            ("GET", "/exports/{exportId}", get_export),
            ("PUT", "/exports/{exportId}", update_export),
            ("DELETE", "/exports/{exportId}", delete_export)):
        router.add(method, template, handler, version=VERSION)
