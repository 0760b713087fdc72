# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A throwaway API key and OCI config file for tests that need no server."""
from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def write_config(tmp_path, region='ap-tokyo-1'):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                            serialization.NoEncryption())
    key_file = tmp_path / 'key.pem'
    key_file.write_bytes(pem)
    cfg = tmp_path / 'config'
    cfg.write_text('[DEFAULT]\nuser=ocid1.user.oc1..aaaa\nfingerprint=%s\ntenancy=ocid1.tenancy.oc1..aaaa\n'
                   'region=%s\nkey_file=%s\n' % (':'.join(['aa'] * 16), region, key_file))
    return str(cfg)
