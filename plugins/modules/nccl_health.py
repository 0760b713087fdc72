#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_health
short_description: Health checks of a GPU node before an NCCL test
version_added: 0.1.0
description:
  - Checks that the node shows the GPUs its shape has, that no GPU reports uncorrected ECC
    errors, that the kernel log holds no XID (GPU driver error) events, that the RDMA devices
    the shape uses have their ports up (ACTIVE), and that the NVMe scratch file system is mounted.
  - Fails when a check fails; the message names the node and every reason.
  - A check that cannot read its data (for example a kernel log the user may not read) is
    reported with C(ok=null) and a warning, never passed silently.
  - Reads only; changes nothing on the node.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ocigpu.cluster.host
options:
  node_name:
    description: Name of the node in messages (the inventory name).
    type: str
    required: true
  expected_gpus:
    description: GPUs the node must show. Unset to skip the GPU count and ECC checks.
    type: int
  check_xid:
    description: Whether to look for XID events in the kernel's own records (C(/dev/kmsg), then C(journalctl -k)).
    type: bool
    default: true
  expected_hcas:
    description: RDMA devices (for example C(mlx5_0)) whose ports must be ACTIVE. Unset to skip.
    type: list
    elements: str
  scratch_path:
    description: Mount point of the NVMe scratch file system. Empty to skip.
    type: str
    default: ''
  sysfs_root:
    description: Where the RDMA devices are listed.
    type: path
    default: /sys/class/infiniband
  nvidia_smi:
    description: The nvidia-smi program.
    type: str
    default: nvidia-smi
author:
  - ocigpu.cluster maintainers (@ocigpu)
"""

EXAMPLES = r"""
- name: Check the node before the NCCL test
  ocigpu.cluster.nccl_health:
    node_name: "{{ inventory_hostname }}"
    expected_gpus: 8
    expected_hcas: "{{ ('BM.GPU4.8' | ocigpu.cluster.shape_facts).hcas }}"
    scratch_path: /mnt/localdisk
"""

RETURN = r"""
checks:
  description: Each check run, with its result and a reason that starts with the node name.
  returned: always
  type: list
  elements: dict
  contains:
    check: {description: "gpu_count, ecc, xid, rdma_links or nvme_scratch.", type: str}
    ok: {description: "True, false, or null when the check could not read its data.", type: bool}
    reason: {description: "What was found.", type: str}
gpus:
  description: The GPUs nvidia-smi listed (index, bus_id, name, ecc_uncorrected).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ocigpu.cluster.plugins.module_utils._health import BASE_FIELDS, IB_SYSFS, find_xids, gpu_list, kernel_log
from ansible_collections.ocigpu.cluster.plugins.module_utils._observe import query_gpus, read_ib_ports
from ansible_collections.ocigpu.cluster.plugins.module_utils._nccl import evaluate_health


def _kernel_log(module):
    def run(argv):
        path = module.get_bin_path(argv[0], opt_dirs=['/bin', '/usr/bin', '/sbin'])
        return module.run_command([path] + argv[1:]) if path else (127, '', argv[0] + ' not found')
    return kernel_log(run)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node_name=dict(type='str', required=True),
            expected_gpus=dict(type='int'),
            check_xid=dict(type='bool', default=True),
            expected_hcas=dict(type='list', elements='str'),
            scratch_path=dict(type='str', default=''),
            sysfs_root=dict(type='path', default=IB_SYSFS),
            nvidia_smi=dict(type='str', default='nvidia-smi'),
        ),
        supports_check_mode=True,
    )
    p = module.params
    gpus = None
    listed = []
    if p['expected_gpus'] is not None:
        smi = module.get_bin_path(p['nvidia_smi']) if '/' not in p['nvidia_smi'] else p['nvidia_smi']
        if smi:
            gpus = query_gpus(smi, (BASE_FIELDS,), module.run_command)[0]
            listed = gpu_list(gpus or [])
    xids = None
    log_readable = True
    if p['check_xid']:
        log = _kernel_log(module)
        log_readable = log is not None
        xids = find_xids(log) if log_readable else []
    mounts = ''
    if p['scratch_path']:
        with open('/proc/mounts') as handle:
            mounts = handle.read()
    checks = evaluate_health(
        p['node_name'], gpus=gpus, expected_gpus=p['expected_gpus'], xids=xids,
        ib_ports=read_ib_ports(p['sysfs_root']) if p['expected_hcas'] is not None else None,
        expected_hcas=p['expected_hcas'], mounts_text=mounts, scratch_path=p['scratch_path'],
        xid_log_readable=log_readable)
    for check in checks:
        if check['ok'] is None:
            module.warn(check['reason'])
    failed = [c['reason'] for c in checks if c['ok'] is False]
    if failed:
        module.fail_json(msg='health check failed on ' + '; '.join(failed), checks=checks, gpus=listed)
    module.exit_json(changed=False, checks=checks, gpus=listed)


if __name__ == '__main__':
    main()
