# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Core networking (VirtualNetworkClient): VCNs, subnets, gateways, services, route tables,
security lists, DHCP options, VNICs and private IPs."""

from __future__ import annotations

import ipaddress

from .core import conflict, invalid, not_found, rfc3339
from .resources import apply_tags_and_name, base, get_reply, in_compartment, list_reply, owned, required
from .web import Reply

ALIVE = ("PROVISIONING", "AVAILABLE", "UPDATING")
GATEWAYS = ("internet_gateways", "nat_gateways", "service_gateways")


def _alive(res):
    return res.get("lifecycleState") in ALIVE


def _settle(ctx, res):
    """New network resources are PROVISIONING for durations['network'] seconds, then AVAILABLE."""
    delay = ctx.sim.durations["network"]
    if delay <= 0:
        res["lifecycleState"] = "AVAILABLE"
        return
    res["lifecycleState"] = "PROVISIONING"

    def done():
        if res["lifecycleState"] == "PROVISIONING":
            res["lifecycleState"] = "AVAILABLE"
    ctx.store.schedule(delay, done)


def _terminate(ctx, res):
    delay = ctx.sim.durations["network"]
    res["lifecycleState"] = "TERMINATING" if delay > 0 else "TERMINATED"
    if delay > 0:
        def done():
            res["lifecycleState"] = "TERMINATED"
        ctx.store.schedule(delay, done)


def _network(cidr):
    try:
        return ipaddress.ip_network(cidr, strict=True)
    except ValueError:
        raise invalid("Invalid CIDR block: {0}".format(cidr)) from None


def _vcn_of(ctx, body):
    required(body, "vcnId")
    vcn = owned(ctx, "vcns", body["vcnId"], "vcn")
    if not _alive(vcn):
        raise conflict("The VCN {0} is not available.".format(vcn["id"]), "IncorrectState")
    return vcn


# ---------------------------------------------------------------- VCNs
def create_vcn(ctx):
    body = ctx.body
    blocks = body.get("cidrBlocks") or ([body["cidrBlock"]] if body.get("cidrBlock") else [])
    if not blocks:
        raise invalid("Either cidrBlock or cidrBlocks must be given.")
    for block in blocks:
        net = _network(block)
        if not 16 <= net.prefixlen <= 30:
            raise invalid("VCN CIDR block prefix must be between /16 and /30: {0}".format(block))
    dns = body.get("dnsLabel")
    vcn = base(ctx, body, "vcn", "vcn", {
        "cidrBlock": blocks[0], "cidrBlocks": list(blocks), "dnsLabel": dns,
        "vcnDomainName": "{0}.oraclevcn.com".format(dns) if dns else None,
        "ipv6CidrBlocks": None, "byoipv6CidrBlocks": None, "ipv6PrivateCidrBlocks": None,
    })
    store = ctx.store
    store.vcns[vcn["id"]] = vcn
    common = {"compartmentId": vcn["compartmentId"], "vcnId": vcn["id"], "_tenancy": ctx.tenancy,
              "timeCreated": vcn["timeCreated"], "freeformTags": {}, "definedTags": {}, "lifecycleState": "AVAILABLE"}
    rt = dict(common, id=store.ocids.new("routetable"), displayName="Default Route Table for " + vcn["displayName"],
              routeRules=[], _default=True)
    sl = dict(common, id=store.ocids.new("securitylist"),
              displayName="Default Security List for " + vcn["displayName"], _default=True,
              egressSecurityRules=[{"destination": "0.0.0.0/0", "destinationType": "CIDR_BLOCK", "protocol": "all",
                                    "isStateless": False, "description": None, "icmpOptions": None,
                                    "tcpOptions": None, "udpOptions": None}],
              ingressSecurityRules=[{"source": "0.0.0.0/0", "sourceType": "CIDR_BLOCK", "protocol": "6",
                                     "isStateless": False, "description": None, "icmpOptions": None,
                                     "tcpOptions": {"destinationPortRange": {"min": 22, "max": 22},
                                                    "sourcePortRange": None}, "udpOptions": None}])
    dh = dict(common, id=store.ocids.new("dhcpoptions"), displayName="Default DHCP Options for " + vcn["displayName"],
              options=[{"type": "DomainNameServer", "serverType": "VcnLocalPlusInternet", "customDnsServers": []},
                       {"type": "SearchDomain", "searchDomainNames": [vcn["vcnDomainName"] or "oraclevcn.com"]}],
              domainNameType="CUSTOM_DOMAIN", _default=True)
    store.route_tables[rt["id"]] = rt
    store.security_lists[sl["id"]] = sl
    store.dhcp_options[dh["id"]] = dh
    vcn.update(defaultRouteTableId=rt["id"], defaultSecurityListId=sl["id"], defaultDhcpOptionsId=dh["id"])
    _settle(ctx, vcn)
    return get_reply(vcn)


def get_vcn(ctx):
    return get_reply(owned(ctx, "vcns", ctx.params["vcnId"], "vcn"))


def list_vcns(ctx):
    return list_reply(ctx, in_compartment(ctx, "vcns"))


def update_vcn(ctx):
    vcn = owned(ctx, "vcns", ctx.params["vcnId"], "vcn")
    apply_tags_and_name(vcn, ctx.body)
    return get_reply(vcn)


def delete_vcn(ctx):
    store = ctx.store
    vcn = owned(ctx, "vcns", ctx.params["vcnId"], "vcn")
    if vcn["lifecycleState"] in ("TERMINATING", "TERMINATED"):
        return Reply(204)
    users = [s["id"] for s in store.subnets.values() if s["vcnId"] == vcn["id"] and _alive(s)]
    for coll in GATEWAYS:
        users += [g["id"] for g in getattr(store, coll).values() if g["vcnId"] == vcn["id"] and _alive(g)]
    for coll in ("route_tables", "security_lists", "dhcp_options"):
        users += [r["id"] for r in getattr(store, coll).values()
                  if r["vcnId"] == vcn["id"] and _alive(r) and not r.get("_default")]
    if users:
        raise conflict("The VCN {0} cannot be deleted because it still contains resources: {1}".format(
            vcn["id"], ", ".join(sorted(users))))
    for coll in ("route_tables", "security_lists", "dhcp_options"):
        for res in getattr(store, coll).values():
            if res["vcnId"] == vcn["id"] and res.get("_default"):
                res["lifecycleState"] = "TERMINATED"
    _terminate(ctx, vcn)
    return Reply(204)


# ---------------------------------------------------------------- subnets
def create_subnet(ctx):
    body = ctx.body
    required(body, "cidrBlock", "compartmentId")
    vcn = _vcn_of(ctx, body)
    net = _network(body["cidrBlock"])
    if not any(net.subnet_of(ipaddress.ip_network(b)) for b in vcn["cidrBlocks"]):
        raise invalid("The subnet CIDR {0} is not within the VCN CIDR blocks.".format(body["cidrBlock"]))
    if net.prefixlen > 30:
        raise invalid("Subnet CIDR block prefix must be /30 or larger.")
    for other in ctx.store.subnets.values():
        if other["vcnId"] == vcn["id"] and _alive(other) and net.overlaps(ipaddress.ip_network(other["cidrBlock"])):
            raise invalid("The requested CIDR {0} overlaps with the CIDR {1} of subnet {2}.".format(
                body["cidrBlock"], other["cidrBlock"], other["id"]))
    rt_id = body.get("routeTableId") or vcn["defaultRouteTableId"]
    owned(ctx, "route_tables", rt_id, "route table")
    sl_ids = body.get("securityListIds") or [vcn["defaultSecurityListId"]]
    for sl_id in sl_ids:
        owned(ctx, "security_lists", sl_id, "security list")
    dns = body.get("dnsLabel")
    subnet = base(ctx, body, "subnet", "subnet", {
        "vcnId": vcn["id"], "cidrBlock": str(net), "availabilityDomain": body.get("availabilityDomain"),
        "routeTableId": rt_id, "securityListIds": list(sl_ids),
        "dhcpOptionsId": body.get("dhcpOptionsId") or vcn["defaultDhcpOptionsId"],
        "dnsLabel": dns,
        "subnetDomainName": "{0}.{1}".format(dns, vcn["vcnDomainName"]) if dns and vcn["vcnDomainName"] else None,
        "prohibitPublicIpOnVnic": bool(body.get("prohibitPublicIpOnVnic", False)),
        "prohibitInternetIngress": bool(body.get("prohibitInternetIngress", body.get("prohibitPublicIpOnVnic", False))),
        "virtualRouterIp": str(net.network_address + 1),
        "virtualRouterMac": "00:00:17:{0:02X}:{1:02X}:{2:02X}".format(*net.network_address.packed[1:]),
        "ipv6CidrBlock": None, "ipv6CidrBlocks": None, "ipv6VirtualRouterIp": None,
        "_next_host": 2, "_free": [],
    })
    ctx.store.subnets[subnet["id"]] = subnet
    _settle(ctx, subnet)
    return get_reply(subnet)


def allocate_ip(subnet, wanted=None):
    """Next free private IP of a subnet (skipping network, router and broadcast addresses)."""
    net = ipaddress.ip_network(subnet["cidrBlock"])
    if wanted:
        addr = ipaddress.ip_address(wanted)
        if addr not in net:
            raise invalid("The private IP {0} is not in the subnet CIDR {1}.".format(wanted, net))
        if addr in subnet.setdefault("_taken", set()):
            raise conflict("The private IP {0} is already in use.".format(wanted))
        subnet["_taken"].add(addr)
        return str(addr)
    taken = subnet.setdefault("_taken", set())
    while True:
        if subnet["_free"]:
            addr = subnet["_free"].pop(0)
        else:
            if subnet["_next_host"] >= net.num_addresses - 1:
                raise invalid("Subnet {0} has no free private IP addresses.".format(subnet["id"]))
            addr = net.network_address + subnet["_next_host"]
            subnet["_next_host"] += 1
        if addr not in taken:
            taken.add(addr)
            return str(addr)


def release_ip(subnet, address):
    addr = ipaddress.ip_address(address)
    taken = subnet.setdefault("_taken", set())
    if addr in taken:
        taken.discard(addr)
        subnet["_free"].append(addr)


def get_subnet(ctx):
    return get_reply(owned(ctx, "subnets", ctx.params["subnetId"], "subnet"))


def list_subnets(ctx):
    return list_reply(ctx, in_compartment(ctx, "subnets"), filters=[("vcnId", "vcnId")])


def update_subnet(ctx):
    subnet = owned(ctx, "subnets", ctx.params["subnetId"], "subnet")
    body = ctx.body
    apply_tags_and_name(subnet, body)
    if body.get("routeTableId"):
        owned(ctx, "route_tables", body["routeTableId"], "route table")
        subnet["routeTableId"] = body["routeTableId"]
    if body.get("securityListIds") is not None:
        for sl_id in body["securityListIds"]:
            owned(ctx, "security_lists", sl_id, "security list")
        subnet["securityListIds"] = list(body["securityListIds"])
    return get_reply(subnet)


def delete_subnet(ctx):
    store = ctx.store
    subnet = owned(ctx, "subnets", ctx.params["subnetId"], "subnet")
    if subnet["lifecycleState"] in ("TERMINATING", "TERMINATED"):
        return Reply(204)
    vnics = [v["id"] for v in store.vnics.values()
             if v["subnetId"] == subnet["id"] and v["lifecycleState"] in ("PROVISIONING", "AVAILABLE")]
    if vnics:
        raise conflict("The Subnet {0} references the VNIC {1}. You must remove the reference to proceed "
                       "with this operation.".format(subnet["id"], vnics[0]))
    # A mount target (File Storage) holds a private IP of its subnet.
    held = [p["_mount_target"] for p in store.private_ips.values() if p["subnetId"] == subnet["id"] and p.get("_mount_target")]
    if held:
        raise conflict("The Subnet {0} references the mount target {1}. You must remove the reference to proceed "
                       "with this operation.".format(subnet["id"], held[0]))
    _terminate(ctx, subnet)
    return Reply(204)


# ---------------------------------------------------------------- gateways
def _referenced_by_route(store, entity_id):
    for rt in store.route_tables.values():
        if _alive(rt) and any(rule.get("networkEntityId") == entity_id for rule in rt["routeRules"]):
            return rt["id"]
    return None


def _gateway_handlers(collection, kind, path_param, extra_fields):
    def create(ctx):
        body = ctx.body
        vcn = _vcn_of(ctx, body)
        fields = {"vcnId": vcn["id"], "routeTableId": body.get("routeTableId")}
        fields.update(extra_fields(ctx, body))
        res = base(ctx, body, kind, kind, fields)
        if collection != "service_gateways":
            for other in getattr(ctx.store, collection).values():
                if other["vcnId"] == vcn["id"] and _alive(other):
                    raise invalid("The VCN {0} already has a {1}.".format(vcn["id"], kind))
        getattr(ctx.store, collection)[res["id"]] = res
        _settle(ctx, res)
        return get_reply(res)

    def get(ctx):
        return get_reply(owned(ctx, collection, ctx.params[path_param], kind))

    def list_(ctx):
        return list_reply(ctx, in_compartment(ctx, collection), filters=[("vcnId", "vcnId")])

    def update(ctx):
        res = owned(ctx, collection, ctx.params[path_param], kind)
        body = ctx.body
        apply_tags_and_name(res, body)
        for name in ("isEnabled", "blockTraffic", "routeTableId"):
            if body.get(name) is not None and name in res:
                res[name] = body[name]
        if collection == "service_gateways" and body.get("services") is not None:
            res["services"] = _services(ctx, body)
        return get_reply(res)

    def delete(ctx):
        res = owned(ctx, collection, ctx.params[path_param], kind)
        if res["lifecycleState"] in ("TERMINATING", "TERMINATED"):
            return Reply(204)
        user = _referenced_by_route(ctx.store, res["id"])
        if user:
            raise conflict("The {0} {1} is referenced by route table {2}. You must remove the reference to "
                           "proceed with this operation.".format(kind, res["id"], user))
        _terminate(ctx, res)
        return Reply(204)

    return create, get, list_, update, delete


def _services(ctx, body):
    out = []
    for item in body.get("services") or []:
        service = ctx.sim.services_by_id.get(item.get("serviceId"))
        if service is None:
            raise not_found("service")
        out.append({"serviceId": service["id"], "serviceName": service["name"]})
    return out


def _igw_fields(_ctx, body):
    return {"isEnabled": body.get("isEnabled", True)}


def _nat_fields(ctx, body):
    host = int(ctx.store.ocids.unique()[8:12].encode().hex(), 16) % 250 + 2
    return {"blockTraffic": bool(body.get("blockTraffic", False)), "natIp": "198.51.100.{0}".format(host),
            "publicIpId": ctx.store.ocids.new("publicip")}


def _sgw_fields(ctx, body):
    return {"blockTraffic": False, "services": _services(ctx, body)}


# ---------------------------------------------------------------- services
def list_services(ctx):
    return list_reply(ctx, list(ctx.sim.services_by_id.values()), default_sort="NAME")


def get_service(ctx):
    service = ctx.sim.services_by_id.get(ctx.params["serviceId"])
    if service is None:
        raise not_found("service")
    return get_reply(service)


# ---------------------------------------------------------------- route tables, security lists, DHCP
def _check_route_rules(ctx, rules):
    out = []
    for rule in rules or []:
        target = rule.get("networkEntityId")
        if not target:
            raise invalid("routeRules[].networkEntityId is required.")
        found = None
        for coll in GATEWAYS + ("private_ips",):
            found = found or getattr(ctx.store, coll).get(target)
        if found is None or found.get("_tenancy") != ctx.tenancy:
            raise invalid("The route target {0} does not exist.".format(target))
        destination = rule.get("destination") or rule.get("cidrBlock")
        if not destination:
            raise invalid("routeRules[].destination is required.")
        out.append({"destination": destination, "destinationType": rule.get("destinationType") or "CIDR_BLOCK",
                    "networkEntityId": target, "description": rule.get("description"),
                    "routeType": rule.get("routeType") or "STATIC", "cidrBlock": rule.get("cidrBlock")})
    return out


def create_route_table(ctx):
    body = ctx.body
    vcn = _vcn_of(ctx, body)
    rt = base(ctx, body, "routetable", "routetable", {"vcnId": vcn["id"],
                                                      "routeRules": _check_route_rules(ctx, body.get("routeRules"))})
    ctx.store.route_tables[rt["id"]] = rt
    _settle(ctx, rt)
    return get_reply(rt)


def update_route_table(ctx):
    rt = owned(ctx, "route_tables", ctx.params["rtId"], "route table")
    apply_tags_and_name(rt, ctx.body)
    if ctx.body.get("routeRules") is not None:
        rt["routeRules"] = _check_route_rules(ctx, ctx.body["routeRules"])
    return get_reply(rt)


def _security_rules(rules, direction):
    key, key_type = ("source", "sourceType") if direction == "ingress" else ("destination", "destinationType")
    out = []
    for rule in rules or []:
        if not rule.get(key) or not rule.get("protocol"):
            raise invalid("{0}SecurityRules[] need {1} and protocol.".format(direction, key))
        out.append({key: rule[key], key_type: rule.get(key_type) or "CIDR_BLOCK", "protocol": str(rule["protocol"]),
                    "isStateless": bool(rule.get("isStateless", False)), "description": rule.get("description"),
                    "icmpOptions": rule.get("icmpOptions"), "tcpOptions": rule.get("tcpOptions"),
                    "udpOptions": rule.get("udpOptions")})
    return out


def create_security_list(ctx):
    body = ctx.body
    vcn = _vcn_of(ctx, body)
    sl = base(ctx, body, "securitylist", "securitylist", {
        "vcnId": vcn["id"],
        "ingressSecurityRules": _security_rules(body.get("ingressSecurityRules"), "ingress"),
        "egressSecurityRules": _security_rules(body.get("egressSecurityRules"), "egress")})
    ctx.store.security_lists[sl["id"]] = sl
    _settle(ctx, sl)
    return get_reply(sl)


def update_security_list(ctx):
    sl = owned(ctx, "security_lists", ctx.params["securityListId"], "security list")
    body = ctx.body
    apply_tags_and_name(sl, body)
    if body.get("ingressSecurityRules") is not None:
        sl["ingressSecurityRules"] = _security_rules(body["ingressSecurityRules"], "ingress")
    if body.get("egressSecurityRules") is not None:
        sl["egressSecurityRules"] = _security_rules(body["egressSecurityRules"], "egress")
    return get_reply(sl)


def _simple_handlers(collection, kind, path_param, subnet_field):
    def get(ctx):
        return get_reply(owned(ctx, collection, ctx.params[path_param], kind))

    def list_(ctx):
        return list_reply(ctx, in_compartment(ctx, collection), filters=[("vcnId", "vcnId")])

    def delete(ctx):
        res = owned(ctx, collection, ctx.params[path_param], kind)
        if res["lifecycleState"] in ("TERMINATING", "TERMINATED"):
            return Reply(204)
        if res.get("_default"):
            raise conflict("The default {0} of a VCN cannot be deleted.".format(kind))
        for subnet in ctx.store.subnets.values():
            value = subnet.get(subnet_field)
            if _alive(subnet) and (value == res["id"] or (isinstance(value, list) and res["id"] in value)):
                raise conflict("The {0} {1} is used by subnet {2}. You must remove the reference to proceed "
                               "with this operation.".format(kind, res["id"], subnet["id"]))
        _terminate(ctx, res)
        return Reply(204)

    return get, list_, delete


# ---------------------------------------------------------------- VNICs and private IPs
def get_vnic(ctx):
    return get_reply(owned(ctx, "vnics", ctx.params["vnicId"], "vnic"))


def list_private_ips(ctx):
    query = ctx.query
    store = ctx.store
    if query.get("vnicId"):
        vnic = owned(ctx, "vnics", query["vnicId"], "vnic")
        items = [store.private_ips[p] for p in vnic["_private_ips"] if p in store.private_ips]
    elif query.get("subnetId"):
        subnet = owned(ctx, "subnets", query["subnetId"], "subnet")
        items = [p for p in store.private_ips.values() if p["subnetId"] == subnet["id"]]
        if query.get("ipAddress"):
            items = [p for p in items if p["ipAddress"] == query["ipAddress"]]
    elif query.get("vlanId"):
        items = []
    else:
        raise invalid("One of subnetId, vnicId or vlanId is required.")
    return list_reply(ctx, items, default_sort="TIMECREATED")


def get_private_ip(ctx):
    return get_reply(owned(ctx, "private_ips", ctx.params["privateIpId"], "private ip"))


def list_ipv6s(ctx):
    if ctx.query.get("vnicId"):
        owned(ctx, "vnics", ctx.query["vnicId"], "vnic")
    elif ctx.query.get("subnetId"):
        owned(ctx, "subnets", ctx.query["subnetId"], "subnet")
    else:
        raise invalid("One of subnetId or vnicId is required.")
    return Reply(200, [])


def allocate_public_ip(store):
    """The lowest free host address of the store's public IP network (after its first address,
    which a rehearsal's gateway may hold); a terminated instance's VNIC gives its address back."""
    taken = {v.get("publicIp") for v in store.vnics.values() if v.get("lifecycleState") != "TERMINATED"}
    for index, address in enumerate(store.public_ip_network.hosts()):
        if index > 0 and str(address) not in taken:
            return str(address)
    raise invalid("No public IP address is left in {0}.".format(store.public_ip_network))


def create_vnic(store, tenancy, subnet, instance, nic_index, assign_public_ip, hostname_label, display_name,
                private_ip=None, state="AVAILABLE", now_str=None):
    """Create a VNIC with its primary private IP in a subnet (used by compute and seeding)."""
    now_str = now_str or rfc3339(store.now())
    address = allocate_ip(subnet, private_ip)
    vnic_id = store.ocids.new("vnic")
    public_ip = None
    if assign_public_ip:
        if subnet["prohibitPublicIpOnVnic"]:
            raise invalid("The subnet {0} prohibits public IPs on VNICs.".format(subnet["id"]))
        public_ip = allocate_public_ip(store)
    octets = ipaddress.ip_address(address).packed
    vnic = {
        "id": vnic_id, "availabilityDomain": instance["availabilityDomain"],
        "compartmentId": instance["compartmentId"], "displayName": display_name,
        "freeformTags": {}, "definedTags": {}, "hostnameLabel": hostname_label,
        "isPrimary": nic_index == 0, "lifecycleState": state,
        "macAddress": "02:00:17:{0:02X}:{1:02X}:{2:02X}".format(octets[1], octets[2], octets[3]),
        "nsgIds": [], "vlanId": None, "privateIp": address, "publicIp": public_ip, "skipSourceDestCheck": False,
        "subnetId": subnet["id"], "timeCreated": now_str, "ipv6Addresses": [], "routeTableId": None,
        "_tenancy": tenancy, "_instance": instance["id"], "_private_ips": [],
    }
    pip = {
        "id": store.ocids.new("privateip"), "availabilityDomain": instance["availabilityDomain"],
        "compartmentId": instance["compartmentId"], "displayName": address, "freeformTags": {}, "definedTags": {},
        "hostnameLabel": hostname_label, "ipAddress": address, "isPrimary": True, "vlanId": None,
        "subnetId": subnet["id"], "timeCreated": now_str, "vnicId": vnic_id, "_tenancy": tenancy,
        "ipState": "ASSIGNED", "lifetime": "EPHEMERAL",
    }
    vnic["_private_ips"].append(pip["id"])
    store.vnics[vnic_id] = vnic
    store.private_ips[pip["id"]] = pip
    return vnic


def delete_vnic(store, vnic):
    vnic["lifecycleState"] = "TERMINATED"
    subnet = store.subnets.get(vnic["subnetId"])
    for pip_id in vnic["_private_ips"]:
        pip = store.private_ips.pop(pip_id, None)
        if pip and subnet:
            release_ip(subnet, pip["ipAddress"])
    vnic["_private_ips"] = []


def register(router):
    router.add("POST", "/vcns", create_vcn)
    router.add("GET", "/vcns", list_vcns)
    router.add("GET", "/vcns/{vcnId}", get_vcn)
    router.add("PUT", "/vcns/{vcnId}", update_vcn)
    router.add("DELETE", "/vcns/{vcnId}", delete_vcn)
    router.add("POST", "/subnets", create_subnet)
    router.add("GET", "/subnets", list_subnets)
    router.add("GET", "/subnets/{subnetId}", get_subnet)
    router.add("PUT", "/subnets/{subnetId}", update_subnet)
    router.add("DELETE", "/subnets/{subnetId}", delete_subnet)
    for collection, kind, path, param, fields in (
            ("internet_gateways", "internetgateway", "/internetGateways", "igId", _igw_fields),
            ("nat_gateways", "natgateway", "/natGateways", "natGatewayId", _nat_fields),
            ("service_gateways", "servicegateway", "/serviceGateways", "serviceGatewayId", _sgw_fields)):
        create, get, list_, update, delete = _gateway_handlers(collection, kind, param, fields)
        router.add("POST", path, create)
        router.add("GET", path, list_)
        router.add("GET", path + "/{" + param + "}", get)
        router.add("PUT", path + "/{" + param + "}", update)
        router.add("DELETE", path + "/{" + param + "}", delete)
    router.add("GET", "/services", list_services)
    router.add("GET", "/services/{serviceId}", get_service)
    for collection, kind, path, param, subnet_field, create, update in (
            ("route_tables", "route table", "/routeTables", "rtId", "routeTableId",
             create_route_table, update_route_table),
            ("security_lists", "security list", "/securityLists", "securityListId", "securityListIds",
             create_security_list, update_security_list),
            ("dhcp_options", "dhcp options", "/dhcps", "dhcpId", "dhcpOptionsId", None, None)):
        get, list_, delete = _simple_handlers(collection, kind, param, subnet_field)
        if create:
            router.add("POST", path, create)
            router.add("PUT", path + "/{" + param + "}", update)
        router.add("GET", path, list_)
        router.add("GET", path + "/{" + param + "}", get)
        router.add("DELETE", path + "/{" + param + "}", delete)
    router.add("GET", "/vnics/{vnicId}", get_vnic)
    router.add("GET", "/privateIps", list_private_ips)
    router.add("GET", "/privateIps/{privateIpId}", get_private_ip)
    router.add("GET", "/ipv6", list_ipv6s)
