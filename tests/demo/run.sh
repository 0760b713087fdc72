#!/usr/bin/env bash
# `make demo`: rehearse the whole flow against the local OCI simulator, with no cloud account.
#
#   1. start the simulator (tests/ocisim) on 127.0.0.1 with a generated API key
#   2. provision a 2-node BM.GPU4.8 RDMA cluster (network, bastion, instance configuration,
#      cluster network) with playbooks/provision.yml
#   3. run provision again: everything is adopted, nothing changes
#   4. discover the cluster with the gpu_nodes inventory plugin
#   5. configure the nodes: each launched instance has a local stand-in (a systemd container at
#      its private IP, started by the simulator's instance hook, tests/demo/standin.sh); the
#      common and slurm roles run on them, then `srun -N2 hostname` runs across the two nodes
#   6. tear it down with playbooks/teardown.yml and check that nothing billable is left
#
# The stand-ins have no GPUs, NVMe disks or RDMA NICs, so the roles that need those are not run.
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

remove_standins() {
  local ids
  mapfile -t ids < <(podman ps -aq --filter label=ocigpu-demo=1)
  [ "${#ids[@]}" -eq 0 ] || podman rm -f -t 2 "${ids[@]}" >/dev/null
  ! podman network exists ocigpu-demo || podman network rm ocigpu-demo >/dev/null
}

step "1. Starting the OCI simulator, with local stand-ins for the instances it launches"
remove_standins
# The demo VCN is 198.18.120.0/22, so the stand-ins live on the machine's own test network.
# One podman network spans both subnets (CNI puts a single subnet on a bridge).
podman network create --subnet 198.18.120.0/22 --gateway 198.18.120.1 ocigpu-demo >/dev/null
python -m tests.ocisim --port 0 --write-config "$work/oci/config" \
  --on-instance "bash $OCIGPU_ROOT/tests/demo/standin.sh" --hook-log "$work/standins.log" \
  > "$work/sim.json" 2> "$work/sim.log" &
sim_pid=$!
cleanup() { if [ -z "${DEMO_KEEP:-}" ]; then kill "$sim_pid" 2>/dev/null || true; remove_standins; fi; }
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
vcn_cidr: 198.18.120.0/22
public_subnet_cidr: 198.18.120.0/24
private_subnet_cidr: 198.18.121.0/24
oci_config_file: $work/oci/config
oci_service_endpoint: $endpoint
YAML
cat > "$work/demo.gpu_nodes.yml" <<YAML
plugin: ocigpu.cluster.gpu_nodes
compartments: [$compartment]
cluster: demo
config_file: $work/oci/config
service_endpoint: $endpoint
# The stand-ins are reached through podman instead of SSH through the bastion.
compose:
  ansible_connection: "'containers.podman.podman'"
  ansible_host: "'ocigpu-demo-' ~ oci_display_name"
  ansible_user: "'root'"
YAML
cat > "$work/standin-vars.yml" <<YAML
# Stand-ins are containers: no metadata service, and Slurm without cgroup containment.
ocigpu_use_imds: false
slurm_proctrack_type: proctrack/linuxproc
slurm_task_plugin: task/none
slurm_jobacct_gather_type: jobacct_gather/linux
YAML
echo "cluster vars: $work/cluster.yml"

run_playbook() {  # run_playbook LABEL LOG PLAYBOOK ARGS...
  local label=$1 log=$2 start; shift 2
  start=$(date +%s)
  ansible-playbook "$@" > "$log" 2>&1 || { tail -40 "$log"; die "$label failed; full log: $log"; }
  grep -E '^[^ ]+ +: ok=' "$log" | sed 's/^/   /' || true  # the play recap, one line per host
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

step "5. Configuring the stand-in nodes (roles common and slurm), then srun across both nodes"
running=0
for _ in $(seq 90); do
  running=$(podman ps -q --filter label=ocigpu-demo=1 --filter status=running | wc -l)
  [ "$running" -ge 3 ] && break; sleep 1
done
podman ps -a --filter label=ocigpu-demo=1 --format '   {{.Names}} {{.Status}}'
[ "$running" -ge 3 ] || die "only $running of 3 stand-ins are running; see $work/standins.log"
run_playbook "configure (common, slurm)" "$work/configure.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --tags common,slurm -e "@$work/standin-vars.yml"
start=$(date +%s)
# slurmd registers a moment after its restart: wait until both nodes are idle.
for _ in $(seq 60); do
  [ "$(podman exec ocigpu-demo-demo-bastion sinfo --noheader --Node --format %t | grep -c '^idle')" -eq 2 ] && break
  sleep 1
done
podman exec ocigpu-demo-demo-bastion sinfo | sed 's/^/   /'
podman exec ocigpu-demo-demo-bastion srun -N2 -l hostname | sort | sed 's/^/   srun: /'
[ "$(podman exec ocigpu-demo-demo-bastion srun -N2 hostname | sort -u | wc -l)" -eq 2 ] || die "srun did not answer from both nodes"
record "srun -N2 across the stand-ins" $(( $(date +%s) - start ))

step "6. Tearing down, then checking that nothing billable is left"
run_playbook "teardown" "$work/teardown.log" playbooks/teardown.yml -e "@$work/cluster.yml"
grep -o 'Nothing billable of demo is left.' "$work/teardown.log" | head -n1 | sed 's/^/   /'
for _ in $(seq 30); do [ -z "$(podman ps -aq --filter label=ocigpu-demo=1)" ] && break; sleep 1; done
echo "   stand-ins left: $(podman ps -aq --filter label=ocigpu-demo=1 | wc -l)"

step "Demo finished"
printf '   %s\n' "${done_steps[@]}"
calls=$(curl -s "$endpoint/_admin/calls" | jq '[.[]] | add // 0' 2>/dev/null || echo '?')
echo "   OCI API calls served by the simulator: $calls"
echo "   logs and generated files: ${work#"$OCIGPU_ROOT"/}/"
if [ -n "${DEMO_KEEP:-}" ]; then echo "   simulator still running: pid $sim_pid, $endpoint"; fi
