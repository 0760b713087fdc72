#!/usr/bin/env bash
# `make demo-ondemand`: seed 003's on-demand cluster, rehearsed against the local OCI simulator.
#
#   1. the simulator, with stand-ins for the instances it launches (tests/demo/standin.sh runs
#      each instance's user_data as cloud-init does) and a forwarder that lets them reach it
#   2. provision with autoscaling: true and gpu_node_count: 0 (network, bastion, node template
#      with the collection's cloud-init; no GPU node)
#   3. configure the controller over SSH: Slurm with power saving (SuspendTime 30 s here), the
#      resume/suspend programs and the pull server; the cluster has no GPU node
#   3b. the GPU image baked before any GPU node exists (with the loop; DEMO_BAKE= leaves it out,
#      docs/baking.md): ocigpu.cluster.bake runs ocigpu-pull --bake on a builder from the bundle the
#      controller serves and makes an image of it (the stand-in's container committed); its files are
#      listed (no key, host key, machine-id, bundle or log in it); the node templates and the autoscaler
#      take it; a second bake adopts it. Every GPU node of steps 4 to 5b boots from it and its pull skips
#      the baked roles (each pull's figures, and the bake's run of those roles, at the end)
#   4. jobs of 2, 2 and then 1 node over three capacity sources (docs/capacity.md): a
#      capacity reservation r1 of 2 hosts in AD-1, AD-1's on-demand hosts (none: the reservation
#      holds them) and AD-2's (2 hosts), with slurmctld restarted 2 s into the resume: slurmctld
#      calls the resume program, which hands the request to the autoscaler service (it outlives
#      the restart) -> one cluster network per job, in the first source that has the hosts: one
#      job runs in r1, the next finds r1 full and AD-1 out of hosts and runs in AD-2 (its comment
#      names the sources; the time from the stock-out to the next create is printed) -> the jobs
#      that fit get stand-ins that boot and run the pull path (tags from the metadata service,
#      bundle and munge key from the controller, the roles against themselves) -> slurmd
#      registers -> the jobs run and their output is checked; the last job, submitted once another
#      moved to the next source, finds no source that can hold it: it is told why in its comment
#      within a minute, requeued (never held), and runs once the others' hosts are free
#      (DEMO_SOURCES= : one source, jobs of 2, 1 and 1 nodes at once, hosts for 3)
#   4b. the self-healing loop (DEMO_HEAL= leaves it out): the last job's node is made sick while a
#      job holds it, slurmd's health check drains it, the loop replaces it, the new instance pulls
#      and passes its checks, and a job runs on it under the old Slurm name
#   4c. the periodic active check (with 4b): the controller's sweep runs it through Slurm on the idle
#      nodes; the node made to fall short is drained and replaced by the loop
#   5. 30 s without jobs: the suspend program terminates the cluster networks; the stand-ins go;
#      no node is DOWN
#   5b. a static node of the cluster network (with the loop, DEMO_HEAL): one joins by push, is made
#      sick, and the loop replaces its instance through the pool; the new instance pulls under the old
#      Slurm name, its address is kept in nodes.conf, and a job runs on it
#   6. teardown finds nothing billable
# It prints a timeline with the benchmark figures (a) job -> resume called and (b) resume ->
# registered, split into the simulator's provisioning, boot -> pull start, the pull's configure
# and slurmd's registration, and each job's overhead beyond its cluster networks' provisioning.
# Reproduce: make demo-ondemand (logs in .build/demo-ondemand/).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
DEMO_WORK=${DEMO_DIR:-$OCIGPU_ROOT/.build/demo-ondemand}
rm -rf "$DEMO_WORK"
mkdir -p "$DEMO_WORK"
work=$DEMO_WORK
. "$OCIGPU_ROOT/tests/demo/lib.sh"

SUSPEND_TIME=${DEMO_SUSPEND_TIME:-30}
# The jobs submitted at once (node counts), the GPU shape's host capacity in the simulator, and when
# slurmctld is restarted: the on-demand cluster under real operation (a job that does not fit, a
# configure run that restarts slurmctld in the middle of a resume). DEMO_NODES=N runs one N-node job
# with neither (tests/perf/pull_bench.sh runs 2, 4 and 8).
if [ -n "${DEMO_NODES:-}" ]; then
  JOBS=$DEMO_NODES CAPACITY='' RESTART_AFTER='' HEAL='' SOURCES='' BAKE=''
else
  RESTART_AFTER=${DEMO_RESTART_AFTER-2} HEAL=${DEMO_HEAL-1} SOURCES=${DEMO_SOURCES-1}
  # The baked GPU image, made in step 3b before any GPU node exists (docs/baking.md): every GPU node boots from
  # it (DEMO_BAKE= : from the stock image).
  BAKE=${DEMO_BAKE-$HEAL}
  if [ -n "$SOURCES" ]; then
    # The capacity sources: hosts for 4 of the 5 nodes, 2 in the reservation and 2 in AD-2.
    JOBS=${DEMO_JOBS:-2 2 1} CAPACITY=''
    export DEMO_SIM_ARGS="--availability-domains 2"
  else
    JOBS=${DEMO_JOBS:-2 1 1} CAPACITY=${DEMO_CAPACITY-3}
  fi
fi
NODES=0
for n in $JOBS; do NODES=$((NODES + n)); done
FORWARD_PORT=8766
export DEMO_SIM_FORWARD="http://$DEMO_GATEWAY:$FORWARD_PORT"
demo_start=$(date +%s)
# Each step's banner says when it began, in seconds since the demo started (SECONDS).
step() { printf '\n\033[1m==> %s\033[0m  (at %ss)\n' "$*" "$SECONDS"; }
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
  ansible-playbook "$@" > "$log" 2>&1 || { tail -40 "$log"; ${on_failure:-true}; die "$label failed; full log: $log"; }
  grep -E '^[^ ]+ +: ok=' "$log" | sed 's/^/   /' || true
  mark "$label done in $(( $(date +%s) - start ))s"
}

standin_journals() {  # what slurmd and slurmctld said, for a failed run_playbook (on_failure=standin_journals)
  local c
  for c in $(podman ps --format '{{.Names}}' | grep '^ocigpu-demo-'); do
    echo "== $c: journalctl -u slurmd -u slurmctld (last 40 lines)"
    podman exec "$c" journalctl -u slurmd -u slurmctld --no-pager -n 40 2>&1 | cut -c1-240 || true
  done
}

step "1. The simulator and the stand-ins' way to it"
trap stop_all EXIT
trap 'exit 143' TERM INT
# The shared home: a folder of this machine that every stand-in mounts at /mnt/home (standin.sh), so
# that a cluster user added before any GPU node exists has a home on the nodes that join later.
export DEMO_SHARED_HOME=$work/shared-home
mkdir -p "$DEMO_SHARED_HOME"
demo_start_sim
demo_write_files 0
endpoint=$DEMO_ENDPOINT
if [ -n "$SOURCES" ]; then
  # A capacity reservation of 2 BM.GPU4.8 hosts in AD-1, as a user holds one (made here through the
  # simulator's admin API), then AD-1's and AD-2's on-demand hosts: the sources in cluster.yml.
  mapfile -t ads < <(curl -fsS "$endpoint/_admin/info" | jq -r '.availability_domains[]')
  [ "${#ads[@]}" -ge 2 ] || die "the simulator has ${#ads[@]} availability domain(s); the capacity sources need 2"
  r1=$(curl -fsS -X POST -H 'Content-Type: application/json' "$endpoint/_admin/capacity_reservation" \
    -d "{\"availability_domain\": \"${ads[0]}\", \"shape\": \"BM.GPU4.8\", \"count\": 2, \"display_name\": \"demo-r1\"}" | jq -r .id)
  [[ "$r1" == ocid1.capacityreservation.* ]] || die "the simulator made no capacity reservation ('$r1')"
  cat >> "$DEMO_WORK/cluster.yml" <<YAML
availability_domain: "${ads[0]}"
# Where the GPU nodes' hosts come from, in order (docs/capacity.md).
gpu_capacity_sources:
  - name: r1
    capacity_reservation_id: $r1
  - availability_domain: "${ads[0]}"
  - availability_domain: "${ads[1]}"
YAML
  echo "   capacity sources: r1 (reservation $r1, 2 hosts in ${ads[0]}), ad-1 (${ads[0]}), ad-2 (${ads[1]})"
fi
# Wheels for the controller's virtual environment (oci, ansible-core) and the nodes' (ansible-core,
# Mitogen): a local mirror, as a site without PyPI access would have. Cached across runs; the marker
# names what was downloaded.
wheels=$OCIGPU_CACHE/demo-wheels-cp313
want_wheels="oci==2.189.0 ansible-core==2.19.14 mitogen==0.3.54"
if [ "$(cat "$wheels/.done" 2>/dev/null)" != "$want_wheels" ]; then
  log "downloading the wheels for the stand-ins (Python 3.13) into $wheels"
  mkdir -p "$wheels"
  # shellcheck disable=SC2086  # one argument per requirement
  pip download -q -d "$wheels" --only-binary=:all: --python-version 3.13 --implementation cp --abi cp313 --abi abi3 \
    --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any $want_wheels
  echo "$want_wheels" > "$wheels/.done"
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
# Cluster users (docs/cluster-users.md): alice is added before any GPU node exists, and runs a job.
cluster_users: true
# Twice the jobs' nodes: nodes handed back power down for SuspendTimeout (600 s); a requeued job gets others.
autoscaling_max_nodes: $(( NODES * 2 > 4 ? NODES * 2 : 4 ))
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
if [ -n "$HEAL" ]; then
  # The self-healing loop on (step 4b; DEMO_HEAL= leaves it off). Stand-ins have no GPU, so the
  # loop also mends the check a stand-in can fail (container_paths); they go in a second, so Slurm
  # need not wait 600 s for a power down.
  cat > "$work/heal-vars.yml" <<'YAML'
autoscaling_heal: true
slurm_autoscaler_heal_checks: [gpu_count, xid, rdma_links, nvme_scratch, nccl_active, container_paths]
slurm_autoscaler_suspend_timeout: 30
# The sweep of periodic active checks on the controller (step 4c starts it by hand).
node_health_active_interval: 86400
node_health_active_sweep_every: 3600
YAML
  demo_check_vars "$work/heal-vars.yml"
  # With the loop on, every node runs the active NCCL check in its pull before slurmd starts. The
  # stand-ins' all_reduce_perf replays a recorded BM.GPU4.8 run (tests/demo/all_reduce_perf-standin.sh),
  # so the check is told the shape, and the sizes of that run.
  cat >> "$work/node-vars.yml" <<'YAML'
nccl_tests_shape: BM.GPU4.8
nccl_tests_active_binary: /usr/local/bin/all_reduce_perf
nccl_tests_active_args: "-b 10G -e 10G -n 20 -w 5"
YAML
fi
python3 tests/demo/forward.py "$DEMO_GATEWAY" "$FORWARD_PORT" 127.0.0.1 "${endpoint##*:}" > "$work/forward.log" 2>&1 &
FORWARD_PID=$!
bastion_ip=$(ansible-inventory -i "$work/demo.gpu_nodes.yml" --list | jq -r 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[.bastion.hosts[0]].ansible_host | s')
ansible bastion -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.copy -a "src=$work/ctl-oci/ dest=/etc/ocigpu-demo/oci/ mode=0644 directory_mode=0755" > "$work/ctl-oci.log"
run_playbook "configure the controller" "$work/configure.log" -i "$work/demo.gpu_nodes.yml" playbooks/configure.yml \
  -e "@$work/cluster.yml" -e "@$work/standin-vars.yml" -e "slurm_autoscaler_suspend_time=$SUSPEND_TIME" \
  ${HEAL:+-e "@$work/heal-vars.yml"}
on_ctl sinfo | sed 's/^/   /'
on_ctl grep -E '^(SuspendTime|ResumeTimeout|ResumeProgram|SuspendProgram)' /etc/slurm/slurm.conf | sed 's/^/   slurm.conf: /'
on_ctl grep -E '^NodeName=gpu' /etc/slurm/nodes.conf | sed 's/^/   nodes.conf: /'
on_ctl systemctl is-active ocigpu-pull-server | sed 's/^/   pull server: /'
# No GPU node exists yet, and the lock file already holds every file the joining nodes download
# (configure.yml locks them for the nodes that join later, docs/artifacts.md).
locked=$(python3 -c 'import sys, yaml; print(" ".join(sorted(k.split("/")[0] for k in yaml.safe_load(open(sys.argv[1]))["artifacts"])))' "$work/demo.lock.yml")
echo "   lock file before any GPU node: $locked"
for c in bypass4netns cni_plugins containerd enroot pyxis rootlesskit runc slirp4netns; do
  [[ " $locked " == *" $c "* ]] || die "the lock file has no entry for $c before the first node joins: $locked"
done
cp "$work/demo.lock.yml" "$work/lock-before-join.yml"
# A cluster user, added while no GPU node exists: the nodes that join apply the directory at boot.
ssh-keygen -q -t ed25519 -N '' -C alice -f "$work/alice_ed25519"
run_playbook "add the cluster user alice" "$work/user-add.log" -i "$work/demo.gpu_nodes.yml" playbooks/cluster_user.yml \
  -e @"$work/cluster.yml" -e cluster_user_name=alice -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'"
echo "   alice: $(on_ctl id alice), before any GPU node exists"
as_alice() { ssh -F "$work/ssh_config" -i "$work/alice_ed25519" -o IdentitiesOnly=yes "alice@$bastion_ip" "$@" 2>>"$work/users.log"; }
ocigpu_status "configured; no GPU node has an instance yet"
{ [ -z "$(status_of gpu-1 instance_id)" ] && [ -z "$(status_of gpu-1 instance_state)" ]; } \
  || die "ocigpu status shows an instance for gpu-1 before any job; see $work/status-$status_n.json"

if [ -n "$BAKE" ]; then
  step "3b. Baking the GPU image from the bundle the controller serves; the node templates and the autoscaler take it"
  # Before any GPU node exists: every node from here on (step 4's, the loop's new instances, the static
  # node's) boots from the baked image. ocigpu.cluster.bake launches a builder, runs ocigpu-pull --bake
  # there, makes the image (the stand-in's container committed, tests/demo/standin.sh) and terminates it.
  # Its run on the builder is the part of a pull that the image saves: the stock image's figure below.
  # The builder is reached through the bastion, with the demo's key on both hops (the jump takes the key
  # from ansible_ssh_private_key_file, as provision.yml's hosts do); 5 minutes to answer SSH, not 30.
  bake_args=(-e "@$work/cluster.yml" -e "ansible_ssh_private_key_file=$work/id_ed25519" -e boot_wait_timeout=300)
  run_playbook "bake" "$work/bake.log" playbooks/bake.yml "${bake_args[@]}"
  sed -n '/Show the image/,/PLAY RECAP/p' "$work/bake.log" | grep -E '"(image|bake digest|kept)' | sed 's/^ */   /'
  # The builder's run of ocigpu-pull --bake, as the task timer at the end of the log has it.
  bake_run=$(grep -E '^Run ocigpu-pull --bake on the builder .* -+ [0-9.]+s$' "$work/bake.log" | grep -oE '[0-9.]+s$' | tail -1 || true)
  echo "   the bake's run on the builder (ansible-core and the baked roles, from the stock image): ${bake_run:-?}"
  image_id=$(grep -oE '"image ocid1\.image\.[^ ]+' "$work/bake.log" | tail -1 | cut -d' ' -f2)
  [[ "$image_id" == ocid1.image.* ]] || die "the bake named no image; see $work/bake.log"
  podman_image=$(podman images -q --filter "label=ocigpu-demo-image=$image_id" | head -1)
  [ -n "$podman_image" ] || die "no stand-in image was made for $image_id"
  [ -z "${DEMO_JOIN_BENCH_DIR:-}" ] || { mkdir -p "$DEMO_JOIN_BENCH_DIR"; echo "$podman_image" > "$DEMO_JOIN_BENCH_DIR/image"; }
  # What the image holds: its manifest and the baked software; never a secret, a host key, the builder's
  # identity or its logs (the list of the image's files is kept beside the logs).
  podman run --rm --entrypoint /bin/sh "$podman_image" -c 'find / -xdev \( -path /proc -o -path /sys \) -prune -o -print' \
    > "$work/baked-image-files.txt"
  echo "   the image holds $(wc -l < "$work/baked-image-files.txt") paths; its manifest:"
  podman run --rm --entrypoint /bin/cat "$podman_image" /etc/ocigpu/baked.json | jq -c '{collection, roles, bundle_digest: .bundle_digest[:12], ansible_core}' | sed 's/^/     /'
  leaks=$(grep -E '^/etc/ssh/ssh_host_|^/etc/munge/munge\.key$|/\.ssh/authorized_keys$|/\.ssh/id_|mpi_ed25519|^/var/lib/cloud/instance|^/var/lib/ocigpu-pull/.|^/var/log/ocigpu-pull\.log$|^/opt/ocigpu-pull/bundle|^/opt/ocigpu-pull/join\.json$|^/etc/default/ocigpu-pull$|^/root/\.ansible/tmp/.' \
    "$work/baked-image-files.txt" || true)
  [ -z "$leaks" ] || die "the baked image holds what it must not: $(tr '\n' ' ' <<< "$leaks")"
  machine_id=$(podman run --rm --entrypoint /bin/cat "$podman_image" /etc/machine-id 2>/dev/null || true)
  [ -z "$machine_id" ] || die "the baked image keeps the builder's machine-id ($machine_id)"
  for want in /etc/ocigpu/baked.json /opt/ocigpu-pull/venv/bin/ansible-playbook /usr/bin/enroot \
      /etc/systemd/system/munge.service.d/ocigpu-munge-key.conf /etc/systemd/system/slurmd.service.d/ocigpu-munge-key.conf; do
    grep -qx "$want" "$work/baked-image-files.txt" || die "the baked image lacks $want"
  done
  echo "   no SSH host key, munge key, MPI key, authorized_keys, machine-id, cloud-init or pull state, bundle or log in it"
  # The node templates take the newest baked image (provision.yml), and the controller's autoscaler the new
  # templates (configure.yml --tags slurm_autoscaler: that role alone, as docs/baking.md says). From here on,
  # in cluster.yml.
  echo 'gpu_image_bake: true' >> "$work/cluster.yml"
  run_playbook "provision with the baked image" "$work/provision-baked.log" playbooks/provision.yml -e "@$work/cluster.yml"
  grep -oE 'GPU image of the node templates: [^"]+' "$work/provision-baked.log" | sed 's/^/   /'
  grep -q "GPU image of the node templates: baked image .*$image_id" "$work/provision-baked.log" \
    || die "the node templates did not take the baked image $image_id; see $work/provision-baked.log"
  run_playbook "configure the controller with the new templates" "$work/configure-baked.log" -i "$work/demo.gpu_nodes.yml" \
    playbooks/configure.yml --tags slurm_autoscaler -e "@$work/cluster.yml" -e "@$work/standin-vars.yml" -e "slurm_autoscaler_suspend_time=$SUSPEND_TIME" \
    ${HEAL:+-e "@$work/heal-vars.yml"}
  # The bake again, with the same inputs: the image is adopted, nothing is made.
  run_playbook "bake again (same bundle)" "$work/bake-again.log" playbooks/bake.yml "${bake_args[@]}"
  grep -q "image $image_id .*: adopted" "$work/bake-again.log" || die "the second bake did not adopt $image_id; see $work/bake-again.log"
  grep -q 'Launch the builder' "$work/bake-again.log" && grep -A2 'Launch the builder' "$work/bake-again.log" | grep -q '^changed' \
    && die "the second bake launched a builder"
  echo "   bake again with the same bundle: image $image_id adopted, no builder launched"
fi

step "4. Jobs of ${JOBS// /, } node(s)$(if [ -n "$SOURCES" ]; then echo ' (the last once another moved to the next source)'; else echo ' at once'; fi) on a cluster with none${CAPACITY:+; hosts for $CAPACITY nodes}${SOURCES:+; hosts for 4 in three sources}${RESTART_AFTER:+; slurmctld restarted ${RESTART_AFTER}s into the resume}"
set_hosts() {  # set_hosts HOSTS [AD]: the simulator's BM.GPU4.8 hosts (null: no limit), in one AD or every AD
  curl -fsS -X POST -H 'Content-Type: application/json' "$endpoint/_admin/capacity" \
    -d "{\"shape\": \"BM.GPU4.8\", \"hosts\": $1${2:+, \"availability_domain\": \"$2\"}}" >/dev/null
}
[ -z "$CAPACITY" ] || set_hosts "$CAPACITY"
if [ -n "$SOURCES" ]; then
  # AD-1 has the reservation's 2 hosts and no other; AD-2 has 2.
  set_hosts 2 "${ads[0]}"; set_hosts 2 "${ads[1]}"
fi
declare -a job_ids=() job_sizes=()
declare -A job_told=() job_moved=() job_done=() job_host=() job_completed_once=()
i=0
njobs=$(wc -w <<< "$JOBS")
for n in $JOBS; do
  i=$((i + 1))
  # The last job is alice's, from her own login: it runs as her on a node that did not exist when
  # she was added, and says who it runs as.
  task='hostname'
  # shellcheck disable=SC2016  # expands in the job, on the node
  [ "$i" -ne "$njobs" ] || task='sh -c '\''echo "$(hostname) $(id -un)"'\'
  on_ctl tee "/tmp/job$i.sh" >/dev/null <<JOB
#!/bin/bash
#SBATCH -N $n
#SBATCH -o /tmp/ondemand-%j.out
srun -l $task
JOB
done
# A hostile cluster user: alice holds 20 idle and 5 trickling connections to the pull server through
# the whole resume, opening a new one whenever the server cuts one off. Every node joins all the same
# (the handshake and reads run in each connection's own thread, with a timeout).
pull_addr=$(on_ctl ss -Htln 'sport = :8740' | awk '{ print $4 }' | cut -d: -f1 | head -1)
as_alice 'cat > ~/hold_connections.py; rm -f ~/hold_connections.stop' < tests/demo/hold_connections.py
hold_pid=$(as_alice "nohup python3 ~/hold_connections.py $pull_addr 8740 20 5 1800 < /dev/null > ~/hold_connections.log 2>&1 & echo \$!")
if [ -z "$pull_addr" ] || [ -z "$hold_pid" ]; then die "could not start alice's connection holder (pull server at '$pull_addr')"; fi
t_submit=$(date +%s.%N)
declare -A job_submitted=()
submit_job() {  # submit_job I N: the I-th job script (of N nodes); the last is alice's, from her own login
  local id
  if [ "$1" -eq "$njobs" ]; then
    id=$(as_alice sbatch --parsable --chdir=/tmp "/tmp/job$1.sh"); alice_job=$id
  else
    id=$(on_ctl sbatch --parsable --chdir=/tmp "/tmp/job$1.sh")
  fi
  job_ids+=("$id"); job_sizes+=("$2"); job_submitted[$id]=$(date +%s.%N)
  job_list=$(IFS=,; echo "${job_ids[*]}")
}
i=0 late=''
for n in $JOBS; do
  i=$((i + 1))
  # With the capacity sources the last job comes once another has moved to the next source: the two
  # 2-node jobs take r1 and ad-2 whichever wins the race for r1, and the last finds every source full.
  if [ -n "$SOURCES" ] && [ "$i" -eq "$njobs" ]; then late=$n; continue; fi
  submit_job "$i" "$n"
done
mark "submitted: $(for k in "${!job_ids[@]}"; do printf 'job %s (-N%s) ' "${job_ids[$k]}" "${job_sizes[$k]}"; done)"
# read_output JOB HOST: the batch script's output, read on its batch host over SSH through the bastion
# as soon as the job ends (its stand-in goes SuspendTime later).
read_output() {
  local addr out
  addr=$(on_ctl scontrol show node "$2" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
  out=$(ssh -F "$work/ssh_config" -J "opc@$bastion_ip" "opc@$addr" sudo cat "/tmp/ondemand-$1.out" 2>/dev/null || true)
  printf '%s\n' "$out" > "$work/job-$1.out"
  printf '%s' "$out" | tr '\n' ' '
}
# node_reason NODE: the node's reason in slurmctld, without who set it and when.
run_hostname() {  # run_hostname NODE TRIES WHAT: a job running hostname on NODE, every 2 s up to TRIES looks; sets ran_job, ran_host
  local st=''
  ran_job=$(on_ctl sbatch --parsable -w "$1" -o "/tmp/ondemand-%j.out" --chdir=/tmp --wrap hostname)
  for _ in $(seq "$2"); do
    st=$(on_ctl scontrol -o show job "$ran_job" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
    sleep 2
  done
  [ "$st" = COMPLETED ] || die "the job $ran_job on $3 ended $st"
  ran_host=$(read_output "$ran_job" "$1" | tr -d ' ')
}
node_reason() { on_ctl scontrol -o show node "$1" | grep -o 'Reason=.*' | cut -c8- | sed 's/ \[.*//' || true; }
t_resume=''; restarted=''; down_seen=''
declare -A node_registered=()
for _ in $(seq 1500); do
  if [ -n "$late" ] && { [ "${#job_moved[@]}" -gt 0 ] || [ "$(echo "$(date +%s.%N) - $t_submit > 180" | bc)" -eq 1 ]; }; then
    submit_job "$njobs" "$late"
    mark "submitted: job $alice_job (-N$late), alice's, once a job moved to the next source"; late=''
  fi
  if [ -z "$t_resume" ] && on_ctl grep -q ' resume gpu-' /var/log/ocigpu-autoscaler/autoscaler.log 2>/dev/null; then
    t_resume=$(date +%s.%N); mark "resume program called: $(on_ctl grep ' resume gpu-' /var/log/ocigpu-autoscaler/autoscaler.log | head -1 | cut -d' ' -f5-)"
  fi
  if [ -n "$RESTART_AFTER" ] && [ -n "$t_resume" ] && [ -z "$restarted" ] \
      && [ "$(echo "$(date +%s.%N) - $t_resume >= $RESTART_AFTER" | bc)" -eq 1 ]; then
    on_ctl systemctl restart slurmctld; restarted=1
    mark "slurmctld restarted (a configure run that changes slurm.conf does this)"
  fi
  # One look at slurmctld a round, the jobs then the nodes: each ssh session and sudo takes processor time from
  # the stand-ins that pull meanwhile on this machine. A slurmctld too busy to answer in time ("Socket timed
  # out") leaves "unreachable" in place of either list.
  # shellcheck disable=SC2016  # $1 is the job list, expanded by the controller's shell
  look=$(on_ctl sh -c 'echo @@jobs; squeue -h -j "$1" -o "%i|%T|%B|%k" 2>/dev/null || echo unreachable
    echo @@nodes; sinfo -h -N -o "%N:%t" 2>/dev/null || echo unreachable' sh "$job_list" 2>/dev/null) || look=''
  queue=$(sed -n '/^@@jobs$/,/^@@nodes$/{/^@@/d;p}' <<< "$look")
  nodes_seen=$(sed -n '/^@@nodes$/,${/^@@/d;p}' <<< "$look")
  [ -n "$look" ] || queue=unreachable
  if [ "$queue" != unreachable ]; then
    for k in "${!job_ids[@]}"; do
      id=${job_ids[$k]}
      line=$(printf '%s\n' "$queue" | grep "^$id|" || true)
      IFS='|' read -r _ jstate jhost jcomment <<< "$line"
      # The batch host of the current attempt only: a job requeued after a failed resume is PENDING
      # again, and the host of its failed attempt is gone.
      [ -z "$line" ] || [ "$jhost" = n/a ] || [ -z "$jhost" ] || job_host[$id]=$jhost
      [ "${jstate:-}" != PENDING ] || unset "job_host[$id]"
      # A comment that says where the job runs after other sources ran out is no wait.
      if [ -z "${job_moved[$id]:-}" ] && [[ "${jcomment:-}" == ocigpu-autoscaler:*'running in '* ]]; then
        job_moved[$id]=$jcomment
        mark "job $id moved to the next source: ${jcomment}"
      elif [ -z "${job_told[$id]:-}" ] && [[ "${jcomment:-}" == ocigpu-autoscaler:* ]] && [[ "$jcomment" != *'running in '* ]]; then
        job_told[$id]=$(echo "$(date +%s.%N) - ${job_submitted[$id]:-$t_submit}" | bc)
        mark "job $id told after ${job_told[$id]}s: ${jcomment}"
      fi
      # A job missing from squeue's answer has ended only if scontrol says so, or has forgotten a job
      # that was seen on a host: a job requeued after a failed resume can be missing from one answer.
      if [ -z "$line" ] && [ -z "${job_done[$id]:-}" ]; then
        jinfo=$(on_ctl scontrol -o show job "$id" 2>&1 || true)
        jstate=$(printf '%s' "$jinfo" | grep -o 'JobState=[A-Z_]*\|Invalid job id' | head -1 || true)
        case $jstate in
          JobState=COMPLETED) jstate=COMPLETED ;;
          'Invalid job id') if [ -n "${job_host[$id]:-}" ]; then jstate=COMPLETED; else jstate=UNKNOWN; fi ;;
          *) jstate=${jstate#JobState=} ;;
        esac
      fi
      # Ended: COMPLETED in two answers in a row (never a passing state of a requeue), read on the batch
      # host that scontrol names for it.
      if [ -z "${job_done[$id]:-}" ] && [ "${jstate:-}" = COMPLETED ]; then
        if [ -z "${job_completed_once[$id]:-}" ]; then
          job_completed_once[$id]=1
        else
          jinfo=$(on_ctl scontrol -o show job "$id" 2>&1 || true)
          bhost=$(printf '%s' "$jinfo" | grep -o 'BatchHost=[^ ]*' | cut -d= -f2 || true)
          [ -z "$bhost" ] || job_host[$id]=$bhost
          job_done[$id]=$(date +%s.%N)
          last_ended_host=${job_host[$id]:-}
          mark "job $id ended on ${job_host[$id]:-?} ($(printf '%s' "$jinfo" | grep -o 'JobState=[^ ]*\|Restarts=[^ ]*\|ExitCode=[^ ]*' | tr '\n' ' ')): $(read_output "$id" "${job_host[$id]:-}")"
        fi
      else
        unset "job_completed_once[$id]"
      fi
      case "${jstate:-}" in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) die "job $id ended $jstate" ;; esac
    done
    # No answer from sinfo this round: nothing is compared.
    if [ -z "$look" ] || [ "$nodes_seen" = unreachable ]; then sleep 1; continue; fi
    nodes=$(tr '\n' ' ' <<< "$nodes_seen")
    [ "$nodes" = "${last_nodes:-}" ] || { mark "nodes: $nodes"; last_nodes=$nodes; }
    # When each node is first seen registered (figure (b) per job; a look about every second or two).
    for nr in $(tr ' ' '\n' <<< "$nodes" | grep -E ':(alloc|mix|idle|comp)$' | cut -d: -f1); do
      [ -n "${node_registered[$nr]:-}" ] || node_registered[$nr]=$(date +%s.%N)
    done
    # A DOWN node is recorded once, with the reason slurmctld gives at the time.
    for dn in $(tr ' ' '\n' <<< "$nodes" | grep ':down' | cut -d: -f1); do
      [[ " $down_seen " == *" $dn:"* ]] && continue
      dreason=$(node_reason "$dn" | cut -c1-120)
      down_seen="$down_seen $dn: ${dreason:-no reason};"; mark "DOWN: $dn: ${dreason:-no reason}"
    done
    # figure (b): every node of the jobs that were not told to wait is registered
    want=0
    for k in "${!job_ids[@]}"; do [ -n "${job_told[${job_ids[$k]}]:-}" ] || want=$((want + job_sizes[k])); done
    if [ -z "${t_registered:-}" ] && [ "$(tr ' ' '\n' <<< "$nodes" | grep -cE ':(alloc|mix|idle|comp)$')" -ge "$want" ]; then
      t_registered=$(date +%s.%N); mark "all $want on-demand nodes of the jobs that fit registered"
      for nr in "${!node_registered[@]}"; do echo "$nr ${node_registered[$nr]}"; done > "$work/registered.txt"
      # slurmctld's own times (a look of this loop can take seconds when slurmctld is busy)
      on_ctl grep -h ' now responding$' /var/log/slurm/slurmctld.log > "$work/slurmctld-responding.txt" 2>/dev/null || true
      # What each node's pull recorded (roles/slurm_autoscaler/files/ocigpu_pull.py writes its timings).
      for c in $(podman ps --filter label=ocigpu-demo=1 --format '{{.Names}}' | grep -v bastion); do
        podman exec "$c" cat /var/lib/ocigpu-pull/pull.json > "$work/$c.pull.json" 2>/dev/null || rm -f "$work/$c.pull.json"
        podman exec "$c" cat /var/log/ocigpu-pull.log > "$work/$c.pull.log" 2>/dev/null || true
        podman inspect -f '{{.State.StartedAt}}' "$c" > "$work/$c.started"
        podman exec "$c" cat /opt/ocigpu-pull/bundle/ocigpu.lock.yml > "$work/$c.lock.yml" 2>/dev/null || rm -f "$work/$c.lock.yml"
        # The join benchmark's bundle: a baked node's, as its pull left it (no secret: join.json is gone).
        if [ -n "${DEMO_JOIN_BENCH_DIR:-}" ] && [ ! -d "$DEMO_JOIN_BENCH_DIR/bundle" ] && jq -e .baked "$work/$c.pull.json" >/dev/null 2>&1; then
          podman cp "$c:/opt/ocigpu-pull/bundle" "$DEMO_JOIN_BENCH_DIR/bundle"
        fi
      done
    fi
  fi
  [ -n "$late" ] || [ "${#job_done[@]}" -lt "${#job_ids[@]}" ] || break
  sleep 1
done
t_done=$(date +%s.%N)
as_alice 'touch ~/hold_connections.stop'
for _ in $(seq 10); do as_alice "kill -0 $hold_pid" 2>/dev/null || break; sleep 1; done
hold_said=$(as_alice 'cat ~/hold_connections.log' | tail -1)
echo "   alice's connections to the pull server during the joins: $hold_said"
grep -q '^held for ' <<< "$hold_said" || die "alice's connection holder did not finish: $hold_said"
on_ctl cat /var/log/ocigpu-autoscaler/autoscaler.log > "$work/autoscaler.log"
on_ctl cat /var/log/ocigpu-autoscaler/pull-server.log > "$work/pull-server.log" 2>/dev/null || true
problems=()
for k in "${!job_ids[@]}"; do
  id=${job_ids[$k]}
  [ -n "${job_done[$id]:-}" ] || { problems+=("job $id did not end"); continue; }
  got=$(grep -cE '^[0-9]+: ' "$work/job-$id.out" || true)
  [ "$got" -eq "${job_sizes[$k]}" ] || problems+=("job $id answered from $got of its ${job_sizes[$k]} node(s)")
done
# alice's job ran as her on a node that joined after she was added.
if grep -qE '^[0-9]+: [-a-z0-9]+ alice$' "$work/job-$alice_job.out"; then
  echo "   alice's job $alice_job ran as alice on a node that joined after she was added: $(tr '\n' ' ' < "$work/job-$alice_job.out")"
else
  problems+=("alice's job $alice_job did not run as alice: $(tr '\n' ' ' < "$work/job-$alice_job.out")")
fi
if [ -n "$SOURCES" ] || { [ -n "$CAPACITY" ] && [ "$NODES" -gt "$CAPACITY" ]; }; then
  [ "${#job_told[@]}" -ge 1 ] || problems+=("no job was told it did not fit")
  for id in "${!job_told[@]}"; do
    [ "$(echo "${job_told[$id]} <= 60" | bc)" -eq 1 ] || problems+=("job $id was told after ${job_told[$id]}s (goal: within 60 s)")
  done
fi
[ -z "$RESTART_AFTER" ] || [ -n "$restarted" ] || problems+=("slurmctld was never restarted")
if [ -n "$SOURCES" ]; then
  # One job ran in the reservation; one found it full and AD-1 out of hosts and ran in AD-2, saying so;
  # the next source's create came within a minute of the stock-out; no job was held for capacity.
  grep -qE 'cluster network .* RUNNING in r1 ' "$work/autoscaler.log" || problems+=("no cluster network was made in the reservation r1")
  moved=$(printf '%s\n' "${job_moved[@]}" | grep -E 'reservation r1 full.*ad-1 out of host capacity.*running in ad-2' | head -1 || true)
  [ -n "$moved" ] || problems+=("no job ran in ad-2 after r1 and ad-1 ran out (comments: ${job_moved[*]:-none})")
  failover=$(grep -oE '\(([0-9.]+)s after the stock-out\)' "$work/autoscaler.log" | grep -oE '[0-9.]+' | sort -n | tail -1 || true)
  if [ -z "$failover" ]; then
    problems+=("the autoscaler log tells no failover to the next source")
  else
    mark "stock-out -> the next source's create call: at most ${failover}s (goal: under 60 s)"
    [ "$(echo "$failover < 60" | bc)" -eq 1 ] || problems+=("the next source's create came ${failover}s after the stock-out (goal: under 60 s)")
  fi
  if grep -q ' held ' "$work/autoscaler.log"; then problems+=("a job was held: $(grep ' held ' "$work/autoscaler.log" | head -1)"); fi
fi
# Each joined node decided no sum itself: its copy of the lock file is the one configure wrote.
for f in "$work"/*.pull.json; do
  copy=${f%.pull.json}.lock.yml
  if [ ! -s "$copy" ]; then
    problems+=("no lock file on $(basename "${f%.pull.json}")")
  elif ! python3 -c 'import sys, yaml; a, b = (yaml.safe_load(open(p))["artifacts"] for p in sys.argv[1:]); sys.exit(a != b)' "$work/lock-before-join.yml" "$copy"; then
    problems+=("$(basename "${f%.pull.json}") locked files of its own (its lock file differs from the controller's)")
  fi
done
# With the loop on, each node ran the active NCCL check in its pull before slurmd started.
if [ -n "$HEAL" ]; then
  for f in "$work"/*.pull.log; do
    grep -q 'pull: the active NCCL check passes' "$f" || problems+=("$(basename "${f%.pull.log}") ran no active NCCL check in its pull")
  done
fi
[ -z "$down_seen" ] || problems+=("nodes were DOWN:$down_seen")
if grep -q 'unexpected error' "$work/autoscaler.log"; then problems+=("the autoscaler log has unexpected errors"); fi
# Each node that came up moved from the switch "unknown" to its local block, as the simulator's
# Compute Hosts API places it (the autoscaler's places file), in the topology slurmctld uses.
places=$(on_ctl cat /var/lib/ocigpu-autoscaler/places.json 2>/dev/null || echo '{}')
topo=$(on_ctl scontrol show topology)
placed=$(jq -r 'keys[]' <<< "$places" || true)
[ -n "$placed" ] || problems+=("the autoscaler recorded no on-demand node's place")
for n in $placed; do
  lb=$(jq -r --arg n "$n" '.[$n][2]' <<< "$places")
  members=$(grep -E "^SwitchName=lb-${lb: -8} " <<< "$topo" | grep -oE 'Nodes=[^ ]+' | cut -d= -f2 || true)
  if [ -z "$members" ] || ! on_ctl scontrol show hostnames "$members" | grep -qx "$n"; then
    problems+=("scontrol show topology does not put $n in its local block lb-${lb: -8}")
  fi
done
if [ "${#problems[@]}" -gt 0 ]; then
  tail -40 "$work/autoscaler.log"
  # The jobs' own lines of the timeline last: a failed run's tail shows them.
  echo "   the jobs' timeline:"
  printf '%s\n' "${timeline[@]}" | grep -E 'job [0-9]+ |submitted|restarted|DOWN' | sed 's/^/   /'
  # What the stand-ins' hook could not do (an instance with no stand-in never registers).
  grep -hE 'STAND-IN FAILED|start attempt' "$work/standins.log" | tail -3 | sed 's/^/   stand-ins: /' || true
  die "$(printf '%s; ' "${problems[@]}")see $work/"
fi
if [ -n "$BAKE" ]; then
  # Each node from the baked image: munge and slurmd skipped at its boot (no munge key before the join), not
  # failed; firewalld started at its boot, on the zones its join then finds unchanged (the builder's subnet).
  from_image=$(grep -c ': from image ' "$work/standins.log" || true)
  skipped=$(grep -c ': before its join: munge enabled inactive (condition no at boot) slurmd enabled inactive (condition no at boot) firewalld enabled active (condition yes at boot)$' "$work/standins.log" || true)
  if [ "$from_image" -eq 0 ] || [ "$skipped" -ne "$from_image" ]; then
    die "munge, slurmd and firewalld at the boot of the nodes from the baked image: $(grep ': before its join: ' "$work/standins.log" | sort | uniq -c | head -3)"
  fi
  zones_kept=0; joins=0
  for f in "$work"/*.pull.log; do
    [ -e "$f" ] || continue
    joins=$((joins + 1))
    task=$(grep -A3 "^TASK \[ocigpu.cluster.firewall : Trust the cluster's networks" "$f" || true)
    [[ "$task" != *$'\nok: '* ]] || zones_kept=$((zones_kept + 1))
  done
  [ "$zones_kept" -eq "$joins" ] \
    || die "the firewall's zones changed at $((joins - zones_kept)) join(s) from the baked image (the bake wrote the builder's)"
  mark "munge and slurmd, enabled in the image, skipped at the boot of its $from_image node(s) until their join wrote the munge key; firewalld up at their boot, its zones unchanged at the $zones_kept join(s) logged"
fi
mark "every job ran on all its nodes${CAPACITY:+; the one that did not fit was told why and ran when hosts came back}${SOURCES:+; one moved to the next source; the one no source could hold was told why and ran when hosts came back}; no node was DOWN"
# The later steps need no shortage: every AD's hosts without limit again (the reservation stays).
[ -z "$SOURCES" ] || set_hosts null
printf '%s\n' "$topo" | sed 's/^/   topology: /'
echo "   the autoscaler's log of it (outcomes):"
grep -E ' (done|failed|held|requeued|hosts are free|reconcile|service|topology|cooling)' "$work/autoscaler.log" | cut -d' ' -f4- | cut -c1-220 | sed 's/^/     /'

if [ -n "$HEAL" ]; then
  step "4b. A sick node: the self-healing loop gives it a new instance, checked in its pull, and a job runs on it"
  sick=$last_ended_host
  # A job holds the node while it is made sick: the loop never touches a node with a job on it. Powered down
  # meanwhile (after SuspendTime), the node is powered up for it first, from the baked image.
  hold=$(on_ctl sbatch --parsable -w "$sick" -o /dev/null --wrap 'sleep 30')
  hold_state=''
  for _ in $(seq 300); do
    hold_state=$(on_ctl scontrol -o show job "$hold" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
    [ "$hold_state" = PENDING ] || [ "$hold_state" = CONFIGURING ] || break
    sleep 2
  done
  [ "$hold_state" = RUNNING ] || die "the job $hold that holds $sick did not start ($hold_state)"
  t_sick=$(date +%s.%N)
  sick_old=$(on_ctl scontrol show node "$sick" | grep -o 'NodeHostName=[^ ]*' | cut -d= -f2 || true)
  c=$(podman ps --format '{{.Names}}' | grep "^ocigpu-demo-$sick_old-" | head -1 || true)
  [ -n "$c" ] || die "no stand-in for $sick ($sick_old)"
  if [ -n "$BAKE" ]; then
    # Its pull, from the baked image: kept with the other nodes' figures.
    podman exec "$c" cat /var/lib/ocigpu-pull/pull.json > "$work/held-instance.json" 2>/dev/null || true
    podman exec "$c" cat /var/log/ocigpu-pull.log > "$work/held-instance.log" 2>/dev/null || true
  fi
  podman exec "$c" mv /usr/bin/enroot /usr/bin/enroot.off
  mark "heal: $sick ($sick_old) made sick (enroot gone) while job $hold runs on it"
  reason=''
  for _ in $(seq 60); do
    reason=$(node_reason "$sick")
    [[ "$reason" == ocigpu-health:* ]] && break; sleep 1
  done
  [[ "$reason" == ocigpu-health:* ]] || die "$sick was not drained by its health check (reason: '$reason')"
  mark "heal: $sick drained by slurmd's health check: $reason"
  healed=''
  for _ in $(seq 300); do
    line=$(on_ctl grep -E " heal $sick: " /var/log/ocigpu-autoscaler/autoscaler.log 2>/dev/null | tail -1 | cut -d' ' -f4- || true)
    if [ -n "$line" ] && [ "$line" != "${last_heal:-}" ]; then mark "$line"; last_heal=$line; fi
    case $line in *'back in service'*|*'returned to service powered down'*) healed=1; break ;; *'left'*) break ;; esac
    sleep 2
  done
  [ -n "$healed" ] || die "the loop did not mend $sick; autoscaler log: $(on_ctl grep ' heal ' /var/log/ocigpu-autoscaler/autoscaler.log | tail -3)"
  # The loop's figures, as the dashboard reads them: from the controller's exporter.
  healed_metric=''
  for _ in $(seq 15); do
    healed_metric=$(on_ctl python3 -c 'import urllib.request; print(urllib.request.urlopen("http://127.0.0.1:9879/metrics").read().decode())' \
      2>/dev/null | grep -E '^ocigpu_heal_steps_total\{step="healed"\} ' | cut -d' ' -f2 || true)
    [ "${healed_metric%.*}" = 1 ] && break; sleep 2
  done
  [ "${healed_metric%.*}" = 1 ] || die "the controller's exporter does not serve ocigpu_heal_steps_total{step=\"healed\"} 1 ('$healed_metric')"
  mark "heal: the controller's exporter serves ocigpu_heal_steps_total{step=\"healed\"} $healed_metric"
  # A job under the old Slurm name runs on the new instance (powering it up first when the loop
  # found it powered down already).
  run_hostname "$sick" 300 "the mended $sick"
  hjob=$ran_job new_host=$ran_host
  mark "heal: job $hjob ran on $sick, now instance $new_host (was $sick_old)"
  if [ -z "$new_host" ] || [ "$new_host" = "$sick_old" ]; then
    die "job $hjob did not run on a new instance of $sick ('$new_host')"
  fi
  printf '   heal: sick -> job done on the new instance %.1f s\n' "$(echo "$(date +%s.%N) - $t_sick" | bc)"
  # The new instance's pull: its configure run, passive checks and active NCCL check, before slurmd.
  c=$(podman ps --format '{{.Names}}' | grep "^ocigpu-demo-$new_host-" | head -1)
  podman exec "$c" cat /var/lib/ocigpu-pull/pull.json > "$work/heal-instance.json" 2>/dev/null || true
  podman exec "$c" cat /var/log/ocigpu-pull.log > "$work/heal-instance.log" 2>/dev/null || true
  grep -q 'pull: the active NCCL check passes' "$work/heal-instance.log" \
    || die "the new instance of $sick ran no active NCCL check before slurmd (log: $work/heal-instance.log)"
  jq -r '"   heal: the new instance'"'"'s pull: tags \(.wait_tags) s, bundle \(.fetch_bundle) s, ansible-core \(.ansible) s, roles \(.configure) s, passive checks \(.checks) s, active NCCL check \(.active_check) s, slurmd \(.slurmd_start) s"' \
    "$work/heal-instance.json"
  ocigpu_status "$sick replaced by the self-healing loop"
  { [ "$(status_of "$sick" instance_state)" = RUNNING ] && [ -n "$(status_of "$sick" heal_step)" ]; } \
    || die "ocigpu status does not show $sick's new instance and the loop's step; see $work/status-$status_n.json"
  echo "   ocigpu events --node $sick:"
  on_ctl ocigpu events --node "$sick" > "$work/events-$sick.txt" || die "ocigpu events failed"
  sed 's/^/     /' "$work/events-$sick.txt" | tail -15
  { grep -q "heal: drained by the checks" "$work/events-$sick.txt" && grep -q "pull: join accepted" "$work/events-$sick.txt"; } \
    || die "ocigpu events --node $sick tells neither the loop's drain nor the new instance's join; see $work/events-$sick.txt"

  step "4c. The periodic active check: the sweep runs it through Slurm on idle nodes; one falls short and is replaced"
  # The demo's timer would wait an hour (node_health_active_sweep_every): the sweep is started as the
  # timer starts it. One node falls short: its threshold is raised above what its all_reduce_perf
  # reaches (232.04 GB/s), in the settings its pull's active check left.
  on_ctl systemctl is-enabled ocigpu-active-sweep.timer | sed 's/^/   ocigpu-active-sweep.timer: /'
  podman exec "$c" python3 -c 'import json; p = "/etc/ocigpu-health/active.json"; d = json.load(open(p)); d["threshold_gbps"] = 300.0; json.dump(d, open(p, "w"))'
  for _ in $(seq 20); do
    [ "$(on_ctl sinfo -h -n "$sick" -o '%t')" = idle ] && break; sleep 1
  done
  mended_before=$(on_ctl grep -cE " heal $sick: .*(back in service|returned to service powered down)" /var/log/ocigpu-autoscaler/autoscaler.log || true)
  t_slow=$(date +%s.%N)
  on_ctl systemctl start ocigpu-active-sweep.service
  on_ctl journalctl -u ocigpu-active-sweep.service --no-pager -o cat | grep '^sweep:' > "$work/sweep.log" || true
  sed 's/^/   /' "$work/sweep.log"
  grep -q "^sweep: $sick idle, never checked; active check submitted" "$work/sweep.log" \
    || die "the sweep did not check $sick (its log: $work/sweep.log)"
  # Each check is a Slurm job: the slow node's fails, the others complete.
  grep -oE 'active check submitted \(job [0-9]+\)' "$work/sweep.log" | grep -oE '[0-9]+' > "$work/sweep-jobs.txt" || true
  while read -r job; do
    for _ in $(seq 120); do
      line=$(on_ctl scontrol -o show job "$job" 2>/dev/null < /dev/null || true)
      st=$(grep -o 'JobState=[A-Z_]*' <<< "$line" | cut -d= -f2 || true)
      case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
      sleep 1
    done
    node=$(grep -oE ' NodeList=[^ ]+' <<< "$line" | cut -d= -f2)
    mark "sweep: check job $job on $node ended $st"
    if [ "$node" = "$sick" ]; then want=FAILED; else want=COMPLETED; fi
    [ "$st" = "$want" ] || die "the check job $job on $node ended $st, not $want"
  done < "$work/sweep-jobs.txt"
  reason=$(on_ctl sinfo -h -n "$sick" -o '%E')
  [ "$reason" = "ocigpu-nccl: all_reduce busbw 232.04 GB/s at 10 GiB is below the threshold 300.00 GB/s" ] \
    || die "$sick was not drained by its periodic active check (reason: '$reason')"
  mark "heal: $sick drained by its periodic active check: $reason"
  # The loop replaces it as it replaced it in 4b (a replacement found sick within an hour counts as failed).
  healed=''
  for _ in $(seq 300); do
    log=$(on_ctl grep -E " heal $sick: " /var/log/ocigpu-autoscaler/autoscaler.log 2>/dev/null | cut -d' ' -f4- || true)
    line=$(tail -1 <<< "$log")
    if [ -n "$line" ] && [ "$line" != "${last_heal:-}" ]; then mark "$line"; last_heal=$line; fi
    [ "$(grep -cE '(back in service|returned to service powered down)' <<< "$log" || true)" -gt "$mended_before" ] && { healed=1; break; }
    case $line in *'left'*) break ;; esac
    sleep 1
  done
  [ -n "$healed" ] || die "the loop did not mend $sick after its periodic check; autoscaler log: $(on_ctl grep ' heal ' /var/log/ocigpu-autoscaler/autoscaler.log | tail -3)"
  printf '   heal: drained by the periodic check -> back in service %.1f s\n' "$(echo "$(date +%s.%N) - $t_slow" | bc)"
fi

step "5. $SUSPEND_TIME s without jobs: the suspend program hands the nodes back"
for _ in $(seq 300); do
  live_cns=$(curl -fsS "$endpoint/_admin/state/cluster_networks" | jq '[.[]? | select(.lifecycleState != "TERMINATED")] | length')
  [ "$live_cns" -eq 0 ] && { t_suspend=$(date +%s.%N); mark "every cluster network terminated: $(on_ctl grep -cE ' (suspend|reconcile) gpu-.*: cluster network .* terminated' /var/log/ocigpu-autoscaler/autoscaler.log) suspend(s)"; break; }
  sleep 2
done
[ -n "${t_suspend:-}" ] || die "the suspend program did not terminate the cluster networks"
for _ in $(seq 120); do
  [ "$(podman ps -q --filter label=ocigpu-demo=1 | wc -l)" -eq 1 ] && break; sleep 1
done
left=$(podman ps -q --filter label=ocigpu-demo=1 | wc -l)
mark "stand-ins left: $left (the controller)"
[ "$left" -eq 1 ] || die "the on-demand nodes' stand-ins are still there after the suspend"
states=$(on_ctl sinfo -h -N -o '%N %t')
printf '%s\n' "$states" | sed 's/^/   /'
if printf '%s\n' "$states" | grep -q ' down'; then die "nodes are left DOWN"; fi
ocigpu_status "idle: the nodes handed back"
[ "$(jq '[.nodes[] | select(.instance_state == "RUNNING")] | length' "$work/status-$status_n.json")" = 0 ] \
  || die "ocigpu status shows running instances after the suspend; see $work/status-$status_n.json"

if [ -n "$HEAL" ]; then
  step "5b. A static node of the cluster network made sick: the loop replaces it through the pool, the new instance pulls"
  # One static node joins (provision.yml with gpu_node_count: 1, configure.yml by push), with the loop on
  # for static nodes too. Its instance's user_data holds the pull, which waits in vain for the pull
  # server's tags: a static node is configured by push.
  run_playbook "provision one static node" "$work/provision-static.log" playbooks/provision.yml -e "@$work/cluster.yml" \
    -e gpu_node_count=1
  demo_wait_standins 2
  on_failure=standin_journals run_playbook "configure with the static node" "$work/configure-static.log" \
    -i "$work/demo.gpu_nodes.yml" playbooks/configure.yml -e "@$work/cluster.yml" -e "@$work/standin-vars.yml" \
    -e "slurm_autoscaler_suspend_time=$SUSPEND_TIME" -e "@$work/heal-vars.yml" -e slurm_autoscaler_heal_static=true
  static=$(on_ctl sinfo -h -N -o '%N' | grep -v '^gpu-' | sort -u | head -1)
  [ -n "$static" ] || die "no static node in slurmctld after configure"
  for _ in $(seq 60); do [ "$(on_ctl sinfo -h -n "$static" -o '%t')" = idle ] && break; sleep 1; done
  old_addr=$(on_ctl scontrol show node "$static" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
  c=$(podman ps --format '{{.Names}}' | grep "^ocigpu-demo-$static-" | head -1)
  [ -n "$c" ] || die "no stand-in for the static node $static"
  t_static=$(date +%s.%N)
  podman exec "$c" mv /usr/bin/enroot /usr/bin/enroot.off
  # slurmd runs its health check when it starts, and then every node_health_interval (300 s): a restart
  # of slurmd (as a reboot would) has the check find the fault now rather than within five minutes.
  podman exec "$c" systemctl restart slurmd
  mark "heal: static node $static ($old_addr) made sick (enroot gone), its slurmd restarted"
  reason=''
  for _ in $(seq 90); do
    reason=$(node_reason "$static")
    [[ "$reason" == ocigpu-health:* ]] && break; sleep 1
  done
  [[ "$reason" == ocigpu-health:* ]] || die "$static was not drained by its health check (reason: '$reason')"
  mark "heal: $static drained by slurmd's health check: $reason"
  t_static_drained=$(date +%s.%N)
  healed='' seen=0
  for _ in $(seq 300); do
    # Every new line of the loop and the service about the node, in order.
    lines=$(on_ctl grep -E " (heal|replace) $static: " /var/log/ocigpu-autoscaler/autoscaler.log 2>/dev/null | cut -d' ' -f4- || true)
    count=$(printf '%s' "$lines" | grep -c . || true)
    if [ "$count" -gt "$seen" ]; then
      while IFS= read -r line; do mark "$line"; done < <(printf '%s\n' "$lines" | tail -n "$(( count - seen ))")
      seen=$count
    fi
    case $(printf '%s\n' "$lines" | tail -1) in *'back in service'*) healed=1; break ;; *'left'*) break ;; esac
    sleep 2
  done
  [ -n "$healed" ] || die "the loop did not mend the static node $static; autoscaler log: $(on_ctl grep -E " (heal|replace) $static" /var/log/ocigpu-autoscaler/autoscaler.log | tail -3)"
  t_static_back=$(date +%s.%N)
  new_addr=$(on_ctl scontrol show node "$static" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
  [ "$new_addr" != "$old_addr" ] || die "$static kept its old address $old_addr"
  on_ctl grep -q "^NodeName=$static NodeAddr=$new_addr " /etc/slurm/nodes.conf \
    || die "nodes.conf does not hold $static's new address $new_addr: $(on_ctl grep "^NodeName=$static " /etc/slurm/nodes.conf)"
  # The address outlives a reconfigure (it restarts slurmctld): it is in nodes.conf, not only in slurmctld.
  on_ctl scontrol reconfigure
  for _ in $(seq 30); do on_ctl scontrol show node "$static" > "$work/static-node.txt" 2>/dev/null && break; sleep 1; done
  grep -q "NodeAddr=$new_addr " "$work/static-node.txt" || die "$static lost its new address at scontrol reconfigure: $(grep -o 'NodeAddr=[^ ]*' "$work/static-node.txt")"
  mark "heal: $static at $new_addr (was $old_addr) in slurmctld and nodes.conf, and after scontrol reconfigure"
  run_hostname "$static" 150 "the mended static node $static"
  sjob=$ran_job new_host=$ran_host
  mark "heal: job $sjob ran on $static, now instance $new_host"
  if [ -z "$new_host" ] || [ "$new_host" = "$static" ]; then die "job $sjob did not run on a new instance of $static ('$new_host')"; fi
  c=$(podman ps --format '{{.Names}}' | grep "^ocigpu-demo-$new_host-" | head -1)
  podman exec "$c" cat /var/lib/ocigpu-pull/pull.json > "$work/static-instance.json" 2>/dev/null || true
  printf '   heal (static): sick -> drained %.1f s, drained -> back in service %.1f s (the pool, the pull, the checks)\n' \
    "$(echo "$t_static_drained - $t_static" | bc)" "$(echo "$t_static_back - $t_static_drained" | bc)"
  jq -r '"   heal (static): the new instance'"'"'s pull: tags \(.wait_tags) s, roles \(.configure) s, passive checks \(.checks) s, active NCCL check \(.active_check) s, total \(.total) s"' \
    "$work/static-instance.json" || true
  ocigpu_status "the static node $static replaced through its pool"
  { [ "$(status_of "$static" instance_state)" = RUNNING ] && [ "$(status_of "$static" kind)" = static ]; } \
    || die "ocigpu status does not show the static node $static's new instance; see $work/status-$status_n.json"
fi

if [ -n "$BAKE" ]; then
  # Each node's own figures (pull.json): every pull of this run was on the baked image (step 4's nodes three or
  # four at once on this machine's two cores, the later ones alone). What the image saves a node is the bake's
  # run on the builder (3b): ocigpu-pull --bake ran the baked roles there from the stock image, as a pull on the
  # stock image does before the rest (DEMO_BAKE= make demo-ondemand shows step 4's pulls on the stock image).
  echo "   the pull after its tags on the baked image, and the bake's run of the baked roles from the stock image (seconds):"
  for f in "$work"/ocigpu-demo-*.pull.json "$work/held-instance.json" "$work/heal-instance.json" "$work/static-instance.json"; do
    [ -s "$f" ] || continue
    jq -r --arg f "$(basename "$f" .json)" '"     \(if .baked then "baked" else "stock" end)  \(.name)  ansible-core \(.ansible // 0)  roles \(.configure) (\(.strategy // "linear"))  checks \((.checks // 0) + (.active_check // 0) | . * 100 | round / 100)  total after the tags \(.total - .wait_tags | . * 100 | round / 100)"' "$f" || true
    jq -e '.baked == true' "$f" >/dev/null || die "$(basename "$f" .json) did not pull on the baked image (its log: ${f%.json}.log)"
    # Mitogen, the pull's default, came with the image's environment (slurm_autoscaler_pull_mitogen)
    jq -e '.strategy == "ocigpu.cluster.mitogen_linear"' "$f" >/dev/null \
      || die "$(basename "$f" .json) ran its roles without Mitogen's strategy (its log: ${f%.json}.log)"
  done
  echo "     stock  the builder  the bake's run (a virtual environment with ansible-core, the baked roles): ${bake_run:-?}"
  grep -q 'only the per-node steps (--tags node_join)' "$work/heal-instance.log" || die "the new instance's pull did not run only the per-node steps (see $work/heal-instance.log)"
fi

step "6. Teardown: nothing billable left"
run_playbook "teardown" "$work/teardown.log" playbooks/teardown.yml -e "@$work/cluster.yml"
grep -o 'Nothing billable of demo is left.' "$work/teardown.log" | head -n1 | sed 's/^/   /'
images_left=$(curl -fsS "$endpoint/_admin/state/images" | jq '[.[]? | select(.freeformTags["ocigpu-cluster"] == "demo" and .lifecycleState != "DELETED")] | length')
[ "$images_left" -eq 0 ] || die "$images_left baked image(s) of the cluster are left after the teardown"

step "Timeline"
printf '   %s\n' "${timeline[@]}"
python3 tests/perf/ondemand_figures.py "$work" "$t_submit" "${t_resume:-0}" "$t_registered" "$t_done"
echo "   reproduce: make demo-ondemand    (logs: ${work#"$OCIGPU_ROOT"/}/)"
