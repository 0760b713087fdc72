# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pull server against hostile clients: N nodes fetch the bundle and join at once, first alone,
then while H hostile connections hold the server (half open TCP and send nothing, half finish the TLS
handshake and trickle their request a byte a second; each opens a new connection when the server
cuts it off).

    .venv/bin/python -m tests.perf.pull_hostile_bench [--joins 200] [--hostile 50] [--limit 240]

The server is the real one (controller/ocigpu_control/pull_server.py, make_server with its default limits), in
a process of its own on 127.0.0.1; the clients are the node's own pinned client
(roles/slurm_autoscaler/files/ocigpu_pull.py, Controller), joining from a privileged source port
(run as root). The join decision is a stand-in that answers after 20 ms (the OCI API calls the
real one makes; tests/unit/controller/test_pull.py checks the decision against the
simulator). A client whose connection fails tries again a second later (the node waits 10 s), at
most 30 times. Figures: joins served (goal: all), p50 and p99 of each node's bundle + join time,
their ratio with and without the hostile clients, the tries beyond the first and the hostile
connections the server cut off. Each run stops after --limit seconds in any case.
"""
from __future__ import annotations

import argparse
import base64
import importlib.util
import io
import json
import multiprocessing
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The checkout as the collection (tests/infra/venv.sh makes the link) and the control plane, as pytest.ini has it.
sys.path[:0] = [str(ROOT / '.build' / 'collections'), str(ROOT / 'controller')]

from ocigpu_control import pull_server as _pull  # noqa: E402
_PROGRAM = ROOT / 'roles' / 'slurm_autoscaler' / 'files' / 'ocigpu_pull.py'
_spec = importlib.util.spec_from_file_location('ocigpu_pull', str(_PROGRAM))
ocigpu_pull = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ocigpu_pull)

MUNGE = os.urandom(1024)


class StandInEnroller(object):
    """Answers every join as the real Enroller does once OCI vouched for the instance, after 20 ms."""

    def join(self, instance_id, name, client_ip):
        time.sleep(0.02)
        return dict(name=name, conf_server='10.0.0.2:6817', munge_key_b64=base64.b64encode(MUNGE).decode())

    def failed(self, instance_id, name, client_ip, message):
        return dict(name=name, request='r', message=message)


def make_files(folder, bundle_kib):
    cert, key = os.path.join(folder, 'cert.pem'), os.path.join(folder, 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
                    '-subj', '/CN=ocigpu-bench', '-days', '1', '-keyout', key, '-out', cert], check=True, capture_output=True)
    der = subprocess.run(['openssl', 'x509', '-in', cert, '-outform', 'DER'], check=True, capture_output=True).stdout
    bundle = os.path.join(folder, 'bundle.tar.gz')
    with tarfile.open(bundle, 'w:gz') as tar:
        data = os.urandom(bundle_kib * 1024)
        info = tarfile.TarInfo('collections/filler')
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    munge = os.path.join(folder, 'munge.key')
    with open(munge, 'wb') as f:
        f.write(MUNGE)
    pull = dict(listen='127.0.0.1', port=0, cert=cert, key=key, bundle=bundle, munge_key=munge, conf_server='10.0.0.2:6817')
    return dict(pull=pull), ocigpu_pull.fingerprint(der)


def serve(config, conn):
    """The server's process: its own interpreter lock, as the service has."""
    server = _pull.make_server(config, enroller=StandInEnroller())
    conn.send(server.server_address[1])
    server.serve_forever()


class Hostile(object):
    """H connections that hold the server; each is opened again when the server cuts it off."""

    def __init__(self, address, count):
        self.host, self.port = address
        self.count = count
        self.stop = threading.Event()
        self.opened = 0
        self.cut = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._hold, args=(i % 2 == 0,), daemon=True) for i in range(count)]

    def start(self):
        for t in self.threads:
            t.start()
        time.sleep(1.0)  # all held before the nodes come

    def _hold(self, idle):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        while not self.stop.is_set():
            try:
                sock = socket.create_connection((self.host, self.port), timeout=5)
                if not idle:
                    sock = context.wrap_socket(sock)
                with self.lock:
                    self.opened += 1
                request = b'GET /v1/bundle HTTP/1.0\r\nX-Pad: ' + b'a' * 4000
                sock.settimeout(1.0)
                for n in range(len(request)):
                    if self.stop.is_set():
                        break
                    if not idle:
                        sock.sendall(request[n:n + 1])
                    try:
                        if sock.recv(1) == b'':
                            raise ConnectionResetError('closed')
                    except socket.timeout:
                        continue
                sock.close()
            except OSError:
                with self.lock:
                    self.cut += 1
                time.sleep(0.2)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)


def join_all(address, pin, joins, limit):
    """Each node fetches the bundle then joins; (latencies of the nodes served, tries beyond the first)."""
    deadline = time.monotonic() + limit
    barrier = threading.Barrier(joins)
    results, retries, lock = [], [0], threading.Lock()

    def node(i):
        ctl = ocigpu_pull.Controller('%s:%d' % address, pin, timeout=60)
        barrier.wait()
        started = time.monotonic()
        for step in (lambda: ctl.request('GET', '/v1/bundle', out=os.devnull),
                     lambda: ctl.request('POST', '/v1/join', body=dict(instance_id='ocid1.instance.oc1..n%d' % i,
                                                                       name='gpu-%d' % i), privileged=True)):
            for attempt in range(30):
                if time.monotonic() > deadline:
                    return
                try:
                    answer = step()
                    break
                except (OSError, ocigpu_pull.PullError, ocigpu_pull.httplib.HTTPException):
                    with lock:
                        retries[0] += 1
                    time.sleep(1)
            else:
                return
        if answer.get('munge_key_b64') == base64.b64encode(MUNGE).decode():
            with lock:
                results.append(time.monotonic() - started)

    threads = [threading.Thread(target=node, args=(i,), daemon=True) for i in range(joins)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic() + 5))
    return sorted(results), retries[0]


def percentile(values, p):
    if not values:
        return float('nan')
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--joins', type=int, default=200)
    parser.add_argument('--hostile', type=int, default=50)
    parser.add_argument('--bundle-kib', type=int, default=256)
    parser.add_argument('--limit', type=int, default=240, help='seconds for each run at most')
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit('run as root: a join comes from a privileged source port')
    with tempfile.TemporaryDirectory(prefix='pull-bench-') as folder:
        config, pin = make_files(folder, args.bundle_kib)
        context = multiprocessing.get_context('fork')
        parent, child = context.Pipe()
        server = context.Process(target=serve, args=(config, child), daemon=True)
        server.start()
        try:
            address = ('127.0.0.1', parent.recv())
            figures = {}
            for label, hostile_count in (('alone', 0), ('hostile', args.hostile)):
                hostile = Hostile(address, hostile_count)
                hostile.start()
                started = time.monotonic()
                latencies, retries = join_all(address, pin, args.joins, args.limit)
                wall = time.monotonic() - started
                hostile.end()
                figures[label] = dict(served=len(latencies), p50=percentile(latencies, 50), p99=percentile(latencies, 99),
                                      retries=retries, wall=wall, hostile_opened=hostile.opened)
                print('%-8s served %d/%d joins (bundle %d KiB + join) in %.1f s: p50 %.3f s, p99 %.3f s; '
                      'tries beyond the first %d; hostile connections opened %d (%d held at once)'
                      % (label, len(latencies), args.joins, args.bundle_kib, wall, figures[label]['p50'],
                         figures[label]['p99'], retries, hostile.opened, hostile_count))
                sys.stdout.flush()
        finally:
            server.terminate()
            server.join(10)
    alone, hostile = figures['alone'], figures['hostile']
    print('p99 with / without the hostile clients: %.2f (p50: %.2f)'
          % (hostile['p99'] / alone['p99'], hostile['p50'] / alone['p50']))
    print(json.dumps(dict(figures, joins=args.joins, hostile_connections=args.hostile, bundle_kib=args.bundle_kib)))
    print('reproduce: .venv/bin/python -m tests.perf.pull_hostile_bench --joins %d --hostile %d --bundle-kib %d --limit %d'
          % (args.joins, args.hostile, args.bundle_kib, args.limit))
    return 0 if alone['served'] == hostile['served'] == args.joins else 1


if __name__ == '__main__':
    sys.exit(main())
