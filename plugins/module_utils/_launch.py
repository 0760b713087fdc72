# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Launch options shared by the instance and instance_configuration modules: their argument
spec, input checks, image lookup, user data encoding, and the node IP lookup."""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
import re
import struct

from ansible_collections.ocigpu.cluster.plugins.module_utils import _shapes
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import InputError, attr

try:
    from oci.core import models as M
except ImportError:
    M = None

SSH_KEY_TYPES = ('ssh-rsa', 'ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
                 'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com')
MIN_BOOT_GB = 50
MAX_BOOT_GB = 32768
MAX_USER_DATA = 32000  # OCI's limit on the metadata values, after base64
FAULT_DOMAINS = ('FAULT-DOMAIN-1', 'FAULT-DOMAIN-2', 'FAULT-DOMAIN-3')  # every OCI availability domain has three


def launch_argument_spec():
    return dict(
        shape=dict(type='str'),
        shape_config=dict(type='dict', options=dict(ocpus=dict(type='float'), memory_in_gbs=dict(type='float'))),
        image_id=dict(type='str'),
        image_name=dict(type='str'),
        image_os=dict(type='str'),
        image_os_version=dict(type='str'),
        subnet_id=dict(type='str'),
        assign_public_ip=dict(type='bool', default=False),
        ssh_authorized_keys=dict(type='list', elements='str', default=[], no_log=False),
        user_data=dict(type='str'),
        user_data_file=dict(type='path'),
        boot_volume_size_gb=dict(type='int'),
        availability_domain=dict(type='str'),
        fault_domain=dict(type='str'),
        compute_cluster_id=dict(type='str'),
    )


LAUNCH_MUTUALLY_EXCLUSIVE = [('image_id', 'image_name', 'image_os'), ('user_data', 'user_data_file')]


def check_ssh_key(option, key):
    parts = (key or '').strip().split()
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES:
        raise InputError('%s: %r is not an OpenSSH public key (expected "<type> <base64> [comment]" with type one of %s)'
                         % (option, (key or '')[:40], ', '.join(SSH_KEY_TYPES[:3])))
    try:
        blob = base64.b64decode(parts[1], validate=True)
        (length,) = struct.unpack('>I', blob[:4])
        embedded = blob[4:4 + length].decode('ascii')
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError):
        raise InputError('%s: the key data of %r is not valid base64 key data' % (option, (key or '')[:40]))
    if embedded != parts[0]:
        raise InputError('%s: key data says %s but the key type is %s' % (option, embedded, parts[0]))
    return ' '.join(parts)


# Checks shared by every OCI module of the collection (run before their first API call, see
# OCIModule.run in _module.py) and the preflight (_preflight.py): each returns the text of the
# problem (after "<option>: ") or None, so the modules raise it and the preflight lists it.

# ocid1.<resource type>.<realm>.<region, empty for a tenancy-wide resource>[.<future use>].<unique id>
# (OCI's "Resource Identifiers" page); realms are oc1, oc2, ... Only the parts a check relies on are strict.
OCID = re.compile(r'^ocid1\.(?P<type>[a-z0-9]+)\.(?P<realm>oc[0-9]+)\.(?P<region>[a-z0-9-]*)(\.[a-z0-9-]*)?\.[A-Za-z0-9_-]+$')

# The OCID options of the collection's modules and the resource types each takes (a compartment may be
# the tenancy itself, its root compartment). A module option named *_id or *_ids must be listed here
# (tests/unit/plugins/modules/test_ocid_options.py holds every module to it).
OCID_OPTIONS = {
    'compartment_id': ('compartment', 'tenancy'),
    'subnet_id': ('subnet',),
    'image_id': ('image',),
    'instance_id': ('instance',),
    'compute_cluster_id': ('computecluster',),
    'capacity_reservation_id': ('capacityreservation',),
    'instance_configuration_id': ('instanceconfiguration',),
    'hpc_island_id': ('computehpcisland',),
    'network_block_ids': ('computenetworkblock',),
    'gpu_hpc_island_id': ('computehpcisland',),
    'gpu_network_block_ids': ('computenetworkblock',),
}

# How a message names a resource type that OCID_OPTIONS lists (the others go by their OCID's word).
OCID_WORDS = {'computecluster': 'compute cluster', 'instanceconfiguration': 'instance configuration',
              'computehpcisland': 'HPC island', 'computenetworkblock': 'network block',
              'capacityreservation': 'capacity reservation'}


def ocid_problem(value, kind):
    """The value is an OCID of the resource type kind (or of one of the types of a tuple): an OCID names
    its type (ocid1.subnet..., ocid1.vcn...), and a value of another type never works."""
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    if value is None:
        return None
    text = str(value)
    match = OCID.match(text)
    if match and match.group('type') in kinds:
        return None
    wanted = ' or '.join(_a(OCID_WORDS.get(k, k)) + "'s" for k in kinds)
    example = 'ocid1.%s.<realm>.<region>.<unique id>' % kinds[0]
    found = text.split('.')[1] if text.startswith('ocid1.') and text.count('.') >= 2 else None
    if found and found not in kinds:
        return '%s is the OCID of a %s, not of a %s: give %s OCID (ocid1.%s...)' % (text, found, kinds[0], wanted, kinds[0])
    if found:
        return '%r is not a whole OCID (expected %s)' % (text, example)
    return '%r is not an OCID: give %s OCID (%s)' % (text, wanted, example)


def _a(word):
    return ('an ' if word[:1] in 'aeiou' or word.startswith('HPC') else 'a ') + word


def ocid_option_problems(params, options=None):
    """[(option, text)] for the OCID options in params (every one of OCID_OPTIONS, or those named),
    a list option's items named option[i]."""
    problems = []
    for option in options if options is not None else sorted(OCID_OPTIONS):
        value = params.get(option)
        if option not in OCID_OPTIONS or value is None:
            continue
        if value in ('', []):
            # An optional option left empty is not given (a playbook's "{{ x | default('') }}"); the
            # compartment is never optional.
            if option == 'compartment_id':
                problems.append((option, "empty; give a compartment's or a tenancy's OCID"))
            continue
        items = [('%s[%d]' % (option, i), v) for i, v in enumerate(value)] if isinstance(value, list) else [(option, value)]
        for name, item in items:
            problem = ocid_problem(item, OCID_OPTIONS[option])
            if problem:
                problems.append((name, problem))
    return problems


def _region_id(region):
    """A region's identifier (ap-tokyo-1) for a region given as one or as its key (nrt); None if neither."""
    region = (region or '').strip().lower()
    try:
        import oci.regions  # pylint: disable=import-outside-toplevel
        region = oci.regions.REGIONS_SHORT_NAMES.get(region, region)
    except ImportError:
        pass
    return region if REGION_ID.match(region) else None


# An availability domain's name is <tenancy-specific prefix>:<region part>-AD-<n>. The region part is the
# region's identifier upper-cased in most regions (Abcd:AP-TOKYO-1-AD-1, Abcd:EU-FRANKFURT-1-AD-1), but
# not in the oldest (Abcd:PHX-AD-1 in us-phoenix-1, Abcd:US-ASHBURN-AD-1 in us-ashburn-1): only a part that
# is a whole region identifier says which region the name belongs to.
AD_NAME = re.compile(r'^[^:\s]+:(?P<region>[A-Za-z0-9-]+?)-AD-(?P<number>[0-9]+)$')
REGION_ID = re.compile(r'^[a-z]{2,}-[a-z]+-[0-9]+$')


def ad_region_problem(name, region):
    """An availability domain whose name says it is of another region than the configured one, or None.
    Without a call: ListAvailabilityDomains (check_availability_domain) decides what the name cannot."""
    match = AD_NAME.match(name or '')
    configured = _region_id(region)
    if not match or not configured:
        return None
    named = match.group('region').lower()
    if not REGION_ID.match(named) or named == configured:
        return None
    return ("'%s' is not an availability domain of region %s: its name is of region %s. Use an availability "
            "domain of %s (oci iam availability-domain list), or set region to %s" % (name, configured, named, configured, named))


def export_path_problem(path):
    """An export path as OCI File Storage takes it: '/' then elements, none empty, '.' or '..', no trailing
    '/', at most 1024 bytes with elements of at most 255 bytes (OCI's "Paths in File Systems"); this
    collection also keeps to the characters letters, digits and . _ ~ - in an element."""
    text = path or ''
    elements = text.split('/')[1:]
    if not text.startswith('/') or not text.strip('/'):
        why = "it must start with '/' and name at least one element"
    elif '' in elements[:-1]:
        why = "it has an empty element ('//')"
    elif elements[-1] == '':
        why = "it ends in '/'"
    elif [e for e in elements if e in ('.', '..')]:
        why = "OCI takes no element '.' or '..'"
    elif len(text.encode('utf-8')) > 1024:
        why = 'it is over 1024 bytes'
    elif [e for e in elements if len(e.encode('utf-8')) > 255]:
        why = 'an element is over 255 bytes'
    elif [e for e in elements if not EXPORT_ELEMENT.match(e)]:
        why = 'an element holds a character other than letters, digits and . _ ~ -'
    else:
        return None
    normal = posixpath.normpath(text) if text.startswith('/') else None
    if normal and normal != text and normal.strip('/') and export_path_problem(normal) is None:
        return '%r is not an export path: %s; did you mean %s?' % (text, why, normal)
    return '%r is not an export path: %s (for example /home)' % (text, why)


EXPORT_ELEMENT = re.compile(r'^[A-Za-z0-9._~-]+$')


def early_problems(params, region=None, options=None):
    """[(option, text)] of what a module can tell of its input without any call: its OCIDs' forms and an
    availability domain named for another region. region is the configured region, or a callable that
    gives it (only called when an availability domain is given)."""
    problems = ocid_option_problems(params, options)
    given = params.get('availability_domain')
    if given and (options is None or 'availability_domain' in options) and region is not None:
        problem = ad_region_problem(given, region() if callable(region) else region)
        if problem:
            problems.append(('availability_domain', problem))
    return problems


def check_early(params, region=None, options=None):
    """Raise InputError for the first of early_problems."""
    problems = early_problems(params, region, options)
    if problems:
        raise InputError('%s: %s' % problems[0])


def placement_problems(hpc_island_id, network_block_ids, island_option='hpc_island_id'):
    """[(what, text)] for a cluster network's placement, what being 'hpc_island_id' or 'network_block_ids':
    OCIDs of the right kind, and network blocks only with the island they belong to."""
    problems = []
    if network_block_ids and not hpc_island_id:
        problems.append(('network_block_ids', 'needs %s (the island the blocks belong to)' % island_option))
    problem = ocid_problem(hpc_island_id or None, 'computehpcisland')
    if problem:
        problems.append(('hpc_island_id', problem))
    for block in network_block_ids or []:
        problem = ocid_problem(block, 'computenetworkblock')
        if problem:
            problems.append(('network_block_ids', problem))
    return problems


def fault_domain_problem(value):
    if value is None or value in FAULT_DOMAINS:
        return None
    return '%r is not a fault domain; OCI has %s in each availability domain' % (value, ', '.join(FAULT_DOMAINS))


def availability_domain_problem(given, ads, region):
    """given is one of the availability domains the compartment sees (ListAvailabilityDomains), or the problem."""
    if given is None or given in ads:
        return None
    return "'%s' is not an availability domain of region %s; it has: %s" % (given, region, ', '.join(sorted(ads)) or 'none')


def flex_size_problems(shape, ocpus, memory, ocpu_options=None, memory_options=None):
    """[(what, text)] for a Flex shape's size, what being 'ocpus' or 'memory'. Without the shape's options
    (ListShapes' ocpuOptions and memoryOptions) only the signs are checked."""
    problems = []
    if ocpus is None or ocpus <= 0:
        problems.append(('ocpus', '%s; %s is a Flex shape and takes a positive number of OCPUs' % (_num(ocpus), shape)))
        ocpus = None
    elif ocpu_options is not None and not ocpu_options.min <= ocpus <= ocpu_options.max:
        problems.append(('ocpus', '%s; %s takes %s to %s OCPUs' % (
            _num(ocpus), shape, _num(ocpu_options.min), _num(ocpu_options.max))))
        ocpus = None
    if memory is None:
        return problems
    if memory <= 0:
        problems.append(('memory', '%s; %s is a Flex shape and takes a positive number of GB of memory' % (_num(memory), shape)))
        return problems
    mem = memory_options
    if mem is None:
        return problems
    if not mem.min_in_g_bs <= memory <= mem.max_in_g_bs:
        problems.append(('memory', '%s; %s takes %s to %s GB of memory' % (
            _num(memory), shape, _num(mem.min_in_g_bs), _num(mem.max_in_g_bs))))
    elif ocpus and mem.min_per_ocpu_in_gbs and mem.max_per_ocpu_in_gbs and \
            not mem.min_per_ocpu_in_gbs <= memory / ocpus <= mem.max_per_ocpu_in_gbs:
        problems.append(('memory', '%s GB for %s OCPUs is %s GB per OCPU; %s takes %s to %s GB per OCPU' % (
            _num(memory), _num(ocpus), _num(memory / ocpus), shape,
            _num(mem.min_per_ocpu_in_gbs), _num(mem.max_per_ocpu_in_gbs))))
    return problems


def image_shape_problem(session, compartment_id, image_id, image_name, shape):
    """The image runs on the shape (ListShapes filtered by the image), or the problem. One read."""
    runs_on = set(sh.shape for sh in session.list_all(session.compute.list_shapes, compartment_id, image_id=image_id))
    if shape in runs_on:
        return None
    return '%s does not run on %s (OCI lists it for: %s)' % (image_name, shape, ', '.join(sorted(runs_on)[:8]) or 'no shape')


def check_availability_domain(session, compartment_id, given, option='availability_domain'):
    """The availability domain to use: the given one, checked against ListAvailabilityDomains, else the first."""
    ads = [a.name for a in session.call(session.identity.list_availability_domains, compartment_id)]
    if not ads:
        raise InputError('%s: the compartment sees no availability domain' % option)
    problem = availability_domain_problem(given, ads, session.config.get('region'))
    if problem:
        raise InputError('%s: %s' % (option, problem))
    return given or sorted(ads)[0]


def check_subnet(session, subnet_id, ad, assign_public_ip=False):
    """The subnet exists, is in the availability domain (an AD-specific subnet) and allows a public IP if one
    is asked for. One read; a subnet_id that is not a subnet's OCID is refused before it."""
    problem = ocid_problem(subnet_id, 'subnet')
    if problem:
        raise InputError('subnet_id: %s' % problem)
    subnet = session.get_or_none(session.network.get_subnet, subnet_id)
    if subnet is None:
        raise InputError('subnet_id: subnet %s not found (or not visible to this user)' % subnet_id)
    if subnet.availability_domain and ad and subnet.availability_domain != ad:
        raise InputError('subnet_id: subnet %s belongs to availability domain %s, not %s' % (
            subnet_id, subnet.availability_domain, ad))
    if assign_public_ip and subnet.prohibit_public_ip_on_vnic:
        raise InputError('assign_public_ip: subnet %s (%s) is private - it prohibits public IPs on VNICs; set '
                         'assign_public_ip to false or use a public subnet' % (subnet.display_name, subnet_id))
    return subnet


def _num(value):
    """A number as a person writes it: 2 rather than 2.0, None as 'not set'."""
    if value is None:
        return 'not set'
    return '%d' % value if value == int(value) else '%g' % value


class LaunchSpec(object):
    """Checked launch options (raises InputError naming the option)."""

    def __init__(self, params, check_mode=False):
        self.p = params
        shape = params['shape']
        if not shape:
            raise InputError('shape: required with state=present')
        error = _shapes.validate_shape(shape)
        if error:
            raise InputError('shape: %s' % error)
        self.facts = _shapes.get_shape(shape) if shape in _shapes.SHAPES else None
        self.flex = _shapes.is_flex_shape(shape)
        if self.flex:
            cfg = params['shape_config'] or {}
            if cfg.get('ocpus') is None:
                raise InputError('shape_config: %s is a Flex shape; set shape_config.ocpus (and memory_in_gbs)' % shape)
            self._flex_problems()
        elif params['shape_config']:
            raise InputError('shape_config: only Flex shapes take a shape_config; %s is fixed' % shape)
        if not params['subnet_id'] and not check_mode:
            # In check mode a subnet that an earlier task would create has no id yet (null): accepted, so a
            # --check run of a whole provisioning play on an empty compartment predicts every resource.
            raise InputError('subnet_id: required with state=present')
        for option, problem in (('subnet_id', ocid_problem(params['subnet_id'], 'subnet')),
                                ('fault_domain', fault_domain_problem(params['fault_domain']))):
            if problem:
                raise InputError('%s: %s' % (option, problem))
        if not (params['image_id'] or params['image_name'] or params['image_os']):
            raise InputError('image_id: set image_id, image_name, or image_os (with image_os_version)')
        problem = ocid_problem(params['image_id'], 'image')
        if problem:
            raise InputError('image_id: %s' % problem)
        self.keys = [check_ssh_key('ssh_authorized_keys[%d]' % i, k) for i, k in enumerate(params['ssh_authorized_keys'])]
        boot = params['boot_volume_size_gb']
        if boot is None and self.facts:
            boot = self.facts['boot_volume_gb'] if self.facts['gpu_count'] else None
        if boot is not None and not MIN_BOOT_GB <= boot <= MAX_BOOT_GB:
            raise InputError('boot_volume_size_gb: %s is outside %d..%d' % (boot, MIN_BOOT_GB, MAX_BOOT_GB))
        self.boot_gb = boot
        self.user_data = self._user_data()
        check_hostname_label(params.get('hostname_label'))
        self.image_id = None

    def _user_data(self):
        text = self.p['user_data']
        if self.p['user_data_file']:
            path = self.p['user_data_file']
            if not os.path.isfile(path):
                raise InputError('user_data_file: %s does not exist' % path)
            with open(path, 'rb') as f:
                raw = f.read()
        elif text is not None:
            raw = text.encode('utf-8')
        else:
            return None
        encoded = base64.b64encode(raw).decode('ascii')
        if len(encoded) > MAX_USER_DATA:
            raise InputError('user_data: %d bytes after base64; OCI allows %d' % (len(encoded), MAX_USER_DATA))
        return encoded

    def _flex_problems(self, shape_model=None):
        cfg = self.p['shape_config'] or {}
        options = (attr(shape_model, 'ocpu_options'), attr(shape_model, 'memory_options')) if shape_model else ()
        for what, text in flex_size_problems(self.p['shape'], cfg.get('ocpus'), cfg.get('memory_in_gbs'), *options):
            raise InputError('shape_config.%s: %s' % ('ocpus' if what == 'ocpus' else 'memory_in_gbs', text))

    def resolve(self, session, compartment_id):
        """Reads done before any mutation, and what OCI would refuse of them: the availability domain (one
        of the region's), the shape (offered there; a Flex size within its limits), the image (runs on the
        shape) and the subnet (exists, allows a public IP if one is asked for)."""
        p = self.p
        self.ad = check_availability_domain(session, compartment_id, p['availability_domain'])
        shapes = dict((sh.shape, sh) for sh in session.list_all(session.compute.list_shapes, compartment_id,
                                                                availability_domain=self.ad))
        if p['shape'] not in shapes:
            raise InputError('shape: %s is not offered in %s (ListShapes of the compartment)' % (p['shape'], self.ad))
        if self.flex:
            self._flex_problems(shapes[p['shape']])
        image = resolve_image(session, compartment_id, p)
        self.image_id = image['id']
        if p['image_id'] or p['image_name']:  # image_os picks among the images that run on the shape already
            problem = image_shape_problem(session, compartment_id, image['id'], image['display_name'], p['shape'])
            if problem:
                raise InputError('%s: %s' % ('image_id' if p['image_id'] else 'image_name', problem))
        if p['subnet_id']:
            check_subnet(session, p['subnet_id'], self.ad, p['assign_public_ip'])

    def metadata(self):
        md = {}
        if self.keys:
            md['ssh_authorized_keys'] = '\n'.join(self.keys)
        if self.user_data:
            md['user_data'] = self.user_data
        return md

    def shape_config(self, model):
        cfg = self.p['shape_config']
        return model(ocpus=cfg.get('ocpus'), memory_in_gbs=cfg.get('memory_in_gbs')) if cfg else None

    def launch_details(self, compartment_id, display_name, tags, defined_tags):
        return M.LaunchInstanceDetails(
            availability_domain=self.ad, compartment_id=compartment_id, display_name=display_name,
            shape=self.p['shape'], shape_config=self.shape_config(M.LaunchInstanceShapeConfigDetails),
            source_details=M.InstanceSourceViaImageDetails(image_id=self.image_id, boot_volume_size_in_gbs=self.boot_gb),
            create_vnic_details=M.CreateVnicDetails(subnet_id=self.p['subnet_id'], assign_public_ip=self.p['assign_public_ip'],
                                                    hostname_label=self.p.get('hostname_label')),
            metadata=self.metadata(), fault_domain=self.p['fault_domain'], compute_cluster_id=self.p['compute_cluster_id'],
            freeform_tags=tags, defined_tags=defined_tags or None)

    def configuration_details(self, compartment_id, tags, defined_tags):
        return M.InstanceConfigurationLaunchInstanceDetails(
            availability_domain=self.ad, compartment_id=compartment_id, shape=self.p['shape'],
            shape_config=self.shape_config(M.InstanceConfigurationLaunchInstanceShapeConfigDetails),
            source_details=M.InstanceConfigurationInstanceSourceViaImageDetails(
                image_id=self.image_id, boot_volume_size_in_gbs=self.boot_gb),
            create_vnic_details=M.InstanceConfigurationCreateVnicDetails(
                subnet_id=self.p['subnet_id'], assign_public_ip=self.p['assign_public_ip']),
            metadata=self.metadata(), fault_domain=self.p['fault_domain'], compute_cluster_id=self.p['compute_cluster_id'],
            capacity_reservation_id=self.p.get('capacity_reservation_id') or None,
            freeform_tags=tags, defined_tags=defined_tags or None)


def list_images(session, compartment_id, os_name=None, os_version=None, shape=None, display_name=None):
    kwargs = dict(lifecycle_state='AVAILABLE', sort_by='TIMECREATED', sort_order='DESC')
    for key, value in (('operating_system', os_name), ('operating_system_version', os_version),
                       ('shape', shape), ('display_name', display_name)):
        if value:
            kwargs[key] = value
    return session.list_all(session.compute.list_images, compartment_id, **kwargs)


def resolve_image(session, compartment_id, p):
    """The image named by image_id, image_name (exact), or newest image_os/image_os_version for the shape."""
    if p.get('image_id'):
        image = session.get_or_none(session.compute.get_image, p['image_id'])
        if image is None:
            raise InputError('image_id: image %s not found' % p['image_id'])
        return _image_dict(image)
    if p.get('image_name'):
        found = list_images(session, compartment_id, display_name=p['image_name'])
        if not found:
            raise InputError('image_name: no available image is named %r' % p['image_name'])
        return _image_dict(found[0])
    found = list_images(session, compartment_id, p.get('image_os'), p.get('image_os_version'), p.get('shape'))
    if not found:
        raise InputError('image_os: no available %s image for shape %s' % (
            ' '.join(x for x in (p.get('image_os'), p.get('image_os_version')) if x), p.get('shape')))
    return _image_dict(sorted(found, key=lambda i: str(i.time_created), reverse=True)[0])


def _image_dict(image):
    return dict(id=image.id, display_name=image.display_name, operating_system=image.operating_system,
                operating_system_version=image.operating_system_version,
                time_created=str(image.time_created) if image.time_created else None)


def instance_ips(session, compartment_id, instance_ids):
    """{instance_id: {private_ip, public_ip, hostname_label, subnet_id}} of the primary VNICs.

    One paginated vnic-attachment list for the compartment (not one per instance), then one GET per VNIC.
    """
    wanted = set(instance_ids)
    result = dict((i, dict(private_ip=None, public_ip=None, hostname_label=None, subnet_id=None)) for i in wanted)
    if not wanted:
        return result
    if len(wanted) == 1:
        attachments = session.list_all(session.compute.list_vnic_attachments, compartment_id, instance_id=list(wanted)[0])
    else:
        attachments = session.list_all(session.compute.list_vnic_attachments, compartment_id)
    for att in attachments:
        if att.instance_id not in wanted or att.lifecycle_state != 'ATTACHED':
            continue
        vnic = session.get_or_none(session.network.get_vnic, att.vnic_id)
        if vnic is None or not (vnic.is_primary or attr(att, 'nic_index') == 0):
            continue
        result[att.instance_id] = dict(private_ip=vnic.private_ip, public_ip=vnic.public_ip,
                                       hostname_label=vnic.hostname_label, subnet_id=vnic.subnet_id)
    return result


def instance_tags(session, compartment_id, instance_ids):
    """{instance_id: freeform_tags} of these instances: one paginated instance list for the compartment."""
    wanted = set(instance_ids)
    if not wanted:
        return {}
    return dict((i.id, dict(i.freeform_tags or {})) for i in session.list_all(session.compute.list_instances, compartment_id)
                if i.id in wanted)


def check_hostname_label(label):
    """A VNIC's or a mount target's DNS label in its subnet: 1 to 63 letters, digits and hyphens, a letter first."""
    if label and not re.match(r'^[a-zA-Z][a-zA-Z0-9-]{0,62}$', label):
        raise InputError('hostname_label: %r must be letters, digits and hyphens, starting with a letter' % label)


def label_instance(session, instance_id, display_name=None, freeform_tags=None, current=None):
    """Give an instance a display name and freeform tags (merged into its own) in one UpdateInstance call,
    and only when they differ. `current`: the instance as a listing showed it (else it is read first).
    Returns whether it changed."""
    inst = current or session.call(session.compute.get_instance, instance_id)
    tags = dict(inst.freeform_tags or {})
    want = dict(freeform_tags or {})
    if all(tags.get(k) == v for k, v in want.items()) and display_name in (None, inst.display_name):
        return False
    tags.update(want)
    session.call(session.compute.update_instance, instance_id, M.UpdateInstanceDetails(
        display_name=display_name or inst.display_name, freeform_tags=tags))
    return True
