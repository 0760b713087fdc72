# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The controller's side of the pull path (`ocigpu-pull-server`, installed by slurm_autoscaler).

A node that configures itself at boot (roles/slurm_autoscaler/files/ocigpu_pull.py) talks to this server over TLS
pinned to the controller's certificate:

- ``GET /v1/bundle``: the collections and the cluster's node settings (nothing secret);
- ``POST /v1/join`` ``{"instance_id", "name"}``: the munge key, the cluster's MPI key pair (where the
  configuration names one) and slurmctld's address, given only
  when the OCI API confirms that the instance is RUNNING in the cluster's compartment, carries the
  cluster's tag and the Slurm name it asks for (tags only the controller and the operator set),
  and that one of its VNICs has the address the request comes from (OCI's source/destination check
  keeps an instance from sending with another's address inside the VCN), from a source port below
  1024 (which only root on that instance can bind);
- ``POST /v1/failed`` ``{"instance_id", "name", "message"}``: the node's pull failed (the same checks
  as a join): the autoscaler service hands the node back to Slurm at once, as a failed resume, instead
  of waiting for ResumeTimeout (controller/ocigpu_control/service.py, ``pull_failed``);
- ``GET /v1/health``: "ok".

Every decision is logged with its reason. Configuration: the ``pull`` section of the autoscaler's
JSON (listen address and port, certificate and key, bundle, munge key, slurmctld address; optionally
``timeout`` and ``max_connections``).

No client can hold the server for others: the TLS handshake and the request are read in the
connection's own thread, within ``timeout`` seconds in all (a client that sends nothing, or trickles
bytes, is cut off then); at most ``max_connections`` connections are served at once, and one more is
closed at once (the node's program tries again); a body is at most 4096 bytes, with a valid
Content-Length.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import re
import socket
import ssl
import sys
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover
    BaseHTTPRequestHandler = object
    ThreadingHTTPServer = None

from ansible_collections.ocigpu.cluster.plugins.module_utils import _oci
from ocigpu_control.scaler import NODE_TAG, PULL_CERT_TAG, PULL_SERVER_TAG
from ocigpu_control.cloud import Listings
from ocigpu_control.programs import load_config
from ocigpu_control.requests import submit
from ocigpu_control.service import PULL_FAILED
from ocigpu_control.settings import setup_logging
from ansible_collections.ocigpu.cluster.plugins.module_utils._cluster import SLURM_NAME_TAG
from ansible_collections.ocigpu.cluster.plugins.module_utils._hostlist import expand_hostlist
from ansible_collections.ocigpu.cluster.plugins.module_utils._resource import CLUSTER_TAG, InputError, attr

__all__ = ['Enroller', 'JoinRefused', 'make_server', 'main', 'PULL_SERVER_TAG', 'PULL_CERT_TAG']
PULL_REQUIRED = ('listen', 'port', 'cert', 'key', 'bundle', 'munge_key', 'conf_server')
# The paths a node may POST to, and what each request is called in the log.
POST_PATHS = {'/v1/join': 'join', '/v1/failed': 'failure report'}
# What one client may take: seconds from the connection to the end of its request (TLS handshake
# included), connections served at once, bytes in a request's body.
CONNECTION_TIMEOUT = 30
MAX_CONNECTIONS = 256
MAX_BODY = 4096

log = logging.getLogger('ocigpu.pull')


class JoinRefused(Exception):
    def __init__(self, status, reason):
        super(JoinRefused, self).__init__(reason)
        self.status = status
        self.reason = reason


def pull_settings(config):
    pull = config.get('pull') or {}
    missing = [k for k in PULL_REQUIRED if pull.get(k) in (None, '')]
    if missing:
        raise InputError('config: pull.%s missing' % ', pull.'.join(missing))
    return pull


def read_mpi_keys(folder):
    """{user: {private, public}} from the folder of the users' MPI key pairs (<user> and <user>.pub, the
    slurm_autoscaler role writes them); {} when there is none (a controller not yet configured anew)."""
    keys = {}
    if not os.path.isdir(folder):
        return keys
    for name in sorted(os.listdir(folder)):
        user = name[:-len('.pub')] if name.endswith('.pub') else None
        if not user or not os.path.isfile(os.path.join(folder, user)):
            continue
        with open(os.path.join(folder, user)) as f:
            private = f.read()
        with open(os.path.join(folder, name)) as f:
            keys[user] = dict(private=private, public=f.read().strip())
    return keys


class Enroller(object):
    """Decides whether an instance may join, from what the OCI API says about it now.

    What OCI says is read from listings of the compartment's instances and VNIC attachments and of the
    subnet's private IPs (cloud.Listings), each started after the request came in and shared by every
    request that came in before it started: a burst of 1,000 joins costs a few listings a second instead
    of three calls per join (GetInstance, ListVnicAttachments, GetVnic), which at OCI's per-operation
    throttle queued the joins for tens of seconds. An instance those listings do not show (another
    compartment, one just made) or whose address they do not show is read on its own, as before."""

    def __init__(self, config, session=None):
        self.config = config
        self.pull = pull_settings(config)
        self.session = session or _oci.OCISession(dict(config['auth']))
        self.listings = Listings(self.session, config['compartment_id'])
        # The static nodes the self-healing loop replaces join by pull as the on-demand ones do.
        self.static = set(expand_hostlist((config.get('static') or {}).get('nodes') or ''))
        self.names = set(config['node_names']) | set(expand_hostlist(self.pull.get('extra_nodes') or '')) | self.static

    def verify(self, instance_id, name, client_ip):
        if not isinstance(instance_id, str) or not instance_id.startswith('ocid1.instance.'):
            raise JoinRefused(400, 'instance_id %r is not an instance OCID' % (instance_id,))
        if name not in self.names:
            raise JoinRefused(403, 'name %r is not among this cluster\'s Slurm nodes' % (name,))
        compute = self.session.compute
        listed = self._listed(instance_id)
        inst = listed[0] if listed else self.session.get_or_none(compute.get_instance, instance_id)
        if inst is None:
            raise JoinRefused(403, 'instance %s does not exist' % instance_id)
        tags = attr(inst, 'freeform_tags') or {}
        if inst.compartment_id != self.config['compartment_id']:
            raise JoinRefused(403, 'instance %s is in another compartment' % instance_id)
        if tags.get(CLUSTER_TAG) != self.config['cluster_name']:
            raise JoinRefused(403, 'instance %s is not tagged %s=%s' % (instance_id, CLUSTER_TAG, self.config['cluster_name']))
        # A static node's new instance carries the inventory's tag (the self-healing loop labels it so).
        carried = tags.get(NODE_TAG) or (tags.get(SLURM_NAME_TAG) if name in self.static else None)
        if carried != name:
            raise JoinRefused(403, 'instance %s carries Slurm name %r, not %r' % (instance_id, carried, name))
        if inst.lifecycle_state != 'RUNNING':
            raise JoinRefused(403, 'instance %s is %s, not RUNNING' % (instance_id, inst.lifecycle_state))
        addresses = listed[1] if listed else []
        if client_ip not in addresses:
            addresses = self._addresses(instance_id)
        if client_ip not in addresses:
            raise JoinRefused(403, 'the request comes from %s, not from instance %s (%s)' % (
                client_ip, instance_id, ', '.join(addresses) or 'no address'))
        return inst

    def _listed(self, instance_id):
        """(instance, its VNICs' primary addresses) from listings started after now; None when not listed."""
        mark = self.listings.mark()
        inst = self.listings.get('instances', mark).get(instance_id)
        if inst is None:
            return None
        found = [self.listings.private_ip(att, mark) for att in self.listings.get('vnic_attachments', mark).get(instance_id, [])]
        return inst, [address.ip_address for address in found if address is not None]

    def _addresses(self, instance_id):
        """The private addresses of the instance's VNICs, read on their own."""
        compute = self.session.compute
        addresses = []
        for att in self.session.list_all(compute.list_vnic_attachments, self.config['compartment_id'],
                                         instance_id=instance_id):
            if att.lifecycle_state != 'ATTACHED':
                continue
            vnic = self.session.get_or_none(self.session.network.get_vnic, att.vnic_id)
            if vnic is not None:
                addresses.append(vnic.private_ip)
        return addresses

    def join(self, instance_id, name, client_ip):
        self.verify(instance_id, name, client_ip)
        with open(self.pull['munge_key'], 'rb') as f:
            key = base64.b64encode(f.read()).decode('ascii')
        answer = dict(name=name, conf_server=self.pull['conf_server'], munge_key_b64=key)
        if self.pull.get('mpi_key'):
            # The MPI key pairs (the mpi_ssh role's), one per user: the node installs each in its own user's account.
            answer['mpi_keys'] = read_mpi_keys(self.pull['mpi_key'])
        return answer

    def failed(self, instance_id, name, client_ip, message):
        """A node's report that its pull failed: a request for the autoscaler service."""
        self.verify(instance_id, name, client_ip)
        message = ' '.join(str(message or '').split())[:300]
        rid = submit(self.config, PULL_FAILED, name, source='pull server', instance_id=instance_id, message=message)
        return dict(name=name, request=rid, message=message)


class _DeadlineReader(io.RawIOBase):
    """A connection's reads, each given only what is left of the connection's time: a client that
    trickles its request a byte at a time is cut off when one that sends nothing would be."""

    def __init__(self, sock, deadline):
        super(_DeadlineReader, self).__init__()
        self.sock = sock
        self.deadline = deadline

    def readable(self):
        return True

    def readinto(self, buf):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout('the request was not read in time')
        self.sock.settimeout(left)
        return self.sock.recv_into(buf)


class Handler(BaseHTTPRequestHandler):
    server_version = 'ocigpu-pull'
    enroller = None
    bundle = None
    # Seconds for the handshake and the request together; each write of the answer gets as long.
    timeout = CONNECTION_TIMEOUT

    def setup(self):
        """The TLS handshake, here in the connection's thread (never in the accept loop), then reads
        that end at the connection's deadline."""
        deadline = time.monotonic() + self.timeout
        self.request.settimeout(self.timeout)
        self.request.do_handshake()
        super(Handler, self).setup()
        self.rfile.close()  # the socket's own reader, replaced by one that keeps the deadline
        self.rfile = io.BufferedReader(_DeadlineReader(self.request, deadline))

    def log_message(self, fmt, *args):  # requests are logged by the handlers below
        return

    def log_error(self, fmt, *args):  # a request line or header the server could not read
        log.info('%s: %s', self.client_address[0], fmt % args)

    def end_headers(self):
        # The request is read: the answer's writes get the full timeout each, not what is left.
        self.request.settimeout(self.timeout)
        super(Handler, self).end_headers()

    def _send(self, status, body, content_type='application/json'):
        data = body if isinstance(body, bytes) else json.dumps(body).encode('utf-8')
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (the standard library's name)
        client = self.client_address[0]
        if self.path == '/v1/health':
            return self._send(200, b'ok\n', 'text/plain')
        if self.path != '/v1/bundle':
            return self._send(404, dict(error='no such path'))
        size = os.path.getsize(self.bundle)
        log.info('bundle: %d bytes to %s', size, client)
        self.send_response(200)
        self.send_header('Content-Type', 'application/gzip')
        self.send_header('Content-Length', str(size))
        self.end_headers()
        with open(self.bundle, 'rb') as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                self.wfile.write(chunk)
        return None

    def do_POST(self):  # noqa: N802
        client = self.client_address[0]
        what = POST_PATHS.get(self.path)
        if what is None:
            return self._send(404, dict(error='no such path'))
        try:
            if self.client_address[1] >= 1024:
                raise JoinRefused(403, 'a %s must come from a privileged source port (root on the node), not %d'
                                  % (what, self.client_address[1]))
            length = self.headers.get('Content-Length')
            if length is None:
                raise JoinRefused(411, 'a Content-Length is needed')
            if not re.match(r'[0-9]{1,9}\Z', length.strip()):
                raise JoinRefused(400, 'Content-Length %r is not a size in bytes' % length[:20])
            length = int(length.strip())
            if length > MAX_BODY:
                raise JoinRefused(413, 'request too large')
            body = json.loads(self.rfile.read(length).decode('utf-8') or '{}')
            if not isinstance(body, dict):
                raise JoinRefused(400, 'the request is not a JSON object')
            if what == 'join':
                answer = self.enroller.join(body.get('instance_id'), body.get('name'), client)
            else:
                answer = self.enroller.failed(body.get('instance_id'), body.get('name'), client, body.get('message'))
        except JoinRefused as exc:
            log.warning('%s refused for %s: %s', what, client, exc.reason)
            return self._send(exc.status, dict(error=exc.reason))
        except ValueError:
            return self._send(400, dict(error='the request is not JSON'))
        except (_oci.ServiceError, _oci.OCIConfigError) as exc:
            log.error('%s from %s: the OCI API failed: %s', what, client, exc)
            return self._send(503, dict(error='the controller cannot reach the OCI API; try again'))
        except (IOError, OSError) as exc:
            log.error('%s from %s: %s', what, client, exc)
            return self._send(500, dict(error='the controller could not hand the report on'))
        if what == 'join':
            log.info('join: %s (%s) accepted from %s', answer['name'], body.get('instance_id'), client)
        else:
            log.warning('pull failed on %s (%s, %s): %s; handed to the autoscaler service (request %s)', answer['name'],
                        body.get('instance_id'), client, answer['message'], answer['request'])
        return self._send(200, answer)


class PullServer(ThreadingHTTPServer):
    """One thread per connection, at most max_connections at once: one more is closed at once, and
    the refusals are logged at most every 10 s."""
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, handler, max_connections=MAX_CONNECTIONS):
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0
        self.refused_logged = 0.0
        super(PullServer, self).__init__(address, handler)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            now = time.monotonic()
            if now - self.refused_logged >= 10:
                log.warning('%d connections already open: %d more refused (the last from %s)',
                            self.max_connections, self.refused, client_address[0])
                self.refused, self.refused_logged = 0, now
            self.shutdown_request(request)
            return
        try:
            ThreadingHTTPServer.process_request(self, request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, ValueError)):  # a failed handshake, a timeout, a closed connection
            log.info('%s: connection dropped: %s', client_address[0], exc)
        else:
            log.exception('%s: the request failed', client_address[0])


def make_server(config, enroller=None):
    pull = pull_settings(config)
    enroller = enroller or Enroller(config)
    handler = type('PullHandler', (Handler,), dict(enroller=enroller, bundle=pull['bundle'],
                                                   timeout=float(pull.get('timeout') or CONNECTION_TIMEOUT)))
    server = PullServer((pull['listen'], int(pull['port'])), handler,
                        max_connections=int(pull.get('max_connections') or MAX_CONNECTIONS))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pull['cert'], pull['key'])
    # The handshake runs in each connection's thread (Handler.setup), with its timeout: accept() never waits on a client.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server


def serve_in_thread(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path = '/etc/ocigpu-autoscaler/autoscaler.json'
    if argv[:1] == ['--config'] and len(argv) > 1:
        config_path, argv = argv[1], argv[2:]
    try:
        config = load_config(config_path)
        pull = pull_settings(config)
    except InputError as exc:
        sys.stderr.write('ocigpu-pull-server: %s\n' % exc)
        return 2
    setup_logging(pull.get('log_file') or None)
    log.setLevel(logging.INFO)
    log.handlers[:] = logging.getLogger('ocigpu.autoscaler').handlers
    server = make_server(config)
    log.info('serving the pull path on %s:%s (bundle %s)', pull['listen'], pull['port'], pull['bundle'])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
