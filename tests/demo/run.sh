#!/usr/bin/env bash
# `make demo`: rehearse the whole flow against the local OCI simulator, with no cloud account.
#
#   1. start the simulator (tests/ocisim) on 127.0.0.1 with a generated API key
#   2. provision a 2-node BM.GPU4.8 RDMA cluster (network, bastion, instance configuration,
#      cluster network) with playbooks/provision.yml
#   3. run provision again: everything is adopted, nothing changes
#   4. discover the cluster with the gpu_nodes inventory plugin
#   5. configure the nodes over SSH through the bastion, with the jump the inventory plugin
#      sets for a real cluster. Each launched instance has a local stand-in (a systemd container at
#      its private IP, the bastion also at its public IP, started by the simulator's instance hook,
#      tests/demo/standin.sh, which also does cloud-init's part: login user and SSH keys). Every
#      role that needs no GPU, NVMe disk or RDMA NIC runs (common, rdma_network, containerd_rootless,
#      nvidia_container_toolkit without its packages, slurm, enroot, pyxis, rdma_exporter, and
#      firewall, left on); then `srun -N2 --container-image=<an image made here>` runs across both
#      nodes, and the demo shows what the firewall lets through and what it refuses
#      (configure runs twice: the re-run must change nothing)
#   6. a sick node: slurmd's health check (node_health) drains it with its reason and resumes it
#      once healed; a drain made by hand stays
#   7. shrink to one node while a job runs on the node that goes: provision drains it in Slurm,
#      waits for the job, and only then takes it out of the cluster network; configure --tags slurm
#      then writes slurm.conf without it
#   8. tear it down with playbooks/teardown.yml and check that nothing billable is left
#
# nvme_scratch is left out (the stand-ins have no NVMe disks; tests/infra/vm.sh tests it), and so
# is NCCL validation (no GPUs). enroot and pyxis are the test stand-ins of tests/infra/artifacts:
# the real ones cannot be downloaded here; the pyxis stand-in enters an unpacked image folder.
#
# DEMO_KEEP=1 leaves the simulator and the stand-ins running at the end (PIDs and endpoint printed).
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"

. "$OCIGPU_ROOT/tests/demo/lib.sh"

DEMO_WORK=${DEMO_DIR:-$OCIGPU_ROOT/.build/demo}
work=$DEMO_WORK
rm -rf "$work"
mkdir -p "$work"
demo_start=$(date +%s)
# Each step's banner says when it began, in seconds since the demo started (SECONDS).
step() { printf '\n\033[1m==> %s\033[0m  (at %ss)\n' "$*" "$SECONDS"; }
declare -a done_steps=()
record() { done_steps+=("$(printf '%-58s %4ss' "$1" "$2")"); }
# on_ctl COMMAND: run a command on the Slurm controller (the bastion) over SSH, as root.
# reasons LOG: the "role": "why it runs" lines of configure.yml's "Say why each role runs" task.
reasons() {
  awk '/^TASK \[Say why each role runs\]/ { s = 1; next } /^TASK / { s = 0 } s && /^ok: \[/ { h = $2 }
       s && /^ +"[a-z_]+": "/ && !/"msg": / { line = $0; sub(/^ +/, "", line); print h, line }' "$1"
}
on_ctl() { ssh -F "$work/ssh_config" "opc@$bastion_ip" "sudo $(printf '%q ' "$@")"; }
hostvar() {  # hostvar INVENTORY_JSON HOST VAR
  jq -r --arg h "$2" --arg v "$3" 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[$h][$v] // "" | s' "$1"
}
step "1. Starting the OCI simulator, with local stand-ins for the instances it launches"
# The demo VCN is 198.18.120.0/22 and public IPs come from 198.18.124.0/24, so the stand-ins live
# on the machine's own test networks.
trap demo_stop EXIT
# A stop by signal also removes the stand-ins and ends the simulator (through the EXIT trap).
trap 'exit 143' TERM INT
# The cluster users' shared home (step 6b): a folder of this machine that every stand-in mounts at
# /mnt/home (standin.sh), as every host mounts the File Storage export on OCI.
export DEMO_SHARED_HOME=$work/shared-home
mkdir -p "$DEMO_SHARED_HOME"
demo_start_sim
echo "simulator pid $DEMO_SIM_PID at $DEMO_ENDPOINT (region $(jq -r .region "$work/sim.json"))"
endpoint=$DEMO_ENDPOINT
demo_write_files 2
demo_artifacts
# configure.yml applies the cluster_user role everywhere (cluster_users: true in the cluster vars).
printf '# Cluster users on the shared home (step 6b).\ncluster_users: true\n' >> "$work/standin-vars.yml"
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
jq -r 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars | to_entries[] | "   \(.key): ansible_host=\(.value.ansible_host | s) ansible_user=\(.value.ansible_user | s) \(.value.ansible_ssh_common_args // "" | s)"' "$work/inventory.json"
n=$(jq '.gpu_nodes.hosts | length' "$work/inventory.json")
[ "$n" -eq 2 ] || die "expected 2 GPU nodes in the inventory, found $n"
bastion_ip=$(jq -r 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[.bastion.hosts[0]].ansible_host | s' "$work/inventory.json")
record "inventory discovery" $(( $(date +%s) - start ))

step "5. Configuring the stand-ins over SSH through the bastion ($bastion_ip): the whole stack"
start=$(date +%s)
demo_wait_standins 3
podman ps -a --filter label=ocigpu-demo=1 --format '   {{.Names}} {{.Status}}'
echo "   every host answers SSH (nodes through the bastion, opc@$bastion_ip)"
record "stand-ins up, SSH through the bastion" $(( $(date +%s) - start ))
# nvme_scratch needs NVMe disks: the stand-ins have none.
start=$(date +%s)
run_playbook "configure (whole stack but nvme_scratch)" "$work/configure.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --skip-tags nvme_scratch -e "@$work/standin-vars.yml"
echo "   roles applied (tasks that ran, ok or changed, per role and host, from the log):"
awk '/^TASK \[/ { role = ""; t = $0; sub(/^TASK \[/, "", t); n = split(t, a, " : "); if (n > 1) role = a[1] }
     /^(ok|changed): \[/ && role != "" { h = $2; sub(/^\[/, "", h); sub(/\]:?$/, "", h); c[role " " h]++ }
     END { for (k in c) print k, c[k] }' "$work/configure.log" \
  | sort | awk '{ if ($1 != last) { printf "%s%-40s", (NR > 1 ? "\n" : ""), $1; last = $1 } printf " %s=%s", $2, $3 } END { print "" }' \
  | sed 's/^/     /'

ocigpu_status "configured; the instances as configure found them"
for h in $(jq -r '.gpu_nodes.hosts[]' "$work/inventory.json"); do
  name=$(hostvar "$work/inventory.json" "$h" ocigpu_slurm_name)
  [ -n "$name" ] || name=$(on_ctl scontrol show node --oneliner | awk -v ip="$(hostvar "$work/inventory.json" "$h" ansible_host)" '$0 ~ "NodeAddr=" ip " " { sub(/^NodeName=/, "", $1); print $1 }')
  [ "$(status_of "$name" instance_id)" = "$(hostvar "$work/inventory.json" "$h" oci_instance_id)" ] \
    || die "ocigpu status does not join $name with $h's instance; see $work/status-$status_n.json"
done
echo "   the cluster's lock file, decided on the controller before any node downloaded (docs/artifacts.md):"
python3 - "$work/demo.lock.yml" <<'PY' | sed 's/^/     /'
import sys, yaml
for name, entry in sorted(yaml.safe_load(open(sys.argv[1]))['artifacts'].items()):
    print('%-72s %s  %s' % (name, entry['sha256'][:12], entry['source'].replace('http://198.18.120.1:8765/github/', 'mirror: ')))
PY
locked=$(python3 -c 'import sys, yaml; [print(n, e["source"]) for n, e in yaml.safe_load(open(sys.argv[1]))["artifacts"].items()]' \
  "$work/demo.lock.yml")
# Every component came from the mirror: the checksum files for containerd_rootless, first downloads
# (with a warning) for enroot and pyxis, whose upstreams publish none.
for want in 'containerd/.*releases/download/v[^/]+/containerd-.*[.]sha256sum' 'runc/.*runc[.]sha256sum' \
            'cni_plugins/.*[.]sha256$' 'rootlesskit/.*SHA256SUMS' 'slirp4netns/.*SHA256SUMS' \
            'bypass4netns/.*nerdctl/releases/.*SHA256SUMS' 'enroot/.*first download' 'pyxis/.*first download'; do
  grep -qE "$want" <<< "$locked" || die "the lock file has no entry matching '$want'; see $work/demo.lock.yml"
done
tr -s ' \n' ' ' < "$work/configure.log" | grep -q 'publishes no checksum file; locked the sha256 of a first download' \
  || die "the first download of enroot and pyxis was not said; see $work/configure.log"
lock_sum=$(sha256sum < "$work/demo.lock.yml")

echo "   configuring again (an idempotent re-run):"
start=$(date +%s)
run_playbook "configure again (idempotent re-run)" "$work/configure-2.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --skip-tags nvme_scratch -e "@$work/standin-vars.yml"
if grep -E '^[^ ]+ +: ok=' "$work/configure-2.log" | grep -vqE ' changed=0 '; then
  grep -E '^(changed):' "$work/configure-2.log" | head -20
  die "the re-run of configure changed something; see $work/configure-2.log"
fi
echo "   changed=0 on every host, in $(( $(date +%s) - start ))s"
# Every role was current on every host (role_records): the re-run only looked. nvme_scratch is left
# out with --skip-tags, so it never has a record.
if reasons "$work/configure-2.log" | grep -v '"nvme_scratch": ' | grep -q .; then
  reasons "$work/configure-2.log"
  die "the re-run found roles to run although nothing changed; see $work/configure-2.log"
fi
echo "   every role was current on every host: the re-run skipped them all (docs/rerun.md)"

echo "   a hand edit on one node and a stopped service on the other: the re-run finds both and repairs them"
mapfile -t drift_nodes < <(jq -r '.gpu_nodes.hosts[]' "$work/inventory.json")
ansible "${drift_nodes[0]}" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.shell \
  -a 'echo "* soft memlock 64" >> /etc/security/limits.d/90-ocigpu-memlock.conf' > "$work/drift.log"
ansible "${drift_nodes[1]}" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command \
  -a 'systemctl stop rdma-exporter.service' >> "$work/drift.log"
start=$(date +%s)
run_playbook "configure after the drift" "$work/configure-3.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --skip-tags nvme_scratch -e "@$work/standin-vars.yml"
reasons "$work/configure-3.log" | grep -v '"nvme_scratch": ' | sed 's/^/     why: /'
grep -q '"common": "on the node: paths /etc/security/limits.d/90-ocigpu-memlock.conf"' "$work/configure-3.log" \
  || die "the re-run did not see the hand edit; see $work/configure-3.log"
grep -q '"rdma_exporter": "on the node: units rdma-exporter.service"' "$work/configure-3.log" \
  || die "the re-run did not see the stopped exporter; see $work/configure-3.log"
ansible "${drift_nodes[0]}" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command \
  -a 'grep -c "memlock 64" /etc/security/limits.d/90-ocigpu-memlock.conf' >> "$work/drift.log" 2>&1 \
  && die "the hand edit is still there; see $work/drift.log"
ansible "${drift_nodes[1]}" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command \
  -a 'systemctl is-active rdma-exporter.service' >> "$work/drift.log" \
  || die "the exporter was not started again; see $work/drift.log"
echo "   both repaired in $(( $(date +%s) - start ))s; the roles ran on every host, and changed only these:"
awk '/^(TASK|RUNNING HANDLER) \[/ { t = $0; sub(/ \*+$/, "", t) } /^changed: / { print t "  " $1 " " $2 }' "$work/configure-3.log" \
  | grep -v 'Record what each role' | sed 's/^/     /'

# check_topology INVENTORY_JSON: slurmctld's topology puts every GPU node of the inventory in the
# switch of its local block (lb-<the OCID's last 8 characters>), as the Compute Hosts API places it.
check_topology() {
  local topo h ip lb name members
  topo=$(on_ctl scontrol show topology)
  for h in $(jq -r '.gpu_nodes.hosts[]' "$1"); do
    ip=$(hostvar "$1" "$h" ansible_host)
    lb=$(hostvar "$1" "$h" oci_local_block_id)
    [ -n "$lb" ] || die "$h has no local block in the inventory ($1)"
    name=$(on_ctl scontrol show node --oneliner | awk -v ip="$ip" '$0 ~ "NodeAddr=" ip " " { sub(/^NodeName=/, "", $1); print $1 }')
    members=$(grep -E "^SwitchName=lb-${lb: -8} " <<< "$topo" | grep -oE 'Nodes=[^ ]+' | cut -d= -f2 || true)
    if [ -z "$members" ] || ! on_ctl scontrol show hostnames "$members" | grep -qx "$name"; then
      die "scontrol show topology does not put $name ($h) in its local block lb-${lb: -8}: $topo"
    fi
  done
  printf '%s\n' "$topo" | sed 's/^/   topology: /'
}

step "6. A container job across both nodes, with the firewall on"
start=$(date +%s)
# slurmd registers a moment after its restart: wait until both nodes are idle.
for _ in $(seq 60); do
  [ "$(on_ctl sinfo --noheader --Node --format %t | grep -c '^idle')" -eq 2 ] && break
  sleep 1
done
on_ctl sinfo | sed 's/^/   /'
# topology.conf from where the simulator's Compute Hosts API puts each node: both in one local block,
# so a job asking for one leaf switch runs at once.
check_topology "$work/inventory.json"
[ "$(jq -r '[._meta.hostvars[.gpu_nodes.hosts[]].oci_local_block_id | if type == "object" then .__ansible_unsafe else . end] | unique | length' "$work/inventory.json")" = 1 ] \
  || die "the simulator put the two nodes in different local blocks; the compact job below would show nothing"
answer=$(on_ctl srun -N2 --switches=1@0:30 hostname | sort | paste -sd' ')
echo "   srun -N2 --switches=1 hostname: $answer (one local block)"
[ "$(wc -w <<< "$answer")" -eq 2 ] || die "the compact job did not run on both nodes of the local block: '$answer'"
# An image made here: a folder with a static busybox and its own os-release, unpacked on each node
# (the pyxis stand-in enters an unpacked image folder; real pyxis imports the image with enroot).
img=$work/image/rootfs
mkdir -p "$img/bin" "$img/etc" "$img/tmp"
cp /bin/busybox "$img/bin/busybox"
for t in sh cat hostname; do ln -sf busybox "$img/bin/$t"; done
printf 'NAME="ocigpu demo image"\nPRETTY_NAME="ocigpu demo image (busybox)"\n' > "$img/etc/os-release"
tar -C "$img" -czf "$work/image/demo-image.tar.gz" .
ansible gpu_nodes -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.file -a 'path=/srv/images/demo state=directory mode=0755' > "$work/image.log"
ansible gpu_nodes -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.unarchive -a "src=$work/image/demo-image.tar.gz dest=/srv/images/demo" >> "$work/image.log"
# shellcheck disable=SC2016  # $(hostname) and $PRETTY_NAME expand inside the image, on each node
mapfile -t job < <(on_ctl srun -N2 -l --chdir=/ --container-image=/srv/images/demo sh -c '. /etc/os-release; echo "$(hostname): $PRETTY_NAME"' | sort)
printf '   srun: %s\n' "${job[@]}"
[ "$(printf '%s\n' "${job[@]}" | grep -c 'ocigpu demo image')" -eq 2 ] || die "the container job did not answer from both nodes inside the image"
record "srun -N2 --container-image across the stand-ins" $(( $(date +%s) - start ))

node1=$(jq -r '.gpu_nodes.hosts[0]' "$work/inventory.json")
node2=$(jq -r '.gpu_nodes.hosts[1]' "$work/inventory.json")

step "6b. Cluster users on the shared home: one user added once, who logs in, shares files, runs containers and MPI"
start=$(date +%s)
# The shared home is a folder of this machine mounted at /mnt/home in every stand-in (standin.sh):
# containers here cannot mount NFS (molecule/node_vm mounts a real export in the VM).
ssh-keygen -q -t ed25519 -N '' -C alice -f "$work/alice_ed25519"
user_playbook() {  # user_playbook LOG ARGS...: playbooks/cluster_user.yml against the demo's inventory
  local log=$1; shift
  ansible-playbook -i "$work/demo.gpu_nodes.yml" playbooks/cluster_user.yml -e @"$work/cluster.yml" "$@" > "$log" 2>&1
}
user_playbook "$work/user-add.log" -e cluster_user_name=alice -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'" \
  || { tail -30 "$work/user-add.log"; die "adding alice failed; see $work/user-add.log"; }
grep -E '^[^ ]+ +: ok=' "$work/user-add.log" | sed 's/^/   /'
user_playbook "$work/user-add-2.log" -e cluster_user_name=alice -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'" \
  || die "adding alice again failed; see $work/user-add-2.log"
grep -E '^[^ ]+ +: ok=' "$work/user-add-2.log" | grep -vq ' changed=0 ' && die "adding alice again changed something; see $work/user-add-2.log"
echo "   added alice; adding her again changed nothing"
directory_sum() { on_ctl sha256sum /mnt/home/.ocigpu/users.json | cut -c1-64; }
before=$(directory_sum)
alice_uid=$(on_ctl id -u alice)
# Refused before any change: a taken uid, a bad name, a key that is not one.
refused() {  # refused WHAT WANT ARGS...: the playbook must fail saying WANT, with the directory unchanged
  local what=$1 want=$2; shift 2
  user_playbook "$work/user-refused.log" "$@" && die "$what was accepted; see $work/user-refused.log"
  grep -q "$want" "$work/user-refused.log" || { tail -20 "$work/user-refused.log"; die "$what was refused without saying '$want'"; }
  [ "$(directory_sum)" = "$before" ] || die "$what changed the directory"
  echo "   refused, nothing changed: $what ($want)"
}
refused "bob with alice's uid $alice_uid" "uid $alice_uid is taken by alice" \
  -e cluster_user_name=bob -e cluster_user_uid="$alice_uid" -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'"
refused "the name 'Bob Smith'" "cluster_user_name must be a user name" \
  -e "cluster_user_name='Bob Smith'" -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'"
refused "a key that is not one" "is not one OpenSSH public key line" -e cluster_user_name=bob -e "cluster_user_ssh_key='ssh-ed25519 AAAAnot-a-key'"
# Names and ids that would take over an account of the image or a group of the cluster.
key="cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'"
refused "opc with uid 1000" "the name opc is reserved" -e cluster_user_name=opc -e cluster_user_uid=1000 -e "$key"
refused "root" "the name root is reserved" -e cluster_user_name=root -e "$key"
refused "a user named privilege" "the name privilege is reserved" -e cluster_user_name=privilege -e cluster_user_privileged=false -e "$key"
refused "a name ending in a newline" "cluster_user_name must be a user name" -e '{"cluster_user_name": "eve\n"}' -e "$key"
refused "bob with uid 5000" "uid 5000 is outside the cluster's range" -e cluster_user_name=bob -e cluster_user_uid=5000 -e "$key"
# A second run while one holds the directory's lock (a folder on the controller) waits for no one: it stops.
on_ctl mkdir /run/ocigpu-cluster-user-playbook.lock
refused "bob while another run holds the lock" "Another run of cluster_user.yml is changing the directory" \
  -e cluster_user_name=bob -e "cluster_user_ssh_key='$(cat "$work/alice_ed25519.pub")'"
on_ctl rmdir /run/ocigpu-cluster-user-playbook.lock || die "the refused run took away the other run's lock"
# carol is outside the privilege group: she may run jobs, not containers.
ssh-keygen -q -t ed25519 -N '' -C carol -f "$work/carol_ed25519"
user_playbook "$work/user-carol.log" -e cluster_user_name=carol -e cluster_user_privileged=false \
  -e "cluster_user_ssh_key='$(cat "$work/carol_ed25519.pub")'" || die "adding carol failed; see $work/user-carol.log"
for h in "$node1" "$node2"; do
  who=$(ansible "$h" -i "$work/demo.gpu_nodes.yml" -m ansible.builtin.command -a 'id alice' 2>&1 | tail -1)
  grep -q "uid=$alice_uid(alice) gid=9876(privilege)" <<< "$who" || die "alice is not the same on $h: $who"
done
echo "   alice is uid=$alice_uid gid=9876(privilege) on the controller and both nodes"
# alice logs in to the controller (the bastion) with her own key, and works from her home there.
as_alice() { ssh -F "$work/ssh_config" -i "$work/alice_ed25519" -o IdentitiesOnly=yes "alice@$bastion_ip" "$@" 2>>"$work/users.log"; }
# shellcheck disable=SC2016  # expands on the controller, as alice
as_alice 'echo "written on $(hostname) by $(id -un)" > "$HOME/hello.txt"' || die "alice cannot log in to the controller with her key"
# shellcheck disable=SC2016  # expands on the controller, as alice
mapfile -t seen < <(as_alice 'srun -N2 -l cat "$HOME/hello.txt"' | sort)
printf '   srun -N2 cat ~/hello.txt (as alice): %s\n' "${seen[@]}"
[ "$(printf '%s\n' "${seen[@]}" | grep -c 'by alice')" -eq 2 ] || die "alice's file was not seen from both nodes"
# shellcheck disable=SC2016  # expands inside the image, on each node
mapfile -t job < <(as_alice 'srun -N2 -l --chdir=/ --container-image=/srv/images/demo sh -c '\''. /etc/os-release; echo "$(id -u): $PRETTY_NAME"'\' | sort)
printf '   srun -N2 --container-image (as alice): %s\n' "${job[@]}"
[ "$(printf '%s\n' "${job[@]}" | grep -c "$alice_uid: ocigpu demo image")" -eq 2 ] || die "alice's container job did not run as her on both nodes"
as_carol() { ssh -F "$work/ssh_config" -i "$work/carol_ed25519" -o IdentitiesOnly=yes "carol@$bastion_ip" "$@" 2>>"$work/users.log"; }
as_carol srun -N1 true || die "carol cannot run a plain job"
ssh -F "$work/ssh_config" -i "$work/carol_ed25519" -o IdentitiesOnly=yes "carol@$bastion_ip" \
  srun -N1 --container-image=/srv/images/demo hostname > "$work/carol-container.log" 2>&1 && die "carol, outside the privilege group, ran a container"
grep -q 'may not run enroot' "$work/carol-container.log" || { cat "$work/carol-container.log"; die "carol's container was refused for another reason"; }
echo "   carol (not in privilege) runs jobs, and is refused a container: $(grep -o 'may not run enroot.*' "$work/carol-container.log" | head -1)"
# mpirun across both nodes as alice, over her own MPI key (in her shared home): she reaches the first
# node from the controller with it, and mpirun the second.
# On OCI the VCN's resolver answers for every instance's name; here /etc/hosts does, for this step.
first_ip=$(hostvar "$work/inventory.json" "$node1" ansible_host)
slurm_nodes=$(on_ctl sinfo --noheader --Node --format %N | sort -u | paste -sd,)
names=$(on_ctl scontrol show node --oneliner | sed -nE 's/^NodeName=([^ ]+) .*NodeAddr=([^ ]+) .*/\2 \1/p')
hosts_block() {  # hosts_block present|absent
  ansible gpu_nodes -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.blockinfile \
    -a "$(jq -nc --arg state "$1" --arg block "$names" \
          '{path: "/etc/hosts", marker: "# {mark} make demo: the VCN resolver", state: $state, block: $block}')" \
    >> "$work/hosts-block.log" || die "could not write the nodes' names in /etc/hosts; see $work/hosts-block.log"
}
hosts_block present
# Inside an allocation of both nodes: a login to a GPU node needs a job of hers there (pam_slurm_adopt).
mpi=$(as_alice salloc -N2 --quiet ssh "$first_ip" mpirun -np 2 --host "$slurm_nodes" hostname | sort | paste -sd' ')
hosts_block absent
echo "   mpirun -np 2 --host $slurm_nodes hostname (as alice, from her SSH session on $first_ip): $mpi"
if [ "$(wc -w <<< "$mpi")" -ne 2 ] || [ "$(tr ' ' '\n' <<< "$mpi" | sort -u | wc -l)" -ne 2 ]; then
  die "alice's mpirun did not run on both nodes: '$mpi'"
fi
# Her MPI key opens the hosts from the cluster's network only (from= the VCN, 198.18.120.0/22): this
# machine reaches the bastion's public IP from outside it, and is refused.
# shellcheck disable=SC2016  # expands on the controller
src=$(as_alice 'echo "${SSH_CLIENT%% *}"')
# A connection of its own (ControlPath=none): alice's open one would let it in without a key.
ssh -F "$work/ssh_config" -i "$DEMO_SHARED_HOME/alice/.ssh/id_ed25519_mpi" -o IdentitiesOnly=yes -o BatchMode=yes \
  -o ControlPath=none "alice@$bastion_ip" true 2>>"$work/users.log" && die "alice's MPI key was accepted from outside the VCN (from $src)"
grep -q '^from="198.18.120.0/22",no-agent-forwarding' "$DEMO_SHARED_HOME/alice/.ssh/authorized_keys" \
  || die "alice's MPI key is not limited to the VCN: $(cut -c1-60 "$DEMO_SHARED_HOME/alice/.ssh/authorized_keys")"
echo "   alice's MPI key works inside the VCN and is refused from $src, outside it (from=\"198.18.120.0/22\")"
record "cluster users: add, refuse, log in, share, containers, mpirun" $(( $(date +%s) - start ))

step "7. What the firewall lets through and what it refuses"
ip1=$(jq -r --arg h "$node1" 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[$h].ansible_host | s' "$work/inventory.json")
ip2=$(jq -r --arg h "$node2" 'def s: if type == "object" then .__ansible_unsafe else . end; ._meta.hostvars[$h].ansible_host | s' "$work/inventory.json")
# probe FROM TARGET PORT: connect from one host (bastion, or a node's IP) to another over SSH, with
# bash's /dev/tcp; prints and records open or refused.
probe() {
  local how hop=(-F "$work/ssh_config")
  [ "$1" = bastion ] || hop+=(-J "opc@$bastion_ip")
  # shellcheck disable=SC2029  # the target and port are meant to expand here
  if ssh "${hop[@]}" "opc@$([ "$1" = bastion ] && echo "$bastion_ip" || echo "$1")" \
       "timeout 3 bash -c 'exec 3<>/dev/tcp/$2/$3'" 2>/dev/null; then how=open; else how=refused; fi
  printf '   from %-15s to %-15s port %-5s %s\n' "$1" "$2" "$3" "$how"
  echo "$how" > "$work/probe.last"
}
# The firewall re-applied alone (--tags firewall, every task run): the other roles' ports stay open,
# which the probes below check.
run_playbook "configure --tags firewall (the firewall alone)" "$work/configure-firewall.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --tags firewall -e configure_skip_unchanged=false -e "@$work/standin-vars.yml"
# A listener on a port that nothing declared, on node 1 (a stray service on a real node).
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command \
  -a 'systemd-run --unit demo-stray python3 -m http.server 8080' > "$work/stray.log"
sleep 1
echo "   firewalld zones on $node1:"
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command \
  -a 'firewall-cmd --get-active-zones' 2>/dev/null | grep -v '|' | sed 's/^/     /'
probe "$ip2" "$ip1" 8080;  [ "$(cat "$work/probe.last")" = open ] || die "a node of the same subnet should reach port 8080"
probe bastion "$ip1" 6818; [ "$(cat "$work/probe.last")" = open ] || die "slurmd's port should be open to the controller"
probe bastion "$ip1" 9879; [ "$(cat "$work/probe.last")" = open ] || die "the exporter's port should be open"
probe bastion "$ip1" 8080; [ "$(cat "$work/probe.last")" = refused ] || die "port 8080 should stay closed to hosts outside the node's subnet"
echo "   port 8080 on $node1 answers its own subnet and stays closed to the bastion's (undeclared port, public zone)"

step "7b. A hostile cluster user (alice), and root on one GPU node: each try refused or harmless"
start=$(date +%s)
# The controller's cloud identity: the metadata service (169.254.169.254:80) answers root and the
# service accounts only. The stand-in has no metadata service, so a listener stands in for it.
on_ctl ip addr add 169.254.169.254/32 dev lo
on_ctl systemd-run --unit demo-imds python3 -m http.server 80 --bind 169.254.169.254 > /dev/null 2>&1
sleep 1
imds_try='import socket
try:
    socket.create_connection(("169.254.169.254", 80), 3).close(); print("answered")
except OSError as e:
    print("refused:", e.strerror)'
imds_root=$(on_ctl python3 -c "$imds_try")
imds_alice=$(as_alice python3 -c "'$imds_try'")
on_ctl systemctl stop demo-imds
on_ctl ip addr del 169.254.169.254/32 dev lo
echo "   metadata service on the controller: root $imds_root; alice $imds_alice"
[ "$imds_root" = answered ] || die "root did not reach the stand-in metadata service: $imds_root"
[ "$imds_alice" = "refused: No route to host" ] || die "alice reached the metadata service: $imds_alice"
# Root on a GPU node rewrites the directory on the shared home (the stand-ins' shared home keeps
# root; File Storage squashes it for every host but the controller): every host checks each entry,
# and the controller refuses the bad ones and keeps the rest.
on_ctl cat /mnt/home/.ocigpu/users.json > "$work/users.kept.json"
jq '.users += {eve: {uid: 10099, gid: 0, groups: ["disk", "wheel"], home: "/mnt/home/eve", shell: "/bin/bash", state: "present"},
               opc: {uid: 1000, gid: 9876, groups: [], home: "/mnt/home/opc", shell: "/bin/bash", state: "present"}}' \
  "$work/users.kept.json" > "$work/users.poisoned.json"
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.copy \
  -a "src=$work/users.poisoned.json dest=/mnt/home/.ocigpu/users.json" >> "$work/users.log" 2>&1 || die "root on $node1 could not write the directory"
on_ctl systemctl start ocigpu-cluster-users.service 2>> "$work/users.log" && die "the controller applied the rewritten directory without a word"
on_ctl journalctl -u ocigpu-cluster-users.service -n 20 --no-pager -o cat | grep -E '^ocigpu-cluster-users: refused user (eve|opc):' | sort -u | sed 's/^/   /'
[ "$(on_ctl journalctl -u ocigpu-cluster-users.service -n 20 --no-pager -o cat | grep -cE 'refused user (eve: gid 0 |opc: uid 1000 is outside)')" -ge 2 ] \
  || die "the rewritten entries were not refused on the controller"
on_ctl getent passwd eve >/dev/null && die "eve (gid 0, disk, wheel) was made on the controller"
[ "$(on_ctl getent passwd opc | cut -d: -f3,6)" = "1000:/home/opc" ] || die "opc was taken over on the controller"
on_ctl id -u alice > /dev/null || die "alice was lost on the controller"
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.copy \
  -a "src=$work/users.kept.json dest=/mnt/home/.ocigpu/users.json" >> "$work/users.log" 2>&1 || die "the directory could not be put back"
echo "   root on $node1 wrote eve (gid 0, disk, wheel) and opc (uid 1000) in the directory: refused, opc intact, alice kept"
# A forged GPU fault: alice, in a job on node 1, puts the driver's XID text in the logs, once
# through syslog and once in a kernel record (a process named like the driver's report that
# crashes: the kernel prints its name). The health checks read the kernel's own records and match
# the driver's exact report at their start, so neither counts.
slurm_n1=$(on_ctl scontrol show node --oneliner | awk -v ip="$ip1" '$0 ~ "NodeAddr=" ip " " { sub(/^NodeName=/, "", $1); print $1 }')
forge='logger -p kern.err "NVRM: Xid (PCI:0000:0f:00): 79, pid=1, name=x, GPU has fallen off the bus."
python3 -c "import ctypes; ctypes.CDLL(None).prctl(15, b\"NVRM: Xid (): 7\", 0, 0, 0); ctypes.string_at(0)"'
as_alice "srun -w $slurm_n1 sh -c $(printf %q "$forge")" > "$work/forged-xid.log" 2>&1 || true
xid_try='import sys
sys.path.insert(0, "/usr/local/lib/ocigpu-health")
import ocigpu_health as h
log = h.kernel_log() or []
forged = [m for m in log if "NVRM: Xid (): 7" in m]
print("kernel records with the forged name: %d (%s); XIDs found: %d; a driver report would be: %d" % (
    len(forged), (forged[-1][:48] + "...") if forged else "-", len(h.find_xids(log)),
    len(h.find_xids(["NVRM: Xid (PCI:0000:0f:00): 79, pid=1, name=x, GPU has fallen off the bus."]))))'
xid_seen=$(ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command -a "python3 -c '$xid_try'" 2>&1 | tail -1)
echo "   on $node1 after alice's forged XIDs: $xid_seen"
grep -q 'XIDs found: 0; a driver report would be: 1' <<< "$xid_seen" || die "a forged XID counted, or the check cannot see one: $xid_seen"
on_ctl sinfo --noheader -R --format='%E|%N' | grep -q "|$slurm_n1\$" && die "$slurm_n1 was drained after the forged XID"
# Nodes for jobs (pam_slurm_adopt): alice's ssh to a node without a job of hers there is refused;
# during her job on it she gets in (and her login joins that job).
refusal=$(as_alice "ssh -o BatchMode=yes $ip1 id -un 2>&1") && die "alice logged in to $ip1 without a job there: $refusal"
grep -q 'Access denied by pam_slurm_adopt' <<< "$refusal" || die "alice was refused by $ip1 for another reason: $refusal"
echo "   alice, no job on $slurm_n1: ssh $ip1 refused ($(grep -o 'Access denied by pam_slurm_adopt[^\r]*' <<< "$refusal" | head -1))"
alice_job=$(as_alice sbatch --parsable -w "$slurm_n1" --chdir=/tmp --output=/dev/null --wrap "'sleep 120'")
for _ in $(seq 30); do [ "$(on_ctl squeue --noheader -j "$alice_job" -o %T)" = RUNNING ] && break; sleep 1; done
who=$(as_alice ssh -o BatchMode=yes "$ip1" id -un) || die "alice was refused by $ip1 during her job $alice_job"
on_ctl scancel "$alice_job"
[ "$who" = alice ] || die "ssh $ip1 during alice's job answered '$who'"
echo "   alice, during her job $alice_job on $slurm_n1: ssh $ip1 logs her in ($who)"
# The operator's program and the key the nodes accept for their diagnostics (docs/operations.md):
# alice can neither run the one nor read the other; the key, even taken to a node, opens nothing
# there (that key alone, no ssh configuration: root on a node has root's MPI key in its ssh
# configuration, which opens the other nodes by design,
# docs/security.md), and from the controller it runs the collector and nothing else.
refusal=$(as_alice "/usr/local/sbin/ocigpu status 2>&1") && die "alice ran ocigpu status: $refusal"
echo "   alice: ocigpu status -> $(tail -1 <<< "$refusal")"
grep -q 'Permission denied' <<< "$refusal" || die "ocigpu refused alice for another reason: $refusal"
refusal=$(as_alice "sudo -n /usr/local/sbin/ocigpu status 2>&1") && die "alice ran ocigpu through sudo: $refusal"
echo "   alice: sudo -n ocigpu status -> $(tail -1 <<< "$refusal")"
refusal=$(as_alice "cat /etc/ocigpu-health/diag_ed25519 2>&1") && die "alice read the diag key"
echo "   alice: cat the diag key -> $(tail -1 <<< "$refusal")"
on_ctl cat /etc/ocigpu-health/diag_ed25519 > "$work/diag_key.taken"
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.copy \
  -a "src=$work/diag_key.taken dest=/root/diag_key.taken mode=0600" >> "$work/users.log" 2>&1
rm -f "$work/diag_key.taken"
taken=$(ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.shell -a \
  "ssh -F /dev/null -i /root/diag_key.taken -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@$ip2 id -un 2>&1; rm -f /root/diag_key.taken" 2>&1 | tail -1)
echo "   root on $slurm_n1 with the diag key taken from the controller: ssh root@$ip2 -> $taken"
grep -q 'Permission denied' <<< "$taken" || die "the diag key opened $ip2 from $slurm_n1: $taken"
forced=$(on_ctl ssh -i /etc/ocigpu-health/diag_ed25519 -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  "root@$ip2" id -un 2>/dev/null | head -c 2 | od -An -tx1 | tr -d ' ')
echo "   root on the controller with the diag key: ssh root@$ip2 id -un -> the collector's gzip stream ($forced), not a shell"
[ "$forced" = 1f8b ] || die "the diag key ran something else than the collector on $ip2 (first bytes: $forced)"
record "a hostile user: metadata, directory, forged XID, logins" $(( $(date +%s) - start ))

step "8. A sick node: slurmd's health check drains it with the reason, and resumes it once healed"
start=$(date +%s)
slurm1=$(on_ctl scontrol show node --oneliner | awk -v ip="$ip1" '$0 ~ "NodeAddr=" ip " " { sub(/^NodeName=/, "", $1); print $1 }')
on_ctl scontrol show config | grep -E '^HealthCheck' | sed 's/^/   /'
# What a node knows of itself is healthy: the checks that apply to a stand-in (enroot, pyxis) pass.
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command -a 'ocigpu-healthcheck --no-slurm' \
  > "$work/health-1.log" 2>&1 || { cat "$work/health-1.log"; die "the health check fails on a healthy stand-in"; }
grep -E '^(ok|FAIL|\?) ' "$work/health-1.log" | sed 's/^/   /'
# Break it: enroot's program goes missing. slurmd runs the check every node_health_interval seconds.
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command -a 'mv /usr/bin/enroot /usr/bin/enroot.off' > /dev/null
reason=''
for _ in $(seq 60); do
  reason=$(on_ctl sinfo --noheader -R --format='%E|%N' | awk -F'|' -v n="$slurm1" '$2 == n { print $1 }')
  [ -n "$reason" ] && break; sleep 1
done
echo "   sinfo -R: $slurm1 drained: $reason"
[ "$reason" = "ocigpu-health: container_paths missing enroot" ] || die "expected $slurm1 drained for enroot, got: '$reason'"
ocigpu_status "$slurm1 drained by its health check"
[ "$(status_of "$slurm1" health)" = failing ] || die "ocigpu status does not call $slurm1 failing; see $work/status-$status_n.json"
# Heal it: the next run resumes the node, since the check drained it.
ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.command -a 'mv /usr/bin/enroot.off /usr/bin/enroot' > /dev/null
state=''
for _ in $(seq 60); do
  state=$(on_ctl sinfo --noheader --Node --nodes="$slurm1" --format=%t | head -1)
  [ "$state" = idle ] && break; sleep 1
done
echo "   healed: $slurm1 is $state again"
[ "$state" = idle ] || die "$slurm1 was not resumed after healing (state $state)"
# A node a person drained stays drained, healthy or not.
on_ctl scontrol update NodeName="$slurm1" State=DRAIN Reason="demo: drained by hand"
sleep "$(( $(grep -E '^node_health_interval:' "$work/standin-vars.yml" | awk '{ print $2 }') * 2 + 1 ))"
reason=$(on_ctl sinfo --noheader -R --format='%E|%N' | awk -F'|' -v n="$slurm1" '$2 == n { print $1 }')
echo "   drained by hand, after two check intervals: $reason"
[ "$reason" = "demo: drained by hand" ] || die "the health check changed a drain made by hand: '$reason'"
on_ctl scontrol update NodeName="$slurm1" State=RESUME
record "health check: drain, resume, a drain by hand kept" $(( $(date +%s) - start ))

step "9. Replacing a node under the same Slurm name (a sick node's new instance)"
start=$(date +%s)
slurm2=$(on_ctl scontrol show node --oneliner | awk -v ip="$ip2" '$0 ~ "NodeAddr=" ip " " { sub(/^NodeName=/, "", $1); print $1 }')
[ -n "$slurm2" ] || die "no Slurm node has the address $ip2"
old_id=$(hostvar "$work/inventory.json" "$node2" oci_instance_id)
run_playbook "provision: replace $node2" "$work/provision-replace.log" playbooks/provision.yml \
  -e "@$work/cluster.yml" -e "{\"gpu_replace_nodes\": [\"$node2\"]}" -e gpu_drain_poll_seconds=2
grep -E '"(replaced|left the cluster network)' "$work/provision-replace.log" | sed 's/^ */   /'
reason=$(on_ctl sinfo --noheader -R --format='%E|%N' | awk -F'|' -v n="$slurm2" '$2 == n { print $1 }')
echo "   sinfo -R: $slurm2 drained: $reason"
[ "$reason" = "ocigpu: being replaced (provision.yml) instance $old_id" ] || die "expected $slurm2 drained for its replacement, got: '$reason'"
ansible-inventory -i "$work/demo.gpu_nodes.yml" --list > "$work/inventory-replaced.json"
new_ip=$(hostvar "$work/inventory-replaced.json" "$node2" ansible_host)
new_id=$(hostvar "$work/inventory-replaced.json" "$node2" oci_instance_id)
carried=$(hostvar "$work/inventory-replaced.json" "$node2" ocigpu_slurm_name)
echo "   $node2 is now instance ${new_id: -12} at $new_ip (was ${old_id: -12} at $ip2) and carries the Slurm name '$carried'"
if [ "$carried" != "$slurm2" ] || [ -z "$new_id" ] || [ "$new_id" = "$old_id" ]; then die "the replacement does not carry $slurm2"; fi
demo_wait_standins 3
run_playbook "configure (the new node takes the name)" "$work/configure-replace.log" -i "$work/demo.gpu_nodes.yml" \
  playbooks/configure.yml --skip-tags nvme_scratch -e "@$work/standin-vars.yml"
grep -E 'TASK \[(Make the Slurm name the host name|Resume a name drained)' -A3 "$work/configure-replace.log" \
  | grep -E '^(changed|ok|skipping)' | sed 's/^/   /'
# The new instance installed the stack from the mirror, held to the lock file's sums: the file is
# unchanged (nothing was decided again) and the downloads ran on the new node.
[ "$(sha256sum < "$work/demo.lock.yml")" = "$lock_sum" ] || die "configuring the new node changed the lock file"
for task in 'enroot : Download the enroot packages' 'pyxis : Download the pyxis source archive' \
            'containerd_rootless : Download and check containerd-'; do
  grep -F "TASK [ocigpu.cluster.$task" -A8 "$work/configure-replace.log" | grep -qE "^changed: \[$node2\]" \
    || die "the new node did not download ($task); see $work/configure-replace.log"
done
echo "   the new instance downloaded enroot, pyxis and the containerd archives, held to the lock file's sums (unchanged)"
# slurmctld may list the name as NOT_RESPONDING until the new slurmd registers.
line=''
for _ in $(seq 60); do
  line=$(on_ctl scontrol show node --oneliner "$slurm2" | grep -oE 'NodeName=[^ ]+|NodeAddr=[^ ]+|State=[^ ]+' | paste -sd' ')
  [[ "$line" == *" State=IDLE" ]] && break; sleep 1
done
echo "   scontrol: $line"
[ "$line" = "NodeName=$slurm2 NodeAddr=$new_ip State=IDLE" ] || die "expected $slurm2 at $new_ip and IDLE, got: $line"
answer=$(on_ctl srun -w "$slurm2" hostname)
echo "   srun -w $slurm2 hostname: $answer"
# The cluster user added in step 6b exists on the new instance, with the same ids.
who=$(ansible "$node2" -i "$work/demo.gpu_nodes.yml" -m ansible.builtin.command -a 'id alice' 2>&1 | tail -1)
grep -q "uid=$alice_uid(alice) gid=9876(privilege)" <<< "$who" || die "the new instance of $node2 does not know alice: $who"
echo "   the new instance knows the cluster user added before it existed: $who"
[ "$answer" = "$slurm2" ] || die "the new node answered '$answer', not $slurm2"
ocigpu_status "$slurm2 replaced: a new instance under its name"
[ "$(status_of "$slurm2" instance_id)" = "$new_id" ] || die "ocigpu status does not show $slurm2's new instance; see $work/status-$status_n.json"
echo "   ocigpu events --node $slurm2:"
on_ctl ocigpu events --node "$slurm2" > "$work/events-$slurm2.txt" || die "ocigpu events failed"
sed 's/^/     /' "$work/events-$slurm2.txt" | tail -12
grep -q "ocigpu: being replaced (provision.yml) instance $old_id" "$work/events-$slurm2.txt" \
  || die "ocigpu events --node $slurm2 does not tell of its drain for the replacement; see $work/events-$slurm2.txt"
# The new instance sits on another host: the name moved to the switch of its local block.
[ "$(hostvar "$work/inventory-replaced.json" "$node2" oci_local_block_id)" != "$(hostvar "$work/inventory.json" "$node2" oci_local_block_id)" ] \
  || die "the replacement has the old node's local block; the check below would show nothing"
check_topology "$work/inventory-replaced.json"
# Now in two local blocks, a 2-node job that asks for one leaf switch waits (up to its 5 minutes)
# with both nodes idle, where the same job without --switches runs.
jobid=$(on_ctl sbatch --parsable -N2 --switches=1@5:00 --wrap hostname)
sleep 5
state=$(on_ctl squeue --noheader -j "$jobid" -o %T)
on_ctl scancel "$jobid"
echo "   sbatch -N2 --switches=1 across two local blocks: $state after 5 s, with both nodes idle (cancelled)"
[ "$state" = PENDING ] || die "a job asking for one leaf switch was $state across two local blocks"
answer=$(on_ctl srun -N2 hostname | sort | paste -sd' ')
[ "$(wc -w <<< "$answer")" -eq 2 ] || die "the same job without --switches did not run on both nodes: '$answer'"
ip2=$new_ip
record "replace a node under its Slurm name" $(( $(date +%s) - start ))

step "9b. A diagnostics bundle (diagnose.yml): the controller and both nodes, one of them unreachable, no secret in it"
start=$(date +%s)
# node 2's sshd stopped from outside (podman), so that the collector cannot reach it.
standin2=$(podman ps -q --filter "label=ocigpu-demo-instance=$new_id")
podman exec "$standin2" systemctl stop ssh.socket ssh.service 2>/dev/null || true
run_playbook "diagnose" "$work/diagnose.log" -i "$work/demo.gpu_nodes.yml" playbooks/diagnose.yml -e "@$work/cluster.yml" \
  -e "diag_dest=$work/diag"
podman exec "$standin2" systemctl start ssh.service || die "sshd of $slurm2 did not start again"
bundle=$(find "$work/diag" -maxdepth 1 -name 'ocigpu-diag-*.tar.gz' | sort | tail -1)
[ -f "$bundle" ] || die "diagnose.yml fetched no bundle; see $work/diagnose.log"
index() { tar -xzOf "$bundle" "$(basename "$bundle" .tar.gz)/INDEX.txt"; }
index | sed -n '/^nodes:/,/^$/p' | sed 's/^/   /'
index | grep -E "^ +$slurm1 .*collected" > /dev/null || die "the bundle has nothing of $slurm1; see $bundle"
index | grep -E "^ +$slurm2 .*unreachable" > /dev/null || die "the bundle does not name $slurm2 unreachable; see $bundle"
echo "   $(tar -tzf "$bundle" | wc -l) files in $(du -k "$bundle" | cut -f1) KiB: ${bundle#"$OCIGPU_ROOT"/}"
# No secret of the cluster in it: the munge key, the controller's diag key and SSH host keys, and
# every private key of root and the users on node 1 and on the shared home, each looked for whole.
rm -rf "$work/diag/x"; mkdir -p "$work/diag/x"; tar -xzf "$bundle" -C "$work/diag/x"
# shellcheck disable=SC2016  # expands on the host that runs it
secrets_of='base64 -w0 /etc/munge/munge.key; echo
for f in /etc/ocigpu-health/diag_ed25519 /etc/ssh/ssh_host_*_key /root/.ssh/id_* /home/*/.ssh/id_* /mnt/home/*/.ssh/*; do
  [ -f "$f" ] && grep -q "PRIVATE KEY" "$f" && grep -v -- "-----" "$f"
done | awk "length >= 60"; true'
{ on_ctl sh -c "$secrets_of"
  ansible "$node1" -i "$work/demo.gpu_nodes.yml" -b -m ansible.builtin.shell -a "$secrets_of" 2>/dev/null | tail -n +2; } \
  | awk 'length >= 40' | sort -u > "$work/diag/secrets.txt"
echo "   $(wc -l < "$work/diag/secrets.txt") secret lines of the controller and $slurm1 looked for in the bundle"
[ "$(wc -l < "$work/diag/secrets.txt")" -ge 10 ] || die "too few secrets read to look for; see $work/diag/secrets.txt"
if grep -rlF -f "$work/diag/secrets.txt" "$work/diag/x"; then die "a secret is in the bundle (the files above)"; fi
echo "   none found"
rm -rf "$work/diag/x" "$work/diag/secrets.txt"
record "a diagnostics bundle without secrets" $(( $(date +%s) - start ))

step "10. Shrinking to one node while a job runs on the node that goes"
start=$(date +%s)
# A 20-second job on that node, its srun waiting here: it must end on its own, not with its node.
ssh -F "$work/ssh_config" "opc@$bastion_ip" "sudo srun -w $slurm2 sh -c 'sleep 20; echo finished on \$(hostname)'" \
  > "$work/drain-job.out" 2>&1 &
job_pid=$!
for _ in $(seq 30); do on_ctl squeue --noheader --states=RUNNING --nodelist="$slurm2" | grep -q . && break; sleep 1; done
echo "   job running on $slurm2 ($node2): $(on_ctl squeue --noheader --format='%i %T %N' --nodelist="$slurm2")"
run_playbook "provision: 2 -> 1 node, the busy one named" "$work/provision-shrink.log" playbooks/provision.yml \
  -e "@$work/cluster.yml" -e gpu_node_count=1 -e "{\"gpu_remove_nodes\": [\"$node2\"]}" -e gpu_drain_poll_seconds=2
grep -E '"(leave|drain in Slurm|left the cluster network)' "$work/provision-shrink.log" | sed 's/^ */   /'
polls=$(grep -c 'FAILED - RETRYING: \[.*\]: Wait for their jobs' "$work/provision-shrink.log" || true)
echo "   provision waited for the job: $polls poll(s) of squeue while $slurm2 was draining"
wait "$job_pid" || die "the job on $slurm2 did not end well: $(cat "$work/drain-job.out")"
grep -q "^finished on" "$work/drain-job.out" || die "the job on $slurm2 gave no answer: $(cat "$work/drain-job.out")"
echo "   the job: $(cat "$work/drain-job.out") (exit 0: it ended before its node left)"
[ "$polls" -ge 1 ] || die "provision did not wait for the job on $slurm2"
for _ in $(seq 30); do [ "$(podman ps -q --filter label=ocigpu-demo=1 | wc -l)" -eq 2 ] && break; sleep 1; done
echo "   stand-ins running: $(podman ps -q --filter label=ocigpu-demo=1 | wc -l) (the bastion and one node)"
run_playbook "configure --tags slurm (slurm.conf without the node)" "$work/configure-shrink.log" \
  -i "$work/demo.gpu_nodes.yml" playbooks/configure.yml --tags slurm -e "@$work/standin-vars.yml"
nodes_left=$(on_ctl sinfo --noheader --Node --format=%N | sort -u)
echo "   Slurm nodes now: $nodes_left"
if [ "$(echo "$nodes_left" | wc -l)" -ne 1 ] || [ "$nodes_left" = "$slurm2" ]; then die "slurm.conf still has $slurm2"; fi
record "shrink 2 -> 1 with a drained busy node" $(( $(date +%s) - start ))

step "11. Tearing down, then checking that nothing billable is left"
run_playbook "teardown" "$work/teardown.log" playbooks/teardown.yml -e "@$work/cluster.yml"
grep -o 'Nothing billable of demo is left.' "$work/teardown.log" | head -n1 | sed 's/^/   /'
for _ in $(seq 30); do [ -z "$(podman ps -aq --filter label=ocigpu-demo=1)" ] && break; sleep 1; done
echo "   stand-ins left: $(podman ps -aq --filter label=ocigpu-demo=1 | wc -l)"

record "whole demo" $(( $(date +%s) - demo_start ))
step "Demo finished"
printf '   %s\n' "${done_steps[@]}"
calls=$(curl -s "$endpoint/_admin/calls" | jq '[.[]] | add // 0' 2>/dev/null || echo '?')
echo "   OCI API calls served by the simulator: $calls"
echo "   logs and generated files: ${work#"$OCIGPU_ROOT"/}/"
if [ -n "${DEMO_KEEP:-}" ]; then echo "   simulator still running: pid $DEMO_SIM_PID, $endpoint"; fi
