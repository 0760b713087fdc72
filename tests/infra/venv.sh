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

# Ansible runs each module from a zip (AnsiballZ) and compiles its libraries from source on every
# task; the venv's Python keeps the compiled code in a folder of the venv, writable by its owner
# alone (tests/infra/vm/ocigpu_zipimport_cache.py): a third of each local module call of the
# integration tests and the demos. Not part of the collection; the user's install runs without it.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
install -m 0644 "$OCIGPU_ROOT/tests/infra/vm/ocigpu_zipimport_cache.py" "$site/ocigpu_zipimport_cache.py"
install -d -m 0755 "$VENV/zipimport-cache"
printf 'import ocigpu_zipimport_cache; ocigpu_zipimport_cache.install(%s)\n' "'$VENV/zipimport-cache'" \
  > "$site/ocigpu-zipimport-cache.pth"

# The collection as Ansible sees it from a checkout (ansible.cfg points collections_path here).
mkdir -p "$OCIGPU_ROOT/.build/collections/ansible_collections/ocigpu"
ln -sfn "$OCIGPU_ROOT" "$OCIGPU_ROOT/.build/collections/ansible_collections/ocigpu/cluster"

