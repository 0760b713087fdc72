# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The preflight: a whole cluster plan checked with read-only calls, every problem found at once.

The provisioning modules each check their own options when their turn comes, so a mistake in a
later part of the plan is found after the earlier parts exist (a VCN, a billable bastion).
Preflight(session, params).run() checks all of it before anything is made:

- the plan itself: a cluster name that can name and tag every resource (the display names it makes
  within OCI's 255 characters), shapes known to the shape table (_shapes.py) and of the right kind (the bastion
  a CPU VM shape; GPU nodes a GPU shape, an RDMA one where a cluster network is needed), Flex
  sizes given, node counts, a boot volume of 50 to 32768 GB, user data within 32,000 bytes after
  base64, SSH keys that parse as OpenSSH public keys (a private key is named as one, its text
  never repeated);
- what OCI says, with GETs and one CreateComputeCapacityReport (a POST that creates nothing): the
  compartment and availability domain, the shapes offered there with their Flex limits and limit
  names (`quotaNames`), the images (named one exists, is AVAILABLE, runs on the shape and fits the
  boot volume; the bastion's OS has an image for its shape), the instances the cluster already has
  (a re-run or a resize needs only the difference), the host capacity for what is new (the Compute
  capacity report) and the service limits (the Limits service's resource availability);
- the capacity sources (gpu_capacity_sources, docs/capacity.md) in their checked form; their table
  (reservations read, each AD's capacity report) is made by plugins/modules/preflight.py.

The checks that the resource modules make of the same values (the cluster name and display names in
_resource.py; the availability domain, Flex sizes and image-on-shape in _launch.py) are the same
functions, so the preflight and a module used alone refuse the same things with the same words.

Each problem is one line that starts with the plan variable it is about. A read that OCI refuses
for want of permission or support (the capacity report, a limit without resource availability) is
listed in `skipped`, not as a problem: the preflight must not stop a plan that may well work.
"""

from __future__ import annotations

import base64

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _network, _shapes
from ansible_collections.ocigpu.cluster.plugins.module_utils._oci import ServiceError
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    CLUSTER_TAG, InputError, check_display_names, cluster_name_problem, is_live)

try:
    import oci
    from oci.core import models as M
except ImportError:
    oci = M = None  # OCIModule reports the missing library

LIMITS_SERVICE = 'compute'
FILESYSTEM_SERVICE = 'filesystem'
LIVE_INSTANCE = ('PROVISIONING', 'STARTING', 'RUNNING', 'STOPPING', 'STOPPED', 'MOVING', 'CREATING_IMAGE')
CLUSTER_MODES = ('auto', 'single', 'cluster_network')
PRIVATE_KEY_MARKERS = ('PRIVATE KEY-----', 'PuTTY-User-Key-File')
# HTTP statuses of a read that OCI refused for want of permission or support: skipped, not a problem.
_NOT_ANSWERED = (401, 403, 404)
UNIT_NAMES = {'gpus': 'GPUs', 'ocpus': 'OCPUs', 'memory_gb': 'GB of memory', 'instances': 'instances'}
FLEX_OPTIONS = {'ocpus': 'bastion_ocpus', 'memory': 'bastion_memory_gb'}
# The names provision.yml derives from cluster_name besides the network's: the longest of each kind
# (the instance configuration's ends in a hash of 8 hex digits).
DERIVED_NAMES = ('%s-bastion', '%s-gpu-template-00000000', '%s-cn-pool')


def plan_argument_spec():
    """The plan: the cluster vars of playbooks/vars/cluster_defaults.yml that decide what is created."""
    return dict(
        cluster_name=dict(type='str', required=True),
        compartment_id=dict(type='str', required=True),
        availability_domain=dict(type='str'),
        bastion_shape=dict(type='str', required=True),
        bastion_ocpus=dict(type='float'),
        bastion_memory_gb=dict(type='float'),
        bastion_image_os=dict(type='str', required=True),
        bastion_image_os_version=dict(type='str'),
        gpu_shape=dict(type='str', required=True),
        gpu_image_name=dict(type='str', required=True),
        gpu_node_count=dict(type='int', default=1),
        gpu_cluster_mode=dict(type='str', choices=list(CLUSTER_MODES), default='auto'),
        gpu_placement_constraint=dict(type='str', default='',
                                      choices=['', 'SINGLE_TIER', 'SINGLE_BLOCK', 'PACKED_DISTRIBUTION_MULTI_BLOCK']),
        gpu_hpc_island_id=dict(type='str', default=''),
        gpu_network_block_ids=dict(type='list', elements='str', default=[]),
        gpu_boot_volume_gb=dict(type='int'),
        gpu_user_data=dict(type='str'),
        gpu_user_data_file=dict(type='path'),
        ssh_authorized_keys=dict(type='list', elements='str', default=[], no_log=True),
        ssh_public_key_file=dict(type='path', no_log=False),
        autoscaling=dict(type='bool', default=False),
        autoscaling_max_nodes=dict(type='int', default=8),
        shared_home=dict(type='str', default='', choices=['', 'fss']),
        capacity_sources=dict(type='list', elements='dict', default=[]),
    )


def limit_unit(limit_name):
    """What a compute limit counts, by OCI's naming: OCPUs, GB of memory, GPUs or instances."""
    if limit_name.endswith('core-count'):
        return 'ocpus'
    if limit_name.endswith('memory-count'):
        return 'memory_gb'
    if limit_name.startswith('gpu'):
        return 'gpus'
    return 'instances'


def key_problem(text):
    """Why text is not one OpenSSH public key, or None. The text of a private key is never repeated."""
    stripped = (text or '').strip()
    if not stripped:
        return 'holds no key: expected an OpenSSH public key ("ssh-ed25519 AAAA... comment")'
    if any(marker in stripped for marker in PRIVATE_KEY_MARKERS):
        return ('this is a PRIVATE key, which must not leave your machine; give its public key instead (the .pub '
                'file next to it, or what `ssh-keygen -y -f <private key file>` prints). Its text is not repeated here.')
    if stripped.startswith('---- BEGIN SSH2 PUBLIC KEY'):
        return 'an SSH2 (RFC 4716) public key; OCI takes the OpenSSH format: convert it with `ssh-keygen -i -f <file>`'
    lines = [line.strip() for line in stripped.splitlines() if line.strip() and not line.strip().startswith('#')]
    if not lines:
        return 'holds no key, only comments'
    if len(lines) > 1:
        return ('holds %d lines; each entry takes one OpenSSH public key (list every key as its own entry of '
                'ssh_authorized_keys)' % len(lines))
    parts = lines[0].split()
    if len(parts) < 2 or parts[0] not in _launch.SSH_KEY_TYPES:
        return ('holds no OpenSSH public key: expected "<type> <base64 key> [comment]" with type one of %s'
                % ', '.join(_launch.SSH_KEY_TYPES[:5]))
    try:
        _launch.check_ssh_key('key', lines[0])
    except InputError as exc:
        return str(exc)[len('key: '):]
    return None


class Preflight(object):
    """The checks of one plan. run() returns (result, warnings); result has problems, checks, skipped."""

    def __init__(self, session, params):
        self.s = session
        self.p = params
        self.problems = []
        self.skipped = []
        self.warnings = []
        self.checks = dict(availability_domain=None, bastion=dict(shape=params['bastion_shape']),
                           gpu=dict(shape=params['gpu_shape']), capacity=[], limits=[], shared_home=[],
                           capacity_sources=[], capacity_source=None)
        self.bastion_facts = self.gpu_facts = None
        self.boot_gb = None
        self.shapes = {}
        self.flex_signs_ok = True
        self.sources = None  # the checked capacity sources (plugins/modules/preflight.py); None: none given
        self.answers = {}  # (availability domain, shape) -> the capacity report's answer
        self.reported = set()  # (availability domain, shape) asked of a capacity report

    def problem(self, option, text):
        self.problems.append('%s: %s' % (option, text))

    def run(self):
        self.check_plan()
        self.check_with_oci()
        return dict(problems=self.problems, checks=self.checks, skipped=self.skipped), self.warnings

    # The plan alone --------------------------------------------------------------------------------
    def check_plan(self):
        p = self.p
        self._cluster_name()
        self.bastion_facts = self._bastion_shape(p['bastion_shape'])
        self.gpu_facts = self._gpu_shape(p['gpu_shape'])
        self.flex_signs_ok = True
        if self.bastion_facts and self.bastion_facts['flex']:
            for what, text in _launch.flex_size_problems(p['bastion_shape'], p['bastion_ocpus'], p['bastion_memory_gb']):
                self.problem(FLEX_OPTIONS[what], text)
                self.flex_signs_ok = False
        if not (p['bastion_image_os'] or '').strip():
            self.problem('bastion_image_os', 'empty; name the operating system of the bastion, e.g. Oracle Linux')
        if not (p['gpu_image_name'] or '').strip():
            self.problem('gpu_image_name', 'empty; name the GPU nodes\' image, e.g. Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0')
        self._node_counts()
        self._placement()
        self._boot_volume()
        self._user_data()
        self._ssh_keys()

    def _cluster_name(self):
        name = self.p['cluster_name']
        problem = cluster_name_problem(name)
        if problem:
            self.problem('cluster_name', problem)
            return
        try:
            check_display_names('cluster_name', _network.part_names(name) + [form % name for form in DERIVED_NAMES])
        except InputError as exc:
            self.problem('cluster_name', str(exc).split(': ', 1)[1])

    def _bastion_shape(self, name):
        error = _shapes.validate_shape(name)
        if error:
            self.problem('bastion_shape', error)
            return None
        facts = _shapes.SHAPES.get(name)
        usable = ', '.join(n for n in _shapes.known_shapes() if n.startswith('VM.') and not _shapes.SHAPES[n]['gpu_count'])
        if facts is None:
            self.problem('bastion_shape', "'%s' is not in the collection's shape table; the bastion takes one of: %s"
                         % (name, usable))
            return None
        if facts['gpu_count'] or not name.startswith('VM.'):
            self.problem('bastion_shape', "%s is a %s shape; the bastion (the Slurm controller) takes a CPU VM shape: %s"
                         % (name, 'GPU' if facts['gpu_count'] else 'bare-metal', usable))
            return None
        return facts

    def _gpu_shape(self, name):
        error = _shapes.validate_shape(name)
        if error:
            self.problem('gpu_shape', error)
            return None
        facts = _shapes.SHAPES.get(name)
        if facts is None or not facts['gpu_count']:
            self.problem('gpu_shape', '%s is not a GPU shape; GPU nodes take one of: %s' % (
                name, ', '.join(n for n in _shapes.known_shapes() if _shapes.SHAPES[n]['gpu_count'])))
            return None
        if self._gpu_kind() == 'cluster_network' and facts['cluster_kind'] != 'cluster_network':
            self.problem('gpu_shape', '%s cannot join an RDMA cluster network, which %s needs; RDMA shapes: %s' % (
                name, 'autoscaling' if self.p['autoscaling'] else 'gpu_node_count %d' % self.p['gpu_node_count'],
                ', '.join(n for n in _shapes.known_shapes() if _shapes.SHAPES[n]['cluster_kind'])))
        return facts

    def _gpu_kind(self):
        """As provision.yml decides: one node alone is an instance, more (or on-demand ones) a cluster network."""
        p = self.p
        if p['autoscaling']:
            return 'cluster_network'
        if p['gpu_cluster_mode'] == 'single' or (p['gpu_cluster_mode'] == 'auto' and p['gpu_node_count'] == 1):
            return 'single'
        return 'cluster_network'

    def _node_counts(self):
        p = self.p
        least = 0 if p['autoscaling'] else 1
        if p['gpu_node_count'] < least:
            self.problem('gpu_node_count', '%d; at least %d%s' % (
                p['gpu_node_count'], least, ' (0 only with autoscaling)' if least else ''))
        if p['autoscaling'] and p['autoscaling_max_nodes'] < 1:
            self.problem('autoscaling_max_nodes', '%d; autoscaling needs at least 1' % p['autoscaling_max_nodes'])
        if p['autoscaling'] and p['gpu_cluster_mode'] == 'single':
            self.problem('gpu_cluster_mode', 'single; on-demand nodes come as cluster networks, so autoscaling takes '
                         'auto or cluster_network')
        if p['autoscaling'] and p['gpu_user_data_file']:
            self.problem('gpu_user_data_file', "not with autoscaling: the node template gets the collection's cloud-init, "
                         "with which on-demand nodes configure themselves")
        self.checks['gpu'].update(kind=self._gpu_kind(), nodes=p['gpu_node_count'])

    def _placement(self):
        """Where OCI will put the cluster network's nodes, in words (checks.gpu.placement), and the
        placement options that cannot work."""
        p = self.p
        asked = [o for o in ('gpu_placement_constraint', 'gpu_hpc_island_id', 'gpu_network_block_ids') if p[o]]
        if self._gpu_kind() != 'cluster_network':
            for option in asked:
                self.problem(option, 'only for a cluster network; a single instance (gpu_cluster_mode %s, %d node) '
                             'is placed wherever OCI has a host' % (p['gpu_cluster_mode'], p['gpu_node_count']))
            self.checks['gpu']['placement'] = 'a single instance: any host of the availability domain'
            return
        for what, problem in _launch.placement_problems(p['gpu_hpc_island_id'], p['gpu_network_block_ids'],
                                                        island_option='gpu_hpc_island_id'):
            self.problem('gpu_' + what, problem)
        where = ['one HPC island' + (' (%s)' % p['gpu_hpc_island_id'] if p['gpu_hpc_island_id'] else ', any')]
        if p['gpu_network_block_ids']:
            where.append('network blocks %s' % ', '.join(p['gpu_network_block_ids']))
        where.append('placement constraint %s' % p['gpu_placement_constraint'] if p['gpu_placement_constraint']
                     else "OCI's default placement")
        self.checks['gpu']['placement'] = '; '.join(where) + (
            '; on-demand nodes: each job\'s cluster network places its own' if p['autoscaling'] else '')

    def _boot_volume(self):
        boot = self.p['gpu_boot_volume_gb']
        if boot is None and self.gpu_facts:
            boot = self.gpu_facts['boot_volume_gb']
        if boot is not None and not _launch.MIN_BOOT_GB <= boot <= _launch.MAX_BOOT_GB:
            self.problem('gpu_boot_volume_gb', '%d GB; OCI boot volumes are %d to %d GB (32 TB)'
                         % (boot, _launch.MIN_BOOT_GB, _launch.MAX_BOOT_GB))
            return
        self.boot_gb = boot
        self.checks['gpu']['boot_volume_gb'] = boot

    def _user_data(self):
        path, text = self.p['gpu_user_data_file'] or None, self.p['gpu_user_data'] or None
        if path and text:
            self.problem('gpu_user_data_file', 'set gpu_user_data_file or gpu_user_data, not both')
        raw = None
        option = 'gpu_user_data_file' if path else 'gpu_user_data'
        if path:
            try:
                with open(path, 'rb') as handle:
                    raw = handle.read()
            except (IOError, OSError) as exc:
                self.problem(option, '%s cannot be read: %s' % (path, exc.strerror or exc))
        elif text:
            raw = text.encode('utf-8')
        if raw is None:
            return
        size = len(base64.b64encode(raw))
        self.checks['gpu']['user_data_bytes'] = size
        if size > _launch.MAX_USER_DATA:
            self.problem(option, '%d bytes after base64 (%d as written); OCI takes at most %d in the instance metadata'
                         % (size, len(raw), _launch.MAX_USER_DATA))

    def _ssh_keys(self):
        entries = [('ssh_authorized_keys[%d]' % i, key) for i, key in enumerate(self.p['ssh_authorized_keys'] or [])]
        path = self.p['ssh_public_key_file']
        if path:
            try:
                with open(path) as handle:
                    entries.append(('ssh_public_key_file (%s)' % path, handle.read()))
            except (IOError, OSError) as exc:
                self.problem('ssh_public_key_file', '%s cannot be read: %s' % (path, exc.strerror or exc))
            except ValueError:
                self.problem('ssh_public_key_file', '%s is not a text file; it holds no OpenSSH public key' % path)
        elif not entries:
            self.problem('ssh_authorized_keys', 'no SSH public key in the plan; set ssh_public_key_file or '
                         'ssh_authorized_keys, or nobody can log in to the bastion and the nodes')
        good = 0
        for option, text in entries:
            error = key_problem(text)
            if error:
                self.problem(option, error)
            else:
                good += 1
        self.checks['ssh_keys'] = good

    # What OCI says ---------------------------------------------------------------------------------
    def check_with_oci(self):
        s, comp = self.s, self.p['compartment_id']
        try:
            ads = sorted(a.name for a in s.call(s.identity.list_availability_domains, comp))
        except ServiceError as exc:
            if exc.status in (400, 404):
                self.problem('compartment_id', '%s: OCI answers %s %s, so nothing else could be read: %s'
                             % (comp, exc.status, exc.code, exc.message))
                return
            raise
        existing = [i for i in s.list_all(s.compute.list_instances, comp)
                    if i.lifecycle_state in LIVE_INSTANCE and (i.freeform_tags or {}).get(CLUSTER_TAG) == self.p['cluster_name']]
        bastion = next((i for i in existing if (i.freeform_tags or {}).get('ocigpu-role') == 'bastion'), None)
        ad = self._availability_domain(ads, bastion)
        self.shapes = dict((sh.shape, sh) for sh in s.list_all(
            s.compute.list_shapes, comp, **({'availability_domain': ad} if ad else {})))
        for option, facts in (('bastion_shape', self.bastion_facts), ('gpu_shape', self.gpu_facts)):
            if facts is not None and ad and self.p[option] not in self.shapes:
                self.problem(option, '%s is not offered in %s (ListShapes of the compartment)' % (self.p[option], ad))
        self._flex_limits()
        self._bastion_image()
        self._gpu_image()
        if not ad:
            self.skipped.append('capacity and limits: not checked without a valid availability domain')
            return
        # With capacity sources the nodes may be in any of their availability domains.
        nodes = [i for i in existing if i.shape == self.p['gpu_shape'] and i is not bastion
                 and (i.availability_domain == ad or self.p['capacity_sources'])]
        self.checks['bastion']['exists'] = bastion is not None
        self.checks['gpu']['existing'] = len(nodes)
        wanted = self._wanted(bastion, len(nodes))
        self._capacity(ad, wanted)
        self._limits(ad, wanted)
        self._shared_home(ad)
        self._capacity_sources(ad, ads)

    def _availability_domain(self, ads, bastion):
        given = self.p['availability_domain']
        problem = _launch.availability_domain_problem(given, ads, self.s.config.get('region'))
        if problem:
            self.problem('availability_domain', problem)
            return None
        ad = given or (bastion.availability_domain if bastion is not None else (ads[0] if ads else None))
        if ad is None:
            self.problem('compartment_id', 'the compartment sees no availability domain')
        self.checks['availability_domain'] = ad
        return ad

    def _flex_limits(self):
        p, facts = self.p, self.bastion_facts
        shape = self.shapes.get(p['bastion_shape'])
        if not (facts and facts['flex'] and shape is not None):
            return
        if not self.flex_signs_ok:  # check_plan reported the sizes already
            return
        for what, text in _launch.flex_size_problems(p['bastion_shape'], p['bastion_ocpus'], p['bastion_memory_gb'],
                                                     shape.ocpu_options, shape.memory_options):
            self.problem(FLEX_OPTIONS[what], text)

    def _bastion_image(self):
        p = self.p
        if not (p['bastion_image_os'] or '').strip():
            return
        shape = p['bastion_shape'] if self.bastion_facts else None
        try:
            image = _launch.resolve_image(self.s, p['compartment_id'], dict(
                image_os=p['bastion_image_os'], image_os_version=p['bastion_image_os_version'], shape=shape))
        except InputError as exc:
            self.problem('bastion_image_os', str(exc).split(': ', 1)[1])
            return
        self.checks['bastion']['image'] = image

    def _gpu_image(self):
        s, p = self.s, self.p
        name = (p['gpu_image_name'] or '').strip()
        if not name:
            return
        found = s.list_all(s.compute.list_images, p['compartment_id'], display_name=name,
                           sort_by='TIMECREATED', sort_order='DESC')
        available = [i for i in found if i.lifecycle_state == 'AVAILABLE']
        if not available:
            if found:
                self.problem('gpu_image_name', 'the image %s is %s, not AVAILABLE' % (name, found[0].lifecycle_state))
                return
            hint = ''
            if self.gpu_facts:
                runs_on = _launch.list_images(s, p['compartment_id'], shape=p['gpu_shape'])
                newest = ([i for i in runs_on if 'GPU' in (i.display_name or '')] or runs_on)[:3]
                hint = '; the newest images for %s: %s' % (p['gpu_shape'], ', '.join(i.display_name for i in newest) or 'none')
            self.problem('gpu_image_name', 'no available image is named %r in the compartment or among the '
                         'platform images%s' % (name, hint))
            return
        image = available[0]
        self.checks['gpu']['image'] = _launch._image_dict(image)
        if self.gpu_facts or p['gpu_shape'] in self.shapes:  # a CPU shape given for GPU nodes: its image is checked too
            problem = _launch.image_shape_problem(s, p['compartment_id'], image.id, name, p['gpu_shape'])
            if problem:
                self.problem('gpu_image_name', problem)
        if self.boot_gb and image.size_in_mbs and self.boot_gb * 1024 < image.size_in_mbs:
            self.problem('gpu_boot_volume_gb', '%d GB is smaller than the image %s (%d MB); a boot volume must hold '
                         'its image' % (self.boot_gb, name, image.size_in_mbs))

    # Capacity and limits -----------------------------------------------------------------------------
    def _wanted(self, bastion, existing_nodes):
        """[(option, shape, new instances now, new instances at the peak)] for what the plan would add."""
        p, wanted = self.p, []
        if self.bastion_facts and bastion is None and p['bastion_shape'] in self.shapes:
            wanted.append(('bastion_shape', p['bastion_shape'], 1, 1))
        if self.gpu_facts and p['gpu_shape'] in self.shapes:
            now = max(0, p['gpu_node_count'] - existing_nodes)
            peak = max(0, p['gpu_node_count'] + (p['autoscaling_max_nodes'] if p['autoscaling'] else 0) - existing_nodes)
            self.checks['gpu'].update(new=now, new_at_peak=peak)
            if peak:
                wanted.append(('gpu_node_count', p['gpu_shape'], now, peak))
        return wanted

    def _capacity_asks(self, wanted):
        """What to ask the capacity report: (option, shape, now, peak, Flex size). A Flex bastion whose size
        is wrong is left out (that problem is reported already; OCI would refuse the report)."""
        p, asks = self.p, []
        for option, shape, now, peak in wanted:
            config = None
            if option == 'bastion_shape' and self.bastion_facts['flex']:
                if any(problem.startswith(('bastion_ocpus:', 'bastion_memory_gb:')) for problem in self.problems):
                    continue
                config = M.CapacityReportInstanceShapeConfig(ocpus=p['bastion_ocpus'], memory_in_gbs=p['bastion_memory_gb'])
            asks.append((option, shape, now, peak, config))
        return asks

    def _report(self, ad, shapes, what='capacity'):
        """The capacity report of one availability domain for [(shape, Flex size or None)]: {shape: answer},
        or None when OCI does not answer it (skipped). Each answer is kept in self.answers."""
        s = self.s
        self.reported.update((ad, shape) for shape, _cfg in shapes)
        details = M.CreateComputeCapacityReportDetails(
            compartment_id=self._tenancy(), availability_domain=ad,
            shape_availabilities=[M.CreateCapacityReportShapeAvailabilityDetails(instance_shape=shape, instance_shape_config=cfg)
                                  for shape, cfg in shapes])
        try:
            report = s.call(s.compute.create_compute_capacity_report, details)
        except ServiceError as exc:
            if exc.status in _NOT_ANSWERED:
                self.skip('%s: OCI did not answer the compute capacity report (%s %s: %s)' % (what, exc.status, exc.code, exc.message))
                return None
            raise
        answers = dict((a.instance_shape, a) for a in report.shape_availabilities or [])
        for shape, answer in answers.items():
            self.answers[(ad, shape)] = answer
        return answers

    def _capacity(self, ad, wanted):
        asks = self._capacity_asks(wanted)
        if self.sources is not None:  # the GPU nodes' capacity is asked per source (_capacity_sources)
            asks = [ask for ask in asks if ask[0] != 'gpu_node_count']
        if not asks:
            return
        answers = self._report(ad, [(shape, cfg) for _option, shape, _now, _peak, cfg in asks])
        if answers is None:
            return
        for option, shape, now, peak, _cfg in asks:
            answer = answers.get(shape)
            if answer is None:
                continue
            count, status = answer.available_count, answer.availability_status
            self.checks['capacity'].append(dict(shape=shape, availability_domain=ad, new=now, new_at_peak=peak,
                                                available_count=count, availability_status=status))
            if status == 'HARDWARE_NOT_SUPPORTED':
                self.problem(option if option == 'bastion_shape' else 'gpu_shape',
                             "OCI's capacity report says %s is not supported in %s (HARDWARE_NOT_SUPPORTED)" % (shape, ad))
                continue
            short = (count is not None and count < now) or (count is None and status == 'OUT_OF_HOST_CAPACITY' and now)
            shown = 'none' if count is None else count
            if short and option == 'bastion_shape':
                self.problem(option, "no host for a %s bastion in %s: OCI's capacity report shows %s available (%s)"
                             % (shape, ad, shown, status))
            elif short:
                self.problem(option, "%d new %s node(s) wanted in %s (%d planned, %d exist), but OCI's capacity report "
                             "shows %s available there (%s)"
                             % (now, shape, ad, self.p['gpu_node_count'], self.checks['gpu']['existing'], shown, status))
            elif count is not None and count < peak:
                self.warnings.append("autoscaling_max_nodes: at its peak the cluster adds %d %s node(s) in %s; OCI's "
                                     "capacity report shows %d available now, so on-demand nodes may wait for capacity"
                                     % (peak, shape, ad, count))

    def _capacity_sources(self, ad, ads):
        """The capacity sources' table (checks.capacity_sources): plugins/modules/preflight.py."""

    def _limits(self, ad, wanted):
        p = self.p
        for option, shape_name, _now, peak in wanted:
            shape = self.shapes[shape_name]
            names = list(shape.quota_names or [])
            if not names:
                self.skip('limits: OCI names no service limit for %s' % shape_name)
                continue
            for limit in names:
                unit = limit_unit(limit)
                per = self._units(shape, unit)
                if per is None:
                    continue
                need = peak * per
                answer = self._availability(limit, ad)
                if answer is None:
                    continue
                self.checks['limits'].append(dict(shape=shape_name, limit=limit, unit=unit, needed=need,
                                                  available=answer.available, used=answer.used,
                                                  effective_quota=answer.effective_quota_value))
                if answer.available is None or need <= answer.available:
                    continue
                if option == 'gpu_node_count':
                    on_demand = ' (with autoscaling_max_nodes %d)' % p['autoscaling_max_nodes'] if p['autoscaling'] else ''
                    what = '%d new %s node(s)%s' % (peak, shape_name, on_demand)
                    option_named = option
                else:
                    what = 'the %s bastion' % shape_name
                    option_named = {'ocpus': 'bastion_ocpus', 'memory_gb': 'bastion_memory_gb'}.get(unit, option)
                self.problem(option_named, "%s need %s %s of the service limit %s in %s; OCI's Limits service reports %s "
                             "available (%s used in the compartment): ask for a limit increase or plan less" % (
                                 what, _num(need), UNIT_NAMES[unit], limit, ad, answer.available, answer.used))

    def _units(self, shape, unit):
        """How much of a limit one instance of the shape takes (None: unknown, the plan's size is invalid)."""
        p = self.p
        if unit == 'gpus':
            return shape.gpus or (_shapes.SHAPES.get(shape.shape) or {}).get('gpu_count') or None
        if unit == 'instances':
            return 1
        if shape.shape == p['bastion_shape'] and shape.is_flexible:
            ocpus = p['bastion_ocpus'] if p['bastion_ocpus'] and p['bastion_ocpus'] > 0 else None
            if unit == 'ocpus' or ocpus is None:
                return ocpus
            default = shape.memory_options.default_per_ocpu_in_g_bs if shape.memory_options else None
            return p['bastion_memory_gb'] or (ocpus * default if default else None)
        return shape.ocpus if unit == 'ocpus' else shape.memory_in_gbs

    def _shared_home(self, ad):
        """With shared_home: fss, a file system and a mount target of File Storage fit the AD's limits
        (a part the cluster has already is adopted, not counted)."""
        if self.p['shared_home'] != 'fss':
            return
        s, comp, cluster = self.s, self.p['compartment_id'], self.p['cluster_name']
        for limit, fn, name in (('file-system-count', s.file_storage.list_file_systems, '%s-home' % cluster),
                                ('mount-target-count', s.file_storage.list_mount_targets, '%s-home-mt' % cluster)):
            mine = [r for r in s.list_all(fn, comp, ad, display_name=name) if is_live(r)
                    and (r.freeform_tags or {}).get(CLUSTER_TAG) == cluster]
            if mine:
                self.checks['shared_home'].append(dict(limit=limit, exists=True))
                continue
            answer = self._availability(limit, ad, service=FILESYSTEM_SERVICE)
            if answer is None:
                continue
            self.checks['shared_home'].append(dict(limit=limit, exists=False, available=answer.available,
                                                   used=answer.used))
            if answer.available is not None and answer.available < 1:
                self.problem('shared_home', "a new %s needs 1 of File Storage's service limit %s in %s; OCI's Limits "
                             "service reports %s available (%s used in the compartment): ask for a limit increase, or "
                             "remove one" % ('file system' if limit.startswith('file') else 'mount target', limit, ad,
                                             answer.available, answer.used))

    def _availability(self, limit, ad, service=None):
        """GetResourceAvailability of a compute limit (or another service's) in the AD (a regional limit:
        without it), or None."""
        s = self.s
        client = s.client(oci.limits.LimitsClient)
        for kwargs in ({'availability_domain': ad}, {}):
            try:
                return s.call(client.get_resource_availability, service or LIMITS_SERVICE, limit, self.p['compartment_id'],
                              **kwargs)
            except ServiceError as exc:
                error = exc
                if exc.status != 400:  # 400: the limit is regional and takes no availability domain
                    break
        if error.status in _NOT_ANSWERED + (400,):
            self.skip('limit %s: OCI gives no resource availability for it (%s %s)' % (limit, error.status, error.code))
            return None
        raise error

    def _tenancy(self):
        """The root compartment, where OCI wants capacity reports: the profile's tenancy, or up from the compartment."""
        tenancy = self.s.config.get('tenancy')
        if tenancy:
            return tenancy
        compartment_id = self.p['compartment_id']
        for _level in range(8):  # OCI nests compartments at most six deep
            parent = self.s.call(self.s.identity.get_compartment, compartment_id).compartment_id
            if not parent or parent == compartment_id:
                break
            compartment_id = parent
        return compartment_id

    def skip(self, text):
        self.skipped.append(text)
        self.warnings.append(text)


_num = _launch._num
