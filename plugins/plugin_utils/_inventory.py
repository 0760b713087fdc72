# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Bulk discovery of a tenancy's GPU nodes, for the ocigpu.cluster.gpu_nodes inventory plugin.

This file is PRIVATE to the collection: it can change at any time. It runs on the controller only, so it
lives in plugin_utils, not in module_utils (the modules' library that AnsiballZ ships to the targets).

The number of API calls grows with compartments, subnets, clusters and images, never with the
number of instances, and for one cluster (``cluster``) never with the other clusters of the tenancy:

1. compartments: one ``list_compartments`` over the tenancy subtree (plus ``get_compartment``
   for the configured roots);
2. per region and compartment, all at once: ``list_instances``;
3. only where an instance was kept (a region and compartment that holds one): ``list_vnic_attachments``
   (no instance id: the whole compartment in one paged call), ``list_cluster_networks``,
   ``list_instance_pools`` and ``list_compute_clusters``;
4. for the instances kept: per subnet ``get_subnet`` and ``list_private_ips``; per cluster
   network its instances; per standalone pool its instances; per compute cluster its
   instances; per image ``get_image``. With ``cluster``, a cluster network, pool or compute cluster
   tagged with another cluster is not listed (the collection tags each with its cluster);
5. ``get_vnic`` only for VNICs in subnets that allow public IPs (in practice the bastions),
   because a private IP record does not carry the public IP;
6. with ``topology`` (the default), ``list_compute_hosts`` per region and compartment that holds a
   kept bare-metal instance: each node's HPC island, network block and local block.

Every call runs in a bounded thread pool, is paged to the end and retried (each page on its
own) with the collection's capped, jittered backoff (``_oci.Retrier``). A failed call is recorded in ``errors`` with its scope; the caller decides
whether to raise or warn. Nothing is dropped silently.

Throttling (HTTP 429) is the service asking every caller to slow down, not a failure of one call:
the plugin's ``_oci.ThrottledRetrier`` (``per_operation=False``) pauses every worker of the discovery at
once, and a throttled answer uses up no attempt; the call is tried again until its time budget
(``api_retry_max_seconds``) runs out.
"""

from __future__ import annotations

import datetime
import threading
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import dateutil.parser
    import dateutil.tz
    import oci
    HAS_OCI = True
except ImportError:  # pragma: no cover - reported by the plugin
    HAS_OCI = False

CLUSTER_TAG = 'ocigpu-cluster'
ROLE_TAG = 'ocigpu-role'
BASTION_SUFFIX = '-bastion'

ROLE_BASTION = 'bastion'
ROLE_GPU = 'gpu_node'
ROLE_OTHER = 'other'

_GONE = ('TERMINATED', 'TERMINATING', 'DELETED', 'DELETING')


def _text(value):
    return None if value is None else str(value)


class _Raw(object):
    """An item of a list call read without the SDK's models (skip_deserialization): the JSON object,
    read by the models' attribute names (``lifecycle_state`` -> ``lifecycleState``). Turning thousands
    of instances into models took most of a cold run in a large tenancy; only the few kept are read.
    ``time_created`` is a datetime, as the models give it."""

    __slots__ = ('_data',)

    def __init__(self, data):
        self._data = data

    def __getattr__(self, name):
        head, *rest = name.split('_')
        value = self._data.get(head + ''.join(word.title() for word in rest))
        if name.startswith('time_') and isinstance(value, str):
            return _datetime(value)
        return value


def _datetime(text):
    """An API timestamp as the SDK's models give it (UTC, aware)."""
    try:
        return datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=dateutil.tz.tzutc())
    except ValueError:
        return dateutil.parser.parse(text)


def _error_record(operation, exc, **scope):
    status = getattr(exc, 'status', None)
    code = getattr(exc, 'code', None)
    message = getattr(exc, 'message', None) or str(exc) or exc.__class__.__name__
    record = dict(operation=operation, status=status, code=code, message=str(message))
    record.update((k, v) for k, v in scope.items() if v is not None)
    return record


def format_error(record):
    """One line for a recorded API failure."""
    scope = ', '.join('%s=%s' % (k, record[k]) for k in ('region', 'compartment_id', 'resource_id') if record.get(k))
    status = '%s %s' % (record.get('status') or '', record.get('code') or '')
    return '%s (%s): %s %s' % (record['operation'], scope, status.strip(), record['message'])


class Discovery:
    """Find GPU nodes and bastions in one or more regions and compartment trees.

    ``client_for(client_class, region)`` returns an SDK client for the region, for the calling
    thread (each worker thread resolves its own; the caller owns authentication and endpoints); ``retrier.call(fn)`` retries one request (``_oci.Retrier``).
    ``tenancy_id`` is the root used for the compartment listing.
    """

    def __init__(self, client_for, retrier, tenancy_id, regions, compartments=None, cluster=None,
                 shapes=None, is_gpu_shape=None, include_bastions=True,
                 lifecycle_states=('RUNNING',), max_workers=16, page_limit=1000, topology=True):
        self._client_for = client_for
        self.retrier = retrier
        self.tenancy_id = tenancy_id
        self.regions = list(regions)
        self.compartments = compartments or [dict(id=tenancy_id, subtree=True)]
        self.cluster = cluster
        self.shapes = set(shapes or [])
        self.is_gpu_shape = is_gpu_shape or (lambda name: '.GPU' in (name or ''))
        self.include_bastions = include_bastions
        self.lifecycle_states = set(s.upper() for s in lifecycle_states)
        self.max_workers = max(1, int(max_workers))
        self.page_limit = page_limit
        self.topology = topology
        self.warnings = []
        self.errors = []
        self.seen_clusters = set()  # the cluster tags of every instance listed, kept or not
        self.calls = 0
        self._lock = threading.Lock()

    # -- plumbing -----------------------------------------------------------------------------

    def _count(self, n=1):
        with self._lock:
            self.calls += n

    def _client(self, spec):
        """The client for a (client class, region) spec, in the calling thread."""
        return self._client_for(*spec)

    def _call(self, fn, *args, **kwargs):
        """One request, retried; every attempt is counted."""
        def counted():
            self._count()
            return fn(*args, **kwargs)
        return self.retrier.call(counted)

    def _list(self, client, method, *args, **kwargs):
        """Every item of a paged list call; each page is retried on its own. A client spec with a third
        element True lists without the SDK's models (items are _Raw)."""
        fn = getattr(self._client(client), method)
        raw = len(client) > 2 and client[2]
        kwargs.setdefault('limit', self.page_limit)
        items = []
        while True:
            response = self._call(fn, *args, **kwargs)
            data = response.data
            if raw:
                items.extend(_Raw(item) for item in (data if isinstance(data, list) else (data or {}).get('items') or []))
                data = []
            items.extend(data if isinstance(data, list) else getattr(data, 'items', None) or [])
            page = response.headers.get('opc-next-page')
            if not page:
                return items
            kwargs['page'] = page

    def _get(self, client, method, *args, **kwargs):
        return self._call(getattr(self._client(client), method), *args, **kwargs).data

    def _fail(self, operation, exc, **scope):
        with self._lock:
            self.errors.append(_error_record(operation, exc, **scope))

    def _run_all(self, pool, jobs):
        """Run (key, operation, scope, callable) jobs in the pool; {key: result} for the successes."""
        futures = [(key, op, scope, pool.submit(fn)) for key, op, scope, fn in jobs]
        results = {}
        for key, op, scope, future in futures:
            try:
                results[key] = future.result()
            except Exception as exc:  # any failure is recorded, never swallowed
                self._fail(op, exc, **scope)
        return results

    # -- steps ----------------------------------------------------------------------------------

    def _compartments(self, pool):
        """{compartment_id: name} for the configured roots and (where asked) their subtrees."""
        identity = (oci.identity.IdentityClient, self.regions[0])
        wanted = {}
        need_tree = any(c.get('subtree', True) for c in self.compartments)
        jobs = []
        if need_tree:
            jobs.append(('tree', 'list_compartments', dict(compartment_id=self.tenancy_id), lambda: self._list(
                identity, 'list_compartments', self.tenancy_id, compartment_id_in_subtree=True,
                access_level='ACCESSIBLE', lifecycle_state='ACTIVE')))
        for c in self.compartments:
            jobs.append((c['id'], 'get_compartment', dict(compartment_id=c['id']),
                         lambda cid=c['id']: self._get(identity, 'get_compartment', cid)))
        found = self._run_all(pool, jobs)
        tree = found.pop('tree', [])
        children = {}
        names = {}
        for comp in tree:
            children.setdefault(comp.compartment_id, []).append(comp.id)
            names[comp.id] = comp.name
        for c in self.compartments:
            root = found.get(c['id'])
            if root is None:
                continue  # recorded as an error
            if root.lifecycle_state not in (None, 'ACTIVE'):
                self._fail('get_compartment', RuntimeError('compartment is %s' % root.lifecycle_state),
                           compartment_id=c['id'])
                continue
            wanted[c['id']] = root.name
            if c.get('subtree', True):
                stack = [c['id']]
                while stack:
                    for child in children.get(stack.pop(), []):
                        if child not in wanted:
                            wanted[child] = names[child]
                            stack.append(child)
        return wanted

    def _per_compartment(self, scopes, keys):
        """Jobs for _run_all: the list calls ``keys`` in every (region, compartment) of ``scopes``, keyed
        (region, cid, key)."""
        calls = dict(
            instances=(oci.core.ComputeClient, 'list_instances'),
            attachments=(oci.core.ComputeClient, 'list_vnic_attachments'),
            cluster_networks=(oci.core.ComputeManagementClient, 'list_cluster_networks'),
            instance_pools=(oci.core.ComputeManagementClient, 'list_instance_pools'),
            compute_clusters=(oci.core.ComputeClient, 'list_compute_clusters'))
        state = {}
        if len(self.lifecycle_states) == 1:
            state['lifecycle_state'] = next(iter(self.lifecycle_states))
        jobs = []
        for region, cid in scopes:
            scope = dict(region=region, compartment_id=cid)
            for key in keys:
                client_cls, method = calls[key]
                extra = state if key == 'instances' else {}
                # The instances of every compartment are many and mostly dropped: read without models.
                spec = (client_cls, region, True) if key == 'instances' else (client_cls, region)
                jobs.append(((region, cid, key), method, scope,
                             lambda c=spec, m=method, i=cid, e=extra: self._list(c, m, i, **e)))
        return jobs

    def _other_cluster(self, resource):
        """True when one cluster is asked for and the resource is tagged with another one."""
        tag = (getattr(resource, 'freeform_tags', None) or {}).get(CLUSTER_TAG)
        return bool(self.cluster) and tag is not None and tag != self.cluster

    def _role(self, inst):
        tags = inst.freeform_tags or {}
        cluster = tags.get(CLUSTER_TAG)
        if tags.get(ROLE_TAG) == ROLE_BASTION or (
                cluster and inst.display_name == cluster + BASTION_SUFFIX):
            return ROLE_BASTION
        if (self.shapes and inst.shape in self.shapes) or (not self.shapes and self.is_gpu_shape(inst.shape)):
            return ROLE_GPU
        return ROLE_OTHER

    def _keep(self, inst):
        if inst.lifecycle_state not in self.lifecycle_states:
            return None
        cluster = (inst.freeform_tags or {}).get(CLUSTER_TAG)
        if self.cluster and cluster != self.cluster:
            return None
        role = self._role(inst)
        if role == ROLE_GPU or (role == ROLE_BASTION and self.include_bastions and cluster):
            return role
        return None

    # -- the whole run --------------------------------------------------------------------------

    def run(self):
        """Discover; returns dict(hosts=[...], errors=[...], calls=N, seconds=S)."""
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix='gpu_nodes') as pool:
            compartments = self._compartments(pool)
            every_scope = [(region, cid) for region in self.regions for cid in compartments]
            listed = self._run_all(pool, self._per_compartment(every_scope, ('instances',)))

            instances = {}
            for (region, cid, key), items in listed.items():
                for item in items:
                    tag = (item.freeform_tags or {}).get(CLUSTER_TAG)
                    if tag is not None:
                        self.seen_clusters.add(_text(tag))
                    role = self._keep(item)
                    if role:
                        instances[item.id] = (region, role, item)
            # The rest is listed only where a kept instance lives: for one cluster, its own compartments.
            kept_scopes = sorted(set((region, inst.compartment_id) for region, role, inst in instances.values()))
            # With topology, the compute hosts of the compartments that hold a kept bare-metal node, at
            # the same time.
            bare_metal = sorted(set((region, inst.compartment_id) for region, role, inst in instances.values()
                                    if (inst.shape or '').startswith('BM.'))) if self.topology else []
            second = self._run_all(pool, self._per_compartment(
                kept_scopes, ('attachments', 'cluster_networks', 'instance_pools', 'compute_clusters'))
                + self._compute_host_jobs(bare_metal))
            hosts_of = self._places(
                dict((key, second.pop(key)) for key in list(second) if key[2] == 'compute_hosts'), instances)
            # OCI's reference files compute hosts in the root compartment; where a bare-metal node's host
            # was not found beside its instance, the root's are listed too (one call per region).
            unplaced = sorted(set(region for iid, (region, role, inst) in instances.items()
                                  if self.topology and iid not in hosts_of and (inst.shape or '').startswith('BM.')))
            roots = [(region, self.tenancy_id) for region in unplaced if (region, self.tenancy_id) not in bare_metal]
            if roots:
                hosts_of.update(self._places(self._run_all(pool, self._compute_host_jobs(roots)), instances))
            listed.update(second)

            attachments = {}
            cluster_networks = {}
            pools = {}
            compute_clusters = {}
            pools_in_networks = set()
            for (region, cid, key), items in listed.items():
                for item in items:
                    if key == 'attachments':
                        if item.lifecycle_state == 'ATTACHED' and item.subnet_id:
                            attachments.setdefault(item.instance_id, []).append(item)
                    elif key == 'cluster_networks':
                        if item.lifecycle_state not in _GONE:
                            pools_in_networks.update(p.id for p in (item.instance_pools or []))
                            if not self._other_cluster(item):
                                cluster_networks[item.id] = (region, item)
                    elif key == 'instance_pools':
                        if item.lifecycle_state not in _GONE and not self._other_cluster(item):
                            pools[item.id] = (region, item)
                    elif key == 'compute_clusters':
                        if item.lifecycle_state not in _GONE and not self._other_cluster(item):
                            compute_clusters[item.id] = (region, item)

            failed_lists = set(scope for scope in kept_scopes if scope + ('attachments',) not in listed)
            primary = {}
            for iid in instances:
                atts = sorted(attachments.get(iid, []), key=lambda a: (a.nic_index or 0, str(a.time_created)))
                if atts:
                    primary[iid] = atts[0]
            subnets = {}
            for iid, att in primary.items():
                subnets.setdefault(att.subnet_id, instances[iid][0])
            images = {}
            for region, role, inst in instances.values():
                if inst.image_id:
                    images.setdefault(inst.image_id, region)

            jobs = []
            for sid, region in subnets.items():
                net = (oci.core.VirtualNetworkClient, region)
                scope = dict(region=region, resource_id=sid)
                jobs.append((('subnet', sid), 'get_subnet', scope,
                             lambda n=net, s=sid: self._get(n, 'get_subnet', s)))
                jobs.append((('private_ips', sid), 'list_private_ips', scope,
                             lambda n=net, s=sid: self._list(n, 'list_private_ips', subnet_id=s)))
            pool_of_cn = {}
            for cnid, (region, cn) in cluster_networks.items():
                mgmt = (oci.core.ComputeManagementClient, region)
                cn_pools = [p.id for p in (cn.instance_pools or [])]
                for pid in cn_pools:
                    pool_of_cn[pid] = cnid
                jobs.append((('cn_instances', cnid), 'list_cluster_network_instances',
                             dict(region=region, resource_id=cnid),
                             lambda m=mgmt, c=cn: self._list(m, 'list_cluster_network_instances',
                                                             c.compartment_id, c.id)))
            for pid, (region, ip) in pools.items():
                cnid = pool_of_cn.get(pid)
                if (cnid and len(cluster_networks[cnid][1].instance_pools or []) == 1) or (
                        not cnid and pid in pools_in_networks):
                    continue  # its cluster network's instance list says which pool, or it is another cluster's
                mgmt = (oci.core.ComputeManagementClient, region)
                jobs.append((('pool_instances', pid), 'list_instance_pool_instances',
                             dict(region=region, resource_id=pid),
                             lambda m=mgmt, p=ip: self._list(m, 'list_instance_pool_instances',
                                                             p.compartment_id, p.id)))
            for ccid, (region, cc) in compute_clusters.items():
                compute = (oci.core.ComputeClient, region)
                jobs.append((('cc_instances', ccid), 'list_instances', dict(region=region, resource_id=ccid),
                             lambda c=compute, cc=cc: self._list(c, 'list_instances', cc.compartment_id,
                                                                 compute_cluster_id=cc.id)))
            for image_id, region in images.items():
                compute = (oci.core.ComputeClient, region)
                jobs.append((('image', image_id), 'get_image', dict(region=region, resource_id=image_id),
                             lambda c=compute, i=image_id: self._image(c, i)))
            found = self._run_all(pool, jobs)

            ips = {}
            public_subnets = set()
            subnet_info = {}
            for (kind, key), value in found.items():
                if kind == 'private_ips':
                    for pip in value:
                        if pip.is_primary and pip.vnic_id:
                            ips[pip.vnic_id] = pip
                elif kind == 'subnet':
                    subnet_info[key] = value
                    if not value.prohibit_public_ip_on_vnic:
                        public_subnets.add(key)

            jobs = []
            for iid, att in primary.items():
                if att.subnet_id in public_subnets:
                    net = (oci.core.VirtualNetworkClient, instances[iid][0])
                    jobs.append((att.vnic_id, 'get_vnic', dict(region=instances[iid][0], resource_id=att.vnic_id),
                                 lambda n=net, v=att.vnic_id: self._get(n, 'get_vnic', v)))
            vnics = self._run_all(pool, jobs)

        membership = {}
        for (kind, key), value in found.items():
            if kind == 'cn_instances':
                cn = cluster_networks[key][1]
                cn_pools = cn.instance_pools or []
                for summary in value:
                    entry = membership.setdefault(summary.id, {})
                    entry['cluster_network'] = dict(id=cn.id, name=_text(cn.display_name))
                    if len(cn_pools) == 1:
                        entry['instance_pool'] = dict(id=cn_pools[0].id, name=_text(cn_pools[0].display_name))
            elif kind == 'pool_instances':
                ip = pools[key][1]
                cnid = pool_of_cn.get(key)
                for summary in value:
                    entry = membership.setdefault(summary.id, {})
                    entry['instance_pool'] = dict(id=ip.id, name=_text(ip.display_name))
                    if cnid:
                        cn = cluster_networks[cnid][1]
                        entry.setdefault('cluster_network', dict(id=cn.id, name=_text(cn.display_name)))
            elif kind == 'cc_instances':
                cc = compute_clusters[key][1]
                for inst in value:
                    membership.setdefault(inst.id, {})['compute_cluster'] = dict(id=cc.id, name=_text(cc.display_name))

        hosts = []
        for iid, (region, role, inst) in sorted(instances.items(), key=lambda kv: (kv[1][2].display_name or '', kv[0])):
            att = primary.get(iid)
            pip = ips.get(att.vnic_id) if att else None
            vnic = vnics.get(att.vnic_id) if att else None
            subnet = subnet_info.get(att.subnet_id) if att else None
            image = found.get(('image', inst.image_id))
            private_ip = (vnic.private_ip if vnic else None) or (pip.ip_address if pip else None)
            host = dict(
                id=inst.id,
                display_name=_text(inst.display_name),
                role=role,
                cluster=_text((inst.freeform_tags or {}).get(CLUSTER_TAG)),
                region=_text(inst.region) or region,
                compartment_id=inst.compartment_id,
                compartment_name=_text(compartments.get(inst.compartment_id)),
                availability_domain=_text(inst.availability_domain),
                fault_domain=_text(inst.fault_domain),
                shape=_text(inst.shape),
                lifecycle_state=inst.lifecycle_state,
                time_created=_text(inst.time_created),
                image_id=inst.image_id,
                image=image,
                freeform_tags=dict(inst.freeform_tags or {}),
                defined_tags=dict(inst.defined_tags or {}),
                private_ip=_text(private_ip),
                public_ip=_text(vnic.public_ip) if vnic else None,
                hostname_label=_text((vnic.hostname_label if vnic else None) or (pip.hostname_label if pip else None)),
                vnic_id=att.vnic_id if att else None,
                subnet_id=att.subnet_id if att else None,
                vcn_id=subnet.vcn_id if subnet else None,
                cluster_network=None,
                instance_pool=None,
                compute_cluster=None,
            )
            where = hosts_of.get(iid)
            host.update((key, getattr(where, key, None)) for key in ('hpc_island_id', 'network_block_id', 'local_block_id'))
            host.update(membership.get(iid, {}))
            if inst.lifecycle_state != 'RUNNING' or (region, inst.compartment_id) in failed_lists:
                pass  # not running: VNICs may still be attaching; failed listing: already reported
            elif att is None:
                self._fail('list_vnic_attachments', RuntimeError('no ATTACHED VNIC found for this instance'),
                           region=region, resource_id=iid)
            elif private_ip is None and (att.subnet_id in subnet_info):
                self._fail('list_private_ips', RuntimeError('no primary private IP found for VNIC %s' % att.vnic_id),
                           region=region, resource_id=iid)
            hosts.append(host)
        return dict(hosts=hosts, errors=list(self.errors), warnings=list(self.warnings), calls=self.calls,
                    seconds=round(time.monotonic() - started, 3), seen_clusters=sorted(self.seen_clusters),
                    compartments=sorted(_text(name) or cid for cid, name in compartments.items()))

    def _compute_host_jobs(self, scopes):
        """Jobs for _run_all: list_compute_hosts in every (region, compartment) of ``scopes``, keyed
        (region, cid, 'compute_hosts')."""
        return [((region, cid, 'compute_hosts'), 'list_compute_hosts', dict(region=region, compartment_id=cid),
                 lambda c=(oci.core.ComputeClient, region), i=cid: self._hosts_or_none(c, i))
                for region, cid in scopes]

    def _places(self, listed, instances):
        """{instance id: compute host summary} of the kept instances, from the compute host lists; a warning
        for each compartment whose hosts a policy hides."""
        out = {}
        for (region, cid, _key), items in sorted(listed.items()):
            if items is None:
                self.warnings.append(
                    'list_compute_hosts (region=%s, compartment_id=%s): not allowed or not found; the nodes '
                    'there have no HPC island, network block or local block' % (region, cid))
                continue
            for summary in items:
                if summary.instance_id in instances:
                    out[summary.instance_id] = summary
        return out

    def _hosts_or_none(self, compute, compartment_id):
        """The compartment's compute hosts (HPC island, network block, local block of each bare-metal
        instance), or None where a policy hides them (401/403/404): the location is then unknown,
        with a warning; any other failure is an error."""
        try:
            return self._list(compute, 'list_compute_hosts', compartment_id)
        except oci.exceptions.ServiceError as exc:
            if exc.status in (401, 403, 404):
                return None
            raise

    def _image(self, compute, image_id):
        """Image facts, or None when the image no longer exists (a normal state for old images)."""
        try:
            image = self._get(compute, 'get_image', image_id)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(id=image.id, name=_text(image.display_name), operating_system=_text(image.operating_system),
                    operating_system_version=_text(image.operating_system_version))
