#!/usr/bin/env bash
# Build the pull path's bundle on the operator's machine (slurm_autoscaler, tasks/pull.yml):
#   build-pull-bundle.sh OUT.tar.gz SETTINGS.json NODE_VARS.yml LOCK.yml ROOT/ns/name...
# OUT holds pull.json, node-vars.yml, ocigpu.lock.yml (the cluster's lock file of downloaded
# artifacts, docs/artifacts.md; empty when LOCK.yml does not exist yet) and
# collections/ansible_collections/<ns>/<name> for each
# collection given by its folder. The archive is byte-for-byte the same for the same inputs
# (sorted, fixed times and owners, gzip without a name or time), so an unchanged bundle is not
# copied again. Checkout folders that an installed collection does not have are left out.
set -euo pipefail
out=$1 settings=$2 node_vars=$3 lock=$4
shift 4
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/collections/ansible_collections"
cp "$settings" "$stage/pull.json"
cp "$node_vars" "$stage/node-vars.yml"
if [ -e "$lock" ]; then cp "$lock" "$stage/ocigpu.lock.yml"; else : > "$stage/ocigpu.lock.yml"; fi
for dir in "$@"; do
  name=$(basename "$dir") ns=$(basename "$(dirname "$dir")")
  mkdir -p "$stage/collections/ansible_collections/$ns"
  # -L: a development checkout is a link; its own build and test folders stay behind.
  tar -C "$dir" -ch --exclude=./.git --exclude=./.venv --exclude=./.build --exclude=./.ci --exclude=./tests \
    --exclude=./molecule --exclude=./docs --exclude=./changelogs --exclude='__pycache__' --exclude='*.pyc' . \
    | tar -C "$stage/collections/ansible_collections/$ns" --one-top-level="$name" -x
done
tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c . | gzip -n -6 > "$out.tmp"
mv -f "$out.tmp" "$out"
