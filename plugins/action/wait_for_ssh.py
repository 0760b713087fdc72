# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of ocigpu.cluster.wait_for_ssh: ansible.builtin.wait_for_connection that stops at
once when ssh refuses a host key, with the host, the known_hosts file and the command that fixes it.

wait_for_connection tries again on every failure until its timeout: a host whose key changed would
be waited for until boot_wait_timeout (30 minutes) and then reported as "did not answer SSH". ssh's
answer does not change by waiting, so the first one ends the wait.

The collection's hosts record their keys under their instance OCID (ssh's HostKeyAlias), so a
refused key is the same instance answering with another key; the message names the OCID (what
ssh-keygen -R needs) and the host's name and address."""
from __future__ import annotations

import re
import shlex
import time

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action.wait_for_connection import ActionModule as WaitForConnection
from ansible.plugins.action.wait_for_connection import TimedOutException
from ansible.utils.display import Display

display = Display()

# What ssh says when a host's key is not the one it knows (the first two), or when it cannot check it
# (no known key and StrictHostKeyChecking=yes, or no terminal to ask on).
HOST_KEY_FAILURE = re.compile(r'REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed|'
                              r'Host key for \S+ has changed')
# "Host key for [10.0.1.5]:22 has changed and you have requested strict checking."
CHANGED_HOST = re.compile(r'Host key for (\S+) has changed')
# "Offending ED25519 key in /home/u/.ocigpu/c/known_hosts:3"
OFFENDING = re.compile(r'Offending \S+ key in (.+?):(\d+)\s*$', re.M)


def ssh_options(command_line):
    """The -o options of an ssh command line (a string, split as a shell does), as (name in lower case, value)."""
    try:
        argv = shlex.split(command_line)
    except ValueError:
        return []
    options = []
    for index, arg in enumerate(argv):
        if arg == '-o' and index + 1 < len(argv):
            option = argv[index + 1]
        elif arg.startswith('-o') and len(arg) > 2:
            option = arg[2:]
        else:
            continue
        name, value = (option.split('=', 1) + [''])[:2]
        options.append((name.strip().lower(), value.strip()))
    return options


class HostKeyRefused(TimedOutException):
    """ssh refused the host key: waiting longer does not help."""


def host_key_problem(error, address, known_hosts=None, aliases=None):
    """The message for a connection error that is ssh refusing a host key, else None.

    address: the host as ssh names it in known_hosts (its HostKeyAlias, else ansible_host, [host]:port
    for another port); the host named by ssh's own message wins (through a jump, it may be the
    bastion's). aliases: {HostKeyAlias: the host as people know it (name, address)}."""
    text = to_text(error)
    if not HOST_KEY_FAILURE.search(text):
        return None
    changed = CHANGED_HOST.search(text)
    host = changed.group(1) if changed else address
    offending = OFFENDING.search(text)
    # The file ssh found the old key in, else the one the connection uses.
    files = offending.group(1) if offending else known_hosts
    where = ('the one recorded in %s' % files) if files else 'the one ssh knows'
    # ssh's own lines about the key, without its banner.
    said = '; '.join(line.strip() for line in text.splitlines() if re.search(r'Host key|Offending', line)) or ' '.join(text.split())
    fix = 'ssh-keygen -R %s' % shlex.quote(host) + (' -f %s' % shlex.quote(files) if files else '')
    if host in (aliases or {}):
        return ('the SSH host key of %s, known by its instance OCID %s, is not %s (ssh refused it; a new '
                'instance is accepted once, another key of the same instance never). The same instance answers with '
                'another key (its host keys made again), or another machine answers at its address: find out which '
                'first. If the new key is the instance\'s, remove the old one with: %s, and run again (teardown.yml '
                'removes the cluster\'s known_hosts file). ssh said: %s'
                % (aliases[host], host, where, fix, said))
    return ('the SSH host key of %s is not %s (ssh refused it; a new host is accepted once, a changed key never). '
            'After the cluster was torn down and built again, or a node replaced, on the same address, remove the '
            'old key with: %s, and run again (teardown.yml removes the cluster\'s known_hosts file); otherwise find '
            'out who answers at that address first. ssh said: %s'
            % (host, where, fix, said))


class ActionModule(WaitForConnection):

    _VALID_ARGS = WaitForConnection._VALID_ARGS | frozenset(('known_hosts_file',))

    def do_until_success_or_timeout(self, what, timeout, connect_timeout, what_desc, sleep=1):
        """Try `what` until it works or `timeout` seconds have passed, as wait_for_connection does,
        but stop at the first refused host key."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                what(connect_timeout)
                return
            except Exception as e:  # pylint: disable=broad-exception-caught  # any failure is tried again, as the builtin does
                problem = host_key_problem(e, self._known_hosts_address(), self._task.args.get('known_hosts_file'),
                                           self._host_key_aliases()[0])
                if problem:
                    self._host_key_refused = True
                    raise HostKeyRefused(problem) from e
                last = e
                display.debug('wait_for_ssh: %s failed, trying again in %d s' % (what_desc, sleep))
                time.sleep(sleep)
        raise TimedOutException('timed out waiting for %s: %s' % (what_desc, last))

    def _option(self, name):
        try:
            return self._connection.get_option(name)
        except KeyError:
            return None

    def _host_key_aliases(self):
        """The HostKeyAlias of the host and of the jump's ssh (its ProxyCommand), as the connection's ssh
        arguments set them: ({alias: the host as people know it}, the host's own alias or None)."""
        host, port = self._option('host'), self._option('port')
        where = '%s:%s' % (host, port) if port and int(port) != 22 else host
        name = getattr(self, '_inventory_hostname', None)
        aliases, own = {}, None
        for setting in ('ssh_args', 'ssh_common_args', 'ssh_extra_args'):
            for option, value in ssh_options(self._option(setting) or ''):
                if option == 'hostkeyalias' and own is None:  # ssh takes the first one given
                    own = value
                    aliases[own] = '%s (%s)' % (name, where) if name else where
                elif option == 'proxycommand':
                    jump = ssh_options(value)
                    for jump_option, jump_value in jump:
                        if jump_option == 'hostkeyalias':
                            aliases.setdefault(jump_value, 'the jump host %s' % shlex.split(value)[-1])
        return aliases, own

    def _known_hosts_address(self):
        """The host as ssh names it in known_hosts: its HostKeyAlias, else the address, [address]:port for a
        port other than 22."""
        own = self._host_key_aliases()[1]
        if own:
            return own
        host, port = self._option('host'), self._option('port')
        return '[%s]:%s' % (host, port) if port and int(port) != 22 else host

    def run(self, tmp=None, task_vars=None):
        self._host_key_refused = False
        self._inventory_hostname = (task_vars or {}).get('inventory_hostname')
        result = super().run(tmp, task_vars)
        if self._host_key_refused:
            result['host_key_refused'] = True
        return result
