# Debian 13 minbase tree, shared by build-image.sh and build-vm.sh. Source it; do not run it.
# shellcheck shell=bash
#
#   rootfs_tarball  -> prints the path of a cached tarball of `debootstrap --variant=minbase` trixie
#                      (plus systemd, dbus, ca-certificates), building it when missing. The tarball
#                      is keyed by suite, mirror, package set and debootstrap's version.

ROOTFS_SUITE=trixie
ROOTFS_INCLUDE=systemd,systemd-sysv,dbus,ca-certificates

# The mirror this machine's apt sources use (OCIGPU_DEBIAN_MIRROR overrides it).
debian_mirror() {
  local m=${OCIGPU_DEBIAN_MIRROR:-}
  if [ -z "$m" ]; then
    m=$(grep -rhoE '^(URIs:|deb)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
          /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
        | grep -v -- '-security' | grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
  fi
  m=${m:-http://deb.debian.org/debian}
  printf '%s\n' "${m%/}"
}

rootfs_key() {
  printf '%s\n' "$ROOTFS_SUITE" "$(debian_mirror)" minbase "$ROOTFS_INCLUDE" \
    "$(dpkg-query -W -f='${Version}' debootstrap)" | sha256sum | cut -c1-16
}

rootfs_tarball() {
  local mirror key cache tarball work start
  mirror=$(debian_mirror)
  key=$(rootfs_key)
  cache="$OCIGPU_CACHE/rootfs"
  tarball="$cache/$ROOTFS_SUITE-$key.tar"
  if [ -s "$tarball" ]; then
    log "reusing debootstrap tarball $tarball"
    printf '%s\n' "$tarball"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is missing: run tests/infra/host.sh first"
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/debootstrap.XXXXXX")
  log "debootstrap $ROOTFS_SUITE (minbase) from $mirror: about a minute"
  start=$(date +%s)
  if ! debootstrap --variant=minbase --include="$ROOTFS_INCLUDE" "$ROOTFS_SUITE" "$work/rootfs" "$mirror" \
      > "$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    rm -rf "$work"
    die "debootstrap failed"
  fi
  rm -f "$work/rootfs/etc/apt/sources.list"
  cat > "$work/rootfs/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $ROOTFS_SUITE $ROOTFS_SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar --numeric-owner --xattrs -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"
  rm -rf "$work"
  # Tarballs of other keys are dead weight.
  find "$cache" -maxdepth 1 -name "$ROOTFS_SUITE-*.tar" ! -name "$(basename "$tarball")" -delete
  log "debootstrap tarball written in $(( $(date +%s) - start ))s: $tarball"
  printf '%s\n' "$tarball"
}
