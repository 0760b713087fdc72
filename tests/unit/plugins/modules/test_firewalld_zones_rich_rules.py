# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""firewalld_zones: rich rules (a port open to some sources only), read, added, removed, in an order
that never closes a port that moves between the zone's ports and a rich rule."""
from __future__ import annotations

import pytest

from ansible_collections.ocigpu.cluster.plugins.modules import firewalld_zones
from tests.unit.plugins.modules.test_firewalld_zones import Firewalld, _run


def rule(port, source='10.0.0.0/16'):
    """A rich rule as firewalld lists it."""
    return 'rule family="ipv4" source address="%s" port port="%s" protocol="tcp" accept' % (source, port)


class RichFirewalld(Firewalld):
    """The fake firewall-cmd of test_firewalld_zones, with rich rules: kept as firewalld lists them
    (its canonical form, whatever the form added), one per line under "rich rules:"."""

    def __init__(self, running=True):
        super(RichFirewalld, self).__init__(running)
        for mode in ('permanent', 'runtime'):
            for zone in self.config[mode].values():
                zone['rich_rules'] = []

    def _canonical(self, entry):
        words = dict(w.split('=', 1) for w in entry.replace('"', '').split() if '=' in w)
        return rule(words['port'], words['address'])

    def _add(self, mode, zone, kind, entry):
        if kind != 'rich-rules':
            return super(RichFirewalld, self)._add(mode, zone, kind, entry)
        entry = self._canonical(entry)
        if entry in zone['rich_rules']:
            return 'ALREADY_ENABLED: %s' % entry
        zone['rich_rules'].append(entry)
        return None

    def _remove(self, mode, zone, kind, entry):
        if kind != 'rich-rules':
            return super(RichFirewalld, self)._remove(mode, zone, kind, entry)
        entry = self._canonical(entry)
        if entry not in zone['rich_rules']:
            return 'NOT_ENABLED: %s' % entry
        zone['rich_rules'].remove(entry)
        return None

    def listing(self, mode):
        out = []
        for name in sorted(self.config[mode]):
            zone = self.config[mode][name]
            out.append(name + (' (default, active)' if name == self.default else ''))
            out.append('  target: %s' % ('ACCEPT' if name == 'trusted' else 'default'))
            for kind in ('interfaces', 'sources', 'services', 'ports'):
                out.append('  %s: %s' % (kind, ' '.join(zone[kind])))
            out.append('  forward-ports: \n\tport=80:proto=tcp:toport=8080:toaddr=')
            out.append('  rich rules: ' + ''.join('\n\t' + r for r in zone['rich_rules']))
            out.append('')
        return '\n'.join(out) + '\n'


@pytest.fixture
def fw():
    return RichFirewalld()


# The public zone as the firewall role declares it: SSH, a port open to all, Slurm's from the VCN.
PUBLIC = {'name': 'public', 'services': ['ssh'], 'ports': ['9100/tcp'],
          'rich_rules': [rule('6817'), rule('60001-63000')], 'exclusive': True}


def test_rich_rules_added_then_nothing_to_do(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, zones=[PUBLIC])
    assert result['changes'] == [
        'public: add rich rule ' + rule('6817'),
        'public: add rich rule ' + rule('60001-63000'),
        'public: remove service dhcpv6-client',
        'public: add port 9100/tcp',
    ]
    for mode in ('permanent', 'runtime'):
        assert fw.zone('public', mode)['rich_rules'] == [rule('6817'), rule('60001-63000')]
    # All the new rules in one command per configuration.
    assert [c for c in fw.commands() if 'rich-rule' in c] == [
        '--permanent --zone=public --add-rich-rule=%s --add-rich-rule=%s' % (rule('6817'), rule('60001-63000')),
        '--zone=public --add-rich-rule=%s --add-rich-rule=%s' % (rule('6817'), rule('60001-63000')),
    ]
    fw.calls = []
    again = _run(fw, monkeypatch, capsys, zones=[PUBLIC])
    assert again['changed'] is False and again['changes'] == [] and fw.mutations() == []


def test_a_rule_written_otherwise_counts_as_listed(fw, monkeypatch, capsys):
    """Quotes, attribute order: firewalld lists its own form; the declared one is the same rule."""
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['rich_rules'] = [rule('6817')]
    loose = 'rule family=ipv4 source address=10.0.0.0/16 port protocol=tcp port=6817 accept'
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'rich_rules': [loose], 'exclusive': True}])
    assert result['changed'] is False and fw.mutations() == []


def test_port_moved_from_every_source_to_the_vcn_is_never_closed(fw, monkeypatch, capsys):
    """The old state: Slurm's port open to all. The rule that opens it to the VCN comes before the
    port's removal, in each configuration."""
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['ports'] = ['6817/tcp', '9100/tcp']
        fw.zone('public', mode)['services'] = ['ssh']
    result = _run(fw, monkeypatch, capsys, zones=[dict(PUBLIC, rich_rules=[rule('6817')])])
    assert result['changes'] == ['public: add rich rule ' + rule('6817'), 'public: remove port 6817/tcp']
    options = [c.split('--zone=public ')[1].split('=', 1)[0] for c in fw.commands() if '--zone=public' in c]
    assert options == ['--add-rich-rule', '--remove-port', '--add-rich-rule', '--remove-port']


def test_exclusive_removes_undeclared_rules_last(fw, monkeypatch, capsys):
    """A rule the zone holds that nothing declares (the old exporter rule from another source) goes,
    after the new ones are in."""
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['rich_rules'] = [rule('9879', '0.0.0.0/0')]
        fw.zone('public', mode)['services'] = ['ssh']
    result = _run(fw, monkeypatch, capsys, zones=[dict(PUBLIC, ports=[], rich_rules=[rule('9879')])])
    assert result['changes'] == ['public: add rich rule ' + rule('9879'),
                                 'public: remove rich rule ' + rule('9879', '0.0.0.0/0')]
    assert fw.zone('public', 'runtime')['rich_rules'] == [rule('9879')]


def test_not_exclusive_keeps_undeclared_rules(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['rich_rules'] = [rule('5000')]
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'rich_rules': [rule('6817')]}])
    assert result['changes'] == ['public: add rich rule ' + rule('6817')]
    assert fw.zone('public')['rich_rules'] == [rule('5000'), rule('6817')]


def test_rich_rules_left_alone_when_not_declared(fw, monkeypatch, capsys):
    for mode in ('permanent', 'runtime'):
        fw.zone('public', mode)['rich_rules'] = [rule('5000')]
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'services': ['ssh'], 'exclusive': True}])
    assert result['changes'] == ['public: remove service dhcpv6-client']
    assert fw.zone('public', 'runtime')['rich_rules'] == [rule('5000')]


def test_only_the_configuration_that_lacks_a_rule_gets_it(fw, monkeypatch, capsys):
    fw.zone('public', 'permanent')['rich_rules'] = [rule('6817')]
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'rich_rules': [rule('6817')]}])
    assert result['changes'] == ['public: add rich rule %s (runtime only)' % rule('6817')]


def test_offline_adds_rules_to_the_files(monkeypatch, capsys):
    fw = RichFirewalld(running=False)
    result = _run(fw, monkeypatch, capsys, zones=[{'name': 'public', 'rich_rules': [rule('6817')]}], offline=True)
    assert result['running'] is False
    assert result['changes'] == ['public: add rich rule %s (permanent only)' % rule('6817')]
    assert fw.zone('public')['rich_rules'] == [rule('6817')]


def test_check_mode_reports_and_changes_nothing(fw, monkeypatch, capsys):
    result = _run(fw, monkeypatch, capsys, check=True, diff=True, zones=[PUBLIC])
    assert result['changed'] is True and fw.mutations() == []
    assert result['diff']['after']['runtime']['zones']['public']['rich_rules'] == sorted([rule('6817'), rule('60001-63000')])


@pytest.mark.parametrize('bad', ['family=ipv4 accept', 'rule family="ipv4', 'rule accept\nrule drop', ''])
def test_a_rule_that_is_not_one_rule_fails_before_anything(fw, monkeypatch, capsys, bad):
    result = _run(fw, monkeypatch, capsys, fail=True, zones=[{'name': 'public', 'rich_rules': [bad]}])
    assert 'rich rule' in result['msg'] and fw.calls == []


def test_listing_parser_reads_rich_rules_of_firewalld_2():
    text = ('public (default)\n  target: default\n  services: ssh\n  ports: 9100/tcp\n'
            '  forward-ports: \n\tport=80:proto=tcp:toport=8080:toaddr=\n  icmp-blocks: \n  rich rules: \n'
            '\t' + rule('6817') + '\n\t' + rule('60001-63000') + '\n\n'
            'trusted\n  target: ACCEPT\n  sources: 10.1.0.0/16\n  rich rules: \n')
    zones, dummy = firewalld_zones._parse_zones(text)
    assert zones['public']['rich_rules'] == [rule('6817'), rule('60001-63000')]
    assert zones['public']['ports'] == ['9100/tcp'] and zones['trusted']['rich_rules'] == []
