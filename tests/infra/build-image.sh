#!/usr/bin/env bash
# Build the molecule test image localhost/ocigpu-test:debian13 (Debian 13 trixie, systemd as PID 1).
#
#   debootstrap --variant=minbase trixie  ->  tarball (image/rootfs.sh; cached by its own hash)
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
. "$HERE/image/rootfs.sh"
IMAGE=${OCIGPU_IMAGE:-localhost/ocigpu-test:debian13}

command -v podman >/dev/null || die "podman is missing: run tests/infra/host.sh first"

recipe=$(recipe_hash "$HERE/build-image.sh" "$HERE/image/rootfs.sh" "$HERE/image/Containerfile" "$HERE/image/packages.txt")
have=$(podman image inspect --format '{{index .Labels "org.ocigpu.recipe"}}' "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$recipe" ] && [ "${OCIGPU_FORCE:-0}" != 1 ]; then
  log "image $IMAGE is up to date (recipe $recipe)"
  exit 0
fi
log "building $IMAGE (recipe $recipe; found '${have:-none}')"

# 1.+2. The debootstrap tarball (cached on its own key; build-vm.sh shares it), imported as the
# base image of that key.
base="localhost/ocigpu-test-base:$ROOTFS_SUITE-$(rootfs_key)"
if ! podman image exists "$base"; then
  tarball=$(rootfs_tarball)
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
