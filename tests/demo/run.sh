#!/usr/bin/env bash
# `make demo`: rehearse the whole flow against the local OCI simulator, with no cloud account.
#
#   1. start the simulator (tests/ocisim) on 127.0.0.1 with a generated API key
#   2. provision a 2-node BM.GPU4.8 RDMA cluster (network, bastion, instance configuration,
#      cluster network) with playbooks/provision.yml
#   3. run provision again: everything is adopted, nothing changes
#   4. discover the cluster with the gpu_nodes inventory plugin
#   5. tear it down with playbooks/teardown.yml and check that nothing billable is left
#
# DEMO_KEEP=1 leaves the simulator running at the end (its PID and endpoint are printed).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$OCIGPU_ROOT/.build/collections"
export ANSIBLE_CONFIG="$OCIGPU_ROOT/ansible.cfg"

work=${DEMO_DIR:-$OCIGPU_ROOT/.build/demo}
rm -rf "$work"
mkdir -p "$work"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
declare -a done_steps=()
record() { done_steps+=("$(printf '%-58s %4ss' "$1" "$2")"); }

step "1. Starting the OCI simulator"
python -m tests.ocisim --port 0 --write-config "$work/oci/config" > "$work/sim.json" 2> "$work/sim.log" &
sim_pid=$!
cleanup() { if [ -z "${DEMO_KEEP:-}" ]; then kill "$sim_pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
for _ in $(seq 50); do [ -s "$work/sim.json" ] && break; sleep 0.2; done
[ -s "$work/sim.json" ] || die "the simulator did not start; see $work/sim.log"
endpoint=$(jq -r .endpoint "$work/sim.json")
compartment=$(jq -r .compartment_id "$work/sim.json")
echo "simulator pid $sim_pid at $endpoint (region $(jq -r .region "$work/sim.json"))"

ssh-keygen -q -t ed25519 -N '' -C demo -f "$work/id_ed25519"
cat > "$work/cluster.yml" <<YAML
cluster_name: demo
compartment_id: $compartment
ssh_source_cidrs: [203.0.113.10/32]
ssh_public_key_file: $work/id_ed25519.pub
gpu_shape: BM.GPU4.8
gpu_node_count: 2
oci_config_file: $work/oci/config
oci_service_endpoint: $endpoint
YAML
cat > "$work/demo.gpu_nodes.yml" <<YAML
plugin: ocigpu.cluster.gpu_nodes
compartments: [$compartment]
cluster: demo
config_file: $work/oci/config
service_endpoint: $endpoint
YAML
echo "cluster vars: $work/cluster.yml"

run_playbook() {  # run_playbook LABEL LOG PLAYBOOK ARGS...
  local label=$1 log=$2 start; shift 2
  start=$(date +%s)
  ansible-playbook "$@" > "$log" 2>&1 || { tail -40 "$log"; die "$label failed; full log: $log"; }
  grep -E '^localhost +:' "$log" | sed 's/^/   /'
  record "$label" $(( $(date +%s) - start ))
}

step "2. Provisioning: network, bastion, node template, 2-node RDMA cluster network"
run_playbook "provision (create)" "$work/provision-1.log" playbooks/provision.yml -e "@$work/cluster.yml"
sed -n '/Show what was provisioned/,/PLAY RECAP/p' "$work/provision-1.log" | grep -E '"(cluster|bastion|[0-9]+ x)' | sed 's/^ */   /'

step "3. Provisioning again: a re-run adopts what exists and changes nothing"
run_playbook "provision (re-run)" "$work/provision-2.log" playbooks/provision.yml -e "@$work/cluster.yml"
grep -qE '^localhost +: .*changed=0 ' "$work/provision-2.log" || die "the re-run changed something; see $work/provision-2.log"
echo "   changed=0: nothing was created twice"

step "4. Discovering the cluster with the gpu_nodes inventory plugin"
start=$(date +%s)
ansible-inventory -i "$work/demo.gpu_nodes.yml" --graph > "$work/inventory.txt"
sed 's/^/   /' "$work/inventory.txt"
ansible-inventory -i "$work/demo.gpu_nodes.yml" --list > "$work/inventory.json"
jq -r 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars | to_entries[] | "   \(.key): ansible_host=\(.value.ansible_host | s) \(.value.ansible_ssh_common_args // "" | s)"' "$work/inventory.json"
n=$(jq '.gpu_nodes.hosts | length' "$work/inventory.json")
[ "$n" -eq 2 ] || die "expected 2 GPU nodes in the inventory, found $n"
record "inventory discovery" $(( $(date +%s) - start ))

step "5. Tearing down, then checking that nothing billable is left"
run_playbook "teardown" "$work/teardown.log" playbooks/teardown.yml -e "@$work/cluster.yml"
grep -o 'Nothing billable of demo is left.' "$work/teardown.log" | head -n1 | sed 's/^/   /'

step "Demo finished"
printf '   %s\n' "${done_steps[@]}"
calls=$(curl -s "$endpoint/_admin/calls" | jq '[.[]] | add // 0' 2>/dev/null || echo '?')
echo "   OCI API calls served by the simulator: $calls"
echo "   logs and generated files: ${work#"$OCIGPU_ROOT"/}/"
if [ -n "${DEMO_KEEP:-}" ]; then echo "   simulator still running: pid $sim_pid, $endpoint"; fi
