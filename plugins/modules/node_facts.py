#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_facts
short_description: What an OCI GPU node knows of itself, joined with the shape table
version_added: 0.1.0
description:
  - Reads the node's shape, region, OCIDs and primary VNIC from the OCI instance metadata service
    (IMDS v2), its NVMe data disks, RDMA NICs and GPUs from sysfs and local tools, and joins them
    with the collection's shape table (the same data as the P(ocigpu.cluster.shape_facts#filter) filter).
  - Sets one fact, C(ocigpu_node). Every group in it carries C(source), one of C(imds), C(detected),
    C(shape), C(override) or C(none), so a reader can tell measured facts from expected ones.
  - Without the metadata service (a short timeout, 2 seconds by default) it falls back to detection
    and says so in C(ocigpu_node.imds).
  - NVMe data disks exclude every disk that backs C(/), C(/boot), C(/boot/efi), C(/usr), C(/var) or
    swap. Each disk lists the signatures C(wipefs) finds on it, its partitions, holders and LVM
    volume group, so roles can refuse to touch a disk that holds data.
  - Only reads; changes nothing on the node.
author:
  - ocigpu.cluster maintainers (@ocigpu)
attributes:
  facts:
    support: full
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - ocigpu.cluster.host
options:
  imds_url:
    description:
      - Base URL of the instance metadata service v2 (the part before C(/instance/)).
      - The OCI simulator serves one per instance at C({endpoint}/_imds/<instance OCID>/opc/v2).
    type: str
    default: http://169.254.169.254/opc/v2
  imds_timeout:
    description: Seconds to wait for the metadata service before falling back to detection.
    type: float
    default: 2.0
  use_imds:
    description: Ask the metadata service at all. Set to V(false) on machines outside OCI.
    type: bool
    default: true
  shape:
    description:
      - Shape name to use instead of the one IMDS reports (for nodes outside OCI and for tests).
        The facts then say C(shape_source=override).
    type: str
  root:
    description:
      - Folder under which C(/sys), C(/dev), C(/proc) and the RDMA agent paths are read.
        Only tests set it, to point at a fake tree.
    type: path
    default: /
  rdma_agent_paths:
    description:
      - Files whose presence means the node's own RDMA agent (Oracle's C(oci-rdma-configure), run by
        the Oracle Cloud Agent plugin "Compute HPC RDMA Auto-Configuration") configures the RDMA NICs.
    type: list
    elements: str
    default: [/sbin/oci-rdma-configure, /usr/sbin/oci-rdma-configure, /usr/bin/oci-rdma-configure, /etc/oci-hpc/rdma-network.conf]
  installed_packages:
    description:
      - Also return the names of the installed packages in RV(installed_packages), read from dpkg's
        status file (C(/var/lib/dpkg/status) under O(root)), else from C(rpm -qa).
      - C(configure.yml) hands them to the roles as C(ocigpu_installed_packages), and a role skips its
        package check when all its packages are among them. They are not a fact, so the fact cache
        never holds them from an earlier run.
    type: bool
    default: false
    version_added: 0.4.0
notes:
  - GPUs come from C(nvidia-smi) when it is installed, else from a count of NVIDIA display controllers in sysfs.
  - The RDMA interface order follows the shape table when the table names the detected netdevs
    (seed 001 numbers the 16 BM.GPU4.8 ports in that order), else PCI order.
seealso:
  - plugin: ocigpu.cluster.shape_facts
    plugin_type: filter
  - plugin: ocigpu.cluster.rdma_address
    plugin_type: filter
"""

EXAMPLES = r"""
- name: Read what the node knows of itself
  ocigpu.cluster.node_facts:

- name: Show the NVMe data disks by their stable paths
  ansible.builtin.debug:
    msg: "{{ ansible_facts.ocigpu_node.nvme.disks | map(attribute='by_id') | list }}"

- name: A node outside OCI, with the shape given
  ocigpu.cluster.node_facts:
    use_imds: false
    shape: BM.GPU4.8

- name: Against the OCI simulator's metadata service
  ocigpu.cluster.node_facts:
    imds_url: "http://127.0.0.1:8080/_imds/{{ instance_id }}/opc/v2"
"""

RETURN = r"""
timezone:
  description:
    - The time zone that C(/etc/localtime) (under O(root)) links to, as C(timedatectl) names it (V(UTC),
      V(Asia/Tokyo)); null when it is not a link into a zoneinfo folder.
    - Not a fact, so the fact cache never holds it from an earlier run. C(configure.yml) hands it to the
      common role as C(ocigpu_timezone), which then sets the time zone only when it differs.
  returned: always
  type: str
  sample: UTC
  version_added: 0.4.0
installed_packages:
  version_added: 0.4.0
  description: Names of the installed packages, sorted; null when dpkg's status file and rpm are both missing.
  returned: when O(installed_packages=true)
  type: list
  elements: str
  sample: [bash, munge, slurm-wlm]
ansible_facts:
  description: The facts.
  returned: always
  type: dict
  contains:
    ocigpu_node:
      description: Everything the node knows of itself.
      returned: always
      type: dict
      contains:
        shape:
          description: Shape name, or null when neither IMDS nor the O(shape) option gave one.
          type: str
          sample: BM.GPU4.8
        shape_source:
          description: C(imds), C(override) or C(none).
          type: str
        shape_facts:
          description: The shape table entry for the shape (empty when the shape is unknown to the table).
          type: dict
        imds:
          description: Whether the metadata service answered (C(reachable)), its C(url) and the C(error) when not.
          type: dict
        instance:
          description:
            - From IMDS - C(id), C(display_name), C(hostname), C(region), C(canonical_region_name),
              C(availability_domain), C(fault_domain), C(compartment_id), C(image), C(shape), C(freeform_tags).
            - Only C(source=none) without IMDS.
          type: dict
        primary:
          description: >-
            The primary VNIC - C(interface), C(ip), C(subnet_cidr), C(prefixlen), C(mac), C(vnic_id),
            C(gateway); C(source) is C(imds) or C(detected) (default-route interface and its address).
          type: dict
        nvme:
          description:
            - C(disks) - data disks (boot disks excluded), each with C(name), C(path), C(by_id) (stable
              C(/dev/disk/by-id) path), C(size_bytes), C(model), C(serial), C(signatures) (list of dicts
              with C(type), C(offset), C(label), C(uuid)), C(partitions), C(holders), C(mounted),
              C(lvm_vg) (volume group when the disk is an LVM physical volume) and C(empty).
            - C(boot_disks) - kernel names of the disks that were excluded; C(lvm_probed) - whether C(pvs) ran.
          type: dict
        rdma:
          description:
            - C(devices) - RDMA devices from C(/sys/class/infiniband) (C(name), C(netdev), C(pci),
              C(pci_id) as vendor:device, C(driver), C(port_state), C(link_layer)).
            - C(interfaces) - RDMA netdev names in order; C(expected) - the shape table's names;
              C(source) - C(detected), C(shape) (no RDMA devices, but the shape's netdevs exist) or C(none).
            - C(agent) - C(present) and C(evidence) (paths) when the node's own RDMA agent manages the NICs.
          type: dict
        gpus:
          description: C(count), C(model), C(method) (nvidia-smi or sysfs) and C(list) (C(index), C(name), C(uuid), C(pci_bus_id), C(memory_mib)).
          type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.ocigpu.cluster.plugins.module_utils import _node, _observe
from ansible_collections.ocigpu.cluster.plugins.module_utils._shapes import get_shape


def _imds_get(url, timeout):
    response = open_url(url, headers=_node.IMDS_HEADERS, timeout=timeout, follow_redirects='none',
                        use_proxy=False)
    return json.loads(response.read())


def gather(module):
    params = module.params
    root = params['root']

    sbin = ['/usr/local/sbin', '/usr/sbin', '/sbin']

    def run(argv):
        # Tools such as pvs live in sbin folders that a login user's PATH may lack (Debian, Ubuntu).
        # A missing tool raises OSError, which the detectors read as "not installed".
        path = module.get_bin_path(argv[0], opt_dirs=sbin)
        if path is None:
            raise OSError('%s is not installed' % argv[0])
        return module.run_command([path] + list(argv[1:]), environ_update={'LC_ALL': 'C'})

    imds = {'reachable': False, 'url': params['imds_url'], 'error': None}
    doc = None
    vnics = None
    if params['use_imds']:
        base = params['imds_url'].rstrip('/')
        try:
            doc = _imds_get(base + '/instance/', params['imds_timeout'])
            vnics = _imds_get(base + '/vnics/', params['imds_timeout'])
            imds['reachable'] = True
        except Exception as exc:  # any failure means: fall back to detection, and say why
            imds['error'] = '%s: %s' % (type(exc).__name__, exc)
    else:
        imds['error'] = 'not asked (use_imds=false)'

    shape = params['shape'] or (doc or {}).get('shape')
    shape_source = 'override' if params['shape'] else ('imds' if shape else 'none')
    try:
        shape_facts = get_shape(shape) if shape else {}
    except KeyError:
        shape_facts = {}

    tool_run = run if module.get_bin_path('wipefs', opt_dirs=sbin) or module.get_bin_path('blkid', opt_dirs=sbin) else None
    try:
        nvme = _node.detect_nvme(root, tool_run)
    except RuntimeError as exc:
        module.fail_json(msg=str(exc))
    if tool_run is None:
        nvme['warning'] = 'neither wipefs nor blkid is installed: signatures were not probed'
        for disk in nvme['disks']:
            disk['empty'] = False
        module.warn(nvme['warning'])

    return {
        'shape': shape,
        'shape_source': shape_source,
        'shape_facts': shape_facts,
        'shape_known': bool(shape_facts),
        'imds': imds,
        'instance': _node.instance_facts(doc),
        'primary': _node.primary_facts(root, run, vnics),
        'nvme': nvme,
        'rdma': _node.rdma_facts(root, shape_facts, params['rdma_agent_paths']),
        'gpus': _observe.gpus(root, run, module.get_bin_path('nvidia-smi')),
    }


def timezone(root):
    """The zone /etc/localtime links to (the part after 'zoneinfo/'), or None."""
    try:
        target = os.readlink(os.path.join(root, 'etc/localtime'))
    except OSError:
        return None
    head, sep, zone = target.partition('zoneinfo/')
    return zone if sep and zone else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            imds_url=dict(type='str', default=_node.IMDS_URL),
            imds_timeout=dict(type='float', default=2.0),
            use_imds=dict(type='bool', default=True),
            shape=dict(type='str'),
            root=dict(type='path', default='/'),
            rdma_agent_paths=dict(type='list', elements='str', default=list(_node.RDMA_AGENT_PATHS)),
            installed_packages=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    facts = gather(module)
    result = {'changed': False, 'ansible_facts': {'ocigpu_node': facts}, 'timezone': timezone(module.params['root'])}
    if module.params['installed_packages']:
        result['installed_packages'] = _observe.installed_package_names(module, module.params['root'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
