# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Slurm power saving on OCI: ResumeProgram / SuspendProgram / ResumeFailProgram logic.

Slurm calls the program installed by the slurm_autoscaler role with a hostlist of State=CLOUD
nodes (``gpu-[1-4,7]``):

- resume: the nodes get one RDMA cluster network (ClusterOps.create, the same code path as the
  cluster_network module), the program waits until it is RUNNING and tells Slurm each node's
  addresses with one ``scontrol update nodename=a,b nodeaddr=ipa,ipb nodehostname=ha,hb``; each instance gets
  its Slurm name as the freeform tag ``ocigpu-slurm-node`` (and display name ``<cluster>-<name>``),
  which the node reads from the instance metadata service to start slurmd with ``-N <name>``. A cluster network
  that already carries these Slurm names is adopted, so a repeated resume never launches twice.
  A failed create (e.g. "Out of host capacity.") is terminated before the program reports the
  failure, so nothing billable is left, and the nodes are handed back to Slurm (power down). So is
  one whose create or work request the API kept failing after the retries (found by its tags when
  the create's answer was lost). A wait that times out leaves it: Slurm's power down of the handed
  back nodes runs the suspend, and a resume of the same names adopts it meanwhile.
- suspend / resume-fail: the nodes are marked released; a cluster network whose nodes are all
  released is terminated.
- A suspend that overlaps a resume of the same names wins: one that comes while the cluster network
  is on its way up terminates it (the resume's wait fails); one that comes before the resume has
  created anything finds nothing to terminate, so the resume, when it ends, drops the released
  names and terminates their cluster network itself. A resume left with no names fails.

Which Slurm names a cluster network carries is recorded on OCI itself, in the freeform tag
``ocigpu-slurm-nodes`` (a compressed hostlist), next to ``ocigpu-cluster``; the only local state
this module keeps is the set of released names of cluster networks that are still partly in use
(key ``released`` of the state file, state.py).

Hostlist syntax is _hostlist's; the programs' command line (main) is programs.py's.
"""

from __future__ import annotations

import re
import time

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _oci
from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import ON_DEMAND, ad_suffix, describe_failure, is_stock_out
from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import LIVE_NODE_STATES
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import _natural, compress_hostlist, expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._topology import place_of
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    CLUSTER_TAG, InputError, attr, cluster_tags, is_live)
from ansible_collections.ocigpu.cluster.plugins.module_utils._waiters import WaitError, WaitFailed, Waiter
from ocigpu_control.cloud import PAGE, Listings, SharedOps
from ocigpu_control.settings import ConfigError, log, with_defaults
from ocigpu_control.state import StateFile

NODES_TAG = 'ocigpu-slurm-nodes'
NODE_TAG = 'ocigpu-slurm-node'  # on each instance: its Slurm name, read by the node from the metadata service
AUTOSCALER_TAG = 'ocigpu-autoscaler'
PULL_SERVER_TAG = 'ocigpu-pull-server'  # on each instance, with PULL_CERT_TAG: where its pull path finds the controller
PULL_CERT_TAG = 'ocigpu-pull-cert'
SOURCE_TAG = 'ocigpu-capacity-source'  # on each cluster network it makes: the capacity source its hosts come from
MAX_TAG_VALUE = 256  # OCI's limit on a freeform tag value


def epoch_seconds():
    """Now in seconds since the epoch: the clock of the cooldowns in the state file (tests put the simulator's here)."""
    return time.time()


def clock_time(epoch):
    """HH:MM:SS (UTC) of a time in seconds since the epoch, as the log and the jobs' comments give a cooldown's end."""
    return time.strftime('%H:%M:%S', time.gmtime(epoch))


# Configuration -----------------------------------------------------------------------------------

def check_config(data):
    try:
        config = with_defaults(data)
    except ConfigError as exc:
        raise InputError(str(exc))
    config['node_names'] = expand_hostlist(config['nodes'])
    static = config.get('static') or {}
    if static:
        # Static nodes the self-healing loop replaces through the cluster network's pool (static.py).
        missing = [k for k in ('cluster_network_id', 'nodes') if not static.get(k)]
        if missing:
            raise InputError('config: static.%s missing' % ', static.'.join(missing))
        both = set(expand_hostlist(static['nodes'])) & set(config['node_names'])
        if both:
            raise InputError('static.nodes: %s are on-demand nodes too' % compress_hostlist(both))
    if int(config['max_nodes_per_cluster_network']) < 0:
        raise InputError('max_nodes_per_cluster_network: must be 0 (no limit) or more')
    if int(config['capacity_cooldown']) < 0:
        raise InputError('capacity_cooldown: must be 0 (no cooldown) or more seconds')
    config['capacity_sources'] = capacity_sources(config)
    return config


def capacity_sources(config):
    """The configuration's capacity sources, in order: [{name, kind, availability_domain, instance_configuration_id,
    capacity_reservation_id}]. A configuration without them (written before they existed) has one: the
    on-demand hosts of availability_domain, with instance_configuration_id, named from the AD (ad-1), marked
    derived (its cluster networks get no source tag, as before: their source is their AD)."""
    given = config.get('capacity_sources') or []
    if not given:
        ad = config['availability_domain']
        return [dict(name=ad_suffix(ad) or 'ad-1', kind=ON_DEMAND, availability_domain=ad,
                     instance_configuration_id=config['instance_configuration_id'], capacity_reservation_id=None,
                     derived=True)]
    if not isinstance(given, list):
        raise InputError('capacity_sources: a list of {name, availability_domain, instance_configuration_id, ...}')
    found = []
    for index, item in enumerate(given, 1):
        if not isinstance(item, dict):
            raise InputError('capacity_sources[%d]: a dict, not %r' % (index, item))
        missing = [k for k in ('name', 'availability_domain', 'instance_configuration_id') if not item.get(k)]
        if missing:
            raise InputError('capacity_sources[%d]: %s missing' % (index, ', '.join(missing)))
        found.append(dict(item, kind=item.get('kind') or ON_DEMAND,
                          capacity_reservation_id=item.get('capacity_reservation_id') or None))
    names = [source['name'] for source in found]
    twice = sorted(set(n for n in names if names.count(n) > 1))
    if twice:
        raise InputError('capacity_sources: the name(s) %s are given to more than one source' % ', '.join(twice))
    return found


# The autoscaler ----------------------------------------------------------------------------------

class ResumeFailed(Exception):
    """A resume that cannot give Slurm its nodes. `outcome` says what became of their cluster network."""

    LEFT = 'what was made is left for a later resume to adopt or a suspend to terminate'

    def __init__(self, message, outcome=LEFT, **details):
        super(ResumeFailed, self).__init__(message)
        self.message = message
        self.outcome = outcome
        self.details = details


class StockOut(Exception):
    """A source had no host for a cluster network (OCI's reason `reason`); what was made is terminating."""

    def __init__(self, reason, made=None, details=None, at=None):
        super(StockOut, self).__init__(reason)
        self.reason = reason
        self.made = made or []
        self.details = details or {}
        self.at = epoch_seconds() if at is None else at  # when OCI's answer came


def _terminated(ids, names):
    if not ids:
        return 'no cluster network of %s is left' % names
    return 'cluster network %s terminated, nothing of %s is left running' % (', '.join(ids), names)


def _error_text(exc):
    """An exception as one line: OCI's status, code and message for a ServiceError."""
    if isinstance(exc, _oci.ServiceError):
        return 'OCI API error %s %s: %s' % (exc.status, exc.code, exc.message)
    return '%s: %s' % (type(exc).__name__, exc)


class Autoscaler(object):
    """The autoscaler's work on OCI. The service makes one per request or job, all on one session and one
    set of shared listings (cloud.py), so that what they read of the compartment is read once for all."""

    def __init__(self, config, session=None, waiter=None, listings=None):
        self.config = config
        self.session = session or _oci.OCISession(dict(config['auth']))
        self.waiter = waiter or Waiter(self.session, timeout=int(config['wait_timeout']))
        self.listings = listings or Listings(self.session, config['compartment_id'])
        self.ops = SharedOps(self.listings, int(config['wait_timeout']), session=self.session, waiter=self.waiter,
                             compartment_id=config['compartment_id'], wait=True)
        self.state = StateFile(config['state_file'])
        self.ready_at = None  # listings.mark() when the last resume saw its cluster networks RUNNING
        # What the last resume's creates met on the way, one entry per cluster network made after a stock-out:
        # 'reservation r1 full, ad-1 out of host capacity, running in ad-2' (the service puts it in the job's comment).
        self.capacity_notes = []

    # what is in OCI
    def cluster_networks(self, after=None):
        """Live cluster networks this autoscaler made: [(model, [slurm names])], from a listing started after
        the mark `after` (cloud.Listings.mark(); now when None)."""
        found = []
        for cn in self.listings.get('cluster_networks', after):
            tags = attr(cn, 'freeform_tags') or {}
            if not is_live(cn) or tags.get(CLUSTER_TAG) != self.config['cluster_name'] or NODES_TAG not in tags:
                continue
            found.append((cn, expand_hostlist(tags[NODES_TAG])))
        return found

    def _check_names(self, names):
        if not names:
            raise InputError('hostlist: no node names given')
        unknown = [n for n in names if n not in self.config['node_names']]
        if unknown:
            raise InputError('hostlist: %s not among the autoscaled nodes %s' % (
                compress_hostlist(unknown), self.config['nodes']))

    def _display_name(self, names):
        return '%s-%s' % (self.config['cluster_name'], re.sub(r'[^A-Za-z0-9]+', '-', compress_hostlist(names)).strip('-'))

    def _chunks(self, names):
        if not names:
            return []
        size = int(self.config['max_nodes_per_cluster_network']) or len(names)
        return [names[i:i + size] for i in range(0, len(names), size)]

    # resume
    def resume(self, hostlist):
        """Make the nodes exist; return [{name, id, private_ip, hostname, cluster_network_id}].

        Names that a suspend (or resume-fail) released while this resume ran are left out, and their
        cluster network is terminated when all its nodes are released; when that is every name, the
        resume fails."""
        names = expand_hostlist(hostlist)
        self._check_names(names)
        what = compress_hostlist(names)
        # A listing started after this resume began shows every cluster network an earlier resume made (the
        # service runs a resume after the suspends of its names); the resumes of one burst share it.
        began = self.listings.mark()
        retries = self.session.retrier.retries
        try:
            with self.state.deciding():
                self.state.update(lambda s: s.__setitem__('released', [n for n in s['released'] if n not in names]))
                networks = self.cluster_networks(after=began)
            mapping = self._bring_up(names, what, networks)
            return self._drop_suspended(names, what, mapping)
        finally:
            # The session is the service's, shared by the resumes at work: their retries are counted together.
            retries = self.session.retrier.retries - retries
            if retries:
                log.info('resume %s: %d OCI API call(s) retried meanwhile (throttling, server errors or lost answers)',
                         what, retries)

    def _bring_up(self, names, what, networks):
        mapping, todo = [], list(names)
        for cn, carried in networks:
            if not set(carried) & set(todo):
                continue
            log.info('resume %s: adopting cluster network %s (%s, %s) for %s', what, cn.id, cn.lifecycle_state,
                     compress_hostlist(carried), compress_hostlist(set(carried) & set(todo)))
            if cn.lifecycle_state != 'RUNNING':
                cn = self.ops.wait_running(cn.id)
            mapping.extend(m for m in self._map(cn, carried) if m['name'] in todo)
            todo = [n for n in todo if n not in carried]
        for chunk in self._chunks(todo):
            mapping.extend(self._create(chunk, what))
        order = dict((n, i) for i, n in enumerate(names))
        mapping = sorted(mapping, key=lambda m: order[m['name']])
        self._label(mapping)
        return mapping

    def _nodes(self, cn):
        """[{id, display_name, private_ip, hostname_label}] of the cluster network's live instances: its own
        listing (one call), their primary VNICs and addresses from the shared listings of the compartment's
        VNIC attachments and the subnet's private IPs (started after the cluster network was seen RUNNING);
        an instance those do not show yet is read on its own (ListVnicAttachments, GetVnic)."""
        s = self.session
        items = [i for i in s.list_all(s.compute_management.list_cluster_network_instances, self.config['compartment_id'],
                                       cn.id, limit=PAGE) if (i.state or '').upper() in LIVE_NODE_STATES]
        attachments = self.listings.get('vnic_attachments', self.ready_at)
        nodes, missing = [], []
        for inst in items:
            node = dict(id=inst.id, display_name=inst.display_name, private_ip=None, hostname_label=None)
            primary = [a for a in attachments.get(inst.id, []) if attr(a, 'nic_index') in (0, None)]
            address = self.listings.private_ip(primary[0], self.ready_at) if primary else None
            if address is None:
                missing.append(node)
            else:
                node.update(private_ip=address.ip_address, hostname_label=address.hostname_label)
            nodes.append(node)
        if missing:
            found = _launch.instance_ips(s, self.config['compartment_id'], [n['id'] for n in missing])
            for node in missing:
                node.update(private_ip=found[node['id']]['private_ip'], hostname_label=found[node['id']]['hostname_label'])
        return nodes

    def _drop_suspended(self, names, what, mapping):
        """A suspend that ran while the nodes were coming up may have found no cluster network to end
        (it came before the create) or one still in use: Slurm has powered those names down, so they are
        released again here, as the suspend would have, and left out of the mapping."""
        released = set(self.state.read()['released'])
        suspended = [n for n in names if n in released]
        if not suspended:
            return mapping
        gone = compress_hostlist(suspended)
        outcomes = self._release(suspended)
        log.warning('resume %s: %s suspended while being resumed; %s', what, gone,
                    '; '.join(_describe_release(o, wait=True) for o in outcomes) or 'no cluster network carries them')
        mapping = [m for m in mapping if m['name'] not in suspended]
        if not mapping:
            ended = [o['cn'].id for o in outcomes if not o['in_use']]
            raise ResumeFailed('%s suspended while being resumed' % gone, outcome=_terminated(ended, what), nodes=what)
        return mapping

    def _label(self, mapping):
        """Give each instance its Slurm name: tag ocigpu-slurm-node and display name <cluster>-<name>.

        A node learns its Slurm name from the instance metadata service (freeformTags) and starts
        slurmd with it; only instances whose tag or name differ are updated."""
        listed = self.listings.get('instances', self.ready_at) if mapping else {}
        for m in mapping:
            # What the shared listing shows is current enough: a node's tags are this service's to write.
            _launch.label_instance(self.session, m['id'], display_name='%s-%s' % (self.config['cluster_name'], m['name']),
                                   freeform_tags=dict(self.pull_tags(), **{NODE_TAG: m['name']}), current=listed.get(m['id']))

    def pull_tags(self):
        """Where a node that configures itself at boot finds the controller (roles/slurm_autoscaler/files/ocigpu_pull.py):
        its pull server and the SHA-256 of that server's certificate; none without a pull section."""
        pull = self.config.get('pull') or {}
        if not (pull.get('server') and pull.get('cert_sha256')):
            return {}
        return {PULL_SERVER_TAG: pull['server'], PULL_CERT_TAG: pull['cert_sha256']}

    def _create(self, names, what):
        """One cluster network for the names, in the first capacity source that has the hosts.

        Sources are tried in order; one cooling after a stock-out is skipped (a configuration of one source
        never cools it: there is nowhere else to go). A stock-out (OCI's answer to the create, or its failed
        work request) terminates what was made without waiting, cools the source for capacity_cooldown
        seconds and goes on to the next; any other failure ends the resume (ResumeFailed, as before).
        No source left: ResumeFailed with details capacity=True, retry_after (seconds until the first
        cooldown ends, None when none cools) and sources (what each said)."""
        carried = compress_hostlist(names)
        if len(carried) > MAX_TAG_VALUE:
            raise InputError('hostlist: %s is too long for one tag; lower max_nodes_per_cluster_network' % carried)
        sources = self.config.get('capacity_sources') or capacity_sources(self.config)
        story, made, last = [], [], None  # what each source said; what was terminated; the last stock-out
        for source in sources:
            until = self._cooling_until(source, sources)
            if until is not None:
                story.append('%s cooling until %s' % (source['name'], clock_time(until)))
                continue
            if last is not None:
                self._log_stock_out(what, last, source)
            try:
                cn = self._create_in(source, names, what)
            except StockOut as out:
                made.extend(out.made)
                story.append(describe_failure(source))
                last = dict(source=source, reason=out.reason, at=out.at, details=out.details,
                            until=self._cool(source, sources))
                continue
            except ResumeFailed as exc:
                if story:
                    exc.message = '%s; then %s' % (', '.join(story), exc.message)
                    exc.args = (exc.message,)
                raise
            mapping = self._map(cn, names)
            if story:
                note = '%s, running in %s' % (', '.join(story), source['name'])
                self.capacity_notes.append(note)
                log.info('resume %s: %s', what, note)
            return mapping
        if last is not None:
            self._log_stock_out(what, last, None)
        cooling = [u for u in (self._cooling_until(s, sources) for s in sources) if u is not None]
        retry_after = max(1, int(min(cooling) - epoch_seconds() + 0.999)) if cooling else None
        if len(sources) == 1 and last is not None:
            message = 'cluster network %s for %s failed: %s' % (self._display_name(names), carried, last['reason'])
        else:
            message = 'waiting for capacity: %s' % ', '.join(story)
        raise ResumeFailed(message, outcome=_terminated(made, carried), nodes=carried, cleaned_up=True,
                           capacity=True, retry_after=retry_after, sources=story,
                           **dict((k, v) for k, v in (last or {}).get('details', {}).items()
                                  if k not in ('nodes', 'cleaned_up', 'capacity', 'retry_after', 'sources')))

    def _cooling_until(self, source, sources):
        """When the source's cooldown ends (seconds since the epoch), or None when it is not cooling."""
        if len(sources) < 2:
            return None
        until = (self.state.read().get('cooling') or {}).get(source['name'])
        return float(until) if until and float(until) > epoch_seconds() else None

    def _cool(self, source, sources):
        """Count the source's stock-out and cool it for capacity_cooldown seconds (not a lone source); the end or None."""
        cooldown = int(self.config.get('capacity_cooldown', 600))
        now = epoch_seconds()
        until = now + cooldown if len(sources) > 1 and cooldown > 0 else None

        def cool(state):
            counts = state.setdefault('stock_outs', {})
            counts[source['name']] = int(counts.get(source['name'], 0)) + 1
            cooling = dict((k, v) for k, v in (state.get('cooling') or {}).items() if float(v) > now)
            if until is not None:
                cooling[source['name']] = max(until, float(cooling.get(source['name'], 0)))
            state['cooling'] = cooling
        with self.state.deciding():
            self.state.update(cool)
        return until

    def _log_stock_out(self, what, last, following):
        """One line per stock-out, once the next create is about to be made (or none is left)."""
        source = last['source']
        cooled = 'cooling until %s' % clock_time(last['until']) if last['until'] else 'not cooled (%s)' % (
            'capacity_cooldown 0' if len(self.config.get('capacity_sources') or []) > 1 else 'the only source')
        if following is None:
            nxt = 'next: none (every source out or cooling)'
        else:
            nxt = 'next: %s (%ds after the stock-out)' % (following['name'], int(round(epoch_seconds() - last['at'])))
        log.warning('resume %s: %s: %s (%s); %s; %s', what, source['name'], describe_failure(source), last['reason'],
                    cooled, nxt)

    def _create_in(self, source, names, what):
        """The cluster network of the names made in the source (its AD and node template), RUNNING; StockOut
        when the source has no host, ResumeFailed on any other failure."""
        carried = compress_hostlist(names)
        tags = cluster_tags(self.config['cluster_name'], self.config['freeform_tags'])
        tags[NODES_TAG] = carried
        tags[AUTOSCALER_TAG] = 'true'
        if not source.get('derived'):
            tags[SOURCE_TAG] = source['name']
        want = dict(node_count=len(names), instance_configuration_id=source['instance_configuration_id'],
                    availability_domain=source['availability_domain'], subnet_id=self.config['subnet_id'],
                    placement_constraint=self.config.get('placement_constraint') or None,
                    hpc_island_id=self.config.get('hpc_island_id') or None,
                    network_block_ids=self.config.get('network_block_ids') or None, freeform_tags=tags)
        name = self._display_name(names)
        log.info('resume %s: creating cluster network %s with %d node(s) for %s in %s', what, name, len(names), carried,
                 source['name'])
        try:
            cn = self.ops.create(name, want)
        except WaitFailed as exc:
            at = epoch_seconds()
            resource_id = exc.details.get('resource_id')
            reason = '; '.join(e.get('message') or e.get('code') or '' for e in exc.details.get('errors') or []) or exc.message
            if is_stock_out(reason):
                made = [resource_id] if resource_id and self._end_stock_out(what, resource_id, reason) else []
                raise StockOut(reason, made, exc.details, at)
            if resource_id:
                self._end_failed_create(what, resource_id, reason, exc.message)
            raise ResumeFailed('cluster network %s for %s failed: %s' % (name, carried, reason),
                               outcome=_terminated([resource_id] if resource_id else [], carried),
                               nodes=carried, cleaned_up=bool(resource_id), **exc.details)
        except WaitError as exc:  # timeout: leave it; a later resume or resume-fail adopts or terminates it
            raise ResumeFailed('cluster network %s for %s: %s' % (name, carried, exc.message), nodes=carried,
                               **exc.details)
        except Exception as exc:  # pylint: disable=broad-except
            at = epoch_seconds()
            reason = _error_text(exc)
            if isinstance(exc, _oci.ServiceError) and is_stock_out(exc.message):
                # Refused at once (not retried: _oci.is_retryable); a create an earlier, lost answer made is ended.
                log.error('resume %s: %s in %s; ending any cluster network made for %s', what, reason, source['name'], carried)
                ended = self._terminate_made_for(names, what, wait=False)
                raise StockOut(exc.message, ended or [], dict(status=exc.status, code=exc.code), at)
            # The API kept failing (retries spent) after the create may have been made, perhaps with its
            # answer lost: what was made is found by its tags and terminated.
            log.error('resume %s: %s; looking for a cluster network made for %s to terminate it', what, reason, carried)
            ended = self._terminate_made_for(names, what)
            raise ResumeFailed('cluster network %s for %s failed: %s' % (name, carried, reason), nodes=carried,
                               outcome=ResumeFailed.LEFT if ended is None else _terminated(ended, carried),
                               cleaned_up=ended is not None)
        log.info('resume %s: cluster network %s RUNNING in %s (work request %s)', what, cn.id, source['name'],
                 self.ops.work_request_id)
        return cn

    def _end_stock_out(self, what, cluster_network_id, reason):
        """Terminate a cluster network whose source had no host, without waiting (the next source is tried
        meanwhile); whether it was asked for (or already ended)."""
        log.error('resume %s: cluster network %s is out of host capacity (%s); terminating it', what,
                  cluster_network_id, reason)
        try:
            self.ops.terminate(cluster_network_id, wait=False)
        except Exception as exc:  # pylint: disable=broad-except
            log.error('resume %s: cluster network %s could not be terminated (%s); the suspend that follows '
                      'handing its nodes back to Slurm terminates it', what, cluster_network_id, _error_text(exc))
            return False
        return True

    def _end_failed_create(self, what, cluster_network_id, reason, failure):
        """Terminate a cluster network whose create failed, saying why it failed."""
        cm = self.session.compute_management
        current = self.session.get_or_none(cm.get_cluster_network, cluster_network_id)
        if is_stock_out(reason):
            log.error('resume %s: cluster network %s is out of host capacity (%s); terminating it', what,
                      cluster_network_id, reason)
        elif current is None or current.lifecycle_state in ('TERMINATING', 'TERMINATED'):
            log.warning('resume %s: cluster network %s was terminated while it was being created '
                        '(a suspend or resume-fail of its nodes, or by hand)', what, cluster_network_id)
        else:
            log.error('resume %s: %s; terminating cluster network %s', what, failure, cluster_network_id)
        self.ops.terminate(cluster_network_id, wait=True)
        log.info('resume %s: cluster network %s terminated', what, cluster_network_id)

    def _terminate_made_for(self, names, what, wait=True):
        """Terminate the live cluster networks tagged with exactly these Slurm names; their ids, or None
        when the API would not let them be looked for or terminated."""
        ended = []
        try:
            for cn, carried in self.cluster_networks():
                if sorted(carried) != sorted(names):
                    continue
                self.ops.terminate(cn.id, wait=wait)
                log.info('resume %s: cluster network %s (%s) terminated', what, cn.id, cn.display_name)
                ended.append(cn.id)
        except Exception as exc:  # pylint: disable=broad-except
            log.error('resume %s: cannot look for or terminate the cluster network of %s (%s); the suspend '
                      'that follows handing the nodes back to Slurm terminates it', what, compress_hostlist(names),
                      _error_text(exc))
            return None
        return ended

    def _map(self, cn, names):
        self.ready_at = self.listings.mark()
        nodes = sorted(self._nodes(cn), key=lambda n: (n['id']))
        if len(nodes) < len(names):
            raise ResumeFailed('cluster network %s has %d running node(s) for %d Slurm name(s) %s' % (
                cn.id, len(nodes), len(names), compress_hostlist(names)), cluster_network_id=cn.id)
        ordered = sorted(names, key=_natural)
        # Its source: the tag set at its create; one made before sources were configured is the AD's own.
        sources = self.config.get('capacity_sources') or capacity_sources(self.config)
        source = (attr(cn, 'freeform_tags') or {}).get(SOURCE_TAG) or (sources[0]['name'] if sources[0].get('derived') else None)
        return [dict(name=name, id=node['id'], private_ip=node['private_ip'],
                     hostname=node['hostname_label'] or node['display_name'], cluster_network_id=cn.id,
                     capacity_source=source)
                for name, node in zip(ordered, nodes)]

    # where the nodes sit in the RDMA fabric
    def places(self, mapping):
        """{slurm name: [HPC island, network block, local block]} of the mapping's instances, from the shared
        listing of the compute hosts (the compartment's and the root compartment's); a node whose host is
        not listed (a VM, a host the policy hides) is left out."""
        wanted = dict((m['id'], m['name']) for m in mapping)
        found = {}
        for host in self.listings.get('compute_hosts', self.ready_at) if wanted else []:
            name = wanted.get(attr(host, 'instance_id'))
            place = place_of(host) if name else None
            if place:
                found[name] = list(place)
        return found

    # suspend
    def suspend(self, hostlist, wait=True, action='suspend'):
        """Release the nodes; terminate each cluster network whose nodes are all released.

        Returns {'terminated': [ids], 'waiting': [{'cluster_network_id', 'in_use'}]}."""
        names = expand_hostlist(hostlist)
        self._check_names(names)
        what = compress_hostlist(names)
        outcomes = self._release(names, wait=wait)
        for outcome in outcomes:
            log.info('%s %s: %s', action, what, _describe_release(outcome, wait))
        if not outcomes:
            log.info('%s %s: no cluster network carries %s', action, what, what)
        return dict(terminated=[o['cn'].id for o in outcomes if not o['in_use']],
                    waiting=[dict(cluster_network_id=o['cn'].id, in_use=compress_hostlist(o['in_use']))
                             for o in outcomes if o['in_use']])

    def _release(self, names, wait=True):
        """Mark the names released; terminate each cluster network of theirs whose nodes are all released.

        Returns [{'cn', 'carried', 'in_use'}], one per cluster network carrying any of the names; those
        with nothing in use were terminated."""
        def release(state):
            state['released'] = sorted(set(state['released']) | set(names), key=_natural)
            return list(state['released'])
        outcomes, done = [], set()
        with self.state.deciding():
            released = self.state.update(release)
            for cn, carried in self.cluster_networks():
                if not set(carried) & set(names):
                    continue
                in_use = [n for n in carried if n not in released]
                if not in_use:
                    self.ops.terminate(cn.id, wait=False)
                    done.update(carried)
                outcomes.append(dict(cn=cn, carried=carried, in_use=in_use))
        if wait:
            # Outside the lock: a resume need not wait for OCI to finish the termination.
            for outcome in outcomes:
                if not outcome['in_use']:
                    self.ops.wait_gone(outcome['cn'].id)
        if done:
            # Their hosts are free: a source cooling after a stock-out has them again, its cooldown ends.
            freed = set((attr(o['cn'], 'freeform_tags') or {}).get(SOURCE_TAG) for o in outcomes if not o['in_use'])

            def forget(state):
                state['released'] = [n for n in state['released'] if n not in done]
                cooling = state.get('cooling') or {}
                lifted = sorted(n for n in freed if n in cooling)
                state['cooling'] = dict((k, v) for k, v in cooling.items() if k not in lifted)
                return lifted
            for name in self.state.update(forget):
                log.info('capacity source %s: hosts freed there (%s); its cooldown ends', name, compress_hostlist(done))
        return outcomes

    def status(self):
        return [dict(id=cn.id, display_name=cn.display_name, lifecycle_state=cn.lifecycle_state,
                     nodes=compress_hostlist(carried)) for cn, carried in self.cluster_networks()]


def _describe_release(outcome, wait):
    cn = outcome['cn']
    if outcome['in_use']:
        return 'cluster network %s (%s) keeps running for %s' % (
            cn.id, cn.display_name, compress_hostlist(outcome['in_use']))
    return 'cluster network %s (%s) %s: all its nodes (%s) are released' % (
        cn.id, cn.display_name, 'terminated' if wait else 'terminating', compress_hostlist(outcome['carried']))


# Slurm side --------------------------------------------------------------------------------------

def scontrol_address_command(scontrol, mapping):
    """One `scontrol update` for all the nodes of a mapping: slurmctld pairs the i-th name of ``nodename``
    with the i-th entry of ``nodeaddr`` and of ``nodehostname`` (equal counts, else it refuses the whole
    update), so the three lists are given in one order, the names' natural order."""
    ordered = sorted(mapping, key=lambda m: _natural(m['name']))
    return [scontrol, 'update', 'nodename=%s' % ','.join(m['name'] for m in ordered),
            'nodeaddr=%s' % ','.join(m['private_ip'] for m in ordered),
            'nodehostname=%s' % ','.join(m['hostname'] for m in ordered)]
