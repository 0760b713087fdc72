# Shared helpers for the test-infrastructure scripts. Source it; do not run it.
# shellcheck shell=bash

OCIGPU_ROOT=${OCIGPU_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Built artefacts (images, VM disks) live outside the checkout so that a fresh clone on the same
# machine reuses them; each is keyed by a hash of its recipe.
OCIGPU_CACHE=${OCIGPU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ocigpu-cluster}
VENV=${VENV:-$OCIGPU_ROOT/.venv}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# recipe_hash FILE... : a short, stable hash of the given files' contents and names.
recipe_hash() {
  local f
  for f in "$@"; do printf '%s\n' "${f#"$OCIGPU_ROOT"/}"; cat "$f"; done | sha256sum | cut -c1-16
}

# apt_install PKG... : install Debian packages that are not installed yet (updating lists once).
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  if [ ! -f /var/lib/apt/periodic/ocigpu-updated ] || [ -n "$(find /var/lib/apt/periodic/ocigpu-updated -mmin +720 2>/dev/null)" ]; then
    apt-get update -qq >&2
    mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/ocigpu-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
