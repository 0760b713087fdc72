#!/usr/bin/env bash
# The collection as a user gets it (`make test` stage install:user):
#
#   1. build the tarball from the checkout (ansible-galaxy collection build)
#   2. a fresh virtual environment outside the checkout with only what the README's install section
#      lists: ansible-core and the collection's requirements.txt (read from the installed tarball)
#   3. ansible-galaxy collection install of the tarball into an empty collections path. Galaxy is not
#      reachable here: the dependencies the README names (ansible.posix, community.general,
#      community.mysql) are copied from the test venv's ansible package into a second, separate path
#   4. against the OCI simulator (the cloud's stand-in, run from the checkout): provision --check,
#      provision, a re-run that changes nothing, the gpu_nodes inventory plugin, teardown - each
#      started from a folder outside the checkout, with an environment that holds no path of it
#   5. execution environments: ansible-builder introspect on the installed collection must list
#      exactly its Python and system dependencies, and ansible-builder create must render a build
#      context from docs/examples/execution-environment.yml
#
# USER_INSTALL_DROP=<path in the collection> builds from a copy of the checkout whose galaxy.yml
# build_ignore also drops that file (a packaging mistake): the stage must then fail.
# USER_INSTALL_KEEP=1 keeps the work folder (printed).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"

work=$(mktemp -d /tmp/ocigpu-user-install.XXXXXX)
sim_pid=''
cleanup() {
  [ -z "$sim_pid" ] || kill "$sim_pid" 2>/dev/null || true
  if [ -n "${USER_INSTALL_KEEP:-}" ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
step() { printf '\n==> %s\n' "$*"; }

step "1. Building the tarball"
src=$OCIGPU_ROOT
if [ -n "${USER_INSTALL_DROP:-}" ]; then
  # A copy of the checkout whose galaxy.yml drops one more file, as a build_ignore mistake would.
  src=$work/src
  mkdir -p "$src"
  tar -C "$OCIGPU_ROOT" --exclude=./.venv --exclude=./.build --exclude=./.git --exclude=./tests/output \
    --exclude=./.ansible -cf - . | tar -C "$src" -xf -
  [ -e "$src/$USER_INSTALL_DROP" ] || die "USER_INSTALL_DROP: $USER_INSTALL_DROP is not in the checkout"
  printf '  - %s\n' "$USER_INSTALL_DROP" >> "$src/galaxy.yml"
  tail -1 "$src/galaxy.yml" | grep -qF "$USER_INSTALL_DROP" || die "galaxy.yml must end with build_ignore"
  echo "   build_ignore also drops: $USER_INSTALL_DROP"
fi
"$VENV/bin/ansible-galaxy" collection build "$src" --output-path "$work/dist" >/dev/null
tarball=$(ls "$work"/dist/ocigpu-cluster-*.tar.gz)
echo "   $(basename "$tarball"): $(du -k "$tarball" | cut -f1) KiB, $(tar -tzf "$tarball" | wc -l) entries"

step "2. A fresh virtual environment with ansible-core and the collection's requirements.txt"
start=$(date +%s)
python3 -m venv "$work/venv"
mkdir -p "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked" requirements.txt
core=$(grep -E '^ansible-core==' tests/constraints.txt)
export PIP_CACHE_DIR=$OCIGPU_CACHE/pip-user-install PIP_DISABLE_PIP_VERSION_CHECK=1
"$work/venv/bin/pip" install -q "$core" -r "$work/unpacked/requirements.txt" -c tests/constraints.txt 2> "$work/pip.log" || { cat "$work/pip.log"; die "pip could not install $core and requirements.txt"; }
version=$("$work/venv/bin/ansible" --version)
echo "   ${version%%$'\n'*}; $("$work/venv/bin/pip" list 2>/dev/null | grep -ciE '^(oci|netaddr) ') of oci, netaddr ($(( $(date +%s) - start ))s)"

step "3. ansible-galaxy collection install into an empty collections path"
mkdir -p "$work/run" "$work/home"
# user CMD...: run in the user's folder with an environment that names no path of the checkout.
user() {
  (cd "$work/run" && env -i HOME="$work/home" PATH="$work/venv/bin:/usr/bin:/bin" LANG=C.UTF-8 \
    ANSIBLE_COLLECTIONS_PATH="$work/collections:$work/deps" ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=0 \
    ANSIBLE_INVENTORY_UNPARSED_WARNING=0 ANSIBLE_PYTHON_INTERPRETER="$work/venv/bin/python" "$@")
}
user ansible-galaxy collection install "$tarball" -p "$work/collections" --no-deps >/dev/null
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections
for dep in ansible/posix community/general community/mysql; do
  mkdir -p "$work/deps/ansible_collections/${dep%/*}"
  cp -a "$site/$dep" "$work/deps/ansible_collections/$dep"
done
installed=$work/collections/ansible_collections/ocigpu/cluster
echo "   installed: ${installed#"$work"/} ($(find "$installed" -type f | wc -l) files); dependencies: ansible.posix community.general community.mysql"

step "4. The playbooks and the inventory plugin as a user runs them, against the OCI simulator"
"$VENV/bin/python" -m tests.ocisim --port 0 --scale 0.01 --write-config "$work/oci/config" \
  > "$work/sim.json" 2> "$work/sim.log" &
sim_pid=$!
for _ in $(seq 50); do [ -s "$work/sim.json" ] && break; sleep 0.2; done
[ -s "$work/sim.json" ] || die "the simulator did not start; see $work/sim.log"
endpoint=$(jq -r .endpoint "$work/sim.json")
compartment=$(jq -r .compartment_id "$work/sim.json")
ssh-keygen -q -t ed25519 -N '' -C user -f "$work/run/id_ed25519"
cat > "$work/run/cluster.yml" <<YAML
cluster_name: user
compartment_id: $compartment
ssh_source_cidrs: [203.0.113.10/32]
ssh_public_key_file: $work/run/id_ed25519.pub
gpu_node_count: 2
gpu_drain: false
oci_config_file: $work/oci/config
oci_service_endpoint: $endpoint
YAML
cat > "$work/run/cluster.gpu_nodes.yml" <<YAML
plugin: ocigpu.cluster.gpu_nodes
compartments: [$compartment]
cluster: user
config_file: $work/oci/config
service_endpoint: $endpoint
YAML
user env | grep -F "$OCIGPU_ROOT" && die "the user's environment names the checkout"
# play NAME LOG ARGS...: a playbook of the installed collection; its recap line, or its tail on failure.
play() {
  local log=$work/$2.log; shift 2
  user ansible-playbook "$@" > "$log" 2>&1 || { tail -30 "$log"; die "ansible-playbook $* failed; see $log"; }
  grep -E '^localhost +: ok=' "$log" | sed 's/^/   /'
}
user ansible-doc ocigpu.cluster.cluster_network > "$work/doc.txt" || die "ansible-doc ocigpu.cluster.cluster_network failed"
echo "   ansible-doc ocigpu.cluster.cluster_network: $(wc -l < "$work/doc.txt") lines"
echo "   provision --check:"
play provision check ocigpu.cluster.provision -e @cluster.yml --check
echo "   provision:"
play provision provision ocigpu.cluster.provision -e @cluster.yml
echo "   provision again:"
play provision rerun ocigpu.cluster.provision -e @cluster.yml
grep -qE '^localhost +: .* changed=0 ' "$work/rerun.log" || die "the re-run changed something; see $work/rerun.log"
user ansible-inventory -i cluster.gpu_nodes.yml --list > "$work/inventory.json" 2> "$work/inventory.log" \
  || die "the inventory plugin failed; see $work/inventory.log"
nodes=$(jq '.gpu_nodes.hosts | length' "$work/inventory.json")
echo "   inventory plugin: $nodes GPU nodes, bastion $(jq -r '.bastion.hosts[0]' "$work/inventory.json")"
[ "$nodes" -eq 2 ] || die "the inventory plugin found $nodes GPU nodes, not 2"
echo "   teardown:"
play teardown teardown ocigpu.cluster.teardown -e @cluster.yml
grep -q 'Nothing billable of user is left.' "$work/teardown.log" || die "teardown left something; see $work/teardown.log"
echo "   nothing billable is left"

step "5. Execution environments: ansible-builder introspect and create"
builder=$(grep -E '^ansible-builder==' tests/constraints.txt)
"$work/venv/bin/pip" install -q "$builder" -c tests/constraints.txt 2> "$work/pip-builder.log" || { cat "$work/pip-builder.log"; die "pip could not install $builder"; }
user ansible-builder introspect --sanitize "$work/collections" > "$work/introspect.txt"
sed 's/^/   /' "$work/introspect.txt"
"$VENV/bin/python" - "$work/introspect.txt" "$installed" <<'PY'
import sys, yaml
found = yaml.safe_load(open(sys.argv[1]))
root = sys.argv[2]
def lines(name):
    return sorted(l.split('#')[0].strip() for l in open('%s/%s' % (root, name)) if l.split('#')[0].strip())
python = sorted(l.split('#')[0].strip() for l in found['python'])
system = sorted(l.split('#')[0].strip() for l in found['system'])
assert python == lines('requirements.txt'), (python, lines('requirements.txt'))
assert system == lines('bindep.txt'), (system, lines('bindep.txt'))
assert all('ocigpu.cluster' in l for l in found['python'] + found['system']), found
print('   introspect lists exactly requirements.txt (%d) and bindep.txt (%d) of ocigpu.cluster' % (len(python), len(system)))
PY
cp docs/examples/execution-environment.yml docs/examples/requirements.yml "$work/run/"
user ansible-builder create -f execution-environment.yml --context "$work/ee-context" > "$work/create.log" 2>&1 \
  || { cat "$work/create.log"; die "ansible-builder create failed"; }
[ -s "$work/ee-context/Containerfile" ] || die "ansible-builder create wrote no Containerfile"
grep -q 'ocigpu.cluster' "$work/ee-context/_build/requirements.yml" || die "the build context does not install ocigpu.cluster"
echo "   ansible-builder create: $(find "$work/ee-context" -type f | wc -l) files, Containerfile of $(wc -l < "$work/ee-context/Containerfile") lines"
step "The collection works as installed from its tarball"
