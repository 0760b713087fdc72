#!/usr/bin/env bash
# What a node's join costs on a baked image, one node on this machine alone: the command that ocigpu-pull
# builds on a current baked image (its configure_command: configure.yml and validate.yml, --tags
# node_join,health, the active check included), in a fresh container of the on-demand demo's baked image, with the bundle that
# one of that demo's baked nodes pulled. The demo's figure for four nodes at once shares two processors
# with the other stand-ins, slurmctld and the simulator; this one is a single join's processor time.
# Each round runs the join with ocigpu.cluster.mitogen_linear (what the pull runs) and, for reference,
# with Ansible's linear strategy, each on a new container; then Ansible's start and the playbooks' parse
# (--list-tasks). Prints each run, the medians and their ratio.
#
#   bash tests/perf/join_bench.sh                       # 3 rounds
#   ROUNDS=5 bash tests/perf/join_bench.sh
#   COLLECTION=checkout bash tests/perf/join_bench.sh   # this checkout's roles and playbooks, not the bundle's
#   EXTRA='-e ansible_become=false' bash tests/perf/join_bench.sh
#   PROFILE=1 bash tests/perf/join_bench.sh             # cProfile of the controller's process, each run:
#                                                       # .build/perf-join/<run>.profile.txt
#
# Its first run makes the image and the bundle with the on-demand demo (about 12 minutes:
# DEMO_JOIN_BENCH_DIR=.build/perf-join make demo-ondemand keeps them); a later demo removes the image,
# and the next run makes them again. What differs from a join in the demo: no metadata service (the
# shape given, ocigpu_use_imds=false), no controller (slurmd's unit runs a sleep, the munge key is
# random), the shared home is a folder of this machine. The container is on its own network,
# 198.18.140.0/24.
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
ROUNDS=${ROUNDS:-3}
out=$OCIGPU_ROOT/.build/perf-join
net=ocigpu-join-bench
name=ocigpu-join-bench
mkdir -p "$out"
image=$(cat "$out/image" 2>/dev/null || true)
if [ -z "$image" ] || ! podman image exists "$image" || [ ! -d "$out/bundle" ]; then
  log "making the baked image and a baked node's bundle: the on-demand demo (log: $out/demo.log)"
  rm -rf "$out/bundle" "$out/image"
  DEMO_JOIN_BENCH_DIR=$out DEMO_DIR=$out/demo bash tests/demo/ondemand.sh > "$out/demo.log" 2>&1 \
    || die "the on-demand demo failed; see $out/demo.log"
  image=$(cat "$out/image")
  [ -d "$out/bundle" ] || die "the demo left no baked node's bundle in $out/bundle"
fi
collection=''
if [ "${COLLECTION:-}" = checkout ]; then
  collection=$out/collection
  rm -rf "$collection"
  mkdir -p "$collection"
  cp -r COPYING galaxy.yml meta playbooks plugins roles "$collection/"
fi
mkdir -p "$out/home"
# The node's Slurm name, as its pull wrote the bundle's inventory.
node=$(awk 'NR == 2 { print $1 }' "$out/bundle/inventory.ini")

# pull_command STRATEGY: the ansible-playbook command line that ocigpu-pull runs on a current baked image
# (its configure_command, with the bundle's settings and the extra vars files it passes), one word a line.
pull_command() {
  "$VENV/bin/python" - "$out/bundle/pull.json" "$node" "$1" <<'PY'
import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location('ocigpu_pull', 'roles/slurm_autoscaler/files/ocigpu_pull.py')
pull = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pull)
with open(sys.argv[1]) as f:
    settings = json.load(f)
bundle = pull.DEFAULTS['prefix'] + '/bundle'
extra = [bundle + '/node-vars.yml', pull.DEFAULTS['prefix'] + '/join.json', bundle + '/local-vars.json']
print('\n'.join(pull.configure_command(pull.DEFAULTS['prefix'] + '/venv', bundle, sys.argv[2], settings, extra,
                                       join_only=True, check_strategy=sys.argv[3])))
PY
}
podman network exists "$net" || podman network create --subnet 198.18.140.0/24 "$net" >/dev/null
trap 'podman rm -f -t 0 "$name" >/dev/null 2>&1; podman network rm "$net" >/dev/null 2>&1 || true' EXIT

# join STRATEGY LABEL [ansible-playbook options]: one join on a new container; prints
# "<processor s> <user s> <sys s> <wall s> <recap of the node>".
join() {
  local strategy=$1 label=$2
  shift 2
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  podman run -d --name "$name" --hostname ocigpu-join-bench --network "$net:ip=198.18.140.10" --no-hosts \
    --privileged --systemd=always -v "$out/home:/mnt/home" \
    -v "$OCIGPU_ROOT/tests/demo/all_reduce_perf-standin.sh:/usr/local/bin/all_reduce_perf:ro" \
    -v "$OCIGPU_ROOT/tests/unit/data/nccl/seed000_a100_8gpu_10g.txt:/usr/local/share/ocigpu-demo/all_reduce_perf.txt:ro" \
    "$image" /sbin/init >/dev/null
  # As standin.sh does for the demo's nodes (host name, host keys), and slurmd without a controller.
  podman exec "$name" sh -c 'h=$(cat /etc/hostname); umount /etc/hostname && printf "%s\n" "$h" > /etc/hostname
    ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A >/dev/null
    echo "198.18.140.10 ocigpu-join-bench" >> /etc/hosts
    mkdir -p /etc/systemd/system/slurmd.service.d
    printf "[Service]\nType=simple\nExecStart=\nExecStart=/bin/sleep infinity\n" > /etc/systemd/system/slurmd.service.d/zz-join-bench.conf
    for i in $(seq 120); do  # the boot done (systemd answers on its bus)
      case $(systemctl is-system-running 2>/dev/null) in running|degraded) break ;; esac; sleep 0.5; done
    systemctl daemon-reload'
  podman cp "$out/bundle" "$name:/opt/ocigpu-pull/bundle"
  if [ -n "$collection" ]; then
    podman exec "$name" rm -rf /opt/ocigpu-pull/bundle/collections/ansible_collections/ocigpu/cluster
    podman cp "$collection" "$name:/opt/ocigpu-pull/bundle/collections/ansible_collections/ocigpu/cluster"
  fi
  # What the join answer gives (ocigpu_pull.join_vars): a munge key, slurmctld's address, root's MPI key pair.
  podman exec "$name" sh -c 'rm -rf /opt/ocigpu-pull/bundle/facts/*; ssh-keygen -q -t ed25519 -N "" -f /tmp/mpi >/dev/null
    python3 -c "
import base64, json, os
json.dump(dict(slurm_munge_key_b64=base64.b64encode(os.urandom(1024)).decode(), slurm_conf_server=\"198.18.140.1:6817\",
               slurm_node_name=\"$0\", mpi_ssh_keys=dict(root=dict(private=open(\"/tmp/mpi\").read(), public=open(\"/tmp/mpi.pub\").read()))),
          open(\"/opt/ocigpu-pull/join.json\", \"w\"))"' "$node"
  local b=/opt/ocigpu-pull/bundle argv
  mapfile -t argv < <(pull_command "$strategy")
  [ "${#argv[@]}" -gt 0 ] || die "ocigpu_pull.configure_command gave no command"
  # ansible-playbook in a Python that writes its own processor time (the controller's process: the
  # strategy, the variables, the callbacks) when it ends; with PROFILE, under cProfile too.
  podman exec -i "$name" sh -c 'cat > /tmp/own_time.py' <<'PY'
import cProfile, os, resource, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
profile = cProfile.Profile() if os.environ.get('PROFILE') else None
try:
    if profile:
        profile.enable()
    runpy.run_path(script, run_name='__main__')
finally:
    if profile:
        profile.disable()
        profile.dump_stats('/tmp/join.prof')
    own = resource.getrusage(resource.RUSAGE_SELF)
    with open('/tmp/own', 'w') as f:
        f.write('%.2f\n' % (own.ru_utime + own.ru_stime))
PY
  local python=${argv[0]%/*}/python
  podman exec -w "$b" -e ANSIBLE_CONFIG="$b/ansible.cfg" -e ANSIBLE_COLLECTIONS_PATH="$b/collections" -e ANSIBLE_NOCOLOR=1 \
    -e ANSIBLE_STRATEGY="$strategy" -e PROFILE="${PROFILE:-}" "$name" bash -c 'TIMEFORMAT="%U %S %R"
      { time "$@" -e ocigpu_use_imds=false -e ocigpu_shape=BM.GPU4.8 > /tmp/join.log 2>&1; } 2> /tmp/time
      echo $? > /tmp/rc' bash "$python" /tmp/own_time.py "${argv[@]}" "$@"
  podman exec "$name" cat /tmp/join.log > "$out/$label.log"
  local rc times recap own
  rc=$(podman exec "$name" cat /tmp/rc)
  [ "$rc" = 0 ] || die "the join ($label) exited $rc; see $out/$label.log"
  read -r -a times <<< "$(podman exec "$name" cat /tmp/time)"
  own=$(podman exec "$name" cat /tmp/own)
  if [ -n "${PROFILE:-}" ] && podman exec "$name" test -f /tmp/join.prof; then
    podman cp "$name:/tmp/join.prof" "$out/$label.prof"
    "$VENV/bin/python" -c 'import pstats, sys; pstats.Stats(sys.argv[1], stream=open(sys.argv[2], "w")).sort_stats("cumulative").print_stats(80)' \
      "$out/$label.prof" "$out/$label.profile.txt"
  fi
  recap=$(grep -E "^$node +:" "$out/$label.log" | tail -1 | sed "s/^$node *: *//; s/  */ /g" || true)
  printf '%.2f %.2f %.2f %.2f %.2f %s\n' "$(echo "${times[0]} + ${times[1]}" | bc)" "${times[0]}" "${times[1]}" "${times[2]}" \
    "$own" "$recap"
}

# EXTRA: ansible-playbook options for every join (word-split).
read -r -a extra <<< "${EXTRA:-}"
declare -a cpu_m cpu_l own_m
for round in $(seq "$ROUNDS"); do
  for strategy in ocigpu.cluster.mitogen_linear linear; do
    line=$(join "$strategy" "round$round-${strategy##*.}" "${extra[@]}")
    read -r cpu user sys wall own recap <<< "$line"
    log "round $round, $strategy: $cpu s of processor time (user $user, sys $sys; the controller's process $own), $wall s wall; $recap"
    if [ "$strategy" = linear ]; then cpu_l+=("$cpu"); else cpu_m+=("$cpu"); own_m+=("$own"); fi
  done
done
line=$(join ocigpu.cluster.mitogen_linear list-tasks --list-tasks "${extra[@]}")
read -r start _ <<< "$line"
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m=$(median "${cpu_m[@]}")
l=$(median "${cpu_l[@]}")
echo
echo "a node's join on the baked image, alone on this machine (median processor time of $ROUNDS round(s)):"
printf '  ocigpu.cluster.mitogen_linear (the pull)  %6.2f s\n' "$m"
printf "    of which the controller's own process   %6.2f s (the rest: workers, the node's Python, commands)\n" \
  "$(median "${own_m[@]}")"
printf "  Ansible's linear (reference)              %6.2f s\n" "$l"
printf '  ratio                                     %6.2f\n' "$(echo "$m / $l" | bc -l)"
printf "  of which Ansible's start and the parse    %6.2f s (--list-tasks)\n" "$start"
source_of=${COLLECTION:-bundle}
echo "  collection: the $source_of's; options: ${EXTRA:-none}; logs: $out/"
printf 'reproduce: ROUNDS=%s%s%s bash tests/perf/join_bench.sh\n' "$ROUNDS" "${COLLECTION:+ COLLECTION=$COLLECTION}" \
  "$([ -z "${EXTRA:-}" ] || printf ' EXTRA=%q' "$EXTRA")"
