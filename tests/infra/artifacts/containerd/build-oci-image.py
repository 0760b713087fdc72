# Copyright: ocigpu.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build a tiny OCI image archive from the programs of the machine it runs on.

The molecule scenarios of the containerd_rootless role have no registry: this makes an image of a
few host programs (sh, id, cat, ...) and their shared libraries, in the OCI image layout, packed
as one tar that `ctr images import` reads. Nothing is downloaded.

    python3 build-oci-image.py OUT.tar [--name localhost/ocigpu-tiny:latest] [--program /usr/bin/id ...]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import tarfile

DEFAULT_PROGRAMS = ["/bin/sh", "/usr/bin/id", "/usr/bin/cat", "/usr/bin/echo", "/usr/bin/ls", "/usr/bin/sleep"]
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def shared_libraries(program):
    """Absolute paths of the libraries ldd lists for a program (the loader included)."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=False).stdout
    return sorted(set(re.findall(r"(/\S+)\s+\(0x", out)))


def add_file(tar, path):
    """Add a host file at the same path, following symlinks, owned by root."""
    real = os.path.realpath(path)
    info = tar.gettarinfo(real, arcname=path.lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    with open(real, "rb") as handle:
        tar.addfile(info, handle)


def add_dir(tar, path, mode=0o755):
    info = tarfile.TarInfo(path.lstrip("/"))
    info.type = tarfile.DIRTYPE
    info.mode = mode
    tar.addfile(info)


def layer(programs):
    """The root filesystem layer as (gzip bytes, uncompressed sha256)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        files = set()
        for program in programs:
            files.add(program)
            files.update(shared_libraries(program))
        dirs = set()
        for path in files:
            parent = os.path.dirname(path)
            while parent not in ("/", ""):
                dirs.add(parent)
                parent = os.path.dirname(parent)
        for path in sorted(dirs | {"/tmp", "/proc", "/sys", "/dev", "/etc"}):
            add_dir(tar, path, 0o1777 if path == "/tmp" else 0o755)
        for path in sorted(files):
            add_file(tar, path)
        passwd = b"root:x:0:0:root:/:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    uncompressed = raw.getvalue()
    compressed = gzip.compress(uncompressed, mtime=0)
    return compressed, hashlib.sha256(uncompressed).hexdigest()


def blob(tar, data):
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--name", default="localhost/ocigpu-tiny:latest")
    parser.add_argument("--program", action="append", help="program to include (repeatable)")
    args = parser.parse_args()
    programs = args.program or DEFAULT_PROGRAMS

    layer_gz, diff_id = layer(programs)
    config = {
        "architecture": GOARCH.get(platform.machine(), platform.machine()),
        "os": "linux",
        "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
    }
    with tarfile.open(args.out, "w") as tar:
        config_desc = blob(tar, json.dumps(config, sort_keys=True).encode())
        layer_desc = blob(tar, layer_gz)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer_desc}],
        }
        manifest_desc = blob(tar, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **manifest_desc,
                "annotations": {
                    "io.containerd.image.name": args.name,
                    "org.opencontainers.image.ref.name": args.name.rsplit(":", 1)[-1],
                },
            }],
        }
        for name, data in (("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)):
            payload = json.dumps(data, sort_keys=True).encode()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    print(f"{args.out}: {args.name}, {len(layer_gz)} byte layer, {len(programs)} programs")


if __name__ == "__main__":
    main()
