# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""firewalld_zones: what it changes, where (permanent, runtime), and when it refuses to."""
from __future__ import annotations

import copy

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.modules import firewalld_zones
from tests.unit.plugins.modules._helpers import run_module

KINDS = ('interfaces', 'sources', 'services', 'ports')
READS = ('--list-all-zones', '--get-services')
SERVICES = {'ssh', 'dhcpv6-client', 'http', 'https', 'mdns'}


def _zone(**kinds):
    return dict((k, list(kinds.get(k, []))) for k in KINDS)


def _span(port):
    number, proto = port.split('/')
    low, dummy, high = number.partition('-')
    return int(low), int(high or low), proto


def _text(low, high, proto):
    return ('%d/%s' % (low, proto)) if low == high else ('%d-%d/%s' % (low, high, proto))


class Firewalld(object):
    """A fake firewall-cmd over a permanent and a runtime configuration, as firewalld 2.x keeps them.

    Stands in for AnsibleModule.run_command and get_bin_path and records every command run."""

    def __init__(self, running=True):
        debian = {'public': _zone(services=['dhcpv6-client', 'ssh'], interfaces=['eth0']),
                  'trusted': _zone(), 'internal': _zone(services=['ssh', 'mdns']), 'home': _zone(services=['ssh'])}
        self.config = {'permanent': debian, 'runtime': copy.deepcopy(debian)}
        self.default = 'public'
        self.running = running
        self.installed = True
        self.systemd = False  # a systemctl that answers for firewalld's unit
        self.calls = []
        self.fail = {}  # option prefix -> (rc, stderr) for the command that carries it

    # -- the fake's own view
    def zone(self, name, mode='permanent'):
        return self.config[mode][name]

    def mutations(self):
        return [c for c in self.calls if not any(arg in READS for arg in c)]

    def commands(self):
        return [' '.join(c[1:]) for c in self.calls]

    # -- AnsibleModule stand-ins
    def bin(self, name):
        assert name in ('firewall-cmd', 'firewall-offline-cmd', 'systemctl')
        if name == 'systemctl':
            return '/usr/bin/systemctl' if self.systemd else None
        return '/usr/bin/' + name if self.installed else None

    def run(self, argv):
        self.calls.append(list(argv))
        if argv[0] == '/usr/bin/systemctl':
            assert argv[1:] == ['is-active', 'firewalld.service'], argv
            return (0, 'active\n', '') if self.running else (3, 'inactive\n', '')
        if argv[0] == '/usr/bin/firewall-offline-cmd':  # firewalld's files: the permanent configuration
            assert not self.running and '--permanent' not in argv, argv
            # Its --remove-service is lokkit's, refused beside --zone (the real one's message).
            if any(a.startswith('--remove-service=') for a in argv) and any(a.startswith('--zone=') for a in argv):
                return 2, '', "usage: see firewall-offline-cmd man page\nCan't use lokkit options with other options.\n"
            argv = [argv[0], '--permanent'] + [a.replace('--remove-service-from-zone=', '--remove-service=') for a in argv[1:]]
        else:
            assert argv[0] == '/usr/bin/firewall-cmd'
            if not self.running:
                return 252, '', 'FirewallD is not running\n'
        for prefix, failure in self.fail.items():
            if any(arg.startswith(prefix) for arg in argv):
                return failure[0], '', failure[1]
        args = argv[1:]
        mode = 'permanent' if '--permanent' in args else 'runtime'
        args = [a for a in args if a != '--permanent']
        if args == ['--list-all-zones']:
            return 0, self.listing(mode), ''
        if args == ['--get-services']:
            return 0, ' '.join(sorted(SERVICES)) + '\n', ''
        if len(args) == 1 and args[0].startswith('--set-default-zone='):
            self.default = args[0].split('=', 1)[1]
            self.config['runtime'] = copy.deepcopy(self.config['permanent'])  # firewalld >= 1.0 reloads
            return 0, 'success\n', ''
        zone_arg, actions = args[0], args[1:]
        assert zone_arg.startswith('--zone=') and actions, args
        assert len(set(a.split('=')[0] for a in actions)) == 1, 'firewall-cmd takes one kind of action per call'
        zone = self.config[mode][zone_arg.split('=', 1)[1]]
        warnings = []
        for action in actions:
            option, entry = action[2:].split('=', 1)
            verb, kind = option.split('-', 1)
            warning = getattr(self, '_' + verb)(mode, zone, kind + 's', entry)
            if warning:
                warnings.append(warning)
        if warnings and len(actions) == 1 and not warnings[0].startswith(('ALREADY', 'NOT_ENABLED')):
            return 101, '', 'Error: %s\n' % warnings[0]
        return 0, 'success\n', ''.join('Warning: %s\n' % w for w in warnings)

    def _add(self, mode, zone, kind, entry):
        if kind == 'services' and entry not in SERVICES:
            return "INVALID_SERVICE: '%s' not among existing services" % entry
        if kind == 'ports':
            return self._add_port(zone, entry)
        if entry in zone[kind]:
            return "ALREADY_ENABLED: '%s' already in zone" % entry
        zone[kind].append(entry)
        return None

    def _add_port(self, zone, port):
        low, high, proto = _span(port)
        if any(p == proto and lo <= low and high <= hi for lo, hi, p in map(_span, zone['ports'])):
            return 'ALREADY_ENABLED: %s' % port
        kept = []
        for listed in zone['ports']:  # firewalld merges overlapping ranges
            lo, hi, p = _span(listed)
            if p == proto and lo <= high and low <= hi:
                low, high = min(low, lo), max(high, hi)
            else:
                kept.append(listed)
        zone['ports'] = kept + [_text(low, high, proto)]
        return None

    def _remove(self, mode, zone, kind, entry):
        if entry not in zone[kind]:
            return "NOT_ENABLED: '%s' not in zone" % entry
        zone[kind].remove(entry)
        return None

    def _change(self, mode, zone, kind, entry):
        for other in self.config[mode].values():
            if entry in other[kind]:
                other[kind].remove(entry)
        zone[kind].append(entry)
        return None

    def listing(self, mode):
        """What firewall-cmd [--permanent] --list-all-zones prints."""
        out = []
        for name in sorted(self.config[mode]):
            zone = self.config[mode][name]
            out.append(name + (' (default, active)' if name == self.default else ''))
            out.append('  target: %s' % ('ACCEPT' if name == 'trusted' else 'default'))
            out.append('  icmp-block-inversion: no')
            for kind in KINDS:
                out.append('  %s: %s' % (kind, ' '.join(zone[kind])))
            out.append('  protocols: ')
            out.append('  forward: yes')
            out.append('  forward-ports: ' + ('\n\tport=80:proto=tcp:toport=8080:toaddr=' if name == 'home' else ''))
            out.append('  rich rules: ' + ('\n\trule family="ipv4" source address="10.9.0.0/16" port port="5000" '
                                           'protocol="tcp" accept' if name == 'internal' else ''))
            out.append('')
        return '\n'.join(out) + '\n'


CLUSTER = [
    {'name': 'trusted', 'sources': ['10.0.0.0/16', '192.168.128.0/22']},
    {'name': 'public', 'services': ['ssh'], 'ports': ['6817/tcp', '6818/tcp', '60001-63000/tcp'], 'exclusive': True},
]


@pytest.fixture
def fw():
    return Firewalld()


def _run(fw, monkeypatch, capsys, check=False, diff=False, fail=False, **args):
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda self, argv, **kw: fw.run(argv))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path', lambda self, name, required=False, *a, **kw: fw.bin(name))
    if diff:
        args['_ansible_diff'] = True
    result = run_module(firewalld_zones, args, capsys, check=check)
    assert bool(result.get('failed')) == fail, result
    return result


def _both(fw, name, kind):
    return [sorted(fw.zone(name, mode)[kind]) for mode in ('permanent', 'runtime')]


# ------------------------------------------------------------------- applying and re-applying

# What the cluster's zones need on a fresh firewalld, in the order the module reports it.
FIRST_CHANGES = [
    'trusted: add source 10.0.0.0/16',
    'trusted: add source 192.168.128.0/22',
    'public: remove service dhcpv6-client',
    'public: add port 6817/tcp',
    'public: add port 6818/tcp',
    'public: add port 60001-63000/tcp',
]


def test_first_apply_changes_both_configurations(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, default_zone='public', zones=CLUSTER)
    assert result['changed'] is True
    assert result['changes'] == FIRST_CHANGES
    assert result['default_zone'] == 'public'
    for mode in ('permanent', 'runtime'):
        assert fw.zone('trusted', mode)['sources'] == ['10.0.0.0/16', '192.168.128.0/22']
        assert fw.zone('public', mode) == _zone(services=['ssh'], interfaces=['eth0'],
                                                ports=['6817/tcp', '6818/tcp', '60001-63000/tcp'])
    # Permanent first, one command per zone, kind and direction, never a reload.
    assert fw.commands() == [
        '--permanent --list-all-zones', '--list-all-zones',
        '--permanent --zone=trusted --change-source=10.0.0.0/16 --change-source=192.168.128.0/22',
        '--permanent --zone=public --remove-service=dhcpv6-client',
        '--permanent --zone=public --add-port=6817/tcp --add-port=6818/tcp --add-port=60001-63000/tcp',
        '--zone=trusted --change-source=10.0.0.0/16 --change-source=192.168.128.0/22',
        '--zone=public --remove-service=dhcpv6-client',
        '--zone=public --add-port=6817/tcp --add-port=6818/tcp --add-port=60001-63000/tcp',
    ]


def test_second_apply_only_reads(fw, monkeypatch, capsys):
    _run(fw, monkeypatch, capsys, default_zone='public', zones=CLUSTER)
    fw.calls = []
    result = _run(fw, monkeypatch, capsys, default_zone='public', zones=CLUSTER)
    assert result['changed'] is False and result['changes'] == []
    assert fw.commands() == ['--permanent --list-all-zones', '--list-all-zones']
    assert fw.mutations() == []


def test_only_the_configuration_that_differs_is_changed(fw, monkeypatch, capsys):
    _run(fw, monkeypatch, capsys, zones=CLUSTER)
    fw.zone('public', 'runtime')['ports'].remove('6818/tcp')  # e.g. someone ran firewall-cmd --remove-port
    fw.zone('trusted', 'permanent')['sources'].remove('10.0.0.0/16')
    fw.calls = []
    result = _run(fw, monkeypatch, capsys, zones=CLUSTER)
    assert result['changes'] == ['trusted: add source 10.0.0.0/16 (permanent only)',
                                 'public: add port 6818/tcp (runtime only)']
    assert [' '.join(c[1:]) for c in fw.mutations()] == [
        '--permanent --zone=trusted --change-source=10.0.0.0/16', '--zone=public --add-port=6818/tcp']


# ------------------------------------------------------------------- exclusive or not


def test_exclusive_removes_undeclared_services_and_ports_but_not_sources_or_interfaces(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode).update(ports=['7000/tcp', '6818/tcp'], sources=['172.16.0.0/12'])
    fw.zone('public', 'runtime')['services'].append('http')  # a runtime-only extra
    result = _run(fw, monkeypatch, capsys, zones=CLUSTER)
    assert result['changes'] == [
        'trusted: add source 10.0.0.0/16',
        'trusted: add source 192.168.128.0/22',
        'public: remove service dhcpv6-client',
        'public: remove port 7000/tcp',
        'public: add port 6817/tcp',
        'public: add port 60001-63000/tcp',
        'public: remove service http (runtime only)',
    ]
    for mode in ('permanent', 'runtime'):
        assert fw.zone('public', mode) == _zone(services=['ssh'], interfaces=['eth0'], sources=['172.16.0.0/12'],
                                                ports=['6818/tcp', '6817/tcp', '60001-63000/tcp'])


def test_without_exclusive_undeclared_entries_stay(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['ports'] = ['7000/tcp']
    zones = [dict(CLUSTER[1], exclusive=False)]
    result = _run(fw, monkeypatch, capsys, zones=zones)
    assert result['changes'] == ['public: add port 6817/tcp', 'public: add port 6818/tcp',
                                 'public: add port 60001-63000/tcp']
    assert _both(fw, 'public', 'services') == [['dhcpv6-client', 'ssh']] * 2
    assert _both(fw, 'public', 'ports') == [['60001-63000/tcp', '6817/tcp', '6818/tcp', '7000/tcp']] * 2


def test_exclusive_leaves_kinds_that_are_not_given(fw, monkeypatch, capsys):
    fw.zone('public')['ports'] = ['7000/tcp']
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'services': ['ssh'], 'exclusive': True}])
    assert result['changes'] == ['public: remove service dhcpv6-client']
    assert fw.zone('public')['ports'] == ['7000/tcp']


def test_exclusive_with_an_empty_list_closes_every_entry_of_that_kind(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'services': [], 'exclusive': True}])
    assert result['changes'] == ['public: remove service dhcpv6-client', 'public: remove service ssh']
    assert _both(fw, 'public', 'services') == [[], []]


# ------------------------------------------------------------------- ports as ranges


def test_overlapping_declared_ports_converge_on_the_merged_range(fw, monkeypatch, capsys):
    """firewalld merges overlapping ranges; comparing the strings would add (or close) them on every run."""
    zones = [{'name': 'public', 'ports': ['6817/tcp', '6817-6819/tcp', '6818-6820/tcp', '6821/tcp'],
              'exclusive': True}]
    result = _run(fw, monkeypatch, capsys, zones=zones)
    assert result['changes'] == ['public: add port 6817-6820/tcp', 'public: add port 6821/tcp']
    assert _both(fw, 'public', 'ports') == [['6817-6820/tcp', '6821/tcp']] * 2
    fw.calls = []
    assert _run(fw, monkeypatch, capsys, zones=zones)['changed'] is False
    assert fw.mutations() == []


def test_a_declared_port_inside_an_open_range_is_open(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['ports'] = ['6000-7000/tcp']
    assert _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'ports': ['6818/tcp']}])['changed'] is False
    assert fw.mutations() == []


def test_exclusive_replaces_a_range_wider_than_declared(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['ports'] = ['6000-7000/tcp', '6818/udp']
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'ports': ['6818/tcp'], 'exclusive': True}])
    assert result['changes'] == ['public: remove port 6000-7000/tcp', 'public: remove port 6818/udp',
                                 'public: add port 6818/tcp']
    assert _both(fw, 'public', 'ports') == [['6818/tcp']] * 2


# ------------------------------------------------------------------- sources, interfaces, default zone


def test_a_source_or_interface_bound_to_another_zone_moves(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('internal', mode)['sources'] = ['10.0.0.0/16']
    zones = [{'name': 'trusted', 'sources': ['10.0.0.0/16'], 'interfaces': ['eth0']}]
    result = _run(fw, monkeypatch, capsys, zones=zones)
    assert result['changes'] == ['trusted: add source 10.0.0.0/16 (moved from internal)',
                                 'trusted: add interface eth0 (moved from public)']
    assert _both(fw, 'internal', 'sources') == [[], []] and _both(fw, 'public', 'interfaces') == [[], []]
    assert _both(fw, 'trusted', 'interfaces') == [['eth0'], ['eth0']]


def test_ipv6_sources_and_single_addresses(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'trusted', 'sources': ['fd00::/8', '198.18.20.7']}])
    assert result['changes'] == ['trusted: add source fd00::/8', 'trusted: add source 198.18.20.7']


def test_default_zone_change_is_set_last(fw, monkeypatch, capsys):
    """firewalld 1.0 and later reload on --set-default-zone: last, the reload loads a permanent
    configuration that already has everything declared."""
    fw.default = 'home'
    result = _run(fw, monkeypatch, capsys, default_zone='public', zones=CLUSTER)
    assert result['changes'][-1] == 'default zone: public (was home)'
    assert result['default_zone'] == 'public' and fw.default == 'public'
    assert fw.commands()[-1] == '--set-default-zone=public'
    assert fw.zone('public', 'runtime')['ports'] == ['6817/tcp', '6818/tcp', '60001-63000/tcp']
    fw.calls = []
    assert _run(fw, monkeypatch, capsys, default_zone='public', zones=CLUSTER)['changed'] is False


def test_default_zone_alone(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, default_zone='home')
    assert result['changes'] == ['default zone: home (was public)'] and fw.default == 'home'
    assert [' '.join(c[1:]) for c in fw.mutations()] == ['--set-default-zone=home']


# ------------------------------------------------------------------- check mode and diff


def test_check_mode_reports_and_changes_nothing(fw, monkeypatch, capsys):
    fw.default = 'home'
    before = copy.deepcopy(fw.config)
    result = _run(fw, monkeypatch, capsys, check=True, default_zone='public', zones=CLUSTER)
    assert result['changed'] is True
    assert result['changes'] == FIRST_CHANGES + ['default zone: public (was home)']
    assert result['default_zone'] == 'public'
    assert fw.mutations() == [] and fw.config == before and fw.default == 'home'


def test_diff_shows_the_declared_kinds_before_and_after(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('internal', mode)['sources'] = ['10.0.0.0/16']
    zones = CLUSTER + [{'name': 'internal', 'sources': []}]
    result = _run(fw, monkeypatch, capsys, check=True, diff=True, default_zone='public', zones=zones)
    before, after = result['diff']['before'], result['diff']['after']
    assert before['runtime'] == {'default_zone': 'public', 'zones': {
        'trusted': {'sources': []},
        'public': {'services': ['dhcpv6-client', 'ssh'], 'ports': []},
        'internal': {'sources': ['10.0.0.0/16']}}}
    assert after['permanent'] == after['runtime'] == {'default_zone': 'public', 'zones': {
        'trusted': {'sources': ['10.0.0.0/16', '192.168.128.0/22']},
        'public': {'services': ['ssh'], 'ports': ['60001-63000/tcp', '6817/tcp', '6818/tcp']},
        'internal': {'sources': []}}}
    applied = _run(fw, monkeypatch, capsys, diff=True, default_zone='public', zones=zones)
    assert applied['diff'] == result['diff']


# ------------------------------------------------------------------- refusing and failing


@pytest.mark.parametrize('zone, message', [
    ({'name': 'public', 'ports': ['6818']}, "public: port '6818' is not PORT/PROTO"),
    ({'name': 'public', 'ports': ['6818/icmp']}, "public: port '6818/icmp' is not PORT/PROTO"),
    ({'name': 'public', 'ports': ['70000/tcp']}, "public: port '70000/tcp' must be within 1-65535"),
    ({'name': 'public', 'ports': ['0/tcp']}, "public: port '0/tcp' must be within 1-65535"),
    ({'name': 'public', 'ports': ['7000-6000/udp']}, "public: port '7000-6000/udp' must be within 1-65535, LOW not above HIGH"),
    ({'name': 'trusted', 'sources': ['10.0.0.0/33']}, "trusted: source '10.0.0.0/33' is not an IPv4 or IPv6"),
    ({'name': 'trusted', 'sources': ['10.0.0/16']}, "trusted: source '10.0.0/16' is not an IPv4 or IPv6"),
    ({'name': 'trusted', 'sources': ['ipset:cluster']}, "trusted: source 'ipset:cluster' is not an IPv4 or IPv6"),
    ({'name': 'trusted', 'interfaces': ['eth0 eth1']}, "trusted: interface 'eth0 eth1' is not a valid"),
    ({'name': 'public', 'services': ['ssh;reboot']}, "public: service 'ssh;reboot' is not a valid"),
    ({'name': 'pub lic'}, "zone name 'pub lic' is not valid"),
])
def test_invalid_entries_fail_before_firewall_cmd_runs(fw, monkeypatch, capsys, zone, message):
    result = _run(fw, monkeypatch, capsys, fail=True, zones=[{'name': 'trusted', 'sources': ['10.0.0.0/16']}, zone])
    assert message in result['msg'], result['msg']
    assert fw.calls == [] and result['changes'] == []


def test_every_problem_is_named_at_once(fw, monkeypatch, capsys):
    zones = [{'name': 'trusted', 'sources': ['10.0.0.0/16', 'nonsense']},
             {'name': 'public', 'ports': ['1/icmp', '22/tcp', '99999/tcp']},
             {'name': 'internal', 'sources': ['10.0.0.0/16']},
             {'name': 'public'}]
    result = _run(fw, monkeypatch, capsys, fail=True, zones=zones)
    assert result['msg'].split('; ') == [
        "trusted: source 'nonsense' is not an IPv4 or IPv6 address or network",
        "public: port '1/icmp' is not PORT/PROTO or LOW-HIGH/PROTO with PROTO one of tcp, udp, sctp, dccp",
        "public: port '99999/tcp' must be within 1-65535, LOW not above HIGH",
        'source 10.0.0.0/16 is declared in zones trusted and internal (firewalld binds it to one zone)',
        'zone public is declared twice',
    ]
    assert fw.calls == []


def test_an_unknown_zone_fails_before_any_change(fw, monkeypatch, capsys):
    fw.config['permanent']['cluster'] = _zone()  # made with --new-zone, not reloaded yet
    result = _run(fw, monkeypatch, capsys, fail=True, default_zone='nosuch', zones=CLUSTER + [{'name': 'cluster'}])
    assert result['msg'] == ('zone cluster exists in the permanent configuration only: reload firewalld first; '
                             'zone nosuch does not exist')
    assert fw.mutations() == []


def test_an_unknown_service_fails_before_any_change(fw, monkeypatch, capsys):
    zones = [{'name': 'public', 'services': ['ssh', 'slurm', 'https', 'nfs'], 'ports': ['6818/tcp']}]
    result = _run(fw, monkeypatch, capsys, fail=True, zones=zones)
    assert result['msg'] == ('firewalld does not know the service(s) nfs, slurm (permanent configuration; see '
                             'firewall-cmd --get-services); firewalld does not know the service(s) nfs, slurm '
                             '(runtime configuration; see firewall-cmd --get-services)')
    assert fw.mutations() == []


def test_services_are_only_looked_up_when_some_are_added(fw, monkeypatch, capsys):
    _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'services': ['ssh']}])
    assert '--get-services' not in fw.commands()


def test_a_failing_command_fails_with_its_stderr_and_what_was_applied(fw, monkeypatch, capsys):
    fw.fail['--add-port'] = (13, "Error: INVALID_PROTOCOL: 'dccp' not supported by the kernel\n")
    result = _run(fw, monkeypatch, capsys, fail=True, zones=CLUSTER)
    assert result['msg'] == ("firewall-cmd --permanent --zone=public --add-port=6817/tcp --add-port=6818/tcp "
                             "--add-port=60001-63000/tcp failed (rc=13): Error: INVALID_PROTOCOL: 'dccp' not "
                             "supported by the kernel")
    assert result['rc'] == 13 and 'INVALID_PROTOCOL' in result['stderr']
    assert result['changes'] == ['trusted: add source 10.0.0.0/16 (permanent only)',
                                 'trusted: add source 192.168.128.0/22 (permanent only)',
                                 'public: remove service dhcpv6-client (permanent only)']


def test_a_warning_with_exit_status_0_is_a_failure(fw, monkeypatch, capsys):
    """firewall-cmd exits 0 when one entry of several fails, and only warns."""
    fw.fail['--change-source'] = (0, "Warning: ZONE_CONFLICT: '10.0.0.0/16' already bound to a zone\n")
    result = _run(fw, monkeypatch, capsys, fail=True, zones=CLUSTER)
    assert result['msg'].endswith("failed (rc=0): Warning: ZONE_CONFLICT: '10.0.0.0/16' already bound to a zone")


def test_already_enabled_warnings_are_not_failures(fw, monkeypatch, capsys):
    fw.fail['--add-port'] = (0, 'Warning: ALREADY_ENABLED: 6817:tcp\n')
    assert _run(fw, monkeypatch, capsys, zones=CLUSTER)['changed'] is True


def test_firewalld_not_running(monkeypatch, capsys):
    fw = Firewalld(running=False)
    result = _run(fw, monkeypatch, capsys, fail=True, check=True, zones=CLUSTER)
    assert result['msg'] == ('firewalld is not running (firewall-cmd --permanent --list-all-zones: '
                             'FirewallD is not running)')
    assert result['rc'] == 252 and len(fw.calls) == 1


def test_offline_changes_the_permanent_configuration_before_the_first_start(monkeypatch, capsys):
    fw = Firewalld(running=False)
    runtime = copy.deepcopy(fw.config['runtime'])
    result = _run(fw, monkeypatch, capsys, zones=CLUSTER, offline=True)
    assert result['changed'] is True and result['running'] is False
    assert result['changes'] == [line + ' (permanent only)' for line in FIRST_CHANGES]
    # One try with firewall-cmd, then firewalld's files alone.
    assert fw.commands()[0] == '--permanent --list-all-zones'
    assert all(c[0] == '/usr/bin/firewall-offline-cmd' for c in fw.calls[1:])
    assert fw.commands()[1:] == ['--list-all-zones', '--zone=trusted --change-source=10.0.0.0/16 --change-source=192.168.128.0/22',
                                 '--zone=public --remove-service-from-zone=dhcpv6-client',
                                 '--zone=public --add-port=6817/tcp --add-port=6818/tcp --add-port=60001-63000/tcp']
    assert sorted(fw.zone('trusted')['sources']) == ['10.0.0.0/16', '192.168.128.0/22']
    assert fw.config['runtime'] == runtime
    # What firewalld loads when it starts: the permanent configuration.
    fw.running = True
    fw.config['runtime'] = copy.deepcopy(fw.config['permanent'])
    fw.calls = []
    again = _run(fw, monkeypatch, capsys, zones=CLUSTER, offline=True)
    assert again['changed'] is False and again['running'] is True and fw.mutations() == []


def test_offline_asks_systemd_first_and_spares_firewall_cmds_start(monkeypatch, capsys):
    # systemd says firewalld is stopped: firewalld's files at once, no firewall-cmd (a Python start) to be refused
    fw = Firewalld(running=False)
    fw.systemd = True
    result = _run(fw, monkeypatch, capsys, zones=CLUSTER, offline=True)
    assert result['changed'] is True and result['running'] is False
    assert fw.calls[0] == ['/usr/bin/systemctl', 'is-active', 'firewalld.service']
    assert [c[0] for c in fw.calls[1:]] == ['/usr/bin/firewall-offline-cmd'] * 4
    assert result['changes'] == [line + ' (permanent only)' for line in FIRST_CHANGES]
    # running: firewall-cmd, both configurations, as without systemd's answer
    fw.running = True
    fw.config['runtime'] = copy.deepcopy(fw.config['permanent'])
    fw.calls = []
    again = _run(fw, monkeypatch, capsys, zones=CLUSTER, offline=True)
    assert again['running'] is True and again['changed'] is False
    assert fw.calls[0][0] == '/usr/bin/systemctl' and all(c[0] == '/usr/bin/firewall-cmd' for c in fw.calls[1:])
    # without offline=true, systemd is not asked: a stopped firewalld fails as before
    fw.running, fw.calls = False, []
    stopped = _run(fw, monkeypatch, capsys, fail=True, zones=CLUSTER)
    assert stopped['rc'] == 252 and fw.calls[0][0] == '/usr/bin/firewall-cmd'


def test_offline_reads_without_changing_in_check_mode(monkeypatch, capsys):
    fw = Firewalld(running=False)
    result = _run(fw, monkeypatch, capsys, check=True, diff=True, zones=CLUSTER, default_zone='trusted', offline=True)
    assert result['changes'][-1] == 'default zone: trusted (was public)'
    assert list(result['diff']['before']) == ['permanent'] and fw.mutations() == []


def test_offline_without_firewall_offline_cmd(monkeypatch, capsys):
    fw = Firewalld(running=False)
    real_bin = fw.bin
    monkeypatch.setattr(fw, 'bin', lambda name: None if name == 'firewall-offline-cmd' else real_bin(name))
    result = _run(fw, monkeypatch, capsys, fail=True, zones=CLUSTER, offline=True)
    assert result['msg'] == 'firewalld is not running and firewall-offline-cmd was not found'
    assert fw.mutations() == []


def test_without_firewall_cmd(fw, monkeypatch, capsys):
    fw.installed = False
    result = _run(fw, monkeypatch, capsys, fail=True, zones=CLUSTER)
    assert result['msg'] == 'firewall-cmd not found: is firewalld installed?' and fw.calls == []


# ------------------------------------------------------------------- reading firewall-cmd


def test_listing_parser_reads_rich_rules_and_skips_forward_ports(fw):
    zones, default = firewalld_zones._parse_zones(fw.listing('runtime'))
    assert default == 'public'
    assert zones['internal'] == {'sources': [], 'interfaces': [], 'services': ['ssh', 'mdns'], 'ports': [],
                                 'rich_rules': ['rule family="ipv4" source address="10.9.0.0/16" port port="5000" '
                                                'protocol="tcp" accept']}
    assert zones['home']['rich_rules'] == [] and zones['home']['ports'] == []
    assert zones['public']['interfaces'] == ['eth0'] and sorted(zones) == ['home', 'internal', 'public', 'trusted']


def test_listing_parser_on_a_permanent_listing_of_firewalld_2():
    text = ('public (default)\n  target: default\n  ingress-priority: 0\n  egress-priority: 0\n'
            '  icmp-block-inversion: no\n  interfaces: \n  sources: \n  services: dhcpv6-client ssh\n'
            '  ports: 100-250/tcp 300/udp\n  protocols: \n  forward: yes\n  masquerade: no\n'
            '  forward-ports: \n  source-ports: \n  icmp-blocks: \n  rich rules: \n\n'
            'trusted\n  target: ACCEPT\n  interfaces: \n  sources: 10.1.0.0/16 fd00::/8\n  services: \n  ports: \n')
    zones, default = firewalld_zones._parse_zones(text)
    assert default == 'public'
    assert zones['public']['ports'] == ['100-250/tcp', '300/udp']
    assert zones['trusted']['sources'] == ['10.1.0.0/16', 'fd00::/8']
