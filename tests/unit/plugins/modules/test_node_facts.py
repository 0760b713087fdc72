# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_facts: detection from fake sysfs/dev/proc trees, and IMDS from the simulator."""
from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ocigpu.cluster.plugins.module_utils import _node, _observe
from ansible_collections.ocigpu.cluster.plugins.modules import node_facts

GPU4_RDMA = ['enp%ds0f%d' % (b, f) for b in (12, 22, 72, 76, 138, 148, 195, 209) for f in (0, 1)]
GPU4_HCA = ['mlx5_0', 'mlx5_2', 'mlx5_6', 'mlx5_8', 'mlx5_10', 'mlx5_12', 'mlx5_14', 'mlx5_16',
            'mlx5_1', 'mlx5_3', 'mlx5_7', 'mlx5_9', 'mlx5_11', 'mlx5_13', 'mlx5_15', 'mlx5_17']


def _write(path, text=''):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as handle:
        handle.write(text)


def _link(path, target):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


class Tree(object):
    """A fake node: /sys, /dev, /proc under one folder, built the way the kernel lays them out."""

    def __init__(self, root):
        self.root = str(root)
        self.minor = 0
        self.mounts = []

    def p(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def disk(self, name, size_gb=100, model='QEMU NVMe Ctrl', serial=None, partitions=(), holders=(),
             by_id=True):
        serial = serial or 'SN' + name
        dev = '/sys/devices/pci0000:00/nvme/%s/block/%s' % (name.split('n')[0] + name.split('n')[1][0:0], name)
        self.minor += 1
        devnum = '259:%d' % self.minor
        _write(self.p(dev + '/size'), str(size_gb * 1024 ** 3 // 512))
        _write(self.p(dev + '/dev'), devnum)
        _write(self.p(dev + '/device/model'), model + '   \n')
        _write(self.p(dev + '/device/serial'), serial + '  \n')
        os.makedirs(self.p(dev + '/holders'), exist_ok=True)
        for holder in holders:
            _write(self.p(dev + '/holders/' + holder))
        _link(self.p('/sys/block/' + name), os.path.relpath(self.p(dev), self.p('/sys/block')))
        _link(self.p('/sys/class/block/' + name), os.path.relpath(self.p(dev), self.p('/sys/class/block')))
        _link(self.p('/sys/dev/block/' + devnum), os.path.relpath(self.p(dev), self.p('/sys/dev/block')))
        _write(self.p('/dev/' + name))
        if by_id:
            _link(self.p('/dev/disk/by-id/nvme-%s_%s' % (model.replace(' ', '_'), serial)), '../../' + name)
            _link(self.p('/dev/disk/by-id/nvme-eui.%s' % serial.lower()), '../../' + name)
            _link(self.p('/dev/disk/by-id/nvme-%s_%s_1' % (model.replace(' ', '_'), serial)), '../../' + name)
        parts = {}
        for i, part in enumerate(partitions, 1):
            self.minor += 1
            pdev = dev + '/' + part
            pnum = '259:%d' % self.minor
            _write(self.p(pdev + '/partition'), str(i))
            _write(self.p(pdev + '/dev'), pnum)
            _link(self.p('/sys/class/block/' + part), os.path.relpath(self.p(pdev), self.p('/sys/class/block')))
            _link(self.p('/sys/dev/block/' + pnum), os.path.relpath(self.p(pdev), self.p('/sys/dev/block')))
            parts[part] = pnum
        return devnum, parts

    def mount(self, devnum, point):
        self.mounts.append('%d 1 %s / %s rw,relatime shared:1 - xfs /dev/x rw' % (len(self.mounts) + 20, devnum, point))
        _write(self.p('/proc/self/mountinfo'), '\n'.join(self.mounts) + '\n')

    def netdev(self, name, mac):
        _write(self.p('/sys/class/net/%s/address' % name), mac + '\n')

    def mlx5(self, name, pci, netdev, device_id='0x101d'):
        pdir = '/sys/devices/pci0000:00/%s' % pci
        _write(self.p(pdir + '/vendor'), '0x15b3\n')
        _write(self.p(pdir + '/device'), device_id + '\n')
        os.makedirs(self.p(pdir + '/net/' + netdev), exist_ok=True)
        os.makedirs(self.p('/sys/bus/pci/drivers/mlx5_core'), exist_ok=True)
        _link(self.p(pdir + '/driver'), os.path.relpath(self.p('/sys/bus/pci/drivers/mlx5_core'), self.p(pdir)))
        ib = '/sys/class/infiniband/' + name
        os.makedirs(self.p(ib + '/ports/1'), exist_ok=True)
        _write(self.p(ib + '/ports/1/state'), '4: ACTIVE\n')
        _write(self.p(ib + '/ports/1/link_layer'), 'Ethernet\n')
        _link(self.p(ib + '/device'), os.path.relpath(self.p(pdir), self.p(ib)))
        self.netdev(netdev, '02:00:00:00:%02x:01' % (len(name) % 256))

    def rxe(self, name, netdev):
        ib = '/sys/class/infiniband/' + name
        _write(self.p(ib + '/parent'), netdev + '\n')
        _write(self.p(ib + '/ports/1/state'), '4: ACTIVE\n')
        _write(self.p(ib + '/ports/1/gid_attrs/ndevs/0'), netdev + '\n')


def fake_run(signatures=None, pvs='', wipefs_rc=0, blkid=None, ip=None, smi=None):
    """A command runner standing in for wipefs/blkid/pvs/ip/nvidia-smi; records its calls."""
    signatures = signatures or {}
    calls = []

    def run(argv):
        calls.append(list(argv))
        tool = os.path.basename(argv[0])
        if tool == 'wipefs':
            if wipefs_rc:
                return wipefs_rc, '', 'wipefs: unrecognized option --json'
            sigs = signatures.get(argv[-1], [])
            return 0, json.dumps({'signatures': [dict(device=argv[-1][5:], **s) for s in sigs]}) if sigs else '', ''
        if tool == 'blkid':
            if blkid is None:
                return 4, '', 'blkid: error'
            out = blkid.get(argv[-1])
            return (0, out, '') if out else (2, '', '')
        if tool == 'pvs':
            return 0, pvs, ''
        if tool == 'ip':
            return (0, json.dumps(ip), '') if ip is not None else (1, '', 'no such device')
        if tool == 'nvidia-smi':
            return (0, smi, '') if smi else (9, '', 'no devices')
        raise AssertionError('unexpected command %s' % argv)
    run.calls = calls
    return run


@pytest.fixture
def tree(tmp_path):
    return Tree(tmp_path)


# ------------------------------------------------------------------- NVMe


def test_boot_disk_is_excluded_and_data_disks_listed_in_natural_order(tree):
    boot = tree.disk('nvme0n1', size_gb=200)[0]
    tree.mount(boot, '/')
    for n in (1, 2, 10, 3):
        tree.disk('nvme%dn1' % n, size_gb=6400)
    facts = _node.detect_nvme(tree.root, fake_run())
    assert facts['boot_disks'] == ['nvme0n1']
    assert [d['name'] for d in facts['disks']] == ['nvme1n1', 'nvme2n1', 'nvme3n1', 'nvme10n1']
    d = facts['disks'][0]
    assert d['size_bytes'] == 6400 * 1024 ** 3
    assert d['model'] == 'QEMU NVMe Ctrl' and d['serial'] == 'SNnvme1n1'
    # model_serial beats eui and the namespace-suffixed link
    assert d['by_id'] == '/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_SNnvme1n1'
    assert d['empty'] is True and d['signatures'] == [] and d['lvm_vg'] is None


def test_boot_disk_behind_a_partition_and_lvm_root(tree):
    # /boot on nvme0n1p1, / on an LV whose slave is nvme0n1p2
    parts = tree.disk('nvme0n1', partitions=('nvme0n1p1', 'nvme0n1p2'))[1]
    tree.mount(parts['nvme0n1p1'], '/boot')
    dm = '/sys/devices/virtual/block/dm-0'
    _write(tree.p(dm + '/dev'), '253:0')
    _link(tree.p(dm + '/slaves/nvme0n1p2'), os.path.relpath(tree.p('/sys/class/block/nvme0n1p2'), tree.p(dm + '/slaves')))
    _link(tree.p('/sys/class/block/dm-0'), os.path.relpath(tree.p(dm), tree.p('/sys/class/block')))
    _link(tree.p('/sys/dev/block/253:0'), os.path.relpath(tree.p(dm), tree.p('/sys/dev/block')))
    tree.mount('253:0', '/')
    tree.disk('nvme1n1')
    facts = _node.detect_nvme(tree.root, fake_run())
    assert facts['boot_disks'] == ['nvme0n1']
    assert [d['name'] for d in facts['disks']] == ['nvme1n1']


def test_signatures_partitions_holders_and_lvm_are_reported(tree):
    tree.disk('nvme1n1')
    tree.disk('nvme2n1', partitions=('nvme2n1p1',))
    tree.disk('nvme3n1', holders=('dm-3',))
    tree.disk('nvme4n1')
    run = fake_run(signatures={'/dev/nvme1n1': [{'type': 'ext4', 'offset': '0x438', 'label': 'data', 'uuid': 'u1'}],
                               '/dev/nvme4n1': [{'type': 'LVM2_member', 'offset': '0x218', 'label': None, 'uuid': 'u4'}]},
                   pvs='  /dev/nvme4n1|nvme\n  /dev/sda2|rootvg\n')
    facts = _node.detect_nvme(tree.root, run)
    by = {d['name']: d for d in facts['disks']}
    assert by['nvme1n1']['signatures'][0]['type'] == 'ext4' and not by['nvme1n1']['empty']
    assert by['nvme2n1']['partitions'] == ['nvme2n1p1'] and not by['nvme2n1']['empty']
    assert by['nvme3n1']['holders'] == ['dm-3'] and not by['nvme3n1']['empty']
    assert by['nvme4n1']['lvm_vg'] == 'nvme' and not by['nvme4n1']['empty']
    assert facts['lvm_probed'] is True


def test_mounted_data_disk_is_listed_but_marked(tree):
    dev = tree.disk('nvme1n1')[0]
    tree.mount(dev, '/data')
    facts = _node.detect_nvme(tree.root, fake_run())
    assert facts['disks'][0]['mounted'] == ['/data'] and facts['disks'][0]['empty'] is False


def test_blkid_fallback_and_probe_failure_is_an_error(tree):
    tree.disk('nvme1n1')
    tree.disk('nvme2n1')
    run = fake_run(wipefs_rc=1, blkid={'/dev/nvme1n1': 'DEVNAME=/dev/nvme1n1\nUUID=abc\nTYPE=xfs\n'})
    facts = _node.detect_nvme(tree.root, run)
    assert facts['disks'][0]['signatures'] == [{'type': 'xfs', 'offset': None, 'label': None, 'uuid': 'abc'}]
    assert facts['disks'][1]['signatures'] == []
    with pytest.raises(RuntimeError, match='cannot probe /dev/nvme1n1'):
        _node.detect_nvme(tree.root, fake_run(wipefs_rc=1, blkid=None))


def test_namespace_without_media_and_hidden_paths_are_skipped(tree):
    tree.disk('nvme1n1', size_gb=0)
    os.makedirs(tree.p('/sys/block/nvme0c0n1'))
    assert _node.detect_nvme(tree.root, fake_run())['disks'] == []


# ------------------------------------------------------------------- RDMA


def _gpu4_nics(tree, order=None):
    # mlx5 numbering differs from PCI order on real nodes: pair them the way the shape table's HCA list does
    for netdev, hca in zip(GPU4_RDMA, GPU4_HCA):
        bus, fn = netdev[3:].split('s0f')
        tree.mlx5(hca, '0000:%02x:00.%s' % (int(bus), fn), netdev)


def test_rdma_devices_follow_the_shape_table_order(tree):
    _gpu4_nics(tree)
    shape = {'rdma_interfaces': GPU4_RDMA}
    facts = _node.rdma_facts(tree.root, shape)
    assert facts['source'] == 'detected'
    assert facts['interfaces'] == GPU4_RDMA
    first = facts['devices'][0]
    assert first == {'name': 'mlx5_0', 'netdev': 'enp12s0f0', 'pci': '0000:0c:00.0', 'pci_id': '15b3:101d',
                     'driver': 'mlx5_core', 'port_state': 'ACTIVE', 'link_layer': 'Ethernet'}
    assert [d['pci'] for d in facts['devices']] == sorted(d['pci'] for d in facts['devices'])
    assert facts['agent'] == {'present': False, 'evidence': []}


def test_rdma_without_shape_uses_pci_order(tree):
    tree.mlx5('mlx5_1', '0000:98:00.1', 'ens800f1')
    tree.mlx5('mlx5_0', '0000:98:00.0', 'ens800f0')
    tree.mlx5('mlx5_9', '0000:17:00.0', 'ens10f0')
    facts = _node.rdma_facts(tree.root, {})
    assert facts['interfaces'] == ['ens10f0', 'ens800f0', 'ens800f1']


def test_soft_roce_devices_are_found_through_their_parent(tree):
    tree.rxe('rxe1', 'eth2')
    tree.rxe('rxe0', 'eth1')
    facts = _node.rdma_facts(tree.root, {})
    assert facts['interfaces'] == ['eth1', 'eth2']
    assert facts['devices'][0]['pci'] is None and facts['devices'][0]['port_state'] == 'ACTIVE'


def test_without_rdma_devices_the_shape_names_that_exist_are_used(tree):
    for name in GPU4_RDMA[:4]:
        tree.netdev(name, '02:00:00:00:00:0%d' % GPU4_RDMA.index(name))
    facts = _node.rdma_facts(tree.root, {'rdma_interfaces': GPU4_RDMA})
    assert facts['source'] == 'shape' and facts['interfaces'] == GPU4_RDMA[:4]
    assert _node.rdma_facts(tree.root, {})['source'] == 'none'


def test_rdma_agent_is_detected(tree):
    _write(tree.p('/etc/oci-hpc/rdma-network.conf'), 'rdma_network=192.168.0.0/255.255.0.0\n')
    facts = _node.rdma_facts(tree.root, {})
    assert facts['agent'] == {'present': True, 'evidence': ['/etc/oci-hpc/rdma-network.conf']}


# ------------------------------------------------------------------- GPUs, primary


def test_gpus_from_nvidia_smi_and_sysfs(tree):
    smi = '0, NVIDIA A100-SXM4-40GB, GPU-aaa, 00000000:0F:00.0, 40960\n1, NVIDIA A100-SXM4-40GB, GPU-bbb, 00000000:15:00.0, 40960\n'
    facts = _observe.gpus(tree.root, fake_run(smi=smi), '/usr/bin/nvidia-smi')
    assert facts['count'] == 2 and facts['model'] == 'NVIDIA A100-SXM4-40GB' and facts['list'][1]['memory_mib'] == 40960
    for addr in ('0000:0f:00.0', '0000:15:00.0'):
        _write(tree.p('/sys/bus/pci/devices/%s/vendor' % addr), '0x10de\n')
        _write(tree.p('/sys/bus/pci/devices/%s/class' % addr), '0x030200\n')
    _write(tree.p('/sys/bus/pci/devices/0000:00:01.0/vendor'), '0x8086\n')
    facts = _observe.gpus(tree.root, fake_run(), None)
    assert facts['count'] == 2 and facts['method'] == 'sysfs' and facts['source'] == 'detected'


def test_primary_from_default_route(tree):
    _write(tree.p('/proc/net/route'), 'Iface\tDestination\tGateway\n'
           'eth0\t00000000\t0114A8C6\n' 'eth0\t0014A8C6\t00000000\n')
    tree.netdev('eth0', '02:aa:bb:cc:dd:ee')
    ip = [{'ifname': 'eth0', 'addr_info': [{'family': 'inet', 'local': '198.18.20.11', 'prefixlen': 24, 'scope': 'global'}]}]
    facts = _node.primary_facts(tree.root, fake_run(ip=ip))
    assert facts == {'source': 'detected', 'interface': 'eth0', 'ip': '198.18.20.11', 'subnet_cidr': '198.18.20.0/24',
                     'prefixlen': 24, 'mac': '02:aa:bb:cc:dd:ee', 'vnic_id': None, 'gateway': None}
    assert _node.network_of('10.0.5.77', 22) == '10.0.4.0/22'


# ------------------------------------------------------------------- the module, with the simulator's IMDS


def _run_module(args, monkeypatch, capsys, runner):
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda self, argv, **kw: runner(argv))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **kw: None if name == 'nvidia-smi' else '/usr/sbin/' + name)
    capsys.readouterr()
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            node_facts.main()
    return json.loads(capsys.readouterr().out)


def test_module_joins_imds_with_sysfs_and_the_shape_table(ocisim, tree, monkeypatch, capsys):
    (instance_id,) = ocisim.seed_instances(1, shape='BM.GPU4.8', name_prefix='gpu')
    instance = ocisim.state.get(instance_id)
    vnic = [v for v in ocisim.state.vnics.values() if v['id'] in
            [a['vnicId'] for a in ocisim.state.vnic_attachments.values() if a['instanceId'] == instance_id]][0]
    boot = tree.disk('nvme0n1')[0]
    tree.mount(boot, '/')
    for n in range(1, 5):
        tree.disk('nvme%dn1' % n, size_gb=6400)
    _gpu4_nics(tree)
    tree.netdev('enp45s0f0', vnic['macAddress'].lower())
    url = '%s/_imds/%s/opc/v2' % (ocisim.endpoint, instance_id)
    result = _run_module({'imds_url': url, 'root': tree.root, '_ansible_check_mode': True},
                         monkeypatch, capsys, fake_run())
    assert result['changed'] is False
    facts = result['ansible_facts']['ocigpu_node']
    assert facts['imds'] == {'reachable': True, 'url': url, 'error': None}
    assert facts['shape'] == 'BM.GPU4.8' and facts['shape_source'] == 'imds'
    assert facts['shape_facts']['nvme_count'] == 4 and facts['shape_facts']['hcas'] == GPU4_HCA
    assert facts['instance']['id'] == instance_id and facts['instance']['source'] == 'imds'
    assert facts['instance']['display_name'] == instance['displayName']
    assert facts['primary']['source'] == 'imds' and facts['primary']['ip'] == vnic['privateIp']
    assert facts['primary']['interface'] == 'enp45s0f0'
    assert facts['primary']['subnet_cidr'] == ocisim.state.subnets[vnic['subnetId']]['cidrBlock']
    assert len(facts['nvme']['disks']) == 4 and facts['nvme']['boot_disks'] == ['nvme0n1']
    assert facts['rdma']['interfaces'] == GPU4_RDMA and len(facts['rdma']['devices']) == 16
    assert facts['gpus']['source'] == 'none'


def test_module_without_imds_falls_back_and_says_why(tree, monkeypatch, capsys):
    tree.disk('nvme1n1')
    # a closed port on this machine: nothing leaves the host
    result = _run_module({'imds_url': 'http://127.0.0.1:9/opc/v2', 'imds_timeout': 0.5, 'root': tree.root,
                          'shape': 'BM.GPU3.8'}, monkeypatch, capsys, fake_run())
    facts = result['ansible_facts']['ocigpu_node']
    assert facts['imds']['reachable'] is False and 'Error' in facts['imds']['error']
    assert facts['shape'] == 'BM.GPU3.8' and facts['shape_source'] == 'override'
    assert facts['instance'] == {'source': 'none'} and facts['primary']['source'] == 'none'
    assert facts['nvme']['disks'][0]['name'] == 'nvme1n1'


def test_module_fails_when_a_disk_cannot_be_probed(tree, monkeypatch, capsys):
    tree.disk('nvme1n1')
    result = _run_module({'use_imds': False, 'root': tree.root}, monkeypatch, capsys,
                         fake_run(wipefs_rc=1, blkid=None))
    assert result['failed'] is True and 'cannot probe /dev/nvme1n1' in result['msg']


def test_unknown_shape_gives_empty_shape_facts(tree, monkeypatch, capsys):
    result = _run_module({'use_imds': False, 'root': tree.root, 'shape': 'BM.Unknown.1'}, monkeypatch, capsys, fake_run())
    facts = result['ansible_facts']['ocigpu_node']
    assert facts['shape_facts'] == {} and facts['shape_known'] is False and facts['imds']['error'].startswith('not asked')


def test_module_finds_sbin_tools_and_survives_a_missing_one(tree, monkeypatch, capsys):
    """A login user's PATH may lack /usr/sbin (Debian): tools are looked up there too, and a tool
    that is not installed at all (pvs here) means 'not probed', never a failed task."""
    tree.disk('nvme1n1')
    looked_up = []

    def bin_path(self, name, required=False, opt_dirs=None):
        looked_up.append((name, tuple(opt_dirs or ())))
        return None if name in ('nvidia-smi', 'pvs') else '/usr/sbin/' + name
    runner = fake_run()
    monkeypatch.setattr(AnsibleModule, 'run_command', lambda self, argv, **kw: runner(argv))
    monkeypatch.setattr(AnsibleModule, 'get_bin_path', bin_path)
    capsys.readouterr()
    with patch_module_args({'use_imds': False, 'root': tree.root, 'shape': 'BM.GPU4.8'}):
        with pytest.raises(SystemExit):
            node_facts.main()
    result = json.loads(capsys.readouterr().out)
    assert not result.get('failed'), result
    assert result['ansible_facts']['ocigpu_node']['nvme']['lvm_probed'] is False
    assert ('pvs', ('/usr/local/sbin', '/usr/sbin', '/sbin')) in looked_up
    assert all(os.path.basename(c[0]) != 'pvs' for c in runner.calls)
    assert any(c[0] == '/usr/sbin/wipefs' for c in runner.calls)


def test_installed_packages_come_from_dpkg_status():
    """Only packages whose status ends in 'installed' count; removed ones keep only their config files."""
    status = (
        'Package: munge\nStatus: install ok installed\nDescription: auth\n continued: not a key\n\n'
        'Package: slurm-wlm\nStatus: install ok installed\n\n'
        'Package: firewalld\nStatus: deinstall ok config-files\n\n'
        'Package: half\nStatus: install reinstreq half-installed\n\n'
        'Package: bash\nStatus: install ok installed\n'
    )
    assert _observe.parse_dpkg_status(status) == ['bash', 'munge', 'slurm-wlm']


def test_installed_packages_option_reads_the_tree_and_is_not_a_fact(tmp_path, capsys):
    from ansible_collections.ocigpu.cluster.plugins.modules import node_facts
    from tests.unit.plugins.modules._helpers import run_module
    _write(str(tmp_path / 'var/lib/dpkg/status'), 'Package: munge\nStatus: install ok installed\n')
    args = {'use_imds': False, 'root': str(tmp_path), 'installed_packages': True}
    result = run_module(node_facts, args, capsys)
    assert result['installed_packages'] == ['munge']
    assert 'installed_packages' not in result['ansible_facts']['ocigpu_node']
    assert 'installed_packages' not in run_module(node_facts, dict(args, installed_packages=False), capsys)


def test_timezone_is_where_localtime_links_and_is_not_a_fact(tmp_path, capsys):
    from ansible_collections.ocigpu.cluster.plugins.modules import node_facts
    from tests.unit.plugins.modules._helpers import run_module
    args = {'use_imds': False, 'root': str(tmp_path)}
    assert run_module(node_facts, args, capsys)['timezone'] is None  # no /etc/localtime
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'etc/localtime').symlink_to('../usr/share/zoneinfo/Asia/Tokyo')
    result = run_module(node_facts, args, capsys)
    assert result['timezone'] == 'Asia/Tokyo'
    assert 'timezone' not in result['ansible_facts']['ocigpu_node']
    (tmp_path / 'etc/localtime').unlink()
    (tmp_path / 'etc/localtime').symlink_to('/usr/share/zoneinfo/UTC')
    assert node_facts.timezone(str(tmp_path)) == 'UTC'
    (tmp_path / 'etc/localtime').unlink()
    (tmp_path / 'etc/localtime').write_text('a copied zone file, not a link')
    assert node_facts.timezone(str(tmp_path)) is None
