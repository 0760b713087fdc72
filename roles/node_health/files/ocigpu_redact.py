# -*- coding: utf-8 -*-
# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a diagnostics bundle never holds (`ocigpu diag`, `ocigpu-diag-node`): standard library only,
installed on the Slurm controller and on every GPU node, so that each side removes secrets before
anything leaves the host.

- Files never taken, by name: munge.key, SSH private keys (id_*, *_ed25519/_rsa/_ecdsa without .pub,
  the diag key), *.key, *key.pem, the pull's join.json (the node's join secret).
- Text scrubbed: PEM private key blocks, `Authorization: Bearer ...`, the values of keys named like a
  secret (token, password, secret, munge_key, private_key, pass_phrase, key_file, fingerprint) in JSON,
  YAML and key=value text, OCI API key fingerprints.
"""

import fnmatch
import os
import re

MARK = '<redacted>'

# Base names of files never read into a bundle.
NEVER = ('munge.key', 'join.json', 'id_*', '*.key', '*key.pem', '*_ed25519', '*_rsa', '*_ecdsa', '*_dsa',
         'diag_ed25519', 'authorized_keys', '*.p12', '*.pfx')

_SECRET_WORDS = r'(?:[A-Za-z0-9_.-]*(?:token|password|passwd|secret|munge[_-]key|private[_-]key|pass[_-]?phrase|key[_-]file|' \
    r'fingerprint|api[_-]key|storagepass)[A-Za-z0-9_.-]*)'
_PEM = re.compile(r'-----BEGIN ([A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)-----.*?(?:-----END \1-----|\Z)', re.S)
_BEARER = re.compile(r'(?i)(authorization\s*[:=]\s*"?\s*(?:bearer|basic|token)\s+)[^\s",]+')
# "token": "x" / 'token': 'x' / "token": 12 (JSON, Python reprs)
_JSON = re.compile(r'''(?i)(["']%s["']\s*:\s*)(?![{\[])(?:"(?:\\.|[^"\\])*"|'[^']*'|[^\s,}\]]+)''' % _SECRET_WORDS)
# token: x (YAML), token=x / --token x / TOKEN=x (key=value, environment, argv)
_PAIR = re.compile(r'''(?i)(\b%s\s*(?::(?!//)|=)\s*)(?!<redacted>)("[^"]*"|'[^']*'|[^\s,;&]+)''' % _SECRET_WORDS)
_FLAG = re.compile(r'''(?i)(--%s[ =])(?!<redacted>)(\S+)''' % _SECRET_WORDS)
# An OCI API key's fingerprint: 16 colon-separated hex pairs.
_FINGERPRINT = re.compile(r'\b(?:[0-9a-f]{2}:){15}[0-9a-f]{2}\b', re.I)


def never_taken(path):
    """True for a file that no bundle may hold, by its base name (a public key *.pub is taken)."""
    base = os.path.basename(path)
    if base.endswith('.pub'):
        return False
    return any(fnmatch.fnmatch(base, pattern) for pattern in NEVER)


def scrub(text):
    """The text with its secrets replaced by <redacted>."""
    text = _PEM.sub('-----BEGIN PRIVATE KEY-----\n' + MARK + '\n-----END PRIVATE KEY-----', text)
    text = _BEARER.sub(lambda m: m.group(1) + MARK, text)
    text = _JSON.sub(lambda m: m.group(1) + '"' + MARK + '"', text)
    text = _FLAG.sub(lambda m: m.group(1) + MARK, text)
    text = _PAIR.sub(lambda m: m.group(1) + MARK, text)
    text = _FINGERPRINT.sub(MARK, text)
    return text


def scrub_bytes(data):
    """scrub() for file contents: text as UTF-8 (undecodable bytes kept as escapes)."""
    return scrub(data.decode('utf-8', 'surrogateescape')).encode('utf-8', 'surrogateescape')


def redact_config(value, secret=None):
    """A parsed configuration (the autoscaler's JSON) with its auth section and secret-named keys replaced."""
    secret = secret or re.compile(r'(?i)^(auth|%s)$' % _SECRET_WORDS)
    if isinstance(value, dict):
        return dict((key, MARK if secret.match(str(key)) else redact_config(item, secret)) for key, item in value.items())
    if isinstance(value, list):
        return [redact_config(item, secret) for item in value]
    if isinstance(value, str):
        return scrub(value)
    return value
