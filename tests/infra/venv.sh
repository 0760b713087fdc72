#!/usr/bin/env bash
# Create .venv with the pinned tools and link the checkout as ansible_collections/ocigpu/cluster.
# Fast when nothing changed: the install is keyed by a hash of the requirement files.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

want=$(recipe_hash "$OCIGPU_ROOT/tests/requirements.txt" "$OCIGPU_ROOT/tests/constraints.txt")
if [ "$(cat "$VENV/.ocigpu-hash" 2>/dev/null)" != "$want" ]; then
  log "creating $VENV (pinned tools, about a minute)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -r "$OCIGPU_ROOT/tests/requirements.txt" -c "$OCIGPU_ROOT/tests/constraints.txt"
  echo "$want" > "$VENV/.ocigpu-hash"
fi

# The collection as Ansible sees it from a checkout (ansible.cfg points collections_path here).
mkdir -p "$OCIGPU_ROOT/.build/collections/ansible_collections/ocigpu"
ln -sfn "$OCIGPU_ROOT" "$OCIGPU_ROOT/.build/collections/ansible_collections/ocigpu/cluster"

