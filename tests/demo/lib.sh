# Shared steps of `make demo` (tests/demo/run.sh) and the configure benchmark
# (tests/perf/configure_bench.sh): the simulator with local stand-ins, the cluster vars, the
# inventory reached over SSH through the bastion, and the test artifacts the roles install.
# Source it after tests/infra/lib.sh (it puts the venv on PATH and points Ansible at the checkout);
# set DEMO_WORK (a fresh folder) before calling its functions.
# shellcheck shell=bash

export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$OCIGPU_ROOT/.build/collections"
export ANSIBLE_CONFIG="$OCIGPU_ROOT/ansible.cfg"

DEMO_PRIVATE_NET=198.18.120.0/22     # the demo VCN: both subnets live on one podman network
DEMO_PUBLIC_NET=198.18.124.0/24      # public IPs the simulator hands out (the bastion's)
DEMO_GATEWAY=198.18.120.1            # this machine on the private network (serves the artifacts)
DEMO_ARTIFACT_PORT=8765

# demo_remove_standins [KEEP_IMAGES]: with an argument, the images of this run stay (until the next).
demo_remove_standins() {
  local ids keep_images=${1:-}
  mapfile -t ids < <(podman ps -aq --filter label=ocigpu-demo=1)
  [ "${#ids[@]}" -eq 0 ] || podman rm -f -t 2 "${ids[@]}" >/dev/null
  ! podman network exists ocigpu-demo || podman network rm ocigpu-demo >/dev/null
  ! podman network exists ocigpu-demo-public || podman network rm ocigpu-demo-public >/dev/null
  # The images a bake made (standin.sh commits a builder's container when the simulator creates a
  # custom image): an image of an earlier run is never reused, as an OCI image is the run's own.
  [ -z "$keep_images" ] || return 0
  mapfile -t ids < <(podman images -q --filter label=ocigpu-demo-image 2>/dev/null | sort -u)
  [ "${#ids[@]}" -eq 0 ] || podman rmi -f "${ids[@]}" >/dev/null 2>&1 || true
}

# demo_check_addresses: podman's CNI backend keeps its address reservations in one folder for every
# storage, so a stand-in of a demo that runs under another CONTAINERS_STORAGE_CONF (a second checkout's
# `make test`) still holds its address here, and this demo's stand-in at that address cannot start.
demo_check_addresses() {
  local f held=()
  for f in /var/lib/cni/networks/ocigpu-demo/[0-9]* /var/lib/cni/networks/ocigpu-demo-public/[0-9]*; do
    [ -e "$f" ] && held+=("${f##*/} (container $(head -c 12 "$f" 2>/dev/null))")
  done
  [ "${#held[@]}" -eq 0 ] || die "the demo's addresses are still held: ${held[*]}; a demo of another podman storage (CONTAINERS_STORAGE_CONF) is running or left its stand-ins; remove them first"
}

# demo_start_sim: the networks, then the simulator in the background (DEMO_SIM_PID, DEMO_ENDPOINT,
# DEMO_COMPARTMENT; DEMO_SIM_ARGS: more of its options); its instance hook starts and removes the
# stand-ins. Its hosts fill local blocks of two: a cluster's first two nodes share one, a third (or a
# replacement) sits in another.
demo_start_sim() {
  demo_remove_standins
  podman network create --subnet "$DEMO_PRIVATE_NET" --gateway "$DEMO_GATEWAY" ocigpu-demo >/dev/null
  podman network create --subnet "$DEMO_PUBLIC_NET" --gateway "${DEMO_PUBLIC_NET%.0/24}.1" ocigpu-demo-public >/dev/null
  demo_check_addresses
  local sim_args=()
  read -ra sim_args <<< "${DEMO_SIM_ARGS:-}"
  python -m tests.ocisim --port 0 --write-config "$DEMO_WORK/oci/config" --public-ip-cidr "$DEMO_PUBLIC_NET" \
    --on-instance "bash $OCIGPU_ROOT/tests/demo/standin.sh" --hook-log "$DEMO_WORK/standins.log" \
    --local-block-hosts 2 "${sim_args[@]}" > "$DEMO_WORK/sim.json" 2> "$DEMO_WORK/sim.log" &
  DEMO_SIM_PID=$!
  local _
  for _ in $(seq 50); do [ -s "$DEMO_WORK/sim.json" ] && break; sleep 0.2; done
  [ -s "$DEMO_WORK/sim.json" ] || die "the simulator did not start; see $DEMO_WORK/sim.log"
  DEMO_ENDPOINT=$(jq -r .endpoint "$DEMO_WORK/sim.json")
  DEMO_COMPARTMENT=$(jq -r .compartment_id "$DEMO_WORK/sim.json")
}

# demo_stop: the simulator, the artifact server and the stand-ins (unless DEMO_KEEP is set).
demo_stop() {
  [ -z "${DEMO_KEEP:-}" ] || return 0
  [ -z "${DEMO_SIM_PID:-}" ] || kill "$DEMO_SIM_PID" 2>/dev/null || true
  [ -z "${DEMO_HTTP_PID:-}" ] || kill "$DEMO_HTTP_PID" 2>/dev/null || true
  DEMO_SIM_PID='' DEMO_HTTP_PID=''
  # The join benchmark (tests/perf/join_bench.sh) starts its nodes from this run's baked image.
  demo_remove_standins "${DEMO_JOIN_BENCH_DIR:-}"
}

# demo_write_files NODES: SSH key, cluster vars, inventory source, SSH client settings and the
# stand-in role vars under DEMO_WORK.
demo_write_files() {
  local nodes=$1 w=$DEMO_WORK
  ssh-keygen -q -t ed25519 -N '' -C demo -f "$w/id_ed25519"
  cat > "$w/cluster.yml" <<YAML
cluster_name: demo
compartment_id: $DEMO_COMPARTMENT
ssh_source_cidrs: [203.0.113.10/32]
ssh_public_key_file: $w/id_ed25519.pub
gpu_shape: BM.GPU4.8
gpu_node_count: $nodes
vcn_cidr: 198.18.120.0/22
public_subnet_cidr: 198.18.120.0/24
private_subnet_cidr: 198.18.121.0/24
oci_config_file: $w/oci/config
oci_service_endpoint: $DEMO_ENDPOINT
YAML
  # The inventory exactly as a user writes it for a real cluster: hosts on their private IPs,
  # reached through the bastion's public IP (the jump set by the plugin), with the demo's key for both
  # hops; the stand-ins' host keys are new on every run, so none is recorded (known_hosts /dev/null).
  cat > "$w/demo.gpu_nodes.yml" <<YAML
plugin: ocigpu.cluster.gpu_nodes
compartments: [$DEMO_COMPARTMENT]
cluster: demo
config_file: $w/oci/config
service_endpoint: $DEMO_ENDPOINT
private_key_file: $w/id_ed25519
known_hosts_file: /dev/null
YAML
  # provision.yml records the bastion's key (a resize drains nodes there): a run starts as after a teardown.
  rm -f "$HOME/.ocigpu/demo/known_hosts" "$HOME/.ocigpu/demo/known_hosts.old"
  # On OCI a node learns its subnet from the metadata service, and the firewall trusts that subnet.
  # The stand-ins cannot reach it, and one podman network carries both subnets (its prefix is the
  # VCN's /22), so each group is told its subnet, as group_vars beside the inventory.
  mkdir -p "$w/group_vars"
  printf 'firewall_trust_primary_subnet: false\nfirewall_trusted_sources: [198.18.121.0/24]\n' > "$w/group_vars/gpu_nodes.yml"
  printf 'firewall_trust_primary_subnet: false\nfirewall_trusted_sources: [198.18.120.0/24]\n' > "$w/group_vars/bastion.yml"
  # The ports roles declare for the cluster open to the VCN alone, as configure.yml does with the
  # cluster vars (the demo's configure runs take the stand-ins' vars only).
  printf 'firewall_cluster_cidrs: [198.18.120.0/22]\n' > "$w/group_vars/all.yml"
  # What a user has in ~/.ssh/config (-F; the jump through the bastion is the inventory's ProxyCommand).
  cat > "$w/ssh_config" <<CFG
Host *
  IdentityFile $w/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  ControlMaster auto
  ControlPath $w/cm-%C
  ControlPersist 300s
  ServerAliveInterval 30
CFG
  export ANSIBLE_SSH_ARGS="-F $w/ssh_config"
  # Facts of earlier demos (same host names, other addresses) must not be reused.
  export ANSIBLE_CACHE_PLUGIN_CONNECTION="$w/facts"
}

# demo_artifacts: a local mirror in the upstreams' layout (DEMO_WORK/artifacts/github), served to the
# stand-ins from this machine once the private network exists (demo_wait_standins): the
# containerd_rootless archives assembled from Debian's binaries with each project's checksum file
# beside them, nerdctl's full bundle as a stand-in holding bypass4netns, the enroot stand-in packages
# (enroot publishes no checksum file) and the pyxis stand-in source archive. The stand-ins carry
# versions of their own ("-standin"): the roles' tables of verified sums hold the real releases'
# sums and would (rightly) refuse them under the real versions. No sum is given: the roles decide
# them from the checksum files and first downloads, and lock them in DEMO_WORK/demo.lock.yml.
# Writes the role settings to DEMO_WORK/standin-vars.yml.
DEMO_STANDIN_VERSION_ENROOT=4.1.2
DEMO_STANDIN_VERSION_PYXIS=0.24.0-standin
demo_artifacts() {
  local w=$DEMO_WORK gh=$DEMO_WORK/artifacts/github
  local cache
  cache=$OCIGPU_CACHE/demo-mirror-$(cat tests/infra/artifacts/containerd/build-archives.sh tests/infra/image/* | sha256sum | cut -c1-12)
  if [ ! -s "$cache/meta.json" ]; then
    # Debian 13's binaries, from the stand-ins' own image (this machine runs Debian 12).
    rm -rf "$cache.tmp"; mkdir -p "$cache.tmp"
    podman run --rm --network none -v "$cache.tmp:/out" \
      -v "$OCIGPU_ROOT/tests/infra/artifacts/containerd/build-archives.sh:/build-archives.sh:ro" \
      "${DEMO_IMAGE:-localhost/ocigpu-test:debian13}" bash /build-archives.sh /out >/dev/null
    rm -rf "$cache.tmp/tampered" "$cache"; mv "$cache.tmp" "$cache"
  fi
  mkdir -p "$gh"
  cp -r "$cache/." "$gh/"
  local enroot_dir=$gh/NVIDIA/enroot/releases/download/v$DEMO_STANDIN_VERSION_ENROOT
  bash tests/infra/artifacts/build-enroot-debs.sh "$enroot_dir" "$DEMO_STANDIN_VERSION_ENROOT" >/dev/null
  rm -f "$enroot_dir/SHA256SUMS"       # enroot's releases publish none
  bash tests/infra/artifacts/build-pyxis-standin.sh "$gh/NVIDIA/pyxis/archive/refs/tags" "$DEMO_STANDIN_VERSION_PYXIS" >/dev/null
  rm -f "$gh/NVIDIA/pyxis/archive/refs/tags/"*.sha256   # nor do GitHub's tag archives
  local mirror="http://$DEMO_GATEWAY:$DEMO_ARTIFACT_PORT/github"
  {
    cat <<YAML
# Stand-ins are containers: no metadata service, and Slurm without cgroup containment.
ocigpu_use_imds: false
slurm_proctrack_type: proctrack/linuxproc
slurm_task_plugin: task/none
slurm_jobacct_gather_type: jobacct_gather/linux
# The cluster's lock file of downloaded artifacts, beside the cluster's vars (docs/artifacts.md).
ocigpu_lock_file: $w/demo.lock.yml
# Where the bytes come from: the local mirror in GitHub's layout. nerdctl itself is left out: it has
# no Debian package and cannot be downloaded here. Overlay on overlay fails: the native snapshotter.
containerd_rootless_url_base: $mirror
containerd_rootless_components: [containerd, runc, cni_plugins, rootlesskit, slirp4netns, bypass4netns]
containerd_rootless_snapshotter: native
containerd_rootless_remote_fstypes: [nfs, nfs4, overlay]
enroot_url_base: $mirror/NVIDIA/enroot/releases/download/v$DEMO_STANDIN_VERSION_ENROOT
pyxis_url_base: $mirror/NVIDIA/pyxis/archive/refs/tags
pyxis_version: $DEMO_STANDIN_VERSION_PYXIS
# No GPUs and no NVIDIA repository here: the toolkit's GPU-less path.
nvidia_container_toolkit_manage_repo: false
nvidia_container_toolkit_install: false
# slurmd runs the node health checks every 5 seconds here (300 by default), so that the demo sees
# a sick stand-in drained and a healed one resumed within seconds.
node_health_interval: 5
enroot_sysctl_apply: false
containerd_rootless_versions:
YAML
    jq -r '.versions | to_entries[] | "  \(.key): \"\(.value)\""' "$cache/meta.json"
  } > "$w/standin-vars.yml"
  demo_check_vars "$w/standin-vars.yml"
}

# demo_check_vars FILE: the demo runs the shipped defaults. Its variables may say where the bytes come
# from and describe the stand-ins, but never choose an install method or give a sum.
demo_check_vars() {
  local bad
  bad=$(grep -nE '^[a-z0-9_]*(install_method|sha256|checksums?)[a-z0-9_]*:' "$1" || true)
  [ -z "$bad" ] || die "the demo's variables override an install method or a sum ($1): $bad"
}

# demo_wait_standins COUNT: wait until COUNT stand-ins run and answer SSH through the bastion.
demo_wait_standins() {
  local want=$1 running=0 _
  for _ in $(seq 120); do
    running=$(podman ps -q --filter label=ocigpu-demo=1 --filter status=running | wc -l)
    [ "$running" -ge "$want" ] && break; sleep 1
  done
  [ "$running" -ge "$want" ] || { tail -8 "$DEMO_WORK/standins.log" | sed 's/^/   stand-ins: /'
    die "only $running of $want stand-ins are running; see $DEMO_WORK/standins.log"; }
  # The bridge holds the gateway address now: serve the artifacts there.
  if [ -z "${DEMO_HTTP_PID:-}" ]; then
    python3 -m http.server "$DEMO_ARTIFACT_PORT" --bind "$DEMO_GATEWAY" --directory "$DEMO_WORK/artifacts" \
      > "$DEMO_WORK/http.log" 2>&1 &
    DEMO_HTTP_PID=$!
    # A server left over on the port (another demo's) would serve another folder's files.
    sleep 1
    kill -0 "$DEMO_HTTP_PID" 2>/dev/null \
      || die "the artifact server did not start on $DEMO_GATEWAY:$DEMO_ARTIFACT_PORT: $(tail -1 "$DEMO_WORK/http.log")"
  fi
  # Ansible's own strategy, as boot_wait.yml's play keeps it (Mitogen's wait_for_connection failed
  # behind the bastion: docs/playbooks.md).
  ANSIBLE_STRATEGY=linear ansible all -i "$DEMO_WORK/demo.gpu_nodes.yml" -m ansible.builtin.wait_for_connection -a timeout=120 \
    > "$DEMO_WORK/wait.log" 2>&1 || { tail -20 "$DEMO_WORK/wait.log"; die "the stand-ins do not answer SSH"; }
}

# ocigpu_status WHEN: `ocigpu status` on the controller (docs/operations.md; through the caller's
# on_ctl), printed, and its JSON kept in $DEMO_WORK/status-<n>.json for the checks that follow.
status_n=0
ocigpu_status() {
  status_n=$((status_n + 1))
  echo "   ocigpu status ($1):"
  on_ctl ocigpu status | sed 's/^/     /'
  on_ctl ocigpu status --json --no-figures > "$DEMO_WORK/status-$status_n.json" || die "ocigpu status --json failed"
}
# status_of NAME KEY: a field of a node's row in the last ocigpu status --json.
status_of() { jq -r --arg n "$1" --arg k "$2" '.nodes[] | select(.node == $n) | .[$k] // ""' "$DEMO_WORK/status-$status_n.json"; }
