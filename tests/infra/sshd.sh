#!/usr/bin/env bash
# An OpenSSH server for tests/integration/test_host_keys.py, unpacked into the cache and never installed:
# installing Debian's openssh-server would start an sshd on port 22 of this machine. The test runs it
# on 127.0.0.1/127.0.0.2 only, in a mount namespace of its own. Result: $OCIGPU_CACHE/sshd/sshd, a
# wrapper that runs the unpacked binary with its libraries.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dest=$OCIGPU_CACHE/sshd
# The package's version is part of the stamp, so that a security update unpacks the new one.
want=$(apt-cache policy openssh-server 2>/dev/null | awk '/Candidate:/ {print $2}')
if [ -x "$dest/sshd" ] && [ -n "$want" ] && [ "$(cat "$dest/version" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
log "unpacking openssh-server ${want:-?} into $dest (not installed)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root openssh-server libwrap0 >&2)
mkdir -p "$tmp/root"
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
mkdir -p "$OCIGPU_CACHE"
rm -rf "$dest.new"
mv "$tmp/root" "$dest.new"
cat > "$dest.new/sshd" <<WRAP
#!/bin/sh
# openssh-server unpacked by tests/infra/sshd.sh; its libwrap comes from beside it.
LD_LIBRARY_PATH=$dest/lib/x86_64-linux-gnu:$dest/usr/lib/x86_64-linux-gnu exec $dest/usr/sbin/sshd "\$@"
WRAP
chmod 755 "$dest.new/sshd"
printf '%s\n' "$want" > "$dest.new/version"
rm -rf "$dest"
mv "$dest.new" "$dest"
"$dest/sshd" -V 2>&1 | head -1 >&2 || true
