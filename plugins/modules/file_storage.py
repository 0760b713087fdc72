#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: file_storage
short_description: Create or delete a cluster's shared file system on OCI File Storage
version_added: 0.4.0
description:
  - Creates or deletes the three parts of a shared file system on OCI File Storage (FSS), as Oracle's
    HPC stack makes one for C(/mnt/home) - the file system, a mount target in the cluster's private
    subnet (its private IP is what clients mount) and the export that joins the two under O(export_path).
  - The parts are found by compartment, availability domain, display name and the freeform tag
    C(ocigpu-cluster), so running the task again adopts them. The export is found in the mount target's
    export set by its file system.
  - With O(state=present) the parts are made in that order and each is waited for until C(ACTIVE); with
    O(state=absent) they are deleted in the reverse order (export, mount target, file system), as OCI
    requires, and each is waited for until it is gone. A file system's data is lost with it.
  - Tags and the export's client options change in place. A mount target in another subnet, or an export
    under another path, fails with a message saying so before anything changes.
  - OCI applies to each NFS request the first of the export's client options whose O(export_options[].source)
    holds the client's address; a client that none holds does not see the export. So a host that keeps
    root (C(identity_squash=NONE)) is listed before the network that squashes root.
  - Why a module of its own - ansible-core has none for OCI, and oracle.oci (not a dependency of this collection)
    has one module per part, which a playbook would have to order and find again by OCID. This one finds
    the parts by the cluster's tag as the collection's other resource modules do, and makes and deletes
    them in the one order OCI takes.
extends_documentation_fragment:
  - ocigpu.cluster.oci
  - ocigpu.cluster.oci.ATTRIBUTES
  - ocigpu.cluster.oci.WAIT
  - ocigpu.cluster.oci.TAGS
options:
  display_name:
    description:
      - Display name of the file system. Defaults to C(<cluster_name>-home). The mount target is named
        C(<display_name>-mt).
    type: str
  availability_domain:
    description:
      - Availability domain of the file system and its mount target, for example C(Uocm:AP-TOKYO-1-AD-1).
        Required. Clients in other availability domains can mount it too, at a higher latency.
      - One whose name holds another region's identifier (C(Uocm:EU-FRANKFURT-1-AD-1) with region C(ap-tokyo-1))
        is refused before any call to OCI. The names in the oldest regions (C(Uocm:PHX-AD-1), C(Uocm:US-ASHBURN-AD-1))
        hold no region identifier, so with O(state=present) the module reads the region's availability domains
        (ListAvailabilityDomains) and refuses one that is not among them before anything is made.
    type: str
  subnet_id:
    description:
      - OCID of the subnet of the mount target (the cluster's private subnet). Required with O(state=present).
      - An OCID of another type (the VCN's, C(ocid1.vcn...), next to the subnet's in the console) is refused before
        any call to OCI; a subnet that does not exist, or lies in another availability domain, is refused by a read
        before the file system is made.
      - The subnet's security list must let the clients reach the mount target on TCP 111 and 2048-2050 and
        UDP 111 and 2048. The security lists of M(ocigpu.cluster.network) admit every protocol from inside the
        VCN, so clients in the cluster's VCN reach it as they are.
    type: str
  hostname_label:
    description: DNS label of the mount target in the subnet (1 to 63 letters, digits and dashes, starting with a letter).
    type: str
  export_path:
    description:
      - The path clients mount, C(<mount target IP>:<export_path>). OCI's rules, checked before any call - it starts
        with C(/), has no empty element, no element C(.) or C(..) and no trailing C(/), is at most 1024 bytes long
        and each element at most 255 bytes. This module also keeps to letters, digits and C(. _ ~ -) in an element
        and to at least one element (not C(/) alone). C(/home/../root) is refused (with the path it means, C(/root)).
    type: str
    default: /home
  allowed_cidrs:
    description:
      - Client networks allowed to mount the export, each read-write with B(no identity squash) (root on
        every one of those clients is root on the file system) and a privileged source port required.
      - Kept for compatibility; O(export_options) says the same and more, and squashes root by default.
        One of the two is required with O(state=present); they are mutually exclusive.
    type: list
    elements: str
  export_options:
    description:
      - The export's client options, in order (OCI's C(ClientOptions)); OCI applies the first whose
        O(export_options[].source) holds the client's address. They replace the export's options when
        they differ.
      - One of O(allowed_cidrs) and O(export_options) is required with O(state=present).
    type: list
    elements: dict
    suboptions:
      source:
        description: The clients, one IP address or one network (CIDR, no host bits).
        type: str
        required: true
      access:
        description: What they may do.
        type: str
        choices: [READ_WRITE, READ_ONLY]
        default: READ_WRITE
      identity_squash:
        description:
          - C(ROOT) maps uid and gid 0 to O(export_options[].anonymous_uid) and O(export_options[].anonymous_gid)
            (root on the client cannot write what root owns, nor read what others keep to themselves);
            C(ALL) maps every user; C(NONE) maps none (root on the client is root on the file system).
          - C(ROOT) is OCI's default for a client option.
        type: str
        choices: [NONE, ROOT, ALL]
        default: ROOT
      anonymous_uid:
        description: The uid a squashed user becomes (OCI's default, 65534, is C(nobody)).
        type: int
        default: 65534
      anonymous_gid:
        description: The gid a squashed user becomes.
        type: int
        default: 65534
      require_privileged_source_port:
        description: Clients must connect from a port below 1024 (which only root on the client can open).
        type: bool
        default: true
  state:
    description: Whether the shared file system should exist.
    type: str
    choices: [present, absent]
    default: present
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: The cluster's shared home on File Storage
  ocigpu.cluster.file_storage:
    cluster_name: train1
    compartment_id: "{{ compartment_ocid }}"
    availability_domain: "{{ ad_name }}"
    subnet_id: "{{ net.network.private_subnet_id }}"
    # The controller (10.0.0.2) keeps root; root on every other host of the VCN is nobody there.
    export_options:
      - {source: 10.0.0.2/32, identity_squash: NONE}
      - {source: 10.0.0.0/16, identity_squash: ROOT}
  register: home

- name: Mount it
  ansible.posix.mount:
    path: /mnt/home
    src: "{{ home.file_storage.mount_source }}"
    fstype: nfs
    opts: nfsvers=3,defaults,nofail,nosuid,resvport
    state: mounted

- name: Remove it (its data goes with it)
  ocigpu.cluster.file_storage:
    cluster_name: train1
    compartment_id: "{{ compartment_ocid }}"
    availability_domain: "{{ ad_name }}"
    state: absent
"""

RETURN = r"""
file_storage:
  description: The shared file system (null when absent). In check mode parts to be created have null ids.
  returned: always
  type: dict
  contains:
    file_system: {description: "The file system - id, display_name, availability_domain, lifecycle_state, freeform_tags.", type: dict}
    mount_target: {description: "The mount target - id, display_name, subnet_id, export_set_id, ip_address, lifecycle_state.", type: dict}
    export: {description: "The export - id, path, export_options, lifecycle_state.", type: dict}
    mount_source: {description: "What clients mount, C(<ip_address>:<export_path>); null until the mount target has an address.", type: str}
last_wait:
  description: What the last wait saw when it ended - the same fields a timeout error reports.
  returned: when the module waited
  type: dict
"""

import ipaddress

from ansible_collections.ocigpu.cluster.plugins.module_utils import _launch, _resource
from ansible_collections.ocigpu.cluster.plugins.module_utils._module import OCIModule
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import (
    InputError, attr, compare, current_with_tags, is_live, pick_tagged)

try:
    from oci.file_storage.models import (ClientOptions, CreateExportDetails, CreateFileSystemDetails,
                                         CreateMountTargetDetails, UpdateExportDetails, UpdateFileSystemDetails,
                                         UpdateMountTargetDetails)
except ImportError:
    pass  # OCIModule reports the missing library

TAGS = ('freeform_tags', 'defined_tags')


class FileStorage(OCIModule):

    @property
    def name(self):
        return self.params['display_name'] or '%s-home' % self.cluster_name

    @property
    def mt_name(self):
        return self.name + '-mt'

    @property
    def fss(self):
        return self.session.file_storage

    def validate(self):
        p = self.params
        _resource.check_display_names('display_name' if p['display_name'] else 'cluster_name', [self.name, self.mt_name])
        if p['state'] == 'absent':
            if not p['availability_domain']:
                raise InputError('availability_domain: required (the parts are found in it)')
            return
        for option in ('availability_domain', 'subnet_id'):
            if not p[option]:
                raise InputError('%s: required with state=present' % option)
        if p['allowed_cidrs'] is not None and p['export_options'] is not None:
            raise InputError('export_options: give it or allowed_cidrs, not both')
        if not (p['allowed_cidrs'] or p['export_options']):
            raise InputError('allowed_cidrs: required with state=present (or export_options)')
        problem = _launch.export_path_problem(p['export_path'])
        if problem:
            raise InputError('export_path: %s' % problem)
        _launch.check_hostname_label(p['hostname_label'])
        for cidr in p['allowed_cidrs'] or []:
            try:
                ipaddress.ip_network(cidr)
            except ValueError as exc:
                raise InputError('allowed_cidrs: %r is not a network address with its prefix (%s)' % (cidr, exc))
        for i, option in enumerate(p['export_options'] or []):
            try:
                ipaddress.ip_network(option['source'])
            except ValueError as exc:
                raise InputError('export_options: [%d].source %r is neither an address nor a network address with its '
                                 'prefix (%s)' % (i, option['source'], exc))
            for key in ('anonymous_uid', 'anonymous_gid'):
                if not 0 <= option[key] < 2 ** 32:
                    raise InputError('export_options: [%d].%s %d is not an id from 0 to 4294967295'
                                     % (i, key, option[key]))

    # finding ---------------------------------------------------------------------------------
    def find(self):
        p = self.params
        fs = pick_tagged(self.session.list_all(self.fss.list_file_systems, p['compartment_id'], p['availability_domain'],
                                               display_name=self.name), self.name, self.cluster_name, 'file system')
        mt = pick_tagged(self.session.list_all(self.fss.list_mount_targets, p['compartment_id'], p['availability_domain'],
                                               display_name=self.mt_name), self.mt_name, self.cluster_name, 'mount target')
        export = None
        if fs is not None and mt is not None:
            exports = [e for e in self.session.list_all(self.fss.list_exports, export_set_id=mt.export_set_id,
                                                        file_system_id=fs.id) if is_live(e)]
            # A summary has no client options: the export itself has.
            export = self.session.call(self.fss.get_export, exports[0].id) if exports else None
        return fs, mt, export

    OPTION_KEYS = ('source', 'access', 'identity_squash', 'anonymous_uid', 'anonymous_gid',
                   'require_privileged_source_port')

    def options(self):
        if self.params['export_options'] is not None:
            return [dict((k, o[k]) for k in self.OPTION_KEYS) for o in self.params['export_options']]
        return [dict(source=cidr, access='READ_WRITE', identity_squash='NONE', anonymous_uid=65534, anonymous_gid=65534,
                     require_privileged_source_port=True)
                for cidr in self.params['allowed_cidrs']]

    @classmethod
    def current_options(cls, export):
        return [dict((k, attr(o, k)) for k in cls.OPTION_KEYS) for o in attr(export, 'export_options') or []]

    def ip_address(self, mt):
        ids = attr(mt, 'private_ip_ids') or []
        if not ids:
            return None
        pip = self.session.get_or_none(self.session.network.get_private_ip, ids[0])
        return attr(pip, 'ip_address')

    # the state machine -----------------------------------------------------------------------
    def execute(self):
        p = self.params
        if p['state'] == 'present':
            # Reads that find what OCI would refuse only after the file system was made: an availability
            # domain the region lacks, a subnet that does not exist or lies in another availability domain.
            _launch.check_availability_domain(self.session, p['compartment_id'], p['availability_domain'])
            _launch.check_subnet(self.session, p['subnet_id'], p['availability_domain'])
        fs, mt, export = self.find()
        if self.params['state'] == 'absent':
            return self.absent(fs, mt, export)
        return self.present(fs, mt, export)

    def tags_wanted(self):
        return dict(freeform_tags=self.tags(), defined_tags=self.params['defined_tags'] or None)

    def present(self, fs, mt, export):
        p = self.params
        if mt is not None and mt.subnet_id != p['subnet_id']:
            raise InputError('subnet_id: the mount target %s is in subnet %s; OCI cannot move it. Delete the shared '
                             'file system (state=absent) and run again, or keep the old subnet.' % (mt.id, mt.subnet_id))
        if export is not None and export.path != p['export_path']:
            raise InputError('export_path: the file system is exported as %s; OCI cannot change an export\'s path. '
                             'Delete the shared file system (state=absent) and run again, or keep the old path.'
                             % export.path)
        fs = self.ensure_tags(fs, 'file system', self.name, self.create_file_system, self.fss.update_file_system,
                              UpdateFileSystemDetails, self.fss.get_file_system)
        mt = self.ensure_tags(mt, 'mount target', self.mt_name, self.create_mount_target, self.fss.update_mount_target,
                              UpdateMountTargetDetails, self.fss.get_mount_target)
        export = self.ensure_export(fs, mt, export)
        return dict(file_storage=self.describe(fs, mt, export))

    def ensure_tags(self, res, what, name, create, update_fn, update_cls, get_fn):
        want = self.tags_wanted()
        if res is None:
            self.changed = True
            self.diff['after'][what] = dict(want, display_name=name)
            return None if self.check_mode else create()
        have = current_with_tags(res, want)
        changes, _blocked = compare(want, have, TAGS)
        if not changes:
            return res
        self.changed = True
        self.diff['before'][what] = have
        self.diff['after'][what] = dict(have, **changes)
        if self.check_mode:
            return res
        res = self.session.call(update_fn, res.id, update_cls(**changes))
        return self.wait_active(get_fn, res, what)

    def wait_active(self, get_fn, res, what):
        if not self.params['wait']:
            return res
        return self.waiter.lifecycle(get_fn, res.id, ['ACTIVE'], failed_states=('FAILED', 'DELETING', 'DELETED'),
                                     what='%s %s' % (what, res.id))

    def create_file_system(self):
        p = self.params
        details = CreateFileSystemDetails(compartment_id=p['compartment_id'], availability_domain=p['availability_domain'],
                                          display_name=self.name, freeform_tags=self.tags(),
                                          defined_tags=p['defined_tags'] or None)
        return self.wait_active(self.fss.get_file_system, self.session.create(self.fss.create_file_system, details).data,
                                'file system')

    def create_mount_target(self):
        p = self.params
        details = CreateMountTargetDetails(compartment_id=p['compartment_id'], availability_domain=p['availability_domain'],
                                           subnet_id=p['subnet_id'], display_name=self.mt_name,
                                           hostname_label=p['hostname_label'] or None, freeform_tags=self.tags(),
                                           defined_tags=p['defined_tags'] or None)
        return self.wait_active(self.fss.get_mount_target, self.session.create(self.fss.create_mount_target, details).data,
                                'mount target')

    def ensure_export(self, fs, mt, export):
        want = self.options()
        if export is None:
            self.changed = True
            self.diff['after']['export'] = dict(path=self.params['export_path'], export_options=want)
            if self.check_mode or fs is None or mt is None:
                return None
            details = CreateExportDetails(export_set_id=mt.export_set_id, file_system_id=fs.id,
                                          path=self.params['export_path'],
                                          export_options=[ClientOptions(**o) for o in want])
            return self.wait_active(self.fss.get_export, self.session.create(self.fss.create_export, details).data,
                                    'export')
        have = self.current_options(export)
        if have == want:
            return export
        self.changed = True
        self.diff['before']['export'] = dict(path=export.path, export_options=have)
        self.diff['after']['export'] = dict(path=export.path, export_options=want)
        if self.check_mode:
            return export
        res = self.session.call(self.fss.update_export, export.id,
                                UpdateExportDetails(export_options=[ClientOptions(**o) for o in want]))
        return self.wait_active(self.fss.get_export, res, 'export')

    def absent(self, fs, mt, export):
        if fs is None and mt is None:
            return dict(file_storage=None)
        described = self.describe(fs, mt, export)
        self.diff['before'] = described
        self.changed = True
        if self.check_mode:
            return dict(file_storage=described)
        # Every export of the file system, and every export in the mount target's set, goes first:
        # OCI deletes neither part while one is left.
        exports = {}
        if fs is not None:
            exports.update((e.id, e) for e in self.session.list_all(self.fss.list_exports, file_system_id=fs.id))
        if mt is not None:
            exports.update((e.id, e) for e in self.session.list_all(self.fss.list_exports, export_set_id=mt.export_set_id))
        for e in exports.values():
            if is_live(e):
                self.delete(self.fss.delete_export, self.fss.get_export, e.id, 'export')
        if mt is not None:
            self.delete(self.fss.delete_mount_target, self.fss.get_mount_target, mt.id, 'mount target')
        if fs is not None:
            self.delete(self.fss.delete_file_system, self.fss.get_file_system, fs.id, 'file system')
        return dict(file_storage=described)

    def delete(self, delete_fn, get_fn, resource_id, what):
        self.session.call_response(delete_fn, resource_id)
        if self.params['wait']:
            self.waiter.gone(get_fn, resource_id, what='%s %s' % (what, resource_id))

    def describe(self, fs, mt, export):
        ip = self.ip_address(mt) if mt is not None else None
        path = attr(export, 'path') or self.params['export_path']
        return dict(
            file_system=dict(id=attr(fs, 'id'), display_name=self.name, availability_domain=self.params['availability_domain'],
                             lifecycle_state=attr(fs, 'lifecycle_state'), freeform_tags=attr(fs, 'freeform_tags') or self.tags()),
            mount_target=dict(id=attr(mt, 'id'), display_name=self.mt_name, subnet_id=attr(mt, 'subnet_id') or self.params['subnet_id'],
                              export_set_id=attr(mt, 'export_set_id'), ip_address=ip,
                              lifecycle_state=attr(mt, 'lifecycle_state')),
            export=dict(id=attr(export, 'id'), path=path,
                        export_options=self.current_options(export) if export is not None else self.options_or_none(),
                        lifecycle_state=attr(export, 'lifecycle_state')),
            mount_source='%s:%s' % (ip, path) if ip else None)

    def options_or_none(self):
        return self.options() if self.params['allowed_cidrs'] or self.params['export_options'] else None


def main():
    FileStorage(dict(
        display_name=dict(type='str'),
        availability_domain=dict(type='str'),
        subnet_id=dict(type='str'),
        hostname_label=dict(type='str'),
        export_path=dict(type='str', default='/home'),
        allowed_cidrs=dict(type='list', elements='str'),
        export_options=dict(type='list', elements='dict', options=dict(
            source=dict(type='str', required=True),
            access=dict(type='str', choices=['READ_WRITE', 'READ_ONLY'], default='READ_WRITE'),
            identity_squash=dict(type='str', choices=['NONE', 'ROOT', 'ALL'], default='ROOT'),
            anonymous_uid=dict(type='int', default=65534),
            anonymous_gid=dict(type='int', default=65534),
            require_privileged_source_port=dict(type='bool', default=True))),
        state=dict(type='str', choices=['present', 'absent'], default='present'),
    )).run()


if __name__ == '__main__':
    main()
