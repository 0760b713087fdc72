#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Check a whole GPU cluster plan against OCI before anything is created
version_added: 0.2.0
description:
  - Takes the plan - the cluster vars that decide what M(ocigpu.cluster.instance),
    M(ocigpu.cluster.instance_configuration) and M(ocigpu.cluster.cluster_network) would create - and checks all
    of it with read-only calls, so that a mistake in any part is found before the first resource exists.
  - The plan itself is checked against the collection's shape table - the bastion takes a CPU VM shape, GPU nodes a
    GPU shape (an RDMA one when they form a cluster network) - and against OCI's fixed limits - a boot volume of 50
    to 32768 GB, user data within 32,000 bytes after base64. Every SSH key must parse as an OpenSSH public key;
    a private key given by mistake is named as one and its text is never repeated.
  - OCI is asked, with GET calls, whether the compartment and availability domain exist, whether the shapes are
    offered there and the Flex sizes within the shape's limits, whether the GPU image exists, is AVAILABLE, runs on
    the GPU shape and fits the boot volume, and whether the bastion's operating system has an image for its shape.
  - Capacity is asked from OCI's own read-only APIs for what the plan would add (nodes the cluster already has,
    found by the C(ocigpu-cluster) tag, are not counted twice) - the Compute capacity report
    (CreateComputeCapacityReport, a POST that creates nothing) for the hosts free in the availability domain,
    and the Limits service's GetResourceAvailability for each service limit the shape names (its C(quotaNames)).
    With O(autoscaling=true) the limits must admit O(gpu_node_count) plus O(autoscaling_max_nodes) nodes; a
    capacity report below that peak is a warning, since on-demand nodes are made later.
  - With O(capacity_sources), the GPU nodes' hosts are looked for in each source, in order (docs/capacity.md) - a
    capacity reservation is read (GetComputeCapacityReservation) and must be C(ACTIVE), in O(compartment_id), hold
    O(gpu_shape) and be in the source's availability domain when one is given; its hosts free are reserved minus
    used of that shape, and a reservation pinned to an HPC island or network blocks must match
    O(gpu_hpc_island_id) and O(gpu_network_block_ids). An availability domain's source gets the capacity report's
    answer for the shape. The table is C(checks.capacity_sources); the first source that holds the new static
    nodes is C(checks.capacity_source). A static plan whose new nodes no source holds (every figure known) is
    refused with the table; one that only a later source holds is a warning. With none given, the table has one
    row, the plan's availability domain.
  - Every problem is listed at once - the task fails with one message naming them all and returns them as
    C(problems). A read that OCI refuses for want of permission or support (no capacity report, a limit without
    resource availability) is a warning and listed in C(skipped), never a problem.
  - The module never changes anything and runs the same in check mode.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.READ_ONLY
  - ocigpu.cluster.oci.ATTRIBUTES
options:
  cluster_name:
    description: Name of the cluster (the C(ocigpu-cluster) tag); the bastion and nodes it already has are found by it.
    type: str
    required: true
  compartment_id:
    description: OCID of the compartment the cluster goes into (C(ocid1.compartment...) or the tenancy's); any other is refused before any call to OCI.
    type: str
    required: true
  availability_domain:
    description:
      - Availability domain of the cluster. Defaults to the existing bastion's, else the first one of the region -
        what the provisioning modules choose.
    type: str
  bastion_shape:
    description: Shape of the bastion (the Slurm controller), a CPU VM shape of the shape table, e.g. C(VM.Standard.E5.Flex).
    type: str
    required: true
  bastion_ocpus:
    description: OCPUs of a Flex bastion shape (required for one; ignored for a fixed shape).
    type: float
  bastion_memory_gb:
    description: Memory of a Flex bastion shape in GB (OCI's default per OCPU when unset; ignored for a fixed shape).
    type: float
  bastion_image_os:
    description: Operating system of the bastion's image, e.g. C(Oracle Linux).
    type: str
    required: true
  bastion_image_os_version:
    description: Version of O(bastion_image_os), e.g. C(9).
    type: str
  gpu_shape:
    description: Shape of the GPU nodes, a GPU shape of the shape table, e.g. C(BM.GPU4.8).
    type: str
    required: true
  gpu_image_name:
    description: Exact display name of the GPU nodes' image, e.g. C(Oracle-Linux-9.6-Gen2-GPU-2025.10.23-0).
    type: str
    required: true
  gpu_node_count:
    description: Number of static GPU nodes (0 allowed with O(autoscaling=true)).
    type: int
    default: 1
  gpu_cluster_mode:
    description:
      - How the GPU nodes are built, as in the cluster vars - V(auto) (one node alone, more on an RDMA cluster
        network), V(single) or V(cluster_network). A cluster network needs an RDMA shape.
    type: str
    choices: [auto, single, cluster_network]
    default: auto
  gpu_placement_constraint:
    description:
      - OCI's placement constraint for the cluster network's hosts (the cluster_network module's O(ocigpu.cluster.cluster_network#module:placement_constraint));
        empty leaves OCI's default (one HPC island). Refused with a single instance.
    type: str
    choices: ['', SINGLE_TIER, SINGLE_BLOCK, PACKED_DISTRIBUTION_MULTI_BLOCK]
    default: ''
    version_added: 0.4.0
  gpu_hpc_island_id:
    description: Only this HPC island for the cluster network's nodes; empty for any. Refused with a single instance.
    type: str
    default: ''
    version_added: 0.4.0
  gpu_network_block_ids:
    description: With O(gpu_hpc_island_id), only these network blocks of it.
    type: list
    elements: str
    default: []
    version_added: 0.4.0
  gpu_boot_volume_gb:
    description: Boot volume of a GPU node in GB (50 to 32768). Defaults to the shape table's size (200 GB for GPU shapes).
    type: int
  gpu_user_data:
    description: cloud-init user data of the GPU nodes as text (the node template's, with autoscaling).
    type: str
  gpu_user_data_file:
    description: File with the GPU nodes' cloud-init user data.
    type: path
  ssh_authorized_keys:
    description:
      - OpenSSH public keys, one per entry (the text, e.g. from C(lookup('file', ...))). Marked C(no_log), since a
        private key pasted here by mistake must not reach a log.
    type: list
    elements: str
    default: []
  ssh_public_key_file:
    description: File holding one OpenSSH public key (the cluster var of that name).
    type: path
  autoscaling:
    description: Whether Slurm creates on-demand GPU nodes (docs/autoscaling.md); they then form cluster networks.
    type: bool
    default: false
  autoscaling_max_nodes:
    description: Most on-demand GPU nodes at once, counted against the service limits with O(autoscaling=true).
    type: int
    default: 8
  shared_home:
    description:
      - C(fss) - the plan has a shared file system on OCI File Storage (M(ocigpu.cluster.file_storage)); a new file system
        and a new mount target must fit File Storage's service limits C(file-system-count) and C(mount-target-count) in
        the availability domain (OCI's default is two mount targets per availability domain). Parts the cluster has
        already are not counted.
    type: str
    default: ""
    choices: ["", fss]
    version_added: 0.4.0
  capacity_sources:
    description:
      - Where the GPU nodes' hosts come from, in order - C(gpu_capacity_sources) of the cluster vars as the
        P(ocigpu.cluster.capacity_sources#filter) filter returns them, checked and named - each with C(name),
        C(capacity_reservation_id) (a capacity reservation) or C(availability_domain) (that AD's on-demand hosts),
        and C(kind) and C(fault_domains) (not checked here); any other key is a problem.
      - A source that cannot serve the plan is a problem naming C(gpu_capacity_sources[N]) and the reason - a
        reservation OCI does not let us read (404), not ACTIVE, in another compartment or AD, of another shape,
        or pinned to another HPC island or network blocks; an AD the compartment does not see.
      - Empty - the on-demand hosts of the availability domain, as before.
    type: list
    elements: dict
    default: []
    version_added: 0.5.0
attributes:
  check_mode:
    details: The module only reads (its one POST, the capacity report, creates nothing) and runs the same in check mode.
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Check the whole plan before anything is created
  ocigpu.cluster.preflight:
    cluster_name: "{{ cluster_name }}"
    compartment_id: "{{ compartment_id }}"
    availability_domain: "{{ availability_domain | default(omit) }}"
    bastion_shape: "{{ bastion_shape }}"
    bastion_ocpus: "{{ bastion_ocpus }}"
    bastion_memory_gb: "{{ bastion_memory_gb }}"
    bastion_image_os: "{{ bastion_image_os }}"
    bastion_image_os_version: "{{ bastion_image_os_version }}"
    gpu_shape: "{{ gpu_shape }}"
    gpu_image_name: "{{ gpu_image_name }}"
    gpu_node_count: "{{ gpu_node_count }}"
    gpu_cluster_mode: "{{ gpu_cluster_mode }}"
    gpu_boot_volume_gb: "{{ gpu_boot_volume_gb }}"
    gpu_user_data_file: "{{ gpu_user_data_file or omit }}"
    ssh_public_key_file: "{{ ssh_public_key_file | default(omit) }}"
    ssh_authorized_keys: "{{ ssh_authorized_keys | default([]) }}"
    autoscaling: "{{ autoscaling }}"
    autoscaling_max_nodes: "{{ autoscaling_max_nodes }}"
    capacity_sources: "{{ gpu_capacity_sources | ocigpu.cluster.capacity_sources(availability_domain | default('')) }}"
  register: preflight

- name: Show what OCI reported
  ansible.builtin.debug:
    var: preflight.checks.capacity
"""

RETURN = r"""
problems:
  description: Every problem found, each starting with the plan variable it is about; empty when the plan passes.
  returned: always
  type: list
  elements: str
  sample:
    - "gpu_boot_volume_gb: 10 GB; OCI boot volumes are 50 to 32768 GB (32 TB)"
    - "ssh_public_key_file (/home/me/.ssh/id_ed25519): this is a PRIVATE key, which must not leave your machine; ..."
skipped:
  description: Checks OCI could not answer (no permission for the capacity report, a limit without resource availability).
  returned: always
  type: list
  elements: str
checks:
  description: What the checks found.
  returned: always
  type: dict
  contains:
    availability_domain: {description: The availability domain checked (null when the plan's is wrong)., type: str}
    ssh_keys: {description: Number of SSH public keys that passed., type: int}
    bastion:
      description: C(shape), C(exists) (the cluster has it already) and C(image) (the image it would get).
      type: dict
    gpu:
      description:
        - C(shape), C(kind) (single or cluster_network), C(nodes) (planned), C(existing), C(new) and C(new_at_peak)
          (with on-demand nodes), C(boot_volume_gb), C(user_data_bytes) (after base64), C(image) and C(placement)
          (where OCI will put the nodes, in words).
      type: dict
    capacity:
      description: OCI's capacity report per shape that would get new instances.
      type: list
      elements: dict
      contains:
        shape: {description: Shape., type: str}
        availability_domain: {description: Availability domain., type: str}
        new: {description: New instances the plan adds now., type: int}
        new_at_peak: {description: New instances at the peak (with on-demand nodes)., type: int}
        available_count: {description: Instances OCI reports it can create (null when it gives no count)., type: int}
        availability_status:
          description: C(AVAILABLE), C(OUT_OF_HOST_CAPACITY) or C(HARDWARE_NOT_SUPPORTED).
          type: str
    limits:
      description: The Limits service's resource availability per service limit of those shapes.
      type: list
      elements: dict
      contains:
        shape: {description: Shape., type: str}
        limit: {description: Limit name (a C(quotaNames) entry of the shape)., type: str}
        unit:
          description: What it counts - C(gpus), C(ocpus), C(memory_gb) or C(instances).
          type: str
        needed: {description: Units the plan adds at its peak., type: float}
        available: {description: Units OCI reports available., type: int}
        used: {description: Units used in the compartment., type: int}
        effective_quota:
          description: The compartment quota's value when one applies.
          type: float
    capacity_sources:
      version_added: 0.5.0
      description:
        - The capacity sources in order (one, the availability domain, when none is given), with what was found
          for O(gpu_shape).
      type: list
      elements: dict
      contains:
        name: {description: The source's name., type: str}
        kind: {description: C(reservation) or C(on-demand)., type: str}
        availability_domain: {description: Its availability domain (a reservation's as OCI reports it)., type: str}
        capacity_reservation_id: {description: The reservation's OCID (null for an AD's on-demand hosts)., type: str}
        hosts_free:
          description:
            - Hosts free for the shape - a reservation's reserved minus used, an AD's capacity report count; null
              when unknown (no count, the report not answered, the reservation not readable).
          type: int
        note: {description: "What OCI said: C(ACTIVE, 2 reserved, 1 used), C(capacity report: AVAILABLE), or why it was refused.", type: str}
      sample:
        - {name: r1, kind: reservation, availability_domain: "Uocm:AP-TOKYO-1-AD-1", hosts_free: 0,
           capacity_reservation_id: ocid1.capacityreservation.oc1.ap-tokyo-1.aaaa, note: "ACTIVE, 2 reserved, 2 used"}
        - {name: ad-2, kind: on-demand, availability_domain: "Uocm:AP-TOKYO-1-AD-2", hosts_free: 12,
           capacity_reservation_id: null, note: "capacity report: AVAILABLE"}
    capacity_source:
      version_added: 0.5.0
      description:
        - The name of the first source that holds the new static nodes; null when there are none, when none
          holds them or their hosts are unknown, or for a resize (the nodes join the cluster network where it is).
      type: str
    shared_home:
      version_added: 0.4.0
      description: With O(shared_home=fss), per File Storage limit - C(limit), C(exists) (the cluster has the part), C(available), C(used).
      type: list
      elements: dict
"""

from ansible_collections.ocigpu.cluster.plugins.module_utils import _preflight
from ansible_collections.ocigpu.cluster.plugins.module_utils._capacity import ON_DEMAND, RESERVATION, ad_suffix
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._oci import ServiceError

SOURCE_KEYS = ('name', 'kind', 'availability_domain', 'capacity_reservation_id', 'fault_domains')


class PlanCheck(_preflight.Preflight):
    """The preflight's checks, with the capacity sources' (docs/capacity.md) here: only this module reads them."""

    def __init__(self, session, params):
        super().__init__(session, params)
        self.refused = set()  # names of the sources refused (a problem each)

    def check_plan(self):
        super().check_plan()
        self._sources()

    def _sources(self):
        """gpu_capacity_sources as the capacity_sources filter returns them (each named, in order); a source with
        neither a reservation nor an AD is a problem. The ADs are checked against OCI's in check_with_oci."""
        given = self.p['capacity_sources'] or []
        if not given:
            return
        self.sources = []
        for index, source in enumerate(given, 1):
            reservation = source.get('capacity_reservation_id') or None
            unknown = sorted(set(source) - set(SOURCE_KEYS)) + ([] if source.get('name') else ['no name'])
            if unknown:
                self.problems.append('gpu_capacity_sources[%d]: %s; a source takes %s (the capacity_sources filter '
                                     'names and checks them)' % (index, ', '.join(unknown), ', '.join(SOURCE_KEYS)))
                continue
            if not reservation and not source.get('availability_domain'):
                self.problems.append('gpu_capacity_sources[%d] (%s): give a capacity_reservation_id or an '
                                     'availability_domain' % (index, source['name']))
            self.sources.append(dict(source, kind=RESERVATION if reservation else ON_DEMAND,
                                     capacity_reservation_id=reservation))

    def _capacity_sources(self, ad, ads):
        """checks.capacity_sources: per source (the plan's AD alone when none is given) its hosts free for
        the GPU shape, and checks.capacity_source: the first that holds the new static nodes. A reservation
        that cannot serve the plan is a problem with the reason; a static plan that no source holds is a
        problem with the table; one that only a later source holds, a warning."""
        sources = self.sources if self.sources is not None else [dict(
            name=ad_suffix(ad) or 'ad-1', kind=ON_DEMAND, availability_domain=ad, capacity_reservation_id=None)]
        shape = self.p['gpu_shape']
        rows = []
        for index, source in enumerate(sources, 1):
            row = dict(name=source['name'], kind=source['kind'], availability_domain=source['availability_domain'],
                       capacity_reservation_id=source['capacity_reservation_id'], hosts_free=None, note='')
            where = 'gpu_capacity_sources[%d] (%s)' % (index, source['name'])
            if source['kind'] == RESERVATION:
                self._reservation_row(row, where, shape)
            else:
                self._on_demand_row(row, where, ads, shape)
            rows.append(row)
        self.checks['capacity_sources'] = rows
        self._source_for_static_nodes(rows)

    def _reservation_row(self, row, where, shape):
        """A reservation's row: read it, refuse it with the reason if it cannot serve the plan."""
        s, p, ocid = self.s, self.p, row['capacity_reservation_id']
        try:
            reservation = s.call(s.compute.get_compute_capacity_reservation, ocid)
        except ServiceError as exc:
            if exc.status not in _preflight._NOT_ANSWERED + (400,):
                raise
            row['note'] = 'not readable (%s %s)' % (exc.status, exc.code)
            self.refused.add(row['name'])
            self.problem(where, 'OCI answers %s %s for the capacity reservation %s: it does not exist, or this user '
                         'may not read it (%s)' % (exc.status, exc.code, ocid, exc.message))
            return
        given = row['availability_domain']
        row['availability_domain'] = reservation.availability_domain
        configs = [c for c in reservation.instance_reservation_configs or [] if c.instance_shape == shape]
        reasons = []
        if reservation.lifecycle_state != 'ACTIVE':
            reasons.append('it is %s, not ACTIVE' % reservation.lifecycle_state)
        if reservation.compartment_id != p['compartment_id']:
            reasons.append("it is in the compartment %s, not the plan's (%s)" % (reservation.compartment_id, p['compartment_id']))
        if given and reservation.availability_domain != given:
            reasons.append('it is in %s, not in %s as given' % (reservation.availability_domain, given))
        if not configs:
            held = sorted(set(c.instance_shape for c in reservation.instance_reservation_configs or []))
            reasons.append('it reserves no %s host (its shapes: %s)' % (shape, ', '.join(held) or 'none'))
        reserved = sum(c.reserved_count or 0 for c in configs)
        used = sum(c.used_count or 0 for c in configs)
        if configs:
            row['hosts_free'] = max(0, reserved - used)
        notes = ['%s, %d reserved, %d used' % (reservation.lifecycle_state, reserved, used)] if configs else []
        for problem in self._pinning(configs):
            reasons.append(problem)
        if reasons:
            row['hosts_free'] = 0 if configs else None
            row['note'] = '; '.join(notes + ['refused: ' + reason for reason in reasons])
            self.refused.add(row['name'])
            self.problem(where, 'the capacity reservation %s cannot hold the %s nodes: %s' % (ocid, shape, '; '.join(reasons)))
            return
        pinned = [self._pinned_to(c) for c in configs if c.cluster_config is not None]
        row['note'] = '; '.join(notes + pinned)

    @staticmethod
    def _pinned_to(config):
        blocks = config.cluster_config.network_block_ids or []
        return 'HPC island %s%s' % (config.cluster_config.hpc_island_id,
                                    ', network blocks %s' % ', '.join(blocks) if blocks else '')

    def _pinning(self, configs):
        """Why the reservation's HPC island or network blocks do not match the plan's placement
        (gpu_hpc_island_id, gpu_network_block_ids): a cluster network placed elsewhere gets no reserved host."""
        p = self.p
        island, blocks = p['gpu_hpc_island_id'], p['gpu_network_block_ids'] or []
        found = []
        for config in configs:
            pin = config.cluster_config
            if pin is None:
                continue
            if island and pin.hpc_island_id != island:
                found.append('its hosts are in the HPC island %s, and gpu_hpc_island_id is %s' % (pin.hpc_island_id, island))
            elif not island:
                found.append('its hosts are pinned to %s: set gpu_hpc_island_id (and gpu_network_block_ids) to the '
                             'same, or the cluster network may be placed elsewhere' % self._pinned_to(config))
            elif blocks and pin.network_block_ids and not set(blocks) <= set(pin.network_block_ids):
                found.append('its hosts are in the network blocks %s, and gpu_network_block_ids has %s' % (
                    ', '.join(pin.network_block_ids), ', '.join(sorted(set(blocks) - set(pin.network_block_ids)))))
        return found

    def _on_demand_row(self, row, where, ads, shape):
        """An availability domain's row: the capacity report's answer for the GPU shape."""
        ad = row['availability_domain']
        if ad not in ads:
            row['note'] = 'not an availability domain of the compartment'
            self.refused.add(row['name'])
            self.problem(where, '%s is not an availability domain of the compartment (%s)' % (ad, ', '.join(ads)))
            return
        if not self.gpu_facts or shape not in self.shapes:
            row['note'] = 'not asked (gpu_shape)'
            return
        if (ad, shape) not in self.reported:
            if self._report(ad, [(shape, None)], what='capacity (%s)' % row['name']) is None:
                row['note'] = 'capacity report not answered'
                return
            answer = self.answers.get((ad, shape))
            if answer is not None:
                self.checks['capacity'].append(dict(shape=shape, availability_domain=ad, new=self.checks['gpu'].get('new'),
                                                    new_at_peak=self.checks['gpu'].get('new_at_peak'),
                                                    available_count=answer.available_count,
                                                    availability_status=answer.availability_status))
        answer = self.answers.get((ad, shape))
        if answer is None:
            row['note'] = 'capacity report not answered'
            return
        count, status = answer.available_count, answer.availability_status
        if status == 'HARDWARE_NOT_SUPPORTED':
            row.update(hosts_free=0, note='%s not supported here (HARDWARE_NOT_SUPPORTED)' % shape)
            if self.sources is not None:
                self.refused.add(row['name'])
                self.problem(where, "OCI's capacity report says %s is not supported in %s (HARDWARE_NOT_SUPPORTED)" % (shape, ad))
            return
        row['hosts_free'] = count if count is not None else (0 if status == 'OUT_OF_HOST_CAPACITY' else None)
        row['note'] = 'capacity report: %s' % status

    def _source_for_static_nodes(self, rows):
        """checks.capacity_source, and the refusal or warning about where the new static nodes go."""
        gpu = self.checks['gpu']
        now, peak = gpu.get('new') or 0, gpu.get('new_at_peak') or 0
        known = [r['hosts_free'] for r in rows if r['name'] not in self.refused and r['hosts_free'] is not None]
        if self.sources is not None and self.p['autoscaling'] and peak > now and known and sum(known) < peak:
            self.warnings.append('autoscaling_max_nodes: at its peak the cluster adds %d %s node(s); the capacity sources '
                                 'show %d free now, so on-demand nodes may wait for capacity' % (peak, self.p['gpu_shape'], sum(known)))
        if not now or (gpu.get('existing') and gpu.get('kind') == 'cluster_network'):
            return  # nothing new, or a resize: the new nodes join the cluster network where it is
        usable = [r for r in rows if r['name'] not in self.refused]
        holds = [r for r in usable if r['hosts_free'] is not None and r['hosts_free'] >= now]
        if holds:
            first = holds[0]
            self.checks['capacity_source'] = first['name']
            place = rows.index(first)
            if place:
                self.warnings.append('gpu_capacity_sources: the first source that holds the %d new node(s) is %s (%s of %d): %s'
                                     % (now, first['name'], _ordinal(place + 1), len(rows), table_line(rows[:place])))
            return
        if self.sources is None or not usable or any(r['hosts_free'] is None for r in usable):
            return  # none given (the capacity check above speaks), or a source whose hosts are unknown
        self.problem('gpu_node_count', '%d new %s node(s) wanted, but no capacity source holds them: %s'
                     % (now, self.p['gpu_shape'], table_line(rows)))


def _ordinal(number):
    return '%d%s' % (number, {1: 'st', 2: 'nd', 3: 'rd'}.get(number if number < 20 else number % 10, 'th'))


def table_line(rows):
    """The sources' rows on one line: 'r1 (reservation, AD-1): 1 free (ACTIVE, 2 reserved, 1 used); ad-2 ...'."""
    return '; '.join('%s (%s, %s): %s free%s' % (
        r['name'], r['kind'], (r['availability_domain'] or 'AD unknown').split(':')[-1],
        'unknown' if r['hosts_free'] is None else r['hosts_free'], ' (%s)' % r['note'] if r['note'] else '') for r in rows)


class Preflight(OCIModule):
    # Refused before any call: a compartment that is no compartment's OCID. The plan's other options,
    # placement OCIDs included, are listed together by PlanCheck.
    EARLY_CHECKS = ('compartment_id',)

    def execute(self):
        result, warnings = PlanCheck(self.session, self.params).run()
        for warning in warnings:
            self.module.warn(warning)
        problems = result['problems']
        if problems:
            self.fail('preflight: %d problem%s in the cluster plan, found before anything was created: %s' % (
                len(problems), '' if len(problems) == 1 else 's',
                ' '.join('(%d) %s' % (n, text) for n, text in enumerate(problems, 1))), **result)
        return result


def main():
    Preflight(_preflight.plan_argument_spec(), wait=False, tags=False).run()


if __name__ == '__main__':
    main()
