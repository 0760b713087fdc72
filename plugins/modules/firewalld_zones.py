#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: firewalld_zones
short_description: Bring firewalld's default zone and the sources, interfaces, services, ports and rich rules of its zones to a declared state in one task
version_added: 0.2.0
description:
  - Adds the sources, interfaces, services, ports and rich rules of each zone of O(zones) that the zone
    lacks, removes the undeclared services, ports and rich rules of a zone with O(zones[].exclusive=true), and sets
    O(default_zone). One task and one remote call, where loops over M(ansible.posix.firewalld)
    make one call per entry; on an idempotent re-run of a cluster's configuration those calls add up.
  - Every change is made both in the permanent configuration and at runtime, as
    M(ansible.posix.firewalld) does with C(permanent=true) and C(immediate=true). The two are read
    and compared separately (one C(firewall-cmd --list-all-zones) each), and each gets only the
    changes it needs; an entry that only one of them lacks is changed there only.
  - Changes are applied with C(firewall-cmd), first C(--permanent), then at runtime, one command per
    zone, kind of entry and direction (all the ports to add to a zone in one command). No
    C(firewall-cmd --reload) - writing the permanent configuration only and reloading would save a
    command per change, but a reload rebuilds the whole ruleset and drops the runtime entries that
    others added (container engines, libvirt), where applying the few differences at runtime as
    well changes nothing else. A re-run that finds everything in place runs the two reads and
    nothing else.
  - Sources and interfaces are added with C(--change-source) and C(--change-interface), so one
    bound to another zone moves to the declared zone (the change says from where). For an
    interface that NetworkManager manages, C(firewall-cmd --permanent) sets the zone of its
    NetworkManager connection.
  - Fails before changing anything when an entry is not valid, a zone does not exist, or a service
    to add is not known to firewalld; fails with the message of C(firewall-cmd) when a command fails
    (partial failures too, which C(firewall-cmd) reports with exit status 0 and a warning), or when
    firewalld is not running, unless O(offline=true).
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  check_mode:
    support: full
    details: Reads the zones and reports what would change; changes nothing.
  diff_mode:
    support: full
    details: The default zone and the declared kinds of the declared zones, permanent and runtime, before and after.
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  default_zone:
    description:
      - The default zone, set with C(firewall-cmd --set-default-zone) (permanent and runtime at once)
        when it differs. Unset, the default zone is left as it is.
      - It is set last. firewalld 1.0 and later reload when the default zone changes, so the reload
        loads the permanent configuration the module has just written.
    type: str
  zones:
    description:
      - The zones and what each must hold. A kind that is not given is left as it is.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The zone, which must exist (C(firewall-cmd --get-zones)).
        type: str
        required: true
      sources:
        description: IPv4 or IPv6 addresses or networks (C(10.0.0.0/16), C(fd00::/8)) bound to the zone.
        type: list
        elements: str
      interfaces:
        description: Network interfaces bound to the zone.
        type: list
        elements: str
      services:
        description: firewalld services open in the zone (C(ssh)).
        type: list
        elements: str
      ports:
        description:
          - Ports open in the zone, as C(PORT/PROTO) or C(LOW-HIGH/PROTO), PROTO one of C(tcp),
            C(udp), C(sctp), C(dccp).
          - A port counts as open when a range of the zone covers it. firewalld merges overlapping
            ranges into one; a declared port inside an open range is not added again.
        type: list
        elements: str
      rich_rules:
        version_added: 0.4.0
        description:
          - Rich rules of the zone (C(rule family="ipv4" source address="10.0.0.0/16" port port="6817"
            protocol="tcp" accept)), for a port open to some sources only.
          - Compared as firewalld lists them, with the attributes of each element in any order and quotes
            optional; write them as firewalld lists them (C(firewall-cmd --list-rich-rules)) to be sure.
            A rule firewalld refuses fails the task with its message.
          - New rules are added before anything of the zone is removed, and rules that O(zones[].exclusive)
            removes go last, so that a port that moves from the zone's ports to a rich rule is never closed
            in between.
        type: list
        elements: str
      exclusive:
        description:
          - Also remove the services, ports and rich rules of the zone that are not declared, of the kinds given
            (without O(zones[].ports) the ports are left as they are), in whichever configuration
            holds them. An open range that declared ranges do not cover entirely is removed and the
            declared ones added.
          - Sources and interfaces are never removed; NetworkManager binds interfaces to zones.
        type: bool
        default: false
  offline:
    version_added: 0.4.0
    description:
      - When firewalld is not running, read and change its permanent configuration with
        C(firewall-offline-cmd) (which firewalld loads when it starts; the same options, without
        C(--permanent), and C(--remove-service-from-zone) for C(--remove-service)) instead of failing, as
        M(ansible.posix.firewalld)'s option of the same name does. The result's RV(running) is then
        false and every change is C((permanent only)).
      - This brings the zones to their state before firewalld's first start, so that it never runs
        on its default zones.
      - Where C(systemctl is-active firewalld.service) says C(inactive) or C(failed), the module goes
        offline at once (C(firewall-cmd) would be refused after a Python start of its own); any other
        answer, or no C(systemctl), leaves it to C(firewall-cmd).
    type: bool
    default: false
notes:
  - Needs C(firewall-cmd), and a running firewalld unless O(offline=true) (then also
    C(firewall-offline-cmd), which firewalld ships).
seealso:
  - module: ansible.posix.firewalld
"""

EXAMPLES = r"""
- name: Trust the cluster's networks, open SSH and the declared ports, close the rest of the public zone
  ocigpu.cluster.firewalld_zones:
    default_zone: public
    zones:
      - name: trusted
        sources: [10.0.0.0/16, 192.168.128.0/22]
      - name: public
        services: [ssh]
        ports: [9100/tcp]
        # Slurm's ports from the VCN only.
        rich_rules:
          - rule family="ipv4" source address="10.0.0.0/16" port port="6817" protocol="tcp" accept
          - rule family="ipv4" source address="10.0.0.0/16" port port="60001-63000" protocol="tcp" accept
        exclusive: true
  register: __zones

- name: Say what changed
  ansible.builtin.debug:
    var: __zones.changes
"""

RETURN = r"""
changes:
  description:
    - What changed (or, in check mode, would change), one line per entry, in the order applied.
    - A line without a suffix was changed in both the permanent configuration and at runtime;
      C((permanent only)) or C((runtime only)) tells where only one of them needed it.
  returned: always
  type: list
  elements: str
  sample:
    - "public: remove service dhcpv6-client"
    - "trusted: add source 10.0.0.0/16 (moved from internal)"
    - "public: add port 6818/tcp (runtime only)"
    - 'public: add rich rule rule family="ipv4" source address="10.0.0.0/16" port port="6817" protocol="tcp" accept'
    - "default zone: public (was home)"
default_zone:
  description: The default zone after the task (or, in check mode, after it would have run).
  returned: success
  type: str
  sample: public
running:
  version_added: 0.4.0
  description: Whether firewalld was running; false only with O(offline=true), when only the permanent configuration was read and changed.
  returned: success
  type: bool
  sample: true
"""

import ipaddress
import re
import shlex
from collections import namedtuple

from ansible.module_utils.basic import AnsibleModule

_ENV = {'LC_ALL': 'C'}
_KINDS = ('sources', 'interfaces', 'services', 'ports', 'rich_rules')
_SINGULAR = {'sources': 'source', 'interfaces': 'interface', 'services': 'service', 'ports': 'port',
             'rich_rules': 'rich rule'}
# firewall-cmd's option for each kind: --add-<option>, --remove-<option>.
_OPTION = {'sources': 'source', 'interfaces': 'interface', 'services': 'service', 'ports': 'port',
           'rich_rules': 'rich-rule'}
# The keys of --list-all-zones for the kinds.
_LISTED_KEY = {'sources': 'sources', 'interfaces': 'interfaces', 'services': 'services', 'ports': 'ports',
               'rich rules': 'rich_rules'}
_MODES = ('permanent', 'runtime')  # the order changes are applied in
_PORT = re.compile(r'^(\d{1,5})(?:-(\d{1,5}))?/(tcp|udp|sctp|dccp)$')
# Listed ports may use any protocol firewalld knows; only these are compared as ranges.
_LISTED_PORT = re.compile(r'^(\d{1,5})(?:-(\d{1,5}))?/(\S+)$')
# One firewall-cmd command: mode permanent or runtime, verb add or remove, kind one of _KINDS;
# moved: {entry: the zone it leaves} for sources and interfaces bound elsewhere.
_Step = namedtuple('_Step', 'mode zone verb kind entries moved')
# What firewall-cmd prints, and still exits 0 for, when one entry of several fails.
_PROBLEM = re.compile(r'^(?:Warning|Error): (?!ALREADY_ENABLED|NOT_ENABLED|ZONE_ALREADY_SET|ALREADY_SET)', re.M)


# ------------------------------------------------------------------- ports as ranges


def _range(port, pattern=_PORT):
    """'6817/tcp' -> (6817, 6817, 'tcp'); '1-2/udp' -> (1, 2, 'udp'); None when it does not parse."""
    match = pattern.match(port)
    if not match:
        return None
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) else low
    return low, high, match.group(3)


def _port_text(span):
    low, high, proto = span
    return ('%d/%s' % (low, proto)) if low == high else ('%d-%d/%s' % (low, high, proto))


def _covers(outer, inner):
    return outer[2] == inner[2] and outer[0] <= inner[0] and inner[1] <= outer[1]


def _merge(spans, new):
    """spans with new added as firewalld adds a port: overlapping ranges become one, adjacent ones stay apart."""
    low, high, proto = new
    kept = []
    for span in spans:
        if span[2] == proto and span[0] <= high and low <= span[1]:
            low, high = min(low, span[0]), max(high, span[1])
        else:
            kept.append(span)
    return kept + [(low, high, proto)]


# ------------------------------------------------------------------- reading firewall-cmd


def _rich_key(rule):
    """A rich rule as compared: its words, the attributes of each element sorted, quotes dropped.
    None when it does not parse."""
    try:
        words = shlex.split(rule)
    except ValueError:
        return None
    key, attrs = [], []
    for word in words:
        if '=' in word:
            attrs.append(word)
        else:
            key.extend(sorted(attrs))
            attrs = []
            key.append(word)
    return tuple(key + sorted(attrs))


def _parse_zones(text):
    """--list-all-zones output -> ({zone: {kind: [entries]}}, default zone or None)."""
    zones, default, current, listing = {}, None, None, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith('\t'):  # a continued entry: a rich rule (kept) or a forward port
            if current is not None and listing == 'rich rules':
                current['rich_rules'].append(line.strip())
            continue
        if not line.startswith(' '):
            name, dummy, attrs = line.strip().partition(' ')
            current, listing = zones.setdefault(name, dict((kind, []) for kind in _KINDS)), None
            if 'default' in attrs.strip('()').replace(',', ' ').split():
                default = name
            continue
        key, sep, value = line.strip().partition(':')
        listing = key if sep else None
        if current is not None and sep and key in _LISTED_KEY:
            if key == 'rich rules':  # one per line, on the lines that follow
                current['rich_rules'] = [value.strip()] if value.strip() else []
            else:
                current[_LISTED_KEY[key]] = value.split()
    return zones, default


class _NotRunning(Exception):
    pass


class _FirewallCmd(object):
    """firewall-cmd through AnsibleModule.run_command; a failed command fails the module.

    offline=True: once systemd or firewall-cmd says that firewalld is not running, the permanent
    configuration is read and changed with firewall-offline-cmd (the same options, without --permanent),
    and the runtime one is not there (modes holds 'permanent' alone)."""

    def __init__(self, module, offline=False):
        self.module = module
        self.path = module.get_bin_path('firewall-cmd')
        if not self.path:
            module.fail_json(msg='firewall-cmd not found: is firewalld installed?', changes=[])
        self.offline_allowed = offline
        self.offline_path = None  # set once firewalld is found not running (offline=True)
        self.applied = []  # the steps applied so far, for the failure's changes

    @property
    def modes(self):
        """The configurations there are: offline, the permanent one alone."""
        return ('permanent',) if self.offline_path else _MODES

    def _go_offline(self):
        self.offline_path = self.module.get_bin_path('firewall-offline-cmd')
        if not self.offline_path:
            self.module.fail_json(msg='firewalld is not running and firewall-offline-cmd was not found', changes=[])

    def run(self, args, permanent=False):
        if self.offline_path:
            # firewall-offline-cmd reads --remove-service as lokkit's (from the default zone), and
            # refuses it beside --zone.
            argv = [self.offline_path] + [a.replace('--remove-service=', '--remove-service-from-zone=', 1) for a in args]
        else:
            argv = [self.path] + (['--permanent'] if permanent else []) + args
        rc, out, err = self.module.run_command(argv, environ_update=_ENV)
        if rc != 0 or _PROBLEM.search(err or ''):
            command = ' '.join(argv[1:])
            if rc == 252 or 'FirewallD is not running' in err + out:  # 252: NOT_RUNNING
                if self.offline_allowed and not self.offline_path and not self.applied:
                    raise _NotRunning()
                msg = 'firewalld is not running (firewall-cmd %s: %s)' % (command, (err or out).strip())
            else:
                msg = '%s %s failed (rc=%d): %s' % (argv[0].rsplit('/', 1)[-1], command, rc, (err or out).strip())
            self.module.fail_json(msg=msg, rc=rc, stdout=out, stderr=err, cmd=argv, changes=_describe(self.applied))
        return out

    def read(self):
        """({mode: zones}, the default zone), from firewalld or, offline, from its permanent files."""
        if self.offline_allowed and self._stopped():
            self._go_offline()
            return self._read()
        try:
            return self._read()
        except _NotRunning:
            self._go_offline()
            return self._read()

    def _stopped(self):
        """Whether systemd says that firewalld is stopped: ``systemctl is-active`` takes milliseconds, where
        firewall-cmd's refusal costs a Python start. Any other answer (active, activating, no systemd)
        leaves it to firewall-cmd."""
        systemctl = self.module.get_bin_path('systemctl')
        if not systemctl:
            return False
        rc, out, dummy = self.module.run_command([systemctl, 'is-active', 'firewalld.service'], environ_update=_ENV)
        return rc != 0 and out.strip() in ('inactive', 'failed')

    def _read(self):
        state = {}
        for mode in self.modes:
            state[mode], default = self.zones(mode)  # the runtime's default zone is kept, read last
        return state, default

    def zones(self, mode):
        return _parse_zones(self.run(['--list-all-zones'], permanent=mode == 'permanent'))

    def services(self, mode):
        return set(self.run(['--get-services'], permanent=mode == 'permanent').split())

    def apply(self, step):
        self.run(_args(step), permanent=step.mode == 'permanent')
        self.applied.append(step)


# ------------------------------------------------------------------- what is declared


def _unique(entries):
    return [e for i, e in enumerate(entries) if e not in entries[:i]]


def _check(zones, default_zone):
    """Every problem with the declared zones, before anything is read or changed."""
    problems, seen, bound = [], set(), {}
    for name in [z['name'] for z in zones] + ([default_zone] if default_zone is not None else []):
        if not re.match(r'^[\w.+-]+$', name):
            problems.append('zone name %r is not valid' % name)
    for zone in zones:
        name = zone['name']
        if name in seen:
            problems.append('zone %s is declared twice' % name)
        seen.add(name)
        for source in zone['sources'] or []:
            try:
                ipaddress.ip_network(source, strict=False)
            except ValueError:
                problems.append('%s: source %r is not an IPv4 or IPv6 address or network' % (name, source))
        for interface in zone['interfaces'] or []:
            if not interface or len(interface) > 16 or re.search(r'[\s/!*]', interface):
                problems.append('%s: interface %r is not a valid interface name' % (name, interface))
        for kind in ('sources', 'interfaces'):
            for entry in _unique(zone[kind] or []):
                if bound.setdefault((kind, entry), name) != name:
                    problems.append('%s %s is declared in zones %s and %s (firewalld binds it to one zone)'
                                    % (_SINGULAR[kind], entry, bound[(kind, entry)], name))
        for service in zone['services'] or []:
            if not re.match(r'^[\w.+-]+$', service):
                problems.append('%s: service %r is not a valid service name' % (name, service))
        for rule in zone['rich_rules'] or []:
            words = _rich_key(rule)
            if not words or words[0] != 'rule' or '\n' in rule:
                problems.append('%s: rich rule %r is not one line starting with "rule"' % (name, rule))
        for port in zone['ports'] or []:
            span = _range(port)
            if span is None:
                problems.append('%s: port %r is not PORT/PROTO or LOW-HIGH/PROTO with PROTO one of '
                                'tcp, udp, sctp, dccp' % (name, port))
            elif not 1 <= span[0] <= span[1] <= 65535:
                problems.append('%s: port %r must be within 1-65535, LOW not above HIGH' % (name, port))
    return problems


def _declared_ports(ports):
    spans = []
    for port in ports:
        spans = _merge(spans, _range(port))
    return sorted(spans, key=lambda s: (s[2], s[0]))


# ------------------------------------------------------------------- the plan


def _plan_ports(ports, listed, exclusive):
    """(ports to remove, ports to add, the zone's ports after) for one configuration."""
    declared = _declared_ports(ports)
    listed = [(p, _range(p, _LISTED_PORT)) for p in listed]
    remove = []
    if exclusive:
        remove = [p for p, span in listed if span is None or not any(_covers(d, span) for d in declared)]
        listed = [(p, span) for p, span in listed if p not in remove]
    add = [d for d in declared if not any(span and _covers(span, d) for dummy, span in listed)]
    spans = [span for dummy, span in listed if span]
    for span in add:
        spans = _merge(spans, span)
    after = [p for p, span in listed if span is None or span in spans]
    after += [_port_text(span) for span in spans if span not in [s for dummy, s in listed]]
    return remove, [_port_text(span) for span in add], after


def _plan_zone(mode, zone, state, owners):
    """The steps one configuration (permanent or runtime) needs for one declared zone, in the order
    they are applied, and the zone's state after them. New rich rules first, then the removals (a port
    added next to an undeclared range would otherwise be merged with it), then the additions, and the
    undeclared rich rules last: a port that moves between the ports and a rich rule stays open."""
    name, steps = zone['name'], []
    after = dict((kind, list(state[kind])) for kind in _KINDS)
    services = _unique(zone['services']) if zone['services'] is not None else None

    rules, extra_rules = None, []
    if zone['rich_rules'] is not None:
        rules = _unique(zone['rich_rules'])
        declared = set(_rich_key(r) for r in rules)
        listed = set(_rich_key(r) for r in state['rich_rules'])
        missing = [r for r in rules if _rich_key(r) not in listed]
        if missing:
            steps.append(_Step(mode, name, 'add', 'rich_rules', missing, {}))
            after['rich_rules'] += missing
        if zone['exclusive']:
            extra_rules = [r for r in state['rich_rules'] if _rich_key(r) not in declared]

    if services is not None and zone['exclusive']:
        extra = [s for s in state['services'] if s not in services]
        if extra:
            steps.append(_Step(mode, name, 'remove', 'services', extra, {}))
            after['services'] = [s for s in after['services'] if s not in extra]

    add_ports = []
    if zone['ports'] is not None:
        remove, add_ports, after['ports'] = _plan_ports(zone['ports'], state['ports'], zone['exclusive'])
        if remove:
            steps.append(_Step(mode, name, 'remove', 'ports', remove, {}))

    for kind in ('sources', 'interfaces'):
        if zone[kind] is not None:
            missing = [e for e in _unique(zone[kind]) if e not in state[kind]]
            if missing:
                moved = dict((e, owners[kind][e]) for e in missing if e in owners[kind])
                steps.append(_Step(mode, name, 'add', kind, missing, moved))
                after[kind] += missing

    if services is not None:
        missing = [s for s in services if s not in state['services']]
        if missing:
            steps.append(_Step(mode, name, 'add', 'services', missing, {}))
            after['services'] += missing
    if add_ports:
        steps.append(_Step(mode, name, 'add', 'ports', add_ports, {}))
    if extra_rules:
        steps.append(_Step(mode, name, 'remove', 'rich_rules', extra_rules, {}))
        after['rich_rules'] = [r for r in after['rich_rules'] if r not in extra_rules]
    return steps, after


def _owners(zones):
    """{kind: {entry: zone}} for sources and interfaces: which zone holds each one now."""
    owners = {'sources': {}, 'interfaces': {}}
    for name, state in zones.items():
        for kind in owners:
            for entry in state[kind]:
                owners[kind][entry] = name
    return owners


def _plan(declared, state, modes=_MODES):
    """(steps for the configurations of modes, {mode: {zone: state after}})."""
    names = [z['name'] for z in declared]
    steps, after = [], {}
    for mode in modes:
        owners = _owners(state[mode])
        after[mode] = dict(state[mode])
        planned = []
        for zone in declared:
            zone_steps, after[mode][zone['name']] = _plan_zone(mode, zone, state[mode][zone['name']], owners)
            planned.extend(zone_steps)
        for step in planned:
            for entry, owner in step.moved.items():  # what moves leaves its zone
                if owner in names:
                    after[mode][owner][step.kind] = [e for e in after[mode][owner][step.kind] if e != entry]
        steps.extend(planned)
    return steps, after


def _args(step):
    if step.kind in ('sources', 'interfaces') and step.verb == 'add':
        option = '--change-' + _SINGULAR[step.kind]  # moves it from another zone, if bound to one
    else:
        option = '--%s-%s' % (step.verb, _OPTION[step.kind])
    return ['--zone=' + step.zone] + ['%s=%s' % (option, entry) for entry in step.entries]


def _describe(steps):
    """One line per (zone, verb, kind, entry), in the order first applied, saying where it applied."""
    keys, where, moved_from = [], {}, {}
    for step in steps:
        for entry in step.entries:
            key = (step.zone, step.verb, _SINGULAR[step.kind], entry)
            if key not in where:
                keys.append(key)
                where[key] = []
            where[key].append(step.mode)
            if entry in step.moved:
                moved_from.setdefault(key, set()).add(step.moved[entry])
    lines = []
    for key in keys:
        line = '%s: %s %s %s' % key
        if key in moved_from:
            line += ' (moved from %s)' % ', '.join(sorted(moved_from[key]))
        if len(where[key]) == 1:
            line += ' (%s only)' % where[key][0]
        lines.append(line)
    return lines


def _view(zones, declared, default):
    """The diff's view: the default zone and the declared kinds of the declared zones."""
    return {'default_zone': default,
            'zones': dict((z['name'], dict((k, sorted(zones[z['name']][k])) for k in _KINDS if z[k] is not None))
                          for z in declared)}


def _missing_zones(names, state, modes=_MODES):
    problems = []
    for name in _unique(names):
        where = [mode for mode in modes if name in state[mode]]
        if not where:
            problems.append('zone %s does not exist' % name)
        elif where == ['permanent'] and len(modes) > 1:
            problems.append('zone %s exists in the permanent configuration only: reload firewalld first' % name)
    return problems


def _unknown_services(cmd, steps):
    """An unknown service fails firewall-cmd halfway through (with exit status 0 when others are
    added with it): ask firewalld which services it knows, only where there are services to add."""
    problems = []
    for mode in cmd.modes:
        adding = set(e for step in steps if step.mode == mode and step.verb == 'add' and step.kind == 'services'
                     for e in step.entries)
        unknown = sorted(adding - cmd.services(mode)) if adding else []
        if unknown:
            problems.append('firewalld does not know the service(s) %s (%s configuration; see '
                            'firewall-cmd --get-services)' % (', '.join(unknown), mode))
    return problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            default_zone=dict(type='str'),
            zones=dict(type='list', elements='dict', default=[], options=dict(
                name=dict(type='str', required=True),
                sources=dict(type='list', elements='str'),
                interfaces=dict(type='list', elements='str'),
                services=dict(type='list', elements='str'),
                ports=dict(type='list', elements='str'),
                rich_rules=dict(type='list', elements='str'),
                exclusive=dict(type='bool', default=False),
            )),
            offline=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    declared = module.params['zones']
    default_zone = module.params['default_zone']

    problems = _check(declared, default_zone)
    if problems:
        module.fail_json(msg='; '.join(problems), changes=[])

    cmd = _FirewallCmd(module, offline=module.params['offline'])
    state, current_default = cmd.read()

    problems = _missing_zones([z['name'] for z in declared] + ([default_zone] if default_zone else []), state, cmd.modes)
    if problems:
        module.fail_json(msg='; '.join(problems), changes=[])
    steps, after = _plan(declared, state, cmd.modes)
    problems = _unknown_services(cmd, steps)
    if problems:
        module.fail_json(msg='; '.join(problems), changes=[])

    set_default = bool(default_zone) and default_zone != current_default
    changes = _describe(steps)
    if set_default:
        changes.append('default zone: %s (was %s)' % (default_zone, current_default))
    if not module.check_mode:
        for step in steps:
            cmd.apply(step)
        if set_default:
            cmd.run(['--set-default-zone=' + default_zone])

    final_default = default_zone if set_default else current_default
    result = dict(changed=bool(changes), changes=changes, default_zone=final_default,
                  running=cmd.offline_path is None)
    if module._diff:
        result['diff'] = dict(
            before=dict((mode, _view(state[mode], declared, current_default)) for mode in cmd.modes),
            after=dict((mode, _view(after[mode], declared, final_default)) for mode in cmd.modes))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
