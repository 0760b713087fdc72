# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""API keys and verification of OCI's `Authorization: Signature` header (draft-cavage HTTP
signatures, rsa-sha256), the way OCI checks what the SDK signer sends."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import os
import re
import time

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .core import OciError

GENERIC_HEADERS = ("date", "(request-target)", "host")
BODY_HEADERS = ("content-length", "content-type", "x-content-sha256")
BODY_METHODS = ("POST", "PUT", "PATCH")
# OCI refuses requests whose date is more than 5 minutes off.  The simulator keeps the check but
# compares with real time, since the SDK stamps real time.
MAX_CLOCK_SKEW = 300


def generate_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def private_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def public_pem(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def fingerprint(key):
    """The API key fingerprint as the OCI console shows it: MD5 of the DER public key."""
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashlib.md5(der).hexdigest()  # nosec - this is OCI's fingerprint format
    return ":".join(digest[i:i + 2] for i in range(0, 32, 2))


def write_config(path, profile, user, tenancy, region, key, extra=None):
    """Write an OCI SDK config file and its key file (mode 0600) next to it."""
    path = os.path.abspath(path)
    key_path = path + ".key.pem"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem(key))
    lines = ["[{0}]".format(profile), "user={0}".format(user), "fingerprint={0}".format(fingerprint(key)),
             "tenancy={0}".format(tenancy), "region={0}".format(region), "key_file={0}".format(key_path)]
    for name, value in (extra or {}).items():
        lines.append("{0}={1}".format(name, value))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


_PARAM = re.compile(r'(\w+)="([^"]*)"')


def parse_authorization(value):
    if not value or not value.startswith("Signature "):
        return None
    return dict(_PARAM.findall(value[len("Signature "):]))


def unauthenticated(message="The required information to complete authentication was not provided or was incorrect."):
    return OciError(401, "NotAuthenticated", message)


class KeyRing:
    """Registered API keys: keyId '<tenancy>/<user>/<fingerprint>' -> public key."""

    def __init__(self):
        self._keys = {}

    def register(self, tenancy, user, key):
        key_id = "{0}/{1}/{2}".format(tenancy, user, fingerprint(key))
        self._keys[key_id] = (tenancy, user, key.public_key())
        return key_id

    def clear(self):
        self._keys.clear()

    def verify(self, method, path, headers, body):
        """Check the request's signature.  Return (tenancy, user) or raise a 401 OciError.

        headers: a case-insensitive mapping (http.client.HTTPMessage) of the request headers."""
        params = parse_authorization(headers.get("authorization"))
        if not params:
            raise unauthenticated("Missing or malformed Authorization header.")
        if params.get("algorithm", "rsa-sha256") != "rsa-sha256":
            raise unauthenticated("Unsupported signing algorithm.")
        entry = self._keys.get(params.get("keyId", ""))
        if entry is None:
            raise unauthenticated()
        tenancy, user, public_key = entry
        signed = params.get("headers", "date").lower().split()
        required = list(GENERIC_HEADERS)
        if method in BODY_METHODS:
            required += BODY_HEADERS
        absent = [h for h in required if h not in signed]
        if absent:
            raise unauthenticated("Signature must cover the headers: {0}.".format(", ".join(absent)))
        try:
            stamp = email.utils.parsedate_to_datetime(headers.get("date", "")).timestamp()
        except (TypeError, ValueError):
            raise unauthenticated("Missing or invalid date header.") from None
        if abs(time.time() - stamp) > MAX_CLOCK_SKEW:
            raise unauthenticated("The request date is more than 5 minutes off.")
        lines = []
        for name in signed:
            if name == "(request-target)":
                lines.append("(request-target): {0} {1}".format(method.lower(), path))
            else:
                value = headers.get(name)
                if value is None:
                    raise unauthenticated("Signed header '{0}' is missing.".format(name))
                lines.append("{0}: {1}".format(name, value))
        try:
            signature = base64.b64decode(params.get("signature", ""), validate=True)
            public_key.verify(signature, "\n".join(lines).encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            raise unauthenticated() from None
        if method in BODY_METHODS:
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
            if headers.get("x-content-sha256") != digest:
                raise unauthenticated("x-content-sha256 does not match the request body.")
            if str(len(body)) != str(headers.get("content-length", "")).strip():
                raise unauthenticated("content-length does not match the request body.")
        return tenancy, user
