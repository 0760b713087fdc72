# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The cluster network layout: input checks (NetworkPlan) and the find/create/update/delete of
its ten parts (NetworkBuilder), used by the network module."""

from __future__ import annotations

import platform
import re
import sys
import traceback

from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    InputError, attr, compare, current_with_tags, pick_tagged)

try:
    import netaddr
    NETADDR_ERROR = None
except ImportError:
    netaddr = None
    NETADDR_ERROR = traceback.format_exc()

try:
    from oci.core import models as M
except ImportError:
    M = None

PROTOCOLS = {'all': 'all', 'tcp': '6', 'udp': '17', 'icmp': '1'}
DNS_LABEL_RE = re.compile(r'^[a-zA-Z][a-zA-Z0-9]{0,14}$')


# The parts' display names: <cluster_name>-<suffix>.
NAME_SUFFIXES = ('vcn', 'igw', 'nat', 'sgw', 'public-rt', 'private-rt', 'public-sl', 'private-sl', 'public', 'private')


def part_names(cluster_name):
    return ['%s-%s' % (cluster_name, suffix) for suffix in NAME_SUFFIXES]


def default_dns_label(cluster_name):
    label = re.sub(r'[^a-zA-Z0-9]', '', cluster_name or '')
    label = re.sub(r'^[0-9]+', '', label)[:15]
    return label or 'cluster'


def netaddr_missing():
    """What to do when netaddr, which the network module requires, is not on the Python that runs it."""
    return ('Failed to import the required Python library (netaddr) on %s\'s Python %s: install netaddr into that '
            'Python (the network module lists it in its requirements), or set ansible_python_interpreter to a '
            'Python that has it' % (platform.node(), sys.executable))


def _cidr(option, value, min_prefix=16, max_prefix=30):
    if netaddr is None:
        raise InputError(netaddr_missing())
    try:
        net = netaddr.IPNetwork(value)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise InputError('%s: %r is not a CIDR block' % (option, value))
    if net.version != 4 or '/' not in str(value):
        raise InputError('%s: %r must be an IPv4 CIDR block such as 10.0.0.0/16' % (option, value))
    if not min_prefix <= net.prefixlen <= max_prefix:
        raise InputError('%s: %s has prefix /%d; OCI allows /%d to /%d' % (option, value, net.prefixlen, min_prefix, max_prefix))
    if net.ip != net.network:
        raise InputError('%s: %s has host bits set; did you mean %s?' % (option, value, net.cidr))
    return net


class NetworkPlan(object):
    """Checked input of the network module (raises InputError naming the option)."""

    def __init__(self, vcn_cidr, public_cidr, private_cidr, ssh_cidrs, extra_rules, dns_label):
        self.vcn = _cidr('vcn_cidr', vcn_cidr)
        self.public = _cidr('public_subnet_cidr', public_cidr)
        self.private = _cidr('private_subnet_cidr', private_cidr)
        for option, net in (('public_subnet_cidr', self.public), ('private_subnet_cidr', self.private)):
            if net not in self.vcn:
                raise InputError('%s: %s is not inside vcn_cidr %s' % (option, net, self.vcn))
        if self.public.first <= self.private.last and self.private.first <= self.public.last:
            raise InputError('private_subnet_cidr: %s overlaps public_subnet_cidr %s' % (self.private, self.public))
        if not DNS_LABEL_RE.match(dns_label):
            raise InputError('dns_label: %r must be 1-15 letters and digits starting with a letter' % dns_label)
        self.dns_label = dns_label.lower()
        self.ssh = []
        for value in ssh_cidrs or []:
            self.ssh.append(str(_cidr('ssh_source_cidrs', value, 0, 32)))
        self.extra = {'public': [], 'private': []}
        for i, rule in enumerate(extra_rules or []):
            self.extra[rule['subnet']].append(self._rule('extra_ingress_rules[%d]' % i, rule))

    def _rule(self, option, rule):
        source = str(_cidr(option + '.source', rule['source'], 0, 32))
        proto = str(rule['protocol']).lower()
        proto = PROTOCOLS.get(proto, proto)
        if proto != 'all' and not (proto.isdigit() and 0 <= int(proto) <= 255):
            raise InputError('%s.protocol: %r is not all, tcp, udp, icmp or a protocol number' % (option, rule['protocol']))
        lo, hi = rule.get('port_min'), rule.get('port_max')
        if hi is not None and lo is None:
            raise InputError('%s.port_min: required when port_max is set' % option)
        if lo is not None:
            hi = lo if hi is None else hi
            if proto not in ('6', '17'):
                raise InputError('%s.port_min: ports need protocol tcp or udp' % option)
            if not (1 <= lo <= hi <= 65535):
                raise InputError('%s.port_min: ports %s-%s must satisfy 1 <= port_min <= port_max <= 65535' % (option, lo, hi))
        return dict(protocol=proto, source=source, ports=(lo, hi) if lo is not None else None,
                    description=rule.get('description'))


def ingress(protocol, source, ports=None, description=None):
    opts = {}
    if ports:
        rng = M.PortRange(min=ports[0], max=ports[1])
        key = 'tcp_options' if protocol == '6' else 'udp_options'
        opts[key] = (M.TcpOptions if protocol == '6' else M.UdpOptions)(destination_port_range=rng)
    return M.IngressSecurityRule(protocol=protocol, source=source, source_type='CIDR_BLOCK', is_stateless=False,
                                 description=description, **opts)


def _ports(rule, key):
    rng = attr(attr(rule, key), 'destination_port_range')
    return (attr(rng, 'min'), attr(rng, 'max')) if rng is not None else None


def canon(key, value):
    """A comparable form of the attribute (order-free lists, rule fields that matter)."""
    if value is None:
        return None
    if key == 'route_rules':
        return sorted((attr(r, 'destination'), attr(r, 'destination_type'), attr(r, 'network_entity_id')) for r in value)
    if key == 'ingress_security_rules':
        return sorted((str(attr(r, 'protocol')), attr(r, 'source'), _ports(r, 'tcp_options'), _ports(r, 'udp_options'))
                      for r in value)
    if key == 'egress_security_rules':
        return sorted((str(attr(r, 'protocol')), attr(r, 'destination')) for r in value)
    if key == 'security_list_ids':
        return sorted(value)
    if key == 'services':
        return sorted(attr(s, 'service_id') for s in value)
    return value


class Part(object):
    """One kind of network resource and its SDK calls."""

    def __init__(self, key, suffix, noun, create_model, update_model, updatable):
        self.key, self.suffix, self.noun = key, suffix, noun
        self.create_model, self.update_model, self.updatable = create_model, update_model, updatable

    def fn(self, client, verb):
        return getattr(client, '%s_%s%s' % (verb, self.noun, 's' if verb == 'list' else ''))


def _parts():
    tags = ('freeform_tags', 'defined_tags')
    return dict(
        igw=Part('internet_gateway', 'igw', 'internet_gateway', M.CreateInternetGatewayDetails,
                 M.UpdateInternetGatewayDetails, tags + ('is_enabled',)),
        nat=Part('nat_gateway', 'nat', 'nat_gateway', M.CreateNatGatewayDetails, M.UpdateNatGatewayDetails, tags),
        sgw=Part('service_gateway', 'sgw', 'service_gateway', M.CreateServiceGatewayDetails,
                 M.UpdateServiceGatewayDetails, tags + ('services',)),
        public_rt=Part('public_route_table', 'public-rt', 'route_table', M.CreateRouteTableDetails,
                       M.UpdateRouteTableDetails, tags + ('route_rules',)),
        private_rt=Part('private_route_table', 'private-rt', 'route_table', M.CreateRouteTableDetails,
                        M.UpdateRouteTableDetails, tags + ('route_rules',)),
        public_sl=Part('public_security_list', 'public-sl', 'security_list', M.CreateSecurityListDetails,
                       M.UpdateSecurityListDetails, tags + ('ingress_security_rules', 'egress_security_rules')),
        private_sl=Part('private_security_list', 'private-sl', 'security_list', M.CreateSecurityListDetails,
                        M.UpdateSecurityListDetails, tags + ('ingress_security_rules', 'egress_security_rules')),
        public=Part('public_subnet', 'public', 'subnet', M.CreateSubnetDetails, M.UpdateSubnetDetails,
                    tags + ('route_table_id', 'security_list_ids')),
        private=Part('private_subnet', 'private', 'subnet', M.CreateSubnetDetails, M.UpdateSubnetDetails,
                     tags + ('route_table_id', 'security_list_ids')),
    )


# Creation order; deletion runs backwards (subnets first, VCN last).
ORDER = ('igw', 'nat', 'sgw', 'public_rt', 'private_rt', 'public_sl', 'private_sl', 'public', 'private')


class NetworkBuilder(object):

    def __init__(self, mod):
        self.mod = mod
        self.session = mod.session
        self.net = mod.session.network
        self.compartment = mod.params['compartment_id']
        self.cluster = mod.cluster_name
        self.parts = _parts()

    def name(self, suffix):
        return '%s-%s' % (self.cluster, suffix)

    def tags(self):
        return dict(freeform_tags=self.mod.tags(), defined_tags=self.mod.params['defined_tags'] or None)

    def find_vcn(self):
        items = self.session.list_all(self.net.list_vcns, self.compartment, display_name=self.name('vcn'))
        return pick_tagged(items, self.name('vcn'), self.cluster, 'vcn')

    def find(self, part, vcn_id):
        if vcn_id is None:
            return None
        items = self.session.list_all(part.fn(self.net, 'list'), self.compartment, vcn_id=vcn_id)
        return pick_tagged(items, self.name(part.suffix), self.cluster, part.key)

    def all_services(self):
        services = self.session.list_all(self.net.list_services)
        for s in services:
            if s.name.startswith('All ') and 'services-in-oracle-services-network' in (s.cidr_block or ''):
                return s
        raise InputError('service gateway: no "All <region> Services in Oracle Services Network" service in this region')

    def wait(self, part, res):
        return self.mod.waiter.lifecycle(part.fn(self.net, 'get'), res.id, ['AVAILABLE'],
                                         what='%s %s' % (part.key, res.id))

    def ensure(self, key, want, create_extra):
        """Find, then create / update / leave one part. Returns its id (None if check mode would create)."""
        part = self.parts[key]
        res = self.find(part, create_extra.get('vcn_id'))
        want = dict(want, display_name=self.name(part.suffix), **self.tags())
        if res is None:
            self.mod.changed = True
            self.mod.diff['after'][part.key] = dict((k, canon(k, v)) for k, v in want.items())
            if self.mod.check_mode:
                return None
            details = part.create_model(compartment_id=self.compartment, **dict(want, **create_extra))
            return self.wait(part, self.session.create(part.fn(self.net, 'create'), details).data).id
        have = current_with_tags(res, want)
        self.mod.diff['before'][part.key] = dict((k, canon(k, v)) for k, v in have.items())
        changes, blocked = compare(dict((k, canon(k, v)) for k, v in want.items()),
                                   dict((k, canon(k, v)) for k, v in have.items()), part.updatable)
        if blocked:
            raise InputError('%s: cannot change %s of %s %s in place; delete the network (state=absent) first'
                             % (', '.join(blocked), part.key, part.noun, res.id))
        self.mod.diff['after'][part.key] = dict(self.mod.diff['before'][part.key], **changes)
        if changes:
            self.mod.changed = True
            if not self.mod.check_mode:
                details = part.update_model(**dict((k, want[k]) for k in changes))
                self.wait(part, self.session.call(part.fn(self.net, 'update'), res.id, details))
        return res.id

    def ensure_all(self, plan):
        vcn = self.find_vcn()
        want_vcn = dict(cidr_block=str(plan.vcn), dns_label=plan.dns_label, display_name=self.name('vcn'), **self.tags())
        if vcn is None:
            self.mod.changed = True
            self.mod.diff['after']['vcn'] = want_vcn
            vcn_id = None
            if not self.mod.check_mode:
                details = M.CreateVcnDetails(compartment_id=self.compartment, **want_vcn)
                vcn = self.session.create(self.net.create_vcn, details).data
                vcn = self.mod.waiter.lifecycle(self.net.get_vcn, vcn.id, ['AVAILABLE'], what='vcn %s' % vcn.id)
                vcn_id = vcn.id
        else:
            vcn_id = vcn.id
            have = current_with_tags(vcn, want_vcn)
            self.mod.diff['before']['vcn'] = have
            changes, blocked = compare(want_vcn, have, ('freeform_tags', 'defined_tags'))
            if blocked:
                raise InputError('%s: the VCN %s has %s; OCI cannot change it in place. Delete the network '
                                 '(state=absent) first.' % (blocked[0], vcn.id, attr(vcn, blocked[0])))
            self.mod.diff['after']['vcn'] = dict(have, **changes)
            if changes:
                self.mod.changed = True
                if not self.mod.check_mode:
                    self.session.call(self.net.update_vcn, vcn.id, M.UpdateVcnDetails(**changes))
        ids = {'vcn_id': vcn_id}
        on_vcn = dict(vcn_id=vcn_id)
        service = self.all_services()
        ids['internet_gateway_id'] = self.ensure('igw', dict(is_enabled=True), on_vcn)
        ids['nat_gateway_id'] = self.ensure('nat', {}, on_vcn)
        ids['service_gateway_id'] = self.ensure(
            'sgw', dict(services=[M.ServiceIdRequestDetails(service_id=service.id)]), on_vcn)
        everywhere = [M.EgressSecurityRule(protocol='all', destination='0.0.0.0/0', destination_type='CIDR_BLOCK')]
        ids['public_route_table_id'] = self.ensure('public_rt', dict(route_rules=[
            M.RouteRule(destination='0.0.0.0/0', destination_type='CIDR_BLOCK', network_entity_id=ids['internet_gateway_id'])
        ]), on_vcn)
        ids['private_route_table_id'] = self.ensure('private_rt', dict(route_rules=[
            M.RouteRule(destination='0.0.0.0/0', destination_type='CIDR_BLOCK', network_entity_id=ids['nat_gateway_id']),
            M.RouteRule(destination=service.cidr_block, destination_type='SERVICE_CIDR_BLOCK',
                        network_entity_id=ids['service_gateway_id']),
        ]), on_vcn)
        inside = ingress('all', str(plan.vcn), description='all traffic inside the VCN')
        public_rules = [ingress('6', c, (22, 22), 'SSH') for c in plan.ssh] + [inside]
        ids['public_security_list_id'] = self.ensure('public_sl', dict(
            ingress_security_rules=public_rules + [ingress(**r) for r in plan.extra['public']],
            egress_security_rules=everywhere), on_vcn)
        ids['private_security_list_id'] = self.ensure('private_sl', dict(
            ingress_security_rules=[inside] + [ingress(**r) for r in plan.extra['private']],
            egress_security_rules=everywhere), on_vcn)
        for key, cidr, public in (('public', plan.public, True), ('private', plan.private, False)):
            ids['%s_subnet_id' % key] = self.ensure(key, dict(
                cidr_block=str(cidr), dns_label=key, prohibit_public_ip_on_vnic=not public,
                route_table_id=ids['%s_route_table_id' % key], security_list_ids=[ids['%s_security_list_id' % key]],
            ), on_vcn)
        ids['vcn_cidr'] = str(plan.vcn)
        ids['private_subnet_domain_name'] = None
        if ids['private_subnet_id']:
            ids['private_subnet_domain_name'] = self.session.call(self.net.get_subnet, ids['private_subnet_id']).subnet_domain_name
        return ids

    def delete_all(self):
        vcn = self.find_vcn()
        if vcn is None:
            return False
        found = [(self.parts[k], self.find(self.parts[k], vcn.id)) for k in reversed(ORDER)]
        found = [(p, r) for p, r in found if r is not None]
        self.mod.diff['before'] = dict([('vcn', vcn.id)] + [(p.key, r.id) for p, r in found])
        if self.mod.check_mode:
            return True
        # Subnets, then security lists and route tables (they reference gateways), then gateways.
        for part, res in found:
            self.session.call_response(part.fn(self.net, 'delete'), res.id)
            self.mod.waiter.gone(part.fn(self.net, 'get'), res.id, what='%s %s' % (part.key, res.id))
        self.session.call_response(self.net.delete_vcn, vcn.id)
        self.mod.waiter.gone(self.net.get_vcn, vcn.id, what='vcn %s' % vcn.id)
        return True
