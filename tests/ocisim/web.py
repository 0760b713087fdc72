# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP layer: router, request context, and the request handler (loopback only)."""

from __future__ import annotations

import json
import logging
import re
import socket
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .core import API_VERSION, OciError, invalid

LOG = logging.getLogger("ocisim")


class Route:
    def __init__(self, method, template, handler, signed=True, version=API_VERSION):
        self.method = method
        self.template = template
        self.handler = handler
        self.signed = signed
        self.version = version if signed else None
        self.key = "{0} {1}".format(method, template)
        pattern = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", re.escape(template).replace(r"\{", "{").replace(r"\}", "}"))
        self.regex = re.compile("^" + pattern + "$")


class Router:
    """method + path template -> handler.  Templates are relative to the API version prefix for
    signed API routes (/20160918, or the version a service's route names, e.g. /20190729 for
    Limits), absolute for the unsigned ones (/_imds, /_admin)."""

    def __init__(self):
        self.routes = []

    def add(self, method, template, handler, signed=True, version=API_VERSION):
        self.routes.append(Route(method, template, handler, signed, version))

    def match(self, method, path):
        """Return (route, params) or (None, allowed) where allowed tells whether the path exists."""
        path_exists = False
        for route in self.routes:
            if not route.signed:
                target = path
            elif path.startswith(route.version + "/"):
                target = path[len(route.version):]
            else:
                continue
            found = route.regex.match(target)
            if found:
                if route.method == method:
                    return route, {k: urllib.parse.unquote(v) for k, v in found.groupdict().items()}
                path_exists = True
        return None, path_exists


class Context:
    """One request as the handlers see it."""

    def __init__(self, sim, method, path, query, headers, body, params):
        self.sim = sim
        self.store = sim.store
        self.method = method
        self.path = path
        self.query_lists = query
        self.query = {k: v[-1] for k, v in query.items()}
        self.headers = headers
        self.raw_body = body
        self.params = params
        self.tenancy = None
        self.user = None
        self._json = None

    @property
    def body(self):
        if self._json is None:
            if not self.raw_body:
                self._json = {}
            else:
                try:
                    self._json = json.loads(self.raw_body.decode("utf-8"))
                except ValueError:
                    raise invalid("The request body is not valid JSON.") from None
                if not isinstance(self._json, dict):
                    raise invalid("The request body must be a JSON object.")
        return self._json

    def q_bool(self, name, default=False):
        value = self.query.get(name)
        if value is None:
            return default
        return value.lower() == "true"


class Reply:
    def __init__(self, status=200, body=None, headers=None, raw=None, content_type="application/json"):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.raw = raw
        self.content_type = content_type

    def payload(self):
        if self.raw is not None:
            return self.raw if isinstance(self.raw, bytes) else self.raw.encode("utf-8")
        if self.body is None:
            return b""
        return json.dumps(self.body, separators=(",", ":")).encode("utf-8")


class _DropConnection(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One buffered write per answer and no Nagle delay: keep-alive clients otherwise wait ~40 ms
    # on delayed ACKs for every request.
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server_version = "ocisim"
    sys_version = ""

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        if self.server.sim.verbose:
            super().log_message(format, *args)

    def _handle(self):
        sim = self.server.sim
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        request_id = self.headers.get("opc-request-id")
        request_id = "{0}/{1}".format(request_id, uuid.uuid4().hex.upper()) if request_id else uuid.uuid4().hex.upper()
        try:
            reply = sim.dispatch(self.command, split.path, self.path, query, self.headers, body)
        except _DropConnection:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        except OciError as err:
            reply = Reply(err.status, {"code": err.code, "message": err.message}, err.headers)
        except Exception as err:  # pylint: disable=broad-except
            # A simulator bug: answer it as a 500 that names itself, never as a dropped connection
            # (which the SDK would silently retry).
            LOG.exception("ocisim: unhandled error for %s %s", self.command, self.path)
            reply = Reply(500, {"code": "InternalError", "message": "ocisim bug: {0!r}".format(err)})
        payload = reply.payload()
        self.send_response(reply.status)
        self.send_header("opc-request-id", request_id)
        if payload or reply.status not in (204,):
            self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            if value is not None:
                self.send_header(name, str(value))
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, sim, port=0):
        self.sim = sim
        super().__init__(("127.0.0.1", port), Handler)


DropConnection = _DropConnection
