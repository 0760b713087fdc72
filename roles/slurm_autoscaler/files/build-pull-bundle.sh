#!/usr/bin/env bash
# Build the pull path's bundle on the operator's machine (slurm_autoscaler, tasks/pull.yml):
#   build-pull-bundle.sh OUT.tar.gz SETTINGS.json NODE_VARS.yml LOCK.yml ROOT/ns/name...
# OUT holds pull.json, node-vars.yml, ocigpu.lock.yml (the cluster's lock file of downloaded
# artifacts, docs/artifacts.md; empty when LOCK.yml does not exist yet) and
# collections/ansible_collections/<ns>/<name> for each
# collection given by its folder. The archive is byte-for-byte the same for the same inputs
# (sorted, fixed times and owners, gzip without a name or time), so an unchanged bundle is not
# copied again.
# The controller serves the bundle to every host of the VCN without a check, so each collection gives
# only what a node needs (an allow-list: plugins roles playbooks meta galaxy.yml MANIFEST.json
# FILES.json COPYING, those it has), never what an operator's runs leave in a checkout; and the build
# fails if a key, a settings file, an inventory, a lock file or a fact cache would go in all the same.
set -euo pipefail
out=$1 settings=$2 node_vars=$3 lock=$4
shift 4
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/collections/ansible_collections"
cp "$settings" "$stage/pull.json"
cp "$node_vars" "$stage/node-vars.yml"
if [ -e "$lock" ]; then cp "$lock" "$stage/ocigpu.lock.yml"; else : > "$stage/ocigpu.lock.yml"; fi
parts=(plugins roles playbooks meta galaxy.yml MANIFEST.json FILES.json COPYING)
for dir in "$@"; do
  name=$(basename "$dir") ns=$(basename "$(dirname "$dir")")
  dest="$stage/collections/ansible_collections/$ns/$name"
  mkdir -p "$dest"
  found=()
  for part in "${parts[@]}"; do
    if [ -e "$dir/$part" ]; then found+=("$part"); fi
  done
  if [ "${#found[@]}" -eq 0 ]; then
    echo "build-pull-bundle.sh: $dir holds none of ${parts[*]}: not a collection" >&2
    exit 1
  fi
  # -h: a development checkout is a link.
  tar -C "$dir" -ch --exclude='__pycache__' --exclude='*.pyc' -- "${found[@]}" | tar -C "$dest" -x
done
# What must never be served: keys, the operator's settings and inventories, lock files (but the one
# given above), fact caches, vault passwords.
refused=$(cd "$stage" && find . -mindepth 1 \( -name '*.mpi_ed25519*' -o -name '*.pem' -o -name '*.key' -o -name 'id_*' \
  -o -name 'cluster.yml' -o -name 'cluster.*.yml' -o -name 'cluster-*.yml' -o -name '*gpu_nodes.yml' \
  -o -name '*.lock.yml' -o -name '.cache' -o -name '*fact*cache*' -o -name '.vault*' -o -name '*vault_pass*' \) \
  ! -path ./ocigpu.lock.yml -print | LC_ALL=C sort)
if [ -n "$refused" ]; then
  echo "build-pull-bundle.sh: refusing to build $out: these would be served to the whole VCN: ${refused//$'\n'/ }" >&2
  exit 1
fi
tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c . | gzip -n -6 > "$out.tmp"
mv -f "$out.tmp" "$out"
