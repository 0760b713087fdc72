# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus exporter for RDMA device counters.

Reads, at every scrape, every RDMA device under /sys/class/infiniband:

  <dev>/ports/<port>/counters/*      standard port counters (port_xmit_data, port_rcv_packets, ...)
  <dev>/ports/<port>/hw_counters/*   driver counters (mlx5: out_of_sequence, np_cnp_sent, ...;
                                     irdma: iwInRdmaWrites, ...; rxe: sent_pkts, rcvd_pkts, ...)
  <dev>/hw_counters/*                device-wide driver counters, where the driver has them
  <dev>/ports/<port>/state, phys_state, link_layer, rate

and serves them on /metrics:

  rdma_port_counter_total{device,port,counter}      one series per file in counters/
  rdma_port_transmit_bytes_total{device,port}       port_xmit_data x 4 (the file counts 4-byte words)
  rdma_port_receive_bytes_total{device,port}        port_rcv_data x 4
  rdma_hw_counter_total{device,port,counter}        one series per file in ports/<port>/hw_counters/
  rdma_device_hw_counter_total{device,counter}      one series per file in <dev>/hw_counters/
  rdma_port_state{device,port}                      the numeric port state (4 = ACTIVE)
  rdma_port_info{device,port,state,phys_state,link_layer,rate}   always 1
  rdma_exporter_read_errors{device}                 files that could not be read in this scrape

With --textfile-dir, the *.prom files of that folder (Prometheus text: the node health checks'
health.prom, validate.yml's nccl.prom) are served after them, each checked by the text parser first;
rdma_exporter_textfile_errors counts the files left out.

Files are read when Prometheus scrapes, so devices that appear or vanish are followed. Needs only
python3 and prometheus_client; runs as an unprivileged user (the counter files are world-readable).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

DEFAULT_SYSFS = '/sys/class/infiniband'
# Files in hw_counters that are settings, not counters.
NOT_COUNTERS = frozenset(['lifespan'])
# port_xmit_data and port_rcv_data count 4-byte words (InfiniBand "octets divided by 4").
DATA_WORD_BYTES = 4


def _read(path):
    with open(path) as handle:
        return handle.read().strip()


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def _read_counters(folder, errors):
    """{name: value} for every readable integer file in folder; unreadable files are counted."""
    values = {}
    for name in _listdir(folder):
        if name in NOT_COUNTERS:
            continue
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        try:
            values[name] = int(_read(path), 0)
        except (IOError, OSError, ValueError):
            errors[0] += 1
    return values


class RdmaCollector(object):
    """prometheus_client collector over an infiniband sysfs tree."""

    def __init__(self, sysfs_root=DEFAULT_SYSFS):
        self.sysfs_root = sysfs_root

    def collect(self):
        port_counter = CounterMetricFamily(
            'rdma_port_counter', 'RDMA port counter from ports/<port>/counters', labels=['device', 'port', 'counter'])
        tx_bytes = CounterMetricFamily(
            'rdma_port_transmit_bytes', 'Bytes sent by the port (port_xmit_data x 4)', labels=['device', 'port'])
        rx_bytes = CounterMetricFamily(
            'rdma_port_receive_bytes', 'Bytes received by the port (port_rcv_data x 4)', labels=['device', 'port'])
        hw_counter = CounterMetricFamily(
            'rdma_hw_counter', 'RDMA driver counter from ports/<port>/hw_counters', labels=['device', 'port', 'counter'])
        dev_counter = CounterMetricFamily(
            'rdma_device_hw_counter', 'RDMA driver counter from <device>/hw_counters', labels=['device', 'counter'])
        state = GaugeMetricFamily(
            'rdma_port_state', 'Numeric port state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE)', labels=['device', 'port'])
        info = GaugeMetricFamily(
            'rdma_port_info', 'Port state, physical state, link layer and rate as labels',
            labels=['device', 'port', 'state', 'phys_state', 'link_layer', 'rate'])
        read_errors = GaugeMetricFamily(
            'rdma_exporter_read_errors', 'Counter files that could not be read in this scrape', labels=['device'])

        for dev in _listdir(self.sysfs_root):
            dev_dir = os.path.join(self.sysfs_root, dev)
            errors = [0]
            for name, value in sorted(_read_counters(os.path.join(dev_dir, 'hw_counters'), errors).items()):
                dev_counter.add_metric([dev, name], value)
            for port in _listdir(os.path.join(dev_dir, 'ports')):
                port_dir = os.path.join(dev_dir, 'ports', port)
                counters = _read_counters(os.path.join(port_dir, 'counters'), errors)
                for name, value in sorted(counters.items()):
                    port_counter.add_metric([dev, port, name], value)
                if 'port_xmit_data' in counters:
                    tx_bytes.add_metric([dev, port], counters['port_xmit_data'] * DATA_WORD_BYTES)
                if 'port_rcv_data' in counters:
                    rx_bytes.add_metric([dev, port], counters['port_rcv_data'] * DATA_WORD_BYTES)
                for name, value in sorted(_read_counters(os.path.join(port_dir, 'hw_counters'), errors).items()):
                    hw_counter.add_metric([dev, port, name], value)
                attrs = {}
                for attr in ('state', 'phys_state', 'link_layer', 'rate'):
                    try:
                        attrs[attr] = _read(os.path.join(port_dir, attr))
                    except (IOError, OSError):
                        attrs[attr] = ''
                if attrs['state']:
                    number = attrs['state'].split(':', 1)[0].strip()
                    if number.isdigit():
                        state.add_metric([dev, port], int(number))
                info.add_metric([dev, port, attrs['state'], attrs['phys_state'], attrs['link_layer'], attrs['rate']], 1)
            read_errors.add_metric([dev], errors[0])
        return [port_counter, tx_bytes, rx_bytes, hw_counter, dev_counter, state, info, read_errors]


def textfiles(folder):
    """The Prometheus text of the *.prom files in folder that parse, and the count of those that do not."""
    texts, errors = [], 0
    for name in _listdir(folder):
        if not name.endswith('.prom'):
            continue
        try:
            text = _read(os.path.join(folder, name)) + '\n'
            list(text_string_to_metric_families(text))
        except (IOError, OSError, ValueError):
            errors += 1
            continue
        texts.append(text)
    summary = ('# HELP rdma_exporter_textfile_errors Text files of --textfile-dir left out (unreadable or not Prometheus text).\n'
               '# TYPE rdma_exporter_textfile_errors gauge\nrdma_exporter_textfile_errors %d\n' % errors)
    return ''.join(texts) + summary


def make_registry(sysfs_root=DEFAULT_SYSFS):
    registry = CollectorRegistry()
    registry.register(RdmaCollector(sysfs_root))
    return registry


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(address, port, registry, textfile_dir=None):
    """An HTTP server answering /metrics (and / with a pointer to it). Port 0 picks a free port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split('?', 1)[0] == '/metrics':
                body = generate_latest(registry)
                if textfile_dir:
                    body += textfiles(textfile_dir).encode('utf-8')
                self.send_response(200)
                self.send_header('Content-Type', CONTENT_TYPE_LATEST)
            else:
                body = b'<html><body><a href="/metrics">RDMA counters</a></body></html>\n'
                self.send_response(200 if self.path == '/' else 404)
                self.send_header('Content-Type', 'text/html')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):  # one line per scrape would flood the journal
            pass

    return _Server((address, port), Handler)


def main(argv=None):
    parser = argparse.ArgumentParser(description='Prometheus exporter for RDMA port and hw counters.')
    parser.add_argument('--address', default='0.0.0.0', help='address to listen on (default: all)')
    parser.add_argument('--port', type=int, default=9879, help='TCP port to listen on (default: 9879)')
    parser.add_argument('--sysfs-root', default=DEFAULT_SYSFS, help='where the RDMA devices are listed')
    parser.add_argument('--textfile-dir', help='also serve the *.prom files of this folder (Prometheus text)')
    args = parser.parse_args(argv)
    server = make_server(args.address, args.port, make_registry(args.sysfs_root), args.textfile_dir)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    sys.stdout.write('rdma_exporter: serving %s on %s:%d\n' % (args.sysfs_root, args.address, server.server_address[1]))
    sys.stdout.flush()
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
