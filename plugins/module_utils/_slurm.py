# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Slurm's nodes as the collection reads them: one parser of `scontrol -o show node` and one node model.

Standard library only, and no import of the collection: the slurm_node module and the resize_plan
filter import it, the controller's service and self-healing loop import it without Ansible, and the
node_health role copies it beside its programs on the nodes (as ocigpu_slurm.py), where the health
check and the sweep of active checks run it.

    nodes = parse_show_node(out)        # {name: Node} from `scontrol -o show node [hostlist]`
    node = nodes['gpu-1']
    node.powered_down, node.drained_by('ocigpu-health:'), node.busy, node.reason, node.slurmd_start

    scontrol = Scontrol(run)            # the adapter: run(argv) -> (exit status, stdout, stderr)
    node = scontrol.node('gpu-1')       # None when slurmctld does not know it; SlurmError when it does not answer
    action, message = slurm_action('ocigpu-health:', node, failed=True, reason='ocigpu-health: xid 79')
    scontrol.apply('gpu-1', action, 'ocigpu-health: xid 79')     # drain or resume; (exit status, message)

The Slurm builds this is written for and tested against:
- Debian 13 (trixie)'s slurm-wlm 24.11.5 (slurmctld, slurmd, slurm-client 24.11.5-4+deb13u1), the
  build the test images and the demos run; the node lines of tests/unit/plugins/module_utils/test_slurm.py
  (REAL, CAPTURED) are laid out as its scontrol printed them.
- EPEL 9's slurm 22.05.9 (Oracle Linux 9; the version Fedora's package pages list for EPEL 9). Its
  output was not captured here: the parser relies only on what scontrol's text form has long been,
  one line a node of Key=Value fields, State as a base state and its flags joined by '+', Reason
  (with a ` [user@time]` suffix) after the other fields and before Comment and Extra; the power-saving
  words the predicates read (POWERED_DOWN, POWERING_UP, POWERING_DOWN, POWER_DOWN) are those the
  autoscaler's POWER_DOWN_FORCE works with.

Why the text form and not `scontrol --json show node`: the JSON form comes from the data_parser
plugins of Slurm 23.02 and later (24.11.5 answers with data_parser v0.0.42: "state" a list of words,
"reason", "address", "slurmd_start_time" as {set, number}); EPEL 9's 22.05 has no such plugin, and
the scontrol stand-ins of the tests answer the text form. One parser of the form every build prints.

The node model keeps the state words as Slurm prints them (a frozenset of flags) and names the tests
the callers make; each predicate is documented with the words it reads.
"""

from __future__ import annotations

import re
import subprocess  # nosec: fixed argument lists, no shell
import time

# The words of a node that runs or ends jobs.
BUSY = frozenset(('ALLOCATED', 'MIXED', 'COMPLETING'))
# The power-saving words (Slurm 21.08 and later): POWERED_DOWN (no instance, as far as Slurm knows),
# POWERING_UP (the resume program runs, the node has not registered yet), POWERING_DOWN (the suspend
# program's SuspendTimeout runs), POWER_DOWN (a power down is asked for and waits for the node to be idle).
POWER = frozenset(('POWERED_DOWN', 'POWERING_UP', 'POWERING_DOWN', 'POWER_DOWN'))
# The words of a drain: scontrol prints DRAIN; DRAINED and DRAINING are sinfo's words for the same flag.
DRAIN = frozenset(('DRAIN', 'DRAINED', 'DRAINING'))
# The states the sweep of active checks may take a node in: idle, and CLOUD (an on-demand node), nothing else.
PLAIN_IDLE = frozenset(('IDLE', 'CLOUD'))

_FIELD_RE = re.compile(r'(?:^|\s)(\w+)=(\S*)')
# The end of a reason: the ` [user@time]` that scontrol adds, followed by the next field or the end of the line.
_REASON_END_RE = re.compile(r' \[[^\[\]]*@[^\[\]]*\](?=\s+\w+=|\s*$)')
_TIME_RE = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$')


def _flag(word, doc):
    """A property of a Node that is true when its state has the word."""
    return property(lambda node: word in node.flags, doc=doc)


class Node(object):
    """One Slurm node as `scontrol -o show node` showed it. Immutable.

    name: NodeName. state: State as printed ('IDLE+CLOUD+POWERED_DOWN'); flags: its words, a frozenset.
    reason: Reason without its ` [user@time]` suffix, '' when none. address: NodeAddr, None when the line
    has none. gres, partitions: Gres and Partitions as printed, '' when absent. slurmd_start: SlurmdStartTime
    in seconds since the epoch (read as local time, as scontrol prints it), None when slurmd never started."""

    __slots__ = ('name', 'state', 'flags', 'reason', 'address', 'gres', 'partitions', 'slurmd_start')

    def __init__(self, name, state='', reason='', address=None, gres='', partitions='', slurmd_start=None):
        values = dict(name=name, state=state, flags=frozenset(w for w in state.upper().split('+') if w), reason=reason,
                      address=address, gres=gres, partitions=partitions, slurmd_start=slurmd_start)
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key, value):
        raise AttributeError('a Node is immutable')

    def __eq__(self, other):
        return isinstance(other, Node) and self._key() == other._key()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return 'Node(%s)' % ', '.join('%s=%r' % (k, getattr(self, k)) for k in self.__slots__ if k != 'flags')

    def _key(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    # power saving
    @property
    def powered_down(self):
        """POWERED_DOWN and not POWERING_UP: Slurm holds no instance for it and no resume has begun (a power
        down still under way, POWERING_DOWN, counts). The service's test of a cluster network's nodes."""
        return 'POWERED_DOWN' in self.flags and 'POWERING_UP' not in self.flags

    @property
    def power_down_done(self):
        """POWERED_DOWN and not POWERING_DOWN: powered down and the suspend program's time is over. The
        self-healing loop's test before it powers a node up again."""
        return 'POWERED_DOWN' in self.flags and 'POWERING_DOWN' not in self.flags

    powering_up = _flag('POWERING_UP', 'POWERING_UP: the resume program was started and the node has not registered yet.')

    powering_down = _flag('POWERING_DOWN', 'POWERING_DOWN: the suspend program was started and SuspendTimeout has not run out.')

    @property
    def powered_up(self):
        """None of POWERED_DOWN, POWERING_UP, POWERING_DOWN, POWER_DOWN: its instance runs, as far as Slurm knows."""
        return not self.flags & POWER

    # availability
    down = _flag('DOWN', 'DOWN (the base state).')

    not_responding = _flag('NOT_RESPONDING', 'NOT_RESPONDING: slurmctld does not hear from its slurmd.')

    @property
    def busy(self):
        """ALLOCATED, MIXED or COMPLETING: it runs or ends jobs."""
        return bool(self.flags & BUSY)

    @property
    def drain(self):
        """A drain is set (DRAIN; DRAINED or DRAINING as sinfo says), with or without jobs on the node."""
        return bool(self.flags & DRAIN)

    @property
    def drained(self):
        """A drain and no job (not busy, not sinfo's DRAINING): the node can be taken away."""
        return self.drain and not self.draining

    @property
    def draining(self):
        """A drain and jobs still on it (busy, or sinfo's DRAINING)."""
        return self.drain and (self.busy or 'DRAINING' in self.flags)

    @property
    def plain_idle(self):
        """IDLE and no other word than CLOUD: powered up, not drained, reserved, completing or not responding.
        The sweep's test of a node it may check."""
        return 'IDLE' in self.flags and self.flags <= PLAIN_IDLE

    def drained_by(self, prefix):
        """A drain (drained or draining) whose reason starts with prefix: the drain of that owner."""
        return self.drain and self.reason.startswith(prefix)

    def resume_failed(self, markers):
        """DOWN and POWERED_DOWN with a reason that holds one of markers (for the service: 'ResumeTimeout
        reached', Slurm's, and the autoscaler's prefix): a resume that failed, never a person's DOWN."""
        return 'DOWN' in self.flags and 'POWERED_DOWN' in self.flags and any(m in self.reason for m in markers)

    def as_dict(self):
        """The node as the slurm_node module returns it and the resize_plan filter reads it: name, addr
        (NodeAddr, else the name), state, reason, gres, partitions."""
        return dict(name=self.name, addr=self.address or self.name, state=self.state, reason=self.reason,
                    gres=self.gres, partitions=self.partitions)


def _reason(rest):
    """Reason's text from what follows ' Reason=': up to its ` [user@time]` suffix, else up to the next field."""
    match = _REASON_END_RE.search(rest)
    if match:
        return rest[:match.start()].strip()
    return _FIELD_RE.split(rest, 1)[0].strip()


def _slurmd_start(text):
    if not text or not _TIME_RE.match(text):
        return None
    return time.mktime(time.strptime(text, '%Y-%m-%dT%H:%M:%S'))


def parse_show_node(text):
    """{name: Node} from `scontrol -o show node` (one line a node). Fields are read from the part of the
    line before Reason (Reason, Comment and Extra come last, and hold free text); a line without NodeName
    is skipped."""
    nodes = {}
    for line in (text or '').splitlines():
        head, _sep, rest = line.partition(' Reason=')
        fields = {}
        for key, value in _FIELD_RE.findall(head):
            fields.setdefault(key, value)
        name = fields.get('NodeName')
        if not name:
            continue
        nodes[name] = Node(name, state=fields.get('State', ''), reason=_reason(rest) if _sep else '',
                           address=fields.get('NodeAddr') or None, gres=fields.get('Gres', ''),
                           partitions=fields.get('Partitions', ''), slurmd_start=_slurmd_start(fields.get('SlurmdStartTime')))
    return nodes


def parse_slurm_nodes(text):
    """The nodes of `scontrol -o show node` as dicts (Node.as_dict), in Slurm's order."""
    return [node.as_dict() for node in parse_show_node(text).values()]


def is_busy(state):
    """Whether a State text ('MIXED+DRAIN') names a busy node (Node.busy)."""
    return Node('', state=state or '').busy


def slurm_action(owner, node, failed, reason=''):
    """What a check that owns the drains starting with `owner` does with a Slurm node.

    node: a Node, None when slurmctld does not know it. failed: True (drain with `reason`), False
    (passed: resume if this owner drained it), None (could not tell: change nothing).
    Returns (action, message), action one of 'drain', 'resume' or None. A check changes no drain but its
    own (a person's, or another check's, stays)."""
    if node is None:
        return None, 'unknown to slurmctld, nothing done'
    ours = node.drained_by(owner)
    if failed:
        if node.drain and not ours:
            return None, 'was drained by someone else (%s), left as it is' % node.reason
        if node.drain and node.reason == reason:
            return None, 'stays drained (%s)' % reason
        return 'drain', 'drained (%s)' % reason
    if failed is False and ours:
        return 'resume', 'resumed (was: %s)' % node.reason
    return None, 'left drained (%s)' % node.reason if node.drain else 'not drained, nothing to do'


class SlurmError(Exception):
    """scontrol failed: slurmctld does not answer, or refused. text: scontrol's message (or its exit status)."""

    def __init__(self, argv, status, text):
        self.argv, self.status, self.text = list(argv), status, text
        super(SlurmError, self).__init__('scontrol %s failed (rc %d): %s' % (' '.join(self.argv[1:]), status, text))


def run_command(argv, timeout=60):
    """(exit status, stdout, stderr) of argv: the runner of the programs on the nodes and the controller. A
    program that cannot be started, or does not end within timeout, is exit status 127 with the reason."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # nosec
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, '', str(exc)
    return proc.returncode, proc.stdout, proc.stderr


class Scontrol(object):
    """slurmctld through scontrol, for the programs and modules that read nodes and drain or resume them.

    run(argv) -> (exit status, stdout, stderr): run_command() above on the nodes, AnsibleModule.run_command in a
    module, or a runner of the caller's own (retries, a stand-in in tests). Nodes are read with
    `scontrol show node --oneliner [names]` and changed with `scontrol update NodeName=<names> State=...`."""

    def __init__(self, run=run_command, scontrol='scontrol'):
        self.run = run
        self.scontrol = scontrol

    def show_node(self, names=None):
        """{name: Node} of the nodes named (a hostlist), of every node without names. Raises SlurmError when
        scontrol fails (slurmctld does not answer, or a name is unknown)."""
        argv = [self.scontrol, 'show', 'node', '--oneliner'] + ([names] if names else [])
        status, out, err = self.run(argv)
        if status != 0:
            raise SlurmError(argv, status, (err or out).strip() or 'exit status %d' % status)
        return parse_show_node(out)

    def node(self, name):
        """The Node of name, None when slurmctld does not know it. Raises SlurmError when scontrol fails otherwise."""
        try:
            return self.show_node(name).get(name)
        except SlurmError as exc:
            if 'not found' in exc.text:
                return None
            raise

    def update(self, names, *fields):
        """(exit status, scontrol's message) of `scontrol update NodeName=<names> <fields>`."""
        status, out, err = self.run([self.scontrol, 'update', 'NodeName=' + names] + list(fields))
        return status, (err or out).strip()

    def drain(self, names, reason):
        return self.update(names, 'State=DRAIN', 'Reason=' + reason)

    def resume(self, names):
        return self.update(names, 'State=RESUME')

    def apply(self, name, action, reason=''):
        """Carry out an action of slurm_action: 'drain' (with reason) or 'resume'; (exit status, message)."""
        return self.drain(name, reason) if action == 'drain' else self.resume(name)
