# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ocigpu-healthcheck (issue 17) as Slurm runs it, on a fake node: nvidia-smi, ip and scontrol stand-ins,
a fake /sys/class/infiniband tree, a mounts file and a kernel log. Each failure drains the node with its
reason; recovery resumes it; a node a person drained stays drained; a check that cannot read its data
neither drains nor resumes. The program runs as installed: ocigpu_health.py (plugins/module_utils/_health.py)
and ocigpu_slurm.py (plugins/module_utils/_slurm.py) beside it."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, 'roles', 'node_health', 'files', 'ocigpu-healthcheck')
LIBRARY = os.path.join(ROOT, 'plugins', 'module_utils', '_health.py')
SLURM_LIBRARY = os.path.join(ROOT, 'plugins', 'module_utils', '_slurm.py')

HEALTHY_GPU = '{i}, 00000000:{bus:02X}:00.0, NVIDIA H100 80GB HBM3, 0, [N/A], [N/A], [N/A], No, No, 16, 16, Not Active'

SCONTROL = r'''#!/usr/bin/env python3
import json, sys
path = %r
state = json.load(open(path))
args = sys.argv[1:]
state['calls'].append(args)
if args[:2] == ['show', 'node']:
    if state['known']:
        reason = (' Reason=%%s [root@2026-11-23T10:00:00]' %% state['reason']) if state['reason'] else ''
        print('NodeName=%%s Arch=x86_64 CoresPerSocket=56 State=%%s ThreadsPerCore=2%%s' %% (args[-1], state['state'], reason))
        code = 0
    else:
        print('Node %%s not found' %% args[-1], file=sys.stderr)
        code = 1
elif args[0] == 'update':
    fields = dict(a.split('=', 1) for a in args[1:])
    if fields['State'] == 'DRAIN':
        state['state'], state['reason'] = 'IDLE+DRAIN', fields['Reason']
    elif fields['State'] == 'RESUME':
        state['state'], state['reason'] = 'IDLE', ''
    code = 0
json.dump(state, open(path, 'w'))
sys.exit(code)
'''


class Node(object):
    """A fake node: the files the checks read, and the stand-in commands."""

    def __init__(self, tmp, state_file=None):
        self.tmp = tmp
        self.lib = tmp / 'lib'
        self.lib.mkdir()
        shutil.copy(LIBRARY, str(self.lib / 'ocigpu_health.py'))
        shutil.copy(SLURM_LIBRARY, str(self.lib / 'ocigpu_slurm.py'))
        self.gpus = [HEALTHY_GPU.format(i=i, bus=0x0f + 0x10 * i) for i in range(8)]
        self.smi_fails = False
        self.ports = dict(('mlx5_%d' % n, ('4: ACTIVE', '5: LinkUp', '200 Gb/sec (4X HDR)')) for n in (0, 1))
        self.addresses = {'rdma0': '192.168.0.5/24', 'rdma1': '192.168.1.5/24'}
        self.mounted = True
        # /dev/kmsg's records (priority,sequence,microseconds,flags;message): 6 is kern.info, 3 kern.err
        self.kernel_log = '6,1012,3100000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n'
        self.state_file = state_file or tmp / 'slurm.json'
        if state_file is None:
            self.slurm(state='IDLE', reason='')
        (tmp / 'enroot').write_text('')
        self.expect = dict(gpus=8, rdma_devices=['mlx5_0', 'mlx5_1'], rdma_port_gbps=200,
                           rdma_addresses={'rdma0': '192.168.0.5/24', 'rdma1': '192.168.1.5/24'},
                           scratch_path='/mnt/localdisk', paths=[str(tmp / 'enroot')], slurm_node_name='gpu-7',
                           ignore_xids=[13, 31, 43, 45])

    def slurm(self, state, reason, known=True):
        self.state_file.write_text(json.dumps(dict(state=state, reason=reason, known=known, calls=[])))

    def clear_calls(self):
        state = self.slurm_state()
        state['calls'] = []
        self.state_file.write_text(json.dumps(state))

    def slurm_state(self):
        return json.loads(self.state_file.read_text())

    def _write(self):
        tmp = self.tmp
        (tmp / 'expect.json').write_text(json.dumps(self.expect))
        smi = tmp / 'nvidia-smi'
        (tmp / 'gpus.csv').write_text('\n'.join(self.gpus) + '\n')
        answer = 'echo "NVIDIA-SMI has failed" >&2; exit 9' if self.smi_fails else 'cat %s' % (tmp / 'gpus.csv')
        smi.write_text('#!/bin/sh\n%s\n' % answer)
        links = []
        for name, address in self.addresses.items():
            ip, prefix = address.split('/')
            links.append(dict(ifname=name, addr_info=[dict(local=ip, prefixlen=int(prefix))]))
        (tmp / 'ip.json').write_text(json.dumps(links))
        (tmp / 'ip').write_text('#!/bin/sh\ncat %s\n' % (tmp / 'ip.json'))
        (tmp / 'scontrol').write_text(SCONTROL % str(self.state_file))
        for name in ('nvidia-smi', 'ip', 'scontrol'):
            os.chmod(str(tmp / name), 0o755)
        sysfs = tmp / 'sys'
        if sysfs.exists():
            shutil.rmtree(str(sysfs))
        for dev, (state, phys, rate) in self.ports.items():
            port = sysfs / dev / 'ports' / '1'
            port.mkdir(parents=True)
            for name, value in (('state', state), ('phys_state', phys), ('rate', rate), ('link_layer', 'Ethernet')):
                (port / name).write_text(value + '\n')
        (tmp / 'mounts').write_text('/dev/md0 /mnt/localdisk xfs rw 0 0\n' if self.mounted else 'proc /proc proc rw 0 0\n')
        (tmp / 'kern.log').write_text(self.kernel_log)

    def run(self, args, codes=(0, 1), **env):
        """The program as installed, with its library beside it; its JSON answer and exit status (rc)."""
        self._write()
        proc = subprocess.run([sys.executable, PROGRAM] + list(args) + ['--json'], capture_output=True, text=True,
                              env=dict(os.environ, OCIGPU_HEALTH_LIB=str(self.lib), **env), timeout=90, check=False)
        assert proc.returncode in codes, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        out['rc'] = proc.returncode
        return out

    def check(self, *extra):
        tmp = self.tmp
        out = self.run(['--expect', str(tmp / 'expect.json'), '--nvidia-smi', str(tmp / 'nvidia-smi'),
                        '--scontrol', str(tmp / 'scontrol'), '--sysfs-root', str(tmp / 'sys'), '--mounts', str(tmp / 'mounts'),
                        '--ip', str(tmp / 'ip'), '--kernel-log', str(tmp / 'kern.log'), '--metrics', str(tmp / 'health.prom')]
                       + list(extra))
        out['by_check'] = dict((r['check'], r) for r in out['results'])
        return out


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_a_healthy_node_passes_every_check_and_is_left_alone(node):
    out = node.check()
    assert out['rc'] == 0 and out['node'] == 'gpu-7'
    assert sorted(out['by_check']) == ['clock_slowdown', 'container_paths', 'ecc', 'gpu_count', 'nvme_scratch',
                                       'pcie_width', 'rdma_addresses', 'rdma_links', 'row_remap', 'xid']
    assert all(r['ok'] is True for r in out['results']), out['results']
    assert out['by_check']['rdma_links']['reason'] == 'gpu-7: 2 RDMA devices ACTIVE at 200 Gb/sec'
    assert out['slurm'] == 'slurm: gpu-7 not drained, nothing to do'
    assert node.slurm_state()['calls'] == [['show', 'node', '--oneliner', 'gpu-7']]
    metrics = (node.tmp / 'health.prom').read_text()
    assert 'ocigpu_health_ok 1\n' in metrics and 'ocigpu_health_check_ok{check="gpu_count"} 1\n' in metrics
    assert 'ocigpu_health_gpus 8\n' in metrics


BREAKS = [
    ('gpu fallen off the bus', lambda n: n.gpus.pop(), 'gpu_count', 'gpu_count 7/8 GPUs'),
    ('nvidia-smi fails', lambda n: setattr(n, 'smi_fails', True), 'gpu_count', 'gpu_count nvidia-smi failed'),
    ('uncorrectable ECC', lambda n: n.gpus.__setitem__(2, n.gpus[2].replace('HBM3, 0,', 'HBM3, 3,')), 'ecc',
     'ecc ECC errors on GPU 2'),
    ('pending row remap', lambda n: n.gpus.__setitem__(5, n.gpus[5].replace('No, No,', 'Yes, No,')), 'row_remap',
     'row_remap row remap on GPU 5'),
    ('XID 79', lambda n: setattr(n, 'kernel_log', n.kernel_log + '3,2001,99000000,-;NVRM: Xid (PCI:0000:2f:00): 79, '
                                 'pid=\'<unknown>\', name=<unknown>, GPU has fallen off the bus.\n'), 'xid', 'xid Xid 79'),
    ('RDMA port down', lambda n: n.ports.__setitem__('mlx5_1', ('1: DOWN', '3: Disabled', '200 Gb/sec (4X HDR)')),
     'rdma_links', 'rdma_links RDMA mlx5_1/1 DOWN'),
    ('RDMA port at a lower rate', lambda n: n.ports.__setitem__('mlx5_0', ('4: ACTIVE', '5: LinkUp', '100 Gb/sec (4X EDR)')),
     'rdma_links', 'rdma_links RDMA mlx5_0/1 at 100 Gb/sec (4X EDR), not 200 Gb/sec'),
    ('RDMA device missing', lambda n: n.ports.pop('mlx5_1'), 'rdma_links', 'rdma_links RDMA mlx5_1 missing'),
    ('RDMA interface without its address', lambda n: n.addresses.pop('rdma1'), 'rdma_addresses',
     'rdma_addresses no address on rdma1'),
    ('scratch not mounted', lambda n: setattr(n, 'mounted', False), 'nvme_scratch', 'nvme_scratch /mnt/localdisk not mounted'),
    ('enroot missing', lambda n: os.remove(str(n.tmp / 'enroot')), 'container_paths', 'container_paths missing enroot'),
    ('PCIe link narrowed', lambda n: n.gpus.__setitem__(1, n.gpus[1].replace('16, 16,', '8, 16,')), 'pcie_width',
     'pcie_width PCIe width on GPU 1'),
    ('hardware slowdown', lambda n: n.gpus.__setitem__(0, n.gpus[0].replace('Not Active', 'Active')), 'clock_slowdown',
     'clock_slowdown HW slowdown on GPU 0'),
]


@pytest.mark.parametrize('what, breaks, check, reason', BREAKS, ids=[b[0] for b in BREAKS])
def test_each_failure_drains_with_its_reason_and_recovery_resumes(node, what, breaks, check, reason):
    breaks(node)
    out = node.check()
    assert out['rc'] == 1, what
    assert out['by_check'][check]['ok'] is False, out['by_check'][check]
    assert [r['check'] for r in out['results'] if r['ok'] is False] == [check]
    state = node.slurm_state()
    assert state['state'] == 'IDLE+DRAIN' and state['reason'] == 'ocigpu-health: ' + reason, state
    assert out['slurm'].startswith('slurm: gpu-7 drained (ocigpu-health: ')
    assert 'ocigpu_health_ok 0\n' in (node.tmp / 'health.prom').read_text()
    # Still sick: no second update.
    node.clear_calls()
    again = node.check()
    assert again['slurm'] == 'slurm: gpu-7 stays drained (ocigpu-health: %s)' % reason
    assert [c for c in node.slurm_state()['calls'] if c[0] == 'update'] == []
    # Healed (a healthy node, the same Slurm state): resumed, because this program drained it.
    healed = node.tmp / 'healed'
    healed.mkdir()
    out = Node(healed, state_file=node.state_file).check()
    assert out['rc'] == 0 and out['slurm'].startswith('slurm: gpu-7 resumed (was: ocigpu-health: ')
    assert node.slurm_state()['state'] == 'IDLE' and node.slurm_state()['reason'] == ''


# The active check's drains: while it runs (slurmd may run the passive checks then) and when it fell short.
@pytest.mark.parametrize('reason', ['bad DIMM, ticket 4711', 'ocigpu-nccl: active NCCL check running',
                                    'ocigpu-nccl: all_reduce busbw 343.33 GB/s at 4 GiB is below the threshold 352.00 GB/s'])
def test_a_node_a_person_or_the_active_check_drained_stays_drained(node, reason):
    node.slurm(state='IDLE+DRAIN', reason=reason)
    node.gpus.pop()
    out = node.check()
    assert out['rc'] == 1 and out['slurm'] == 'slurm: gpu-7 was drained by someone else (%s), left as it is' % reason
    node.gpus.append(HEALTHY_GPU.format(i=7, bus=0x7f))
    out = node.check()
    assert out['rc'] == 0 and out['slurm'] == 'slurm: gpu-7 left drained (%s)' % reason
    state = node.slurm_state()
    assert state['reason'] == reason and [c for c in state['calls'] if c[0] == 'update'] == []


def test_a_check_that_cannot_run_neither_drains_nor_resumes(node):
    node.slurm(state='IDLE+DRAIN', reason='ocigpu-health: xid Xid 79')
    node._write()
    os.remove(str(node.tmp / 'kern.log'))  # the kernel log cannot be read: the XID check cannot run
    tmp = node.tmp
    proc = subprocess.run(
        [sys.executable, PROGRAM, '--expect', str(tmp / 'expect.json'), '--nvidia-smi', str(tmp / 'nvidia-smi'),
         '--scontrol', str(tmp / 'scontrol'), '--sysfs-root', str(tmp / 'sys'), '--mounts', str(tmp / 'mounts'),
         '--ip', str(tmp / 'ip'), '--kernel-log', str(tmp / 'kern.log'), '--metrics', '', '--json'],
        capture_output=True, text=True, env=dict(os.environ, OCIGPU_HEALTH_LIB=str(node.lib)), timeout=60, check=False)
    out = json.loads(proc.stdout)
    xid = [r for r in out['results'] if r['check'] == 'xid'][0]
    assert proc.returncode == 0 and xid['ok'] is None and 'kernel log not readable' in xid['reason']
    assert out['slurm'] == 'slurm: gpu-7 left drained (ocigpu-health: xid Xid 79)'


def test_application_xids_are_ignored_and_unknown_nodes_are_reported(node):
    node.kernel_log += '3,2002,50000000,-;NVRM: Xid (PCI:0000:0f:00): 13, pid=4242, name=python3, Graphics Exception\n'
    node.slurm(state='IDLE', reason='', known=False)
    out = node.check()
    assert out['rc'] == 0 and out['by_check']['xid']['ok'] is True
    assert out['slurm'] == 'slurm: gpu-7 unknown to slurmctld, nothing done'


def test_no_slurm_only_reports(node):
    node.gpus.pop()
    out = node.check('--no-slurm')
    assert out['rc'] == 1 and out['slurm'] is None and node.slurm_state()['calls'] == []


def test_an_older_driver_without_the_extra_fields_still_checks_the_base_ones(node, tmp_path):
    # nvidia-smi rejects the optional fields: the program asks again for the base ones.
    node._write()
    (tmp_path / 'nvidia-smi').write_text(
        '#!/bin/sh\ncase "$1" in *remapped_rows*) echo \'Field "remapped_rows.pending" is not a valid field to query.\' >&2;'
        ' exit 2;; esac\n' + ''.join('echo "%d, 00000000:%02X:00.0, Tesla V100-SXM2-16GB, 0"\n' % (i, i) for i in range(8)))
    tmp = tmp_path
    proc = subprocess.run(
        [sys.executable, PROGRAM, '--expect', str(tmp / 'expect.json'), '--nvidia-smi', str(tmp / 'nvidia-smi'),
         '--no-slurm', '--sysfs-root', str(tmp / 'sys'), '--mounts', str(tmp / 'mounts'), '--ip', str(tmp / 'ip'),
         '--kernel-log', str(tmp / 'kern.log'), '--metrics', '', '--json'],
        capture_output=True, text=True, env=dict(os.environ, OCIGPU_HEALTH_LIB=str(node.lib)), timeout=60, check=False)
    out = json.loads(proc.stdout)
    by = dict((r['check'], r) for r in out['results'])
    assert proc.returncode == 0 and by['gpu_count']['ok'] is True and by['ecc']['ok'] is True
    assert by['pcie_width']['ok'] is None and 'not reported by this driver' in by['pcie_width']['reason']


# The periodic active check (issue 32): `ocigpu-healthcheck --active`, as the sweep's Slurm job runs it.
RECORDED = os.path.join(ROOT, 'tests', 'unit', 'data', 'nccl', 'seed000_a100_8gpu_10g.txt')  # 232.04 GB/s, 8 ranks
NCCL_LIBRARY = os.path.join(ROOT, 'plugins', 'module_utils', '_nccl.py')


class ActiveNode(Node):
    """A fake node with an all_reduce_perf stand-in that prints a recorded run (or hangs) and the
    settings validate.yml --tags health leaves."""

    def __init__(self, tmp):
        super(ActiveNode, self).__init__(tmp)
        shutil.copy(NCCL_LIBRARY, str(self.lib / 'ocigpu_nccl.py'))
        self.binary = tmp / 'all_reduce_perf'
        self.binary.write_text('#!/bin/sh\necho "$@" > %s\n[ -n "$HANG" ] && exec sleep 30\ncat %s\n'
                               % (tmp / 'argv', RECORDED))
        os.chmod(str(self.binary), 0o755)
        self.settings = dict(binary=str(self.binary), args='-b 1G -e 4G -f 2 -n 20 -w 5', gpus=8, threshold_gbps=148.0,
                             timeout=20, env={'NCCL_IB_HCA': '=mlx5_0,mlx5_1'})

    def active(self, *extra, **env):
        tmp = self.tmp
        (tmp / 'active.json').write_text(json.dumps(self.settings))
        out = self.run(['--active', '--expect', str(tmp / 'expect.json'), '--scontrol', str(tmp / 'scontrol'),
                        '--active-settings', str(tmp / 'active.json'), '--active-metrics', str(tmp / 'nccl-active.prom')]
                       + list(extra), codes=(0, 1, 2), **env)
        out['result'] = out['results'][0]
        return out


@pytest.fixture
def active_node(tmp_path):
    return ActiveNode(tmp_path)


def test_the_active_check_passes_a_sound_node_with_the_settings_validate_left(active_node):
    out = active_node.active()
    assert out['rc'] == 0 and out['result']['ok'] is True and out['result']['check'] == 'nccl_active'
    assert out['result']['reason'] == 'all_reduce over 8 GPUs: busbw 232.04 GB/s against 148.00 GB/s'
    assert out['slurm'] == 'slurm: gpu-7 not drained, nothing to do'
    # The run is the one validate.yml makes: its arguments, then -g and the GPU count.
    assert (active_node.tmp / 'argv').read_text().split() == '-b 1G -e 4G -f 2 -n 20 -w 5 -g 8'.split()
    metrics = (active_node.tmp / 'nccl-active.prom').read_text()
    assert 'ocigpu_nccl_active_busbw_gbps 232.04\n' in metrics and 'ocigpu_nccl_active_passed 1\n' in metrics
    assert 'ocigpu_nccl_active_threshold_gbps 148.0\n' in metrics


def test_a_node_that_falls_short_is_drained_with_the_figures_and_resumed_once_it_passes(active_node):
    active_node.settings['threshold_gbps'] = 300.0
    out = active_node.active()
    reason = 'ocigpu-nccl: all_reduce busbw 232.04 GB/s at 10 GiB is below the threshold 300.00 GB/s'
    assert out['rc'] == 1 and out['result']['ok'] is False
    assert out['slurm'] == 'slurm: gpu-7 drained (%s)' % reason
    assert active_node.slurm_state()['state'] == 'IDLE+DRAIN' and active_node.slurm_state()['reason'] == reason
    assert 'ocigpu_nccl_active_passed 0\n' in (active_node.tmp / 'nccl-active.prom').read_text()
    # The passive checks (slurmd's) pass on this node and leave the active check's drain alone.
    out = active_node.check()
    assert out['rc'] == 0 and active_node.slurm_state()['reason'] == reason
    active_node.settings['threshold_gbps'] = 148.0
    out = active_node.active()
    assert out['rc'] == 0 and out['slurm'] == 'slurm: gpu-7 resumed (was: %s)' % reason
    assert active_node.slurm_state()['state'] == 'IDLE'


@pytest.mark.parametrize('reason', ['bad DIMM, ticket 4711', 'ocigpu-health: gpu_count 7 of 8 GPUs',
                                    'ocigpu-nccl: active NCCL check running'])
def test_the_active_check_leaves_other_drains_alone(active_node, reason):
    active_node.slurm(state='IDLE+DRAIN', reason=reason)
    active_node.settings['threshold_gbps'] = 300.0
    out = active_node.active()
    assert out['rc'] == 1 and out['slurm'] == 'slurm: gpu-7 was drained by someone else (%s), left as it is' % reason
    active_node.settings['threshold_gbps'] = 148.0
    out = active_node.active()
    assert out['rc'] == 0 and out['slurm'] == 'slurm: gpu-7 left drained (%s)' % reason
    assert [c for c in active_node.slurm_state()['calls'] if c[0] == 'update'] == []


def test_a_run_that_hangs_is_stopped_and_fails_the_node(active_node):
    active_node.settings['timeout'] = 1
    out = active_node.active(HANG='1')
    assert out['rc'] == 1 and out['result']['short'] == 'did not finish within 1 s'
    assert active_node.slurm_state()['reason'] == 'ocigpu-nccl: all_reduce did not finish within 1 s'


def test_an_active_check_that_cannot_run_changes_nothing_in_slurm(active_node):
    active_node.settings['binary'] = str(active_node.tmp / 'missing' / 'all_reduce_perf')
    out = active_node.active()
    assert out['rc'] == 2 and out['result']['ok'] is None and out['slurm'] is None
    assert 'is not an executable program' in out['result']['reason']
    assert active_node.slurm_state()['calls'] == [] and not (active_node.tmp / 'nccl-active.prom').exists()


# Issue 45: text a user can put in the kernel log is not an XID. Each record below is one the kernel
# logs (or lets user space log) from a string an unprivileged user chose; none may drain the node.
FORGED = [
    # an overlayfs mount in a user namespace with a lower directory named like an XID (kern.err)
    ('overlayfs path', "3,3001,120000000,-;overlayfs: failed to resolve 'NVRM: Xid (PCI:0000:0f:00): 79': -2"),
    # a process named "NVRM: Xid (): 7" (15 characters, a task name's most) that segfaults (kern.info)
    ('process name', '6,3002,121000000,-;NVRM: Xid (): 7[31482]: segfault at 0 ip 0000000000401000 sp '
                     '00007ffc8a0d1e40 error 4 in a.out[401000+1000]'),
    # the driver's exact line, written to /dev/kmsg by user space: the kernel gives it the user facility (14)
    ('written to /dev/kmsg', '14,3003,122000000,-;NVRM: Xid (PCI:0000:0f:00): 79, pid=1, name=x, GPU has fallen off the bus.'),
    # even with a priority that names kern.err the kernel stores it as user.err (11)
    ('written to /dev/kmsg as <3>', '11,3004,123000000,-;NVRM: Xid (PCI:0000:0f:00): 79, pid=1, name=x, forged'),
    # a path with a newline in it: one record, escaped by /dev/kmsg, not a line of its own
    ('newline in a path', "3,3005,124000000,-;overlayfs: failed to resolve 'x\\x0aNVRM: Xid (PCI:0000:0f:00): 79, "
                          "pid=1, name=x, y': -2"),
    # a user's text after the driver's prefix, without the driver's PCI address
    ('no PCI address', '3,3006,125000000,-;NVRM: Xid (gpu0): 79, forged'),
]


@pytest.mark.parametrize('what, record', FORGED, ids=[f[0] for f in FORGED])
def test_text_a_user_can_log_is_not_an_xid(node, what, record):
    node.kernel_log += record + '\n'
    out = node.check()
    assert out['rc'] == 0 and out['by_check']['xid']['ok'] is True, (what, out['by_check']['xid'])
    assert node.slurm_state()['state'] == 'IDLE'


def test_the_drivers_own_records_are_xids(node):
    """The driver's formats (kernel_rc.c): with and without PCI:, a MIG instance, an NVLink XID without a
    process, a PCI domain past 0000."""
    node.kernel_log += ''.join(r + '\n' for r in (
        '3,4001,130000000,-;NVRM: Xid (PCI:0000:2f:00): 79, pid=\'<unknown>\', name=<unknown>, GPU has fallen off the bus.',
        '3,4002,131000000,-;NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 94, pid=5, name=python3, Contained ECC error',
        '4,4003,132000000,-;NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)',
        '3,4004,133000000,-;NVRM: Xid (0000:8d:00): 48, An uncorrectable double bit error',
        ' SUBSYSTEM=pci',  # a record's continuation line
    ))
    out = node.check()
    assert out['rc'] == 1 and node.slurm_state()['reason'] == 'ocigpu-health: xid Xid 48,79,94,149'
    assert 'Xid 79 on PCI:0000:2f:00' in out['by_check']['xid']['reason']
    assert 'Xid 94 on PCI:0000:3b:00' in out['by_check']['xid']['reason']


def test_kmsg_records_and_the_journal_keep_only_the_kernels_own():
    lib = _library()
    text = ('6,1,10,-;NVRM: loading\n SUBSYSTEM=pci\n DEVICE=+pci:0000:0f:00.0\n'
            '14,2,11,-;NVRM: Xid (PCI:0000:0f:00): 79, forged\n'
            "3,3,12,c;overlayfs: failed to resolve 'a\\x0aNVRM: Xid (PCI:0000:0f:00): 79, b': -2\n")
    assert lib.parse_kmsg(text) == ['NVRM: loading', "overlayfs: failed to resolve 'a\nNVRM: Xid (PCI:0000:0f:00): 79, b': -2"]
    assert lib.find_xids(lib.parse_kmsg(text)) == []
    journal = '\n'.join(json.dumps(e) for e in (
        dict(_TRANSPORT='kernel', MESSAGE='NVRM: Xid (PCI:0000:0f:00): 79, pid=0, name=x, fallen off'),
        dict(_TRANSPORT='syslog', MESSAGE='NVRM: Xid (PCI:0000:0f:00): 48, pid=0, name=x, forged'),
        dict(_TRANSPORT='stdout', MESSAGE='NVRM: Xid (PCI:0000:0f:00): 48, pid=0, name=x, forged'),
        dict(_TRANSPORT='kernel', MESSAGE=list(b'NVRM: Xid (PCI:0000:0f:00): 63, pid=0, name=x, \xff'))))
    assert [x['xid'] for x in lib.find_xids(lib.journal_kernel_messages(journal))] == [79, 63]


def test_kernel_log_reads_kmsg_else_the_journals_kernel_entries(tmp_path):
    lib = _library()
    kmsg = tmp_path / 'kmsg'
    kmsg.write_text('3,1,1,-;NVRM: Xid (PCI:0000:0f:00): 79, pid=0, name=x, y\n14,2,2,-;user text\n')
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, json.dumps(dict(_TRANSPORT='kernel', MESSAGE='from the journal')) + '\n', ''
    assert lib.kernel_log(run, kmsg=str(kmsg)) == ['NVRM: Xid (PCI:0000:0f:00): 79, pid=0, name=x, y'] and calls == []
    assert lib.kernel_log(run, kmsg=str(tmp_path / 'none')) == ['from the journal']
    assert calls[0][:2] == ['journalctl', '-k']
    assert lib.kernel_log(lambda argv: (1, '', 'no journal'), kmsg=str(tmp_path / 'none')) is None


def _library():
    import importlib.util
    spec = importlib.util.spec_from_file_location('ocigpu_health_under_test', LIBRARY)
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    return lib
