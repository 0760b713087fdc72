# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: gpu_nodes
short_description: GPU nodes and bastions of OCI GPU clusters
description:
  - Finds the GPU nodes of one cluster (freeform tag C(ocigpu-cluster)) or of every cluster in a
    tenancy, with their bastions, and groups them for the roles of this collection.
  - GPU nodes that the Slurm autoscaler launched (freeform tag C(ocigpu-slurm-node)) configure
    themselves at boot; they are in the group C(gpu_nodes_on_demand), not C(gpu_nodes), so that
    configure.yml leaves them alone. So is the builder of a baked image while ocigpu.cluster.bake runs
    (freeform tag C(ocigpu-role=bake-builder)), in the group C(bake_builders).
  - Discovery is done in bulk and in parallel. Per compartment it lists instances and VNIC
    attachments once (not once per instance); private IPs are listed once per subnet; cluster
    networks, instance pools and compute clusters are listed once per compartment. The number of
    API calls grows with compartments, subnets and clusters, not with instances.
  - Hosts are reached on their private IP (V(ansible_host)), through an SSH jump via their
    cluster's bastion, so C(ansible all -m ping) works from a laptop.
  - SSH checks the host keys of the bastion and of every node of a cluster against the cluster's own
    known_hosts file (O(known_hosts_file)). A new host's key is accepted once
    (C(StrictHostKeyChecking=accept-new)), a changed one is refused. C(teardown.yml) removes the file.
  - Each key is recorded under the host's instance OCID, not its address (C(-o HostKeyAlias=<instance OCID>),
    the bastion's OCID on the jump). OCI gives a released private IP to later instances, so an autoscaled
    or replacement node on an old node's IP is a new host, accepted once; a key is refused only when the
    same instance answers with another one.
  - A cluster is its tag in its compartment. When one tag is found in several compartments, each is a
    cluster of its own, with its own group (C(cluster_<name>_<8 hex digits of the compartment OCID's
    SHA-256>)), bastion, jump and controller, and a warning names them. They share one known_hosts file.
  - An inventory that finds no host warns, naming the compartments searched and the cluster tags seen there.
  - A throttled answer (HTTP 429) pauses every call of the run and uses up no attempt of O(api_retries);
    the call is tried again until O(api_retry_max_seconds) have passed.
  - An API failure is an error (O(strict=true), the default). With O(strict=false) the inventory is
    still built, with a loud warning that counts and lists the failed calls, and the variable
    C(ocigpu_inventory_errors) on the group C(all) holds them. Hosts are never dropped silently.
  - The configuration file name must end in C(gpu_nodes.yml) or C(gpu_nodes.yaml).
author:
  - ocigpu.cluster maintainers (@ocigpu)
version_added: 0.1.0
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - constructed
  - inventory_cache
options:
  plugin:
    description: Marks this file as a configuration of this plugin.
    type: str
    required: true
    choices: [ocigpu.cluster.gpu_nodes]
  config_file:
    env:
      - name: OCI_CONFIG_FILE
  config_profile:
    env:
      - name: OCI_CONFIG_PROFILE
  auth_type:
    env:
      - name: OCI_ANSIBLE_AUTH_TYPE
  region:
    env:
      - name: OCI_REGION
  service_endpoint:
    env:
      - name: OCIGPU_SERVICE_ENDPOINT
  regions:
    description:
      - Regions to search. Defaults to O(region), or the region of the OCI config profile.
    type: list
    elements: str
    default: []
  compartments:
    description:
      - Compartments to search, each either an OCID or a mapping with C(id) and C(subtree).
      - With C(subtree=true) every ACTIVE compartment below it is searched too; the subtree comes from
        one listing of the tenancy's compartments. C(subtree) defaults to V(true), but to V(false) when
        O(cluster) is set, so that one cluster in the compartments given is exactly the instances there.
      - Defaults to the whole tenancy (the root compartment and its subtree).
    type: list
    elements: raw
    default: []
  cluster:
    description:
      - Name of one cluster, the value of the freeform tag C(ocigpu-cluster) on its resources.
      - When unset, every cluster is included, and GPU instances without the tag too (they join no
        C(cluster_*) group and get no jump and no SSH settings).
    type: str
  shapes:
    description:
      - Shapes of the nodes to include.
      - Defaults to every GPU shape (the collection's shape table, and any shape named C(*.GPU*)).
      - Bastions are included independently of this list, see O(include_bastions).
    type: list
    elements: str
    default: []
  include_bastions:
    description:
      - Include each cluster's bastion, the instance tagged with the cluster and named
        C(<cluster>-bastion) (or tagged C(ocigpu-role=bastion)), whatever its shape.
    type: bool
    default: true
  lifecycle_states:
    description: Instance lifecycle states to include.
    type: list
    elements: str
    default: [RUNNING]
  hostnames:
    description:
      - Ordered preferences for the inventory hostname; the first one that gives a value not used
        by another host wins.
      - V(display_name), V(hostname_label) (DNS label of the primary VNIC), V(private_ip),
        V(public_ip), V(id), or C(tag:<key>) for a freeform tag.
      - V(id) is always tried last, so every instance gets a name.
      - When several hosts want the same name, it goes to a host of the cluster the name starts with
        (C(<cluster>-...)), else to a host of some cluster over an untagged one, else to the older
        instance; if that still ties, none of them takes it and each tries its next preference. So a
        cluster's names never depend on OCIDs or on instances of other clusters named like its own.
    type: list
    elements: str
    default: [display_name, hostname_label, private_ip, id]
  ansible_user_by_os:
    description:
      - Login user per image operating system (as OCI names it in the image record).
      - Hosts whose image is unknown or not in this map get O(default_ansible_user).
    type: dict
    default:
      Oracle Linux: opc
      Canonical Ubuntu: ubuntu
      CentOS: opc
      Oracle Autonomous Linux: opc
  default_ansible_user:
    description: Login user when the image's operating system is unknown.
    type: str
    default: opc
  proxy_jump:
    description:
      - Make every node's SSH connection jump through its cluster's bastion, reached on its public IP
        (in C(ansible_ssh_common_args), C(-o ProxyCommand="ssh ... -W %h:%p <user>@<bastion public IP>")).
      - The jump is a C(ProxyCommand), not a C(ProxyJump), so that it checks the bastion's host key
        against O(known_hosts_file) too (ssh passes no C(-o) option to a C(ProxyJump) hop).
      - The jump logs in with O(private_key_file) when it is set, else with ssh's own identities
        (ssh-agent, C(~/.ssh/config), C(~/.ssh/id_*)); C(--private-key) reaches the node, not the jump.
      - A node whose cluster has no bastion with a public IP gets no jump.
    type: bool
    default: true
  known_hosts_file:
    description:
      - The known_hosts file of the hosts' SSH host keys, used for the bastion, every node and the jump
        (C(-o UserKnownHostsFile=<file> -o StrictHostKeyChecking=accept-new -o HostKeyAlias=<instance OCID>)
        in C(ansible_ssh_common_args), and C(ocigpu_known_hosts_file)).
      - Its entries are named by instance OCID (C(ssh-keygen -F <instance OCID> -f <file>) shows one).
      - Defaults to C(~/.ocigpu/<cluster>/known_hosts), in the folder of the cluster's MPI keys, the file
        that C(provision.yml) gives its hosts and C(teardown.yml) removes; a cluster name that is not
        plain letters, digits, C(.), C(_) and C(-) is replaced by C(cluster-<8 hex digits of its SHA-256>).
        The folder is made (mode 0700) when missing, so that ssh can record the keys.
      - A path given here is used for every cluster the inventory finds.
    type: path
    version_added: 0.4.0
  private_key_file:
    description:
      - The private key for the bastion, the nodes and the jump through the bastion
        (C(ansible_ssh_private_key_file) and C(-i) in the jump's command).
      - Unset, the hosts get no C(ansible_ssh_private_key_file) and the jump uses ssh's own identities.
    type: path
    version_added: 0.4.0
  slurm_controller:
    description:
      - Which host of each cluster joins the group C(slurm_controller). V(bastion) means the cluster's
        bastion; any other value is the display name of the instance to use.
    type: str
    default: bastion
  topology:
    version_added: 0.4.0
    description:
      - Read where each bare-metal node sits in OCI's RDMA fabric (its HPC island, network block and
        local block, from the Compute Hosts API) into C(oci_hpc_island_id), C(oci_network_block_id)
        and C(oci_local_block_id), with one paged C(list_compute_hosts) per compartment that holds a
        bare-metal node.
      - Where a policy does not allow it (401, 403, 404), those variables are null and a warning says so.
    type: bool
    default: true
  max_workers:
    description: Number of API calls in flight at once.
    type: int
    default: 16
  strict:
    description:
      - If V(true), an API failure (after retries) or a bad template in O(compose), O(groups) or
        O(keyed_groups) makes the inventory fail.
      - If V(false), failed API calls are reported as a warning with their count and scope, stored in
        C(ocigpu_inventory_errors) on the group C(all), and the result is not cached.
    type: bool
    default: true
notes:
  - Host variables C(oci_*) hold what the API says about the instance; C(ocigpu_*) hold what this
    collection derives from it (role, cluster, shape-table facts, RDMA index).
  - A node that replaced another (C(provision.yml) with C(gpu_replace_nodes)) carries the freeform tag
    C(ocigpu-slurm-name); it stays in C(gpu_nodes) and gets C(ocigpu_slurm_name), the Slurm name it carries on,
    which C(configure.yml) makes its host name.
  - The RDMA index C(ocigpu_rdma_index) is the last octet of the primary private IP, the C(y) of
    the address C(192.168.x.y) that interface C(x) gets in the RDMA network (OCI's GPU cluster tutorial).
  - Strings that come from the API are marked unsafe, so a display name or tag cannot inject a template.
  - Groups named after a cluster tag or a display name (C(cluster_*), C(cluster_network_*),
    C(instance_pool_*), C(compute_cluster_*)) turn C(-) into C(_) for names of lower-case letters,
    digits and dashes (the collection's own names); any other name also gets the first 8 hex digits
    of its SHA-256, so C(Train-01) and C(train_01) never share a group.
  - With O(cluster), only the cluster's own compartments are listed beyond C(list_instances), and
    cluster networks, instance pools and compute clusters tagged with another cluster are not
    listed at all, so the number of API calls does not grow with the other clusters of the tenancy.
seealso:
  - name: Inventory plugin guide
    description: Examples for one cluster and for a whole tenancy, and benchmark figures.
    link: https://github.com/ocigpu/cluster/blob/main/docs/inventory.md
"""

EXAMPLES = r"""
# inventory/gpu_nodes.yml: one cluster
# ---
# plugin: ocigpu.cluster.gpu_nodes
# compartments:
#   - ocid1.compartment.oc1..aaaaexample
# cluster: train01

# tenancy.gpu_nodes.yml: every cluster in two regions, cached for 10 minutes
plugin: ocigpu.cluster.gpu_nodes
regions: [ap-tokyo-1, us-ashburn-1]
hostnames: [hostname_label, display_name]
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/ocigpu-inventory
cache_timeout: 600
keyed_groups:
  - key: oci_freeform_tags.team | default('none')
    prefix: team
compose:
  gpu_memory_total_gb: ocigpu_gpu_memory_gb * ocigpu_gpu_count
"""

import hashlib
import os
import re
import shlex
import threading
import time

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable
from ansible.utils.display import Display

from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import SLURM_NAME_TAG
from ansible_collections.ocigpu.cluster.plugins.module_utils._shapes import SHAPES, get_shape, is_gpu_shape
from ansible_collections.ocigpu.cluster.plugins.plugin_utils import _inventory

try:
    # ansible-core 2.19+: a string is a template only when explicitly trusted, and API data never is.
    from ansible.template import trust_as_template as _trust_as_template
except ImportError:
    _trust_as_template = None
if _trust_as_template is None:  # older ansible-core: remote strings must be wrapped to stay out of the templar
    from ansible.utils.unsafe_proxy import wrap_var as _make_unsafe
else:
    _make_unsafe = None

try:
    from ansible_collections.ocigpu.cluster.plugins.module_utils._oci import (
        HAS_OCI, OCIConfigError, build_config, create_client, throttled_retrier)
except ImportError:
    HAS_OCI = False

display = Display()


def make_unsafe(value):
    return value if _make_unsafe is None else _make_unsafe(value)


_HOSTNAME_KEYS = ('display_name', 'hostname_label', 'private_ip', 'public_ip', 'id')
_UNSAFE_GROUP_CHARS = re.compile(r'[^A-Za-z0-9_]')


def safe_group(*parts):
    """Group name from parts: lower case, anything but [a-z0-9_] becomes '_'."""
    return _UNSAFE_GROUP_CHARS.sub('_', '_'.join(str(p) for p in parts if p)).lower()


# A name as the collection makes them (cluster names, `<cluster>-cn`, `<cluster>-pool`): lower case,
# digits and dashes; '-' becomes '_', which such a name never holds, so two of them never share a group.
_PLAIN_NAME = re.compile(r'^[a-z0-9][a-z0-9-]*$')


def named_group(prefix, value):
    """The group of a user-chosen name (a cluster tag, a display name): `<prefix>_<name>`, with '-' as '_'.

    Any other value (capitals, '_', other characters) gets the first 8 hex digits of its SHA-256 as a
    suffix, so that values differing only in case or in '-'/'_' never share a group, whatever else
    the tenancy holds."""
    value = str(value)
    if _PLAIN_NAME.match(value):
        return '%s_%s' % (prefix, value.replace('-', '_'))
    return '%s_%s' % (safe_group(prefix, value), hashlib.sha256(value.encode('utf-8')).hexdigest()[:8])


def _digest(text):
    return hashlib.sha256(str(text).encode('utf-8')).hexdigest()


# A cluster name that can be a folder name as it is.
_PATH_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')


def known_hosts_path(cluster, configured=None):
    """The known_hosts file of a cluster's hosts: the one configured, else ~/.ocigpu/<cluster>/known_hosts.

    The cluster name comes from a tag: one that is not a plain folder name (a '/', '..', a space) is
    replaced by its digest, so that a tag never names a path elsewhere."""
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    name = str(cluster)
    if not _PATH_NAME.match(name) or name.strip('.') == '':
        name = 'cluster-%s' % _digest(name)[:8]
    return os.path.join(os.path.expanduser('~'), '.ocigpu', name, 'known_hosts')


def _host_key_alias(instance_id):
    """-o HostKeyAlias=<instance OCID>: the host's key recorded and checked under its instance, not its
    address (OCI gives a released private IP to later instances). Nothing where the OCID is unknown."""
    return ['-o', 'HostKeyAlias=%s' % instance_id] if instance_id else []


def ssh_common_args(known_hosts, jump=None, private_key_file=None, instance_id=None, jump_instance_id=None):
    """ansible_ssh_common_args of a cluster's host: its host key checked against the cluster's
    known_hosts file (a new host accepted once, a changed key refused), under its instance OCID
    (HostKeyAlias) where known, and, for a node, the jump through the bastion (`user@address`,
    the bastion's OCID jump_instance_id) as a ProxyCommand with the same checks and key.

    playbooks/provision.yml builds the same string with Jinja (tests/unit check that they agree)."""
    checks = ['-o', 'UserKnownHostsFile="%s"' % known_hosts, '-o', 'StrictHostKeyChecking=accept-new']
    args = checks + _host_key_alias(instance_id)
    if jump:
        key = ['-i', private_key_file, '-o', 'IdentitiesOnly=yes'] if private_key_file else []
        command = ['ssh'] + checks + _host_key_alias(jump_instance_id) + key + ['-W', '%h:%p', jump]
        args += ['-o', 'ProxyCommand=' + ' '.join(shlex.quote(part) for part in command)]
    return ' '.join(shlex.quote(part) for part in args)


def _cluster_key(host):
    """A cluster's identity: its tag in its compartment (None for an untagged instance)."""
    return (host['cluster'], host['compartment_id']) if host['cluster'] else None


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):

    NAME = 'ocigpu.cluster.gpu_nodes'

    def verify_file(self, path):
        if super().verify_file(path):
            return path.endswith(('gpu_nodes.yml', 'gpu_nodes.yaml'))
        return False

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path)
        started = time.monotonic()
        if not HAS_OCI:
            raise AnsibleError('the ocigpu.cluster.gpu_nodes inventory needs the oci Python SDK (pip install oci)')
        self._read_config_data(path)

        cache_key = self.get_cache_key(path)
        use_cache = self.get_option('cache') and cache
        update_cache = self.get_option('cache') and not cache
        result = None
        source = 'cache'
        if use_cache:
            try:
                result = self._cache[cache_key]
            except KeyError:
                update_cache = True
        if result is None:
            source = 'API'
            result = self.discover()
            if result['errors']:
                update_cache = False  # an incomplete answer is never cached
        if update_cache:
            self._cache[cache_key] = result
        self.populate(result)
        if not result['hosts']:
            display.warning(self._nothing_found(result))
        display.vvv('ocigpu.cluster.gpu_nodes: %d hosts from the %s in %.3f s'
                    % (len(result['hosts']), source, time.monotonic() - started))

    # -- discovery -------------------------------------------------------------------------------

    def _auth_params(self):
        return dict((name, self.get_option(name)) for name in (
            'config_file', 'config_profile', 'auth_type', 'region', 'service_endpoint',
            'api_retries', 'api_retry_max_seconds'))

    def discover(self):
        """Ask the API; returns the JSON-serialisable result that is cached and populated."""
        params = self._auth_params()
        try:
            config, signer = build_config(params)
        except OCIConfigError as exc:
            raise AnsibleError('ocigpu.cluster.gpu_nodes: %s' % to_native(exc))
        tenancy = config.get('tenancy') or getattr(signer, 'tenancy_id', None)
        if not tenancy:
            raise AnsibleError('ocigpu.cluster.gpu_nodes: cannot tell the tenancy OCID from the auth options')
        regions = self.get_option('regions') or [config['region']]

        local = threading.local()

        def client_for(client_cls, region, raw=False):
            # One client per worker thread, region and class, so no HTTP session is shared between threads;
            # raw: one that leaves the answers as JSON (skip_deserialization).
            clients = local.__dict__.setdefault('clients', {})
            key = (client_cls, region, raw)
            if key not in clients:
                clients[key] = create_client(client_cls, dict(params, region=region),
                                             (dict(config, region=region), signer))
                clients[key].base_client.skip_deserialization = raw
            return clients[key]

        # A 429 pauses every call of the discovery (one pause) and uses up no attempt (_oci.ThrottledRetrier).
        retrier = throttled_retrier(params, per_operation=False)
        discovery = _inventory.Discovery(
            client_for, retrier, tenancy, regions,
            compartments=self._compartments(tenancy),
            cluster=self.get_option('cluster'),
            shapes=self.get_option('shapes'),
            is_gpu_shape=is_gpu_shape,
            include_bastions=self.get_option('include_bastions'),
            lifecycle_states=self.get_option('lifecycle_states'),
            max_workers=self.get_option('max_workers'),
            topology=self.get_option('topology'),
        )
        result = discovery.run()
        display.vvv('ocigpu.cluster.gpu_nodes: %d hosts, %d API requests, %d retries, %.2f s'
                    % (len(result['hosts']), result['calls'], retrier.retries, result['seconds']))
        self._report_errors(result['errors'])
        for warning in result.get('warnings') or []:
            display.warning('ocigpu.cluster.gpu_nodes: %s' % warning)
        return result

    def _compartments(self, tenancy):
        # One cluster in given compartments: exactly those (the cluster provision.yml made there), unless
        # an item says subtree: true. The whole tenancy, or every cluster: each compartment and its subtree.
        given = self.get_option('compartments')
        subtree = not (given and self.get_option('cluster'))
        out = []
        for item in given or [dict(id=tenancy)]:
            if isinstance(item, str):
                item = dict(id=item)
            if not isinstance(item, dict) or not isinstance(item.get('id'), str):
                raise AnsibleError('ocigpu.cluster.gpu_nodes: compartments: each item is an OCID or '
                                   'a mapping with id (and optional subtree), not %r' % (item,))
            unknown = set(item) - set(('id', 'subtree'))
            if unknown:
                raise AnsibleError('ocigpu.cluster.gpu_nodes: compartments: unknown keys %s' % ', '.join(sorted(unknown)))
            out.append(dict(id=item['id'], subtree=bool(item.get('subtree', subtree))))
        return out

    def _nothing_found(self, result):
        """The warning for an inventory without a host: where it looked, and the clusters it saw there."""
        cluster = self.get_option('cluster')
        seen = result.get('seen_clusters') or []
        where = result.get('compartments') or []
        text = 'ocigpu.cluster.gpu_nodes: no host found%s in %d compartment(s) (%s), states %s. ' % (
            ' for cluster %r' % cluster if cluster else '', len(where),
            ', '.join(where[:10]) + (', ...' if len(where) > 10 else ''), '/'.join(self.get_option('lifecycle_states')))
        if seen:
            text += 'Clusters seen there (tag %s): %s.' % (
                _inventory.CLUSTER_TAG,
                ', '.join(seen[:20]) + (' and %d more' % (len(seen) - 20) if len(seen) > 20 else ''))
        else:
            text += 'No instance there carries the tag %s.' % _inventory.CLUSTER_TAG
        return text + ' Check the cluster name, the compartments and the region.'

    def _report_errors(self, errors):
        if not errors:
            return
        lines = [_inventory.format_error(e) for e in errors]
        shown = '\n  '.join(lines[:20]) + ('\n  ... and %d more' % (len(lines) - 20) if len(lines) > 20 else '')
        if self.get_option('strict'):
            raise AnsibleError('ocigpu.cluster.gpu_nodes: %d API call(s) failed after retries; refusing to '
                               'return an incomplete inventory (set strict: false to accept it):\n  %s'
                               % (len(errors), shown))
        display.warning('ocigpu.cluster.gpu_nodes: INCOMPLETE INVENTORY: %d API call(s) failed after retries; '
                        'hosts in the scopes below are missing or lack details:\n  %s' % (len(errors), shown))

    # -- inventory -------------------------------------------------------------------------------

    def _candidate(self, host, pref):
        if pref.startswith('tag:'):
            value = host['freeform_tags'].get(pref[4:])
        elif pref in _HOSTNAME_KEYS:
            value = host.get(pref)
        else:
            raise AnsibleError('ocigpu.cluster.gpu_nodes: hostnames: unknown preference %r (use %s or tag:<key>)'
                               % (pref, ', '.join(_HOSTNAME_KEYS)))
        return str(value) if value else None

    @staticmethod
    def _claim(host, name):
        """How strongly a host claims a name; lower wins: a name that starts with the host's own cluster
        name (`<cluster>-bastion`), then a host of some cluster, then an untagged one; then the older
        instance. Never the OCID: a name depends on the instances that want it, not on ids."""
        cluster = host['cluster']
        if cluster and name.startswith(cluster + '-'):
            rank = 0
        elif cluster:
            rank = 1
        else:
            rank = 2
        return (rank, host['time_created'] or '')

    def _hostnames(self, hosts):
        """{instance id: inventory name}. Preference by preference, a name wanted by several hosts goes
        to the one with the strongest claim (_claim); when the strongest claims tie, none takes it and
        each tries its next preference. The OCID is always the last one, so every host gets a name."""
        prefs = list(self.get_option('hostnames')) + ['id']
        names = {}
        taken = set()
        left = list(hosts)
        for pref in prefs:
            wanted = {}
            for host in left:
                name = self._candidate(host, pref)
                if name and name not in taken:
                    wanted.setdefault(name, []).append(host)
            for name, claimants in wanted.items():
                claims = sorted((self._claim(h, name), h['id']) for h in claimants)
                if len(claims) > 1 and claims[0][0] == claims[1][0]:
                    continue  # a tie: nobody takes it
                names[claims[0][1]] = name
                taken.add(name)
            left = [h for h in left if h['id'] not in names]
            if not left:
                break
        if left:
            raise AnsibleError('ocigpu.cluster.gpu_nodes: two instances share the OCID %s' % left[0]['id'])
        return names

    def _user(self, host):
        users = self.get_option('ansible_user_by_os') or {}
        os_name = (host.get('image') or {}).get('operating_system')
        return users.get(os_name) or self.get_option('default_ansible_user')

    def populate(self, result):
        strict = self.get_option('strict')
        hosts = result['hosts']
        names = self._hostnames(hosts)

        # A cluster is its tag in its compartment: two compartments' clusters of one name share no
        # bastion, controller or group.
        bastions = {}
        controllers = {}
        wanted_controller = self.get_option('slurm_controller')
        for host in hosts:
            if host['role'] == _inventory.ROLE_BASTION and host['cluster']:
                bastions.setdefault(_cluster_key(host), host)
            if host['cluster'] and (
                    (wanted_controller == 'bastion' and host['role'] == _inventory.ROLE_BASTION)
                    or host['display_name'] == wanted_controller):
                controllers.setdefault(_cluster_key(host), host)
        self._group_names = self._identity_groups(hosts)

        for group in ('bastion', 'gpu_nodes', 'gpu_nodes_on_demand', 'slurm_controller'):
            self.inventory.add_group(group)
        if result['errors']:
            self.inventory.set_variable('all', 'ocigpu_inventory_errors', make_unsafe(result['errors']))

        for host in hosts:
            name = names[host['id']]
            self.inventory.add_host(name)
            hostvars = self._hostvars(host, bastions.get(_cluster_key(host)))
            for key, value in hostvars.items():
                self.inventory.set_variable(name, key, value)
            for group in self._groups(host, controllers):
                self.inventory.add_group(group)
                self.inventory.add_child(group, name)
            self._set_composite_vars(self.get_option('compose'), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option('groups'), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option('keyed_groups'), hostvars, name, strict=strict)

    @staticmethod
    def _identity_groups(hosts):
        """{(prefix, name, compartment id): group} for the groups named after a cluster tag or a display name.

        A name found in one compartment gives named_group(prefix, name), as always. A name found in
        several compartments gives each of them its own group: the compartment OCID's first 8 hex
        digits of SHA-256 after the name, with a warning for a cluster tag. Where a name crafted
        elsewhere would still give a group name that another one has, both take 16 hex digits of
        the name and compartment together."""
        places = {}
        for host in hosts:
            names = [('cluster', host['cluster'])] if host['cluster'] else []
            names += [(kind, host[kind]['name'] or host[kind]['id'])
                      for kind in ('cluster_network', 'instance_pool', 'compute_cluster') if host.get(kind)]
            for prefix, name in names:
                places.setdefault((prefix, name), {})[host['compartment_id']] = host['compartment_name']
        out = {}
        for (prefix, name), compartments in places.items():
            for cid in compartments:
                out[(prefix, name, cid)] = named_group(prefix, name) if len(compartments) == 1 else (
                    '%s_%s' % (named_group(prefix, name), _digest(cid)[:8]))
            if prefix == 'cluster' and len(compartments) > 1:
                display.warning('ocigpu.cluster.gpu_nodes: the cluster tag %r is on instances in %d compartments; '
                                'each is a cluster of its own: %s' % (name, len(compartments), ', '.join(
                                    '%s in %s' % (out[(prefix, name, cid)], compartments[cid] or cid)
                                    for cid in sorted(compartments))))
        taken = {}
        for key, group in out.items():
            taken.setdefault(group, []).append(key)
        for group, keys in taken.items():
            if len(keys) > 1:
                for prefix, name, cid in keys:
                    out[(prefix, name, cid)] = '%s_%s' % (
                        named_group(prefix, name), _digest('%s\0%s' % (name, cid))[:16])
        return out

    def _groups(self, host, controllers):
        # On-demand nodes (the Slurm autoscaler's, tagged with their Slurm name) configure themselves
        # (the pull path): they get a group of their own, so a push of configure.yml leaves them alone.
        # A bake's builder (tagged ocigpu-role=bake-builder by bake.yml) is no node of the cluster either.
        tags = host['freeform_tags'] or {}
        on_demand = 'ocigpu-slurm-node' in tags
        kind = 'gpu_nodes_on_demand' if on_demand else 'bake_builders' if tags.get('ocigpu-role') == 'bake-builder' else 'gpu_nodes'
        groups = ['bastion' if host['role'] == _inventory.ROLE_BASTION else kind]
        if host['cluster']:
            groups.append(self._group_names[('cluster', host['cluster'], host['compartment_id'])])
            if controllers.get(_cluster_key(host)) is host:
                groups.append('slurm_controller')
        for kind in ('cluster_network', 'instance_pool', 'compute_cluster'):
            if host.get(kind):
                groups.append(self._group_names[(kind, host[kind]['name'] or host[kind]['id'], host['compartment_id'])])
        groups.append(safe_group('shape', host['shape']))
        if host['availability_domain']:
            groups.append(safe_group('ad', host['availability_domain']))
            if host['fault_domain']:
                groups.append(safe_group('fd', host['availability_domain'], host['fault_domain']))
        return groups

    def _shape_facts(self, shape):
        cache = self.__dict__.setdefault('_shape_cache', {})
        if shape not in cache:
            cache[shape] = get_shape(shape) if shape in SHAPES else None
        return cache[shape]

    def _hostvars(self, host, bastion):
        public = host['role'] == _inventory.ROLE_BASTION
        hv = dict(
            ansible_host=(host['public_ip'] or host['private_ip']) if public else host['private_ip'],
            ansible_user=self._user(host),
            oci_instance_id=host['id'],
            oci_display_name=host['display_name'],
            oci_region=host['region'],
            oci_compartment_id=host['compartment_id'],
            oci_compartment_name=host['compartment_name'],
            oci_availability_domain=host['availability_domain'],
            oci_fault_domain=host['fault_domain'],
            oci_shape=host['shape'],
            oci_lifecycle_state=host['lifecycle_state'],
            oci_image_id=host['image_id'],
            oci_image=host['image'],
            oci_private_ip=host['private_ip'],
            oci_public_ip=host['public_ip'],
            oci_hostname_label=host['hostname_label'],
            oci_vnic_id=host['vnic_id'],
            oci_subnet_id=host['subnet_id'],
            oci_vcn_id=host['vcn_id'],
            oci_freeform_tags=host['freeform_tags'],
            oci_defined_tags=host['defined_tags'],
            oci_time_created=host['time_created'],
            oci_cluster_network_id=(host['cluster_network'] or {}).get('id'),
            oci_cluster_network_name=(host['cluster_network'] or {}).get('name'),
            oci_instance_pool_id=(host['instance_pool'] or {}).get('id'),
            oci_instance_pool_name=(host['instance_pool'] or {}).get('name'),
            oci_compute_cluster_id=(host['compute_cluster'] or {}).get('id'),
            oci_compute_cluster_name=(host['compute_cluster'] or {}).get('name'),
            oci_hpc_island_id=host.get('hpc_island_id'),
            oci_network_block_id=host.get('network_block_id'),
            oci_local_block_id=host.get('local_block_id'),
            ocigpu_role=host['role'],
            ocigpu_cluster=host['cluster'],
        )
        facts = self._shape_facts(host['shape'])
        if facts:
            hv.update(ocigpu_gpu_model=facts['gpu_model'], ocigpu_gpu_count=facts['gpu_count'],
                      ocigpu_gpu_memory_gb=facts['gpu_memory_gb'], ocigpu_nvme_count=facts['nvme_count'],
                      ocigpu_rdma_interfaces=list(facts['rdma_interfaces']))
        if host['role'] == _inventory.ROLE_GPU and host['private_ip']:
            hv['ocigpu_rdma_index'] = int(host['private_ip'].rsplit('.', 1)[-1])
        slurm_name = (host['freeform_tags'] or {}).get(SLURM_NAME_TAG)
        if host['role'] == _inventory.ROLE_GPU and slurm_name:
            hv['ocigpu_slurm_name'] = slurm_name
        if host['cluster']:
            known_hosts = self._known_hosts(host['cluster'])
            key = self.get_option('private_key_file')
            jump = jump_id = None
            if (self.get_option('proxy_jump') and not public and bastion is not None and bastion['public_ip']):
                jump = '%s@%s' % (self._user(bastion), bastion['public_ip'])
                jump_id = bastion['id']
                hv['ocigpu_bastion'] = bastion['public_ip']
            hv['ansible_ssh_common_args'] = ssh_common_args(known_hosts, jump, key, host['id'], jump_id)
            hv['ocigpu_known_hosts_file'] = known_hosts
            if key:
                hv['ansible_ssh_private_key_file'] = key
        return make_unsafe(hv)

    def _known_hosts(self, cluster):
        """The cluster's known_hosts file, its folder made (0700) where missing: ssh records no key
        in a folder that does not exist, and would then accept a new key on every run."""
        path = known_hosts_path(cluster, self.get_option('known_hosts_file'))
        made = self.__dict__.setdefault('_known_hosts_dirs', set())
        folder = os.path.dirname(path)
        if folder not in made:
            made.add(folder)
            try:
                os.makedirs(folder, mode=0o700, exist_ok=True)
            except OSError as e:
                display.warning('ocigpu.cluster.gpu_nodes: cannot make %s (%s): ssh will not record the host keys of %s'
                                % (folder, to_native(e), cluster))
        return path
