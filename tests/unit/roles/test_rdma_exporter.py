# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/rdma_exporter/files/rdma_exporter.py against a fake /sys/class/infiniband tree: the
exporter is started on a loopback port, scraped over HTTP, and the metric values are checked,
also after counters change and devices come and go."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = ROOT / 'roles' / 'rdma_exporter' / 'files' / 'rdma_exporter.py'

spec = importlib.util.spec_from_file_location('rdma_exporter', SCRIPT)
rdma_exporter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rdma_exporter)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + '\n')


def make_port(root, dev, port, state='4: ACTIVE', counters=None, hw=None):
    pdir = root / dev / 'ports' / str(port)
    write(pdir / 'state', state)
    write(pdir / 'phys_state', '5: LinkUp')
    write(pdir / 'link_layer', 'Ethernet')
    write(pdir / 'rate', '200 Gb/sec (4X HDR)')
    for name, value in (counters or {}).items():
        write(pdir / 'counters' / name, str(value))
    for name, value in (hw or {}).items():
        write(pdir / 'hw_counters' / name, str(value))
    return pdir


@pytest.fixture
def sysfs(tmp_path):
    root = tmp_path / 'infiniband'
    make_port(root, 'mlx5_0', 1, counters={'port_xmit_data': 1000, 'port_rcv_data': 250, 'port_xmit_packets': 7},
              hw={'out_of_sequence': 3, 'np_cnp_sent': 11, 'lifespan': 10})
    make_port(root, 'irdma0', 1, state='1: DOWN', hw={'iwInRdmaWrites': 141075419, 'iwOutRdmaWrites': 137113821})
    write(root / 'mlx5_0' / 'hw_counters' / 'req_cqe_error', '0')
    return root


@pytest.fixture
def exporter(sysfs):
    server = rdma_exporter.make_server('127.0.0.1', 0, rdma_exporter.make_registry(str(sysfs)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


def scrape(url):
    with urllib.request.urlopen(url + '/metrics', timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers['Content-Type'].startswith('text/plain')
        text = resp.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def test_port_and_hw_counters(exporter):
    s = scrape(exporter)
    assert value(s, 'rdma_port_counter_total', device='mlx5_0', port='1', counter='port_xmit_packets') == 7
    assert value(s, 'rdma_port_transmit_bytes_total', device='mlx5_0', port='1') == 4000
    assert value(s, 'rdma_port_receive_bytes_total', device='mlx5_0', port='1') == 1000
    assert value(s, 'rdma_hw_counter_total', device='mlx5_0', port='1', counter='np_cnp_sent') == 11
    assert value(s, 'rdma_hw_counter_total', device='irdma0', port='1', counter='iwInRdmaWrites') == 141075419
    assert value(s, 'rdma_device_hw_counter_total', device='mlx5_0', counter='req_cqe_error') == 0
    assert value(s, 'rdma_port_state', device='mlx5_0', port='1') == 4
    assert value(s, 'rdma_port_state', device='irdma0', port='1') == 1
    assert value(s, 'rdma_port_info', device='irdma0', port='1', state='1: DOWN', phys_state='5: LinkUp',
                 link_layer='Ethernet', rate='200 Gb/sec (4X HDR)') == 1
    assert value(s, 'rdma_exporter_read_errors', device='mlx5_0') == 0
    # lifespan is a setting of the driver, not a counter
    assert ('rdma_hw_counter_total', (('counter', 'lifespan'), ('device', 'mlx5_0'), ('port', '1'))) not in s


def test_counters_are_read_at_every_scrape(exporter, sysfs):
    before = scrape(exporter)
    write(sysfs / 'mlx5_0' / 'ports' / '1' / 'hw_counters' / 'out_of_sequence', '5')
    write(sysfs / 'mlx5_0' / 'ports' / '1' / 'counters' / 'port_xmit_data', '1500')
    after = scrape(exporter)
    key = dict(device='mlx5_0', port='1', counter='out_of_sequence')
    assert value(before, 'rdma_hw_counter_total', **key) == 3
    assert value(after, 'rdma_hw_counter_total', **key) == 5
    assert value(after, 'rdma_port_transmit_bytes_total', device='mlx5_0', port='1') == 6000


def test_devices_that_come_and_go(exporter, sysfs):
    make_port(sysfs, 'rxe0', 1, hw={'sent_pkts': 9, 'rcvd_pkts': 8})
    s = scrape(exporter)
    assert value(s, 'rdma_hw_counter_total', device='rxe0', port='1', counter='sent_pkts') == 9
    import shutil
    shutil.rmtree(sysfs / 'irdma0')
    s = scrape(exporter)
    assert not any(dict(k[1]).get('device') == 'irdma0' for k in s)


def test_unreadable_counter_is_counted_not_fatal(exporter, sysfs):
    write(sysfs / 'mlx5_0' / 'ports' / '1' / 'hw_counters' / 'rx_atomic_requests', 'N/A')
    s = scrape(exporter)
    assert value(s, 'rdma_exporter_read_errors', device='mlx5_0') == 1
    assert value(s, 'rdma_hw_counter_total', device='mlx5_0', port='1', counter='np_cnp_sent') == 11


def test_no_rdma_devices(tmp_path):
    registry = rdma_exporter.make_registry(str(tmp_path / 'missing'))
    families = {f.name: f.samples for f in registry.collect()}
    assert families['rdma_hw_counter'] == [] and families['rdma_port_state'] == []


def test_other_paths_are_404(exporter):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(exporter + '/nothing', timeout=5)
    assert err.value.code == 404


def test_the_program_runs_as_the_service_does(sysfs):
    """The command line the systemd unit uses: start it, scrape it, stop it with SIGTERM."""
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SCRIPT), '--address', '127.0.0.1', '--port', str(port),
                             '--sysfs-root', str(sysfs)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert b'serving' in proc.stdout.readline()
        deadline = time.monotonic() + 10
        while True:
            try:
                s = scrape('http://127.0.0.1:%d' % port)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, 'exporter did not answer'
                time.sleep(0.1)
        assert value(s, 'rdma_hw_counter_total', device='irdma0', port='1', counter='iwOutRdmaWrites') == 137113821
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_role_declares_its_port_and_starts_the_program_it_installs():
    """The firewall role opens the firewall_ports of each declaration; the unit runs what the role copies."""
    import jinja2
    import yaml
    role = ROOT / 'roles' / 'rdma_exporter'
    defaults = yaml.safe_load((role / 'defaults' / 'main.yml').read_text())
    assert defaults['rdma_exporter_firewall_ports'] == ['{{ rdma_exporter_port }}/tcp']
    declaration = yaml.safe_load((role / 'vars' / 'main.yml').read_text())['__rdma_exporter_manages']
    assert declaration['firewall_ports'] == '{{ rdma_exporter_firewall_ports }}'
    unit = jinja2.Template((role / 'templates' / 'rdma-exporter.service.j2').read_text()).render(
        dict(defaults, ansible_managed='managed', rdma_exporter_port=9999))
    execs = [line for line in unit.splitlines() if line.startswith('ExecStart=')]
    assert execs == ['ExecStart=/usr/bin/python3 /usr/local/libexec/ocigpu/rdma_exporter.py --address 0.0.0.0 '
                     '--port 9999 --sysfs-root /sys/class/infiniband --textfile-dir /var/lib/ocigpu-health']
    assert 'User=rdma-exporter' in unit.splitlines()
    # The argument names in the unit are the ones the program accepts.
    parser_text = SCRIPT.read_text()
    for flag in ('--address', '--port', '--sysfs-root', '--textfile-dir'):
        assert "'%s'" % flag in parser_text
