#!/usr/bin/env bash
# Build the molecule test image localhost/ocigpu-test:debian13 (Debian 13 trixie, systemd as PID 1).
#
#   debootstrap --variant=minbase trixie  ->  tarball (cached by its own hash)
#   podman import                          ->  localhost/ocigpu-test-base:<hash>
#   podman build (image/Containerfile)     ->  localhost/ocigpu-test:debian13, labelled with the
#                                             recipe hash; an unchanged recipe returns at once.
#
# Environment: OCIGPU_CACHE (cache folder), OCIGPU_DEBIAN_MIRROR (default: the mirror this machine's
# apt sources use, else http://deb.debian.org/debian), OCIGPU_IMAGE (image name),
# OCIGPU_FORCE=1 (rebuild even when the label matches).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

HERE="$OCIGPU_ROOT/tests/infra"
IMAGE=${OCIGPU_IMAGE:-localhost/ocigpu-test:debian13}
SUITE=trixie
# Only what systemd needs to boot; everything else comes from image/packages.txt in the build step,
# so changing the package list does not redo debootstrap.
DEBOOTSTRAP_INCLUDE=systemd,systemd-sysv,dbus,ca-certificates

default_mirror() {
  local m
  m=$(grep -rhoE '^(URIs:|deb)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
        /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
      | grep -v -- '-security' | grep -oE 'https?://[^[:space:]]+' | head -n1 || true)
  printf '%s\n' "${m:-http://deb.debian.org/debian}"
}
MIRROR=${OCIGPU_DEBIAN_MIRROR:-$(default_mirror)}
MIRROR=${MIRROR%/}

command -v podman >/dev/null || die "podman is missing: run tests/infra/host.sh first"
command -v debootstrap >/dev/null || die "debootstrap is missing: run tests/infra/host.sh first"

recipe=$(recipe_hash "$HERE/build-image.sh" "$HERE/image/Containerfile" "$HERE/image/packages.txt")
have=$(podman image inspect --format '{{index .Labels "org.ocigpu.recipe"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$recipe" ] && [ "${OCIGPU_FORCE:-0}" != 1 ]; then
  log "image $IMAGE is up to date (recipe $recipe)"
  exit 0
fi
log "building $IMAGE (recipe $recipe; found '${have:-none}')"

# 1. The debootstrap tarball, keyed by what goes into it.
rootfs_key=$(printf '%s\n' "$SUITE" "$MIRROR" minbase "$DEBOOTSTRAP_INCLUDE" "$(dpkg-query -W -f='${Version}' debootstrap)" \
  | sha256sum | cut -c1-16)
cache="$OCIGPU_CACHE/image"
tarball="$cache/rootfs-$SUITE-$rootfs_key.tar"
mkdir -p "$cache"
if [ -s "$tarball" ]; then
  log "reusing debootstrap tarball $tarball"
else
  work=$(mktemp -d "$cache/debootstrap.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "debootstrap $SUITE (minbase) from $MIRROR: about a minute"
  start=$(date +%s)
  debootstrap --variant=minbase --include="$DEBOOTSTRAP_INCLUDE" "$SUITE" "$work/rootfs" "$MIRROR" \
    > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  # The tree's apt sources: the same mirror, plus updates and security.
  rm -f "$work/rootfs/etc/apt/sources.list"
  cat > "$work/rootfs/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  log "debootstrap done in $(( $(date +%s) - start ))s; writing tarball"
  tar --numeric-owner --xattrs -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$tarball"
  rm -rf "$work"; trap - EXIT
  # Older tarballs of other keys are dead weight.
  find "$cache" -maxdepth 1 -name "rootfs-$SUITE-*.tar" ! -name "$(basename "$tarball")" -delete
fi

# 2. Import it as the base image (keyed by the tarball).
base="localhost/ocigpu-test-base:$SUITE-$rootfs_key"
if ! podman image exists "$base"; then
  log "podman import -> $base"
  podman import --change 'CMD=["/sbin/init"]' "$tarball" "$base" >/dev/null
fi

# 3. The test image itself.
log "podman build -> $IMAGE (packages from image/packages.txt)"
start=$(date +%s)
podman build --pull=never --layers=false \
  --build-arg "BASE_IMAGE=$base" \
  --label "org.ocigpu.recipe=$recipe" \
  --label "org.ocigpu.base=$base" \
  -t "$IMAGE" -f "$HERE/image/Containerfile" "$HERE/image" 2>&1 \
  | grep -E --line-buffered '^(STEP|COMMIT|Successfully|Error|E:|\+ )' >&2 || true
have=$(podman image inspect --format '{{index .Labels "org.ocigpu.recipe"}}' "$IMAGE" 2>/dev/null || true)
[ "$have" = "$recipe" ] || die "podman build did not produce $IMAGE with recipe $recipe"
log "built $IMAGE in $(( $(date +%s) - start ))s"
podman image prune -f >/dev/null 2>&1 || true
