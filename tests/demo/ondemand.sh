#!/usr/bin/env bash
# `make demo-ondemand`: seed 003's on-demand cluster, rehearsed against the local OCI simulator.
#
#   1. the simulator, with stand-ins for the instances it launches (tests/demo/standin.sh runs
#      each instance's user_data as cloud-init does) and a forwarder that lets them reach it
#   2. provision with autoscaling: true and gpu_node_count: 0 (network, bastion, node template
#      with the collection's cloud-init; no GPU node)
#   3. configure the controller over SSH: Slurm with power saving (SuspendTime 30 s here), the
#      resume/suspend programs and the pull server; the cluster has no GPU node
#   4. sbatch -N2: slurmctld calls the resume program -> the simulator creates the cluster
#      network -> its stand-ins boot and run the pull path (tags from the metadata service, bundle
#      and munge key from the controller, the roles against themselves) -> slurmd registers -> the
#      job runs and its output is checked
#   5. 30 s without jobs: the suspend program terminates the cluster network; the stand-ins go
#   6. teardown finds nothing billable
# It prints a timeline with the benchmark figures (a) job -> resume called and (b) resume ->
# registered, split into the simulator's provisioning, boot -> pull start, the pull's configure
# and slurmd's registration. Reproduce: make demo-ondemand (logs in .build/demo-ondemand/).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
DEMO_WORK=${DEMO_DIR:-$OCIGPU_ROOT/.build/demo-ondemand}
rm -rf "$DEMO_WORK"
mkdir -p "$DEMO_WORK"
work=$DEMO_WORK
. "$OCIGPU_ROOT/tests/demo/lib.sh"

SUSPEND_TIME=${DEMO_SUSPEND_TIME:-30}
NODES=${DEMO_NODES:-2}      # the job's node count (tests/perf/pull_bench.sh runs 2, 4 and 8)
FORWARD_PORT=8766
export DEMO_SIM_FORWARD="http://$DEMO_GATEWAY:$FORWARD_PORT"
demo_start=$(date +%s)
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
declare -a timeline=()
mark() { timeline+=("$(printf '%7.1fs  %s' "$(echo "$(date +%s.%N) - $demo_start" | bc)" "$*")"); echo "   [$(date +%T)] $*"; }
on_ctl() { ssh -F "$work/ssh_config" "opc@$bastion_ip" "sudo $(printf '%q ' "$@")"; }
stop_all() {
  [ -z "${FORWARD_PID:-}" ] || kill "$FORWARD_PID" 2>/dev/null || true
  demo_stop
}
run_playbook() {  # run_playbook LABEL LOG PLAYBOOK ARGS...
  local label=$1 log=$2 start; shift 2
  start=$(date +%s)
  ansible-playbook "$@" > "$log" 2>&1 || { tail -40 "$log"; die "$label failed; full log: $log"; }
  grep -E '^[^ ]+ +: ok=' "$log" | sed 's/^/   /' || true
  mark "$label done in $(( $(date +%s) - start ))s"
}

step "1. The simulator and the stand-ins' way to it"
trap stop_all EXIT
trap 'exit 143' TERM INT
demo_start_sim
demo_write_files 0
endpoint=$DEMO_ENDPOINT
# Wheels for the controller's virtual environment (oci, ansible-core) and the nodes' (ansible-core):
# a local mirror, as a site without PyPI access would have. Cached across runs.
wheels=$OCIGPU_CACHE/demo-wheels-cp313
if [ ! -s "$wheels/.done" ]; then
  log "downloading the wheels for the stand-ins (Python 3.13) into $wheels"
  mkdir -p "$wheels"
  pip download -q -d "$wheels" --only-binary=:all: --python-version 3.13 --implementation cp --abi cp313 --abi abi3 \
    --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any oci==2.189.0 ansible-core==2.19.14
  date > "$wheels/.done"
fi
demo_artifacts
ln -sfn "$wheels" "$work/artifacts/wheels"
pip_args="--no-index --find-links http://$DEMO_GATEWAY:$DEMO_ARTIFACT_PORT/wheels/ --trusted-host $DEMO_GATEWAY"
# The controller reaches the simulator through the forwarder: its own OCI config and key.
mkdir -p "$work/ctl-oci"
cp "$(awk -F= '/^key_file/ {print $2}' "$work/oci/config" | tr -d ' ')" "$work/ctl-oci/key.pem"
sed -e "s|^key_file *=.*|key_file=/etc/ocigpu-demo/oci/key.pem|" "$work/oci/config" > "$work/ctl-oci/config"
cat >> "$work/cluster.yml" <<YAML
autoscaling: true
autoscaling_max_nodes: $(( NODES > 4 ? NODES : 4 ))
autoscaling_resume_timeout_minutes: 10
node_vars_file: $work/node-vars.yml
autoscaling_pull_skip_tags: [nvme_scratch]
autoscaling_pull_pip_args: [${pip_args// /, }]
YAML
# The nodes' role variables: the stand-in settings of the push demo, but the lock file, which the
# bundle carries (the pull runs on the node, where the operator's folders are not).
grep -v '^ocigpu_lock_file:' "$work/standin-vars.yml" > "$work/node-vars.yml"
demo_check_vars "$work/node-vars.yml"
cat >> "$work/node-vars.yml" <<YAML
firewall_trust_primary_subnet: false
firewall_trusted_sources: [198.18.121.0/24]
YAML
# The controller: API key auth against the simulator; the CLOUD nodes are the stand-ins' size.
cat >> "$work/group_vars/bastion.yml" <<YAML
slurm_autoscaler_auth_type: api_key
slurm_autoscaler_config_file: /etc/ocigpu-demo/oci/config
slurm_autoscaler_service_endpoint: $DEMO_SIM_FORWARD
slurm_autoscaler_node_options: "CPUs=$(nproc) RealMemory=1000"
slurm_autoscaler_pip_extra_args: [${pip_args// /, }]
YAML
echo "   simulator $endpoint, reached by the stand-ins at $DEMO_SIM_FORWARD"

step "2. Provisioning with autoscaling: true and no static GPU node"
run_playbook "provision (network, controller, node template)" "$work/provision.log" playbooks/provision.yml -e "@$work/cluster.yml"
sed -n '/Show what was provisioned/,/PLAY RECAP/p' "$work/provision.log" | grep -E '"(cluster|bastion|[0-9]+ x|on demand)' | sed 's/^ */   /'
ud_bytes=$(curl -s "$endpoint/_admin/state/instance_configurations" | jq '[.[]?.instanceDetails.launchDetails.metadata.user_data // empty | length] | max // 0')
if [ "$ud_bytes" -eq 0 ] || [ "$ud_bytes" -gt 32000 ]; then die "the node template's user_data is $ud_bytes bytes"; fi
echo "   node template user_data: $ud_bytes bytes of base64 (OCI's limit: 32000)"

step "3. Configuring the controller: Slurm power saving, resume/suspend programs, pull server"
demo_wait_standins 1
python3 tests/demo/forward.py "$DEMO_GATEWAY" "$FORWARD_PORT" 127.0.0.1 "${endpoint##*:}" > "$work/forward.log" 2>&1 &
FORWARD_PID=$!
bastion_ip=$(ansible-inventory -i "$work/demo.gpu_nodes.yml" --list | jq -r 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[.bastion.hosts[0]].ansible_host | s')
ansible bastion -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.copy -a "src=$work/ctl-oci/ dest=/etc/ocigpu-demo/oci/ mode=0644 directory_mode=0755" > "$work/ctl-oci.log"
run_playbook "configure the controller" "$work/configure.log" -i "$work/demo.gpu_nodes.yml" playbooks/configure.yml \
  -e "@$work/cluster.yml" -e "@$work/standin-vars.yml" -e "slurm_autoscaler_suspend_time=$SUSPEND_TIME"
on_ctl sinfo | sed 's/^/   /'
on_ctl grep -E '^(SuspendTime|ResumeTimeout|ResumeProgram|SuspendProgram|NodeName=gpu)' /etc/slurm/slurm.conf | sed 's/^/   slurm.conf: /'
on_ctl systemctl is-active ocigpu-pull-server | sed 's/^/   pull server: /'

step "4. A job for $NODES nodes on a cluster with none"
on_ctl tee /tmp/job.sh >/dev/null <<JOB
#!/bin/bash
#SBATCH -N $NODES
#SBATCH -o /tmp/ondemand-%j.out
srun -l hostname
JOB
t_submit=$(date +%s.%N)
job=$(on_ctl sbatch --parsable --chdir=/tmp /tmp/job.sh)
mark "sbatch -N$NODES: job $job submitted"
t_resume=''
state=''
for _ in $(seq 900); do
  if [ -z "$t_resume" ] && on_ctl grep -q ' resume gpu-' /var/log/ocigpu-autoscaler/autoscaler.log 2>/dev/null; then
    t_resume=$(date +%s.%N); mark "resume program called: $(on_ctl grep ' resume gpu-' /var/log/ocigpu-autoscaler/autoscaler.log | head -1 | cut -d' ' -f5-)"
  fi
  state=$(on_ctl squeue -h -j "$job" -o %T 2>/dev/null || true)
  [ -n "${batch_host:-}" ] || batch_host=$(on_ctl squeue -h -j "$job" -o %B 2>/dev/null | grep -v -e '^n/a$' -e '^$' || true)
  nodes=$(on_ctl sinfo -h -N -o '%N:%t' | tr '\n' ' ')
  [ "$nodes" = "${last_nodes:-}" ] || { mark "nodes: $nodes"; last_nodes=$nodes; }
  if [ -z "${t_registered:-}" ] && [ "$(on_ctl sinfo -h -N -o '%t' | grep -cE '^(alloc|mix|idle|comp)$')" -ge "$NODES" ]; then
    t_registered=$(date +%s.%N); mark "all $NODES on-demand nodes registered"
  fi
  case "$state" in COMPLETED|'') [ -n "${t_registered:-}" ] && break ;; FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
  sleep 1
done
# The batch script's output is on its batch host: read it there, over SSH through the bastion.
[ -n "${batch_host:-}" ] || batch_host=$(on_ctl scontrol show job "$job" | grep -o 'BatchHost=[^ ]*' | cut -d= -f2)
batch_addr=$(on_ctl scontrol show node "$batch_host" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
out=$(ssh -F "$work/ssh_config" -J "opc@$bastion_ip" "opc@$batch_addr" sudo cat "/tmp/ondemand-$job.out" 2>/dev/null || true)
printf '   job output (on %s, %s): %s\n' "$batch_host" "$batch_addr" "$(printf '%s' "$out" | tr '\n' ' ')"
[ "$(printf '%s\n' "$out" | grep -cE '^[0-9]+: ')" -eq "$NODES" ] || {
  on_ctl tail -30 /var/log/ocigpu-autoscaler/autoscaler.log || true
  die "the job did not run on all $NODES on-demand nodes (state ${state:-?}); see $work/"; }
t_done=$(date +%s.%N)
mark "job $job finished on $(printf '%s\n' "$out" | cut -d' ' -f2 | sort | tr '\n' ' ')"

# What each node's pull recorded (roles/slurm_autoscaler/files/ocigpu_pull.py writes its timings).
for c in $(podman ps --filter label=ocigpu-demo=1 --format '{{.Names}}' | grep -v bastion); do
  podman exec "$c" cat /var/lib/ocigpu-pull/pull.json > "$work/$c.pull.json" 2>/dev/null || true
  podman exec "$c" cat /var/log/ocigpu-pull.log > "$work/$c.pull.log" 2>/dev/null || true
  podman inspect -f '{{.State.StartedAt}}' "$c" > "$work/$c.started"
done
on_ctl cat /var/log/ocigpu-autoscaler/autoscaler.log > "$work/autoscaler.log"
on_ctl cat /var/log/ocigpu-autoscaler/pull-server.log > "$work/pull-server.log" 2>/dev/null || true

step "5. $SUSPEND_TIME s without jobs: the suspend program hands the nodes back"
for _ in $(seq 300); do
  if on_ctl grep -qE ' suspend gpu-.*: cluster network .* terminated' /var/log/ocigpu-autoscaler/autoscaler.log; then
    t_suspend=$(date +%s.%N); mark "suspend program: $(on_ctl grep -E ' suspend gpu-.*: cluster network .* terminated' /var/log/ocigpu-autoscaler/autoscaler.log | tail -1 | cut -d' ' -f5-)"; break
  fi
  sleep 2
done
[ -n "${t_suspend:-}" ] || die "the suspend program did not terminate the cluster network"
for _ in $(seq 120); do
  [ "$(podman ps -q --filter label=ocigpu-demo=1 | wc -l)" -eq 1 ] && break; sleep 1
done
left=$(podman ps -q --filter label=ocigpu-demo=1 | wc -l)
mark "stand-ins left: $left (the controller)"
[ "$left" -eq 1 ] || die "the on-demand nodes' stand-ins are still there after the suspend"
on_ctl sinfo -h -N -o '%N %t' | sed 's/^/   /'

step "6. Teardown: nothing billable left"
run_playbook "teardown" "$work/teardown.log" playbooks/teardown.yml -e "@$work/cluster.yml"
grep -o 'Nothing billable of demo is left.' "$work/teardown.log" | head -n1 | sed 's/^/   /'

step "Timeline"
printf '   %s\n' "${timeline[@]}"
python3 tests/perf/ondemand_figures.py "$work" "$t_submit" "${t_resume:-0}" "$t_registered" "$t_done"
echo "   reproduce: make demo-ondemand    (logs: ${work#"$OCIGPU_ROOT"/}/)"
