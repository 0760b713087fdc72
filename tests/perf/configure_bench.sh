#!/usr/bin/env bash
# Benchmark of configure.yml over SSH through the bastion, on the demo's local stand-ins
# (tests/demo/lib.sh: the simulator launches one systemd container per instance).
#
# For each node count it provisions a cluster against the simulator, then times five runs of the
# whole configure.yml (every role that needs no GPU, NVMe disk or RDMA NIC, firewall on):
#   first    - the first run on fresh stand-ins
#   re-run   - the same run again (idempotent: nothing to change; every role is current on every
#              host, so role_records lets configure.yml skip them all: docs/rerun.md)
#   full     - the same again with configure_skip_unchanged=false: every role runs all its tasks
#   --tags slurm - one role re-applied whole (configure_skip_unchanged=false), as after editing Slurm
#              settings (a changed setting makes the role run on every host)
#   --tags slurm, current - the same with nothing changed: the role is skipped
# and prints the times, the re-runs as a share of the first run, and where the time went (the
# ansible.posix profile_roles and profile_tasks recaps of each run).
#
#   bash tests/perf/configure_bench.sh          # 2 and 8 nodes
#   bash tests/perf/configure_bench.sh 2 4 8    # other counts
#   FIRST_ONLY=1 bash tests/perf/configure_bench.sh 4    # the first run only
#   STRATEGY=ocigpu.cluster.mitogen_linear bash tests/perf/configure_bench.sh 2   # with Mitogen
#
# Needs what `make demo` needs (tests/infra/host.sh, venv.sh, build-image.sh). Logs: .build/perf/.
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles,ansible.posix.profile_tasks
# STRATEGY=ocigpu.cluster.mitogen_linear: the configure runs and the calibration with Mitogen's
# strategy, as docs/playbooks.md turns it on (provision and the stand-ins' wait keep the default).
STRATEGY=${STRATEGY:-linear}
. "$OCIGPU_ROOT/tests/demo/lib.sh"

counts=("$@")
[ "${#counts[@]}" -gt 0 ] || counts=(2 8)
base=$OCIGPU_ROOT/.build/perf
rm -rf "$base"
mkdir -p "$base"
trap demo_stop EXIT
# A stop by signal also removes the stand-ins and ends the simulator (through the EXIT trap).
trap 'exit 143' TERM INT
declare -a rows=() calib=()

# timed LOG ARGS...: run configure.yml, print and return its wall time in seconds.
timed() {
  local log=$1 start; shift
  start=$(date +%s.%N)
  ANSIBLE_STRATEGY=$STRATEGY ansible-playbook -i "$DEMO_WORK/demo.gpu_nodes.yml" playbooks/configure.yml --skip-tags nvme_scratch \
    -e "@$DEMO_WORK/standin-vars.yml" "$@" > "$log" 2>&1 || { tail -30 "$log" >&2; die "configure failed; see $log"; }
  awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.1f\n", a - b }'
}

# all_current LOG: true when the run's 'Say why each role runs' names no role to run on any host.
all_current() {
  ! awk '/^TASK \[Say why each role runs\]/ { s = 1; next } /^TASK / { s = 0 } s && /^ +"[a-z_]+": "/ && !/"(msg|nvme_scratch)": /' "$1" \
    | grep -q .
}

# recap LOG: the slowest roles and tasks of one run.
recap() {
  awk '/^ROLES RECAP/ { r = 1; next } /^TASKS RECAP/ { r = 0 } r && / -+ [0-9.]+s$/ { print "      role  " $0 }' "$1" | head -n 6
  awk '/^TASKS RECAP/ { t = 1; next } t && / -+ [0-9.]+s$/ { print "      task  " $0 }' "$1" | head -n 5
}

# calibrate: seconds per task of CALIB_TASKS remote no-op tasks (ansible.builtin.ping: one module run
# on every host over the same SSH path) and of as many controller-only tasks (set_fact), on the same
# hosts right after the configure runs. A configure time divided by the remote round's is that run in
# task rounds of this machine at this moment: a reference that the machine's noise moves alike.
calibrate() {
  local play=$DEMO_WORK/calibrate.yml n=${CALIB_TASKS:-20} i remote ctl
  {
    printf -- '- name: Remote no-op tasks\n  hosts: bastion:gpu_nodes\n  gather_facts: false\n  become: true\n  tasks:\n'
    for i in $(seq "$n"); do printf '    - name: ping %s\n      ansible.builtin.ping:\n' "$i"; done
    printf -- '- name: Controller-only tasks\n  hosts: bastion:gpu_nodes\n  gather_facts: false\n  tasks:\n'
    for i in $(seq "$n"); do printf '    - name: set_fact %s\n      ansible.builtin.set_fact:\n        _calib: %s\n' "$i" "$i"; done
  } > "$play"
  # The SSH connections of the configure runs are still open (ControlPersist).
  ANSIBLE_STRATEGY=$STRATEGY ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=all ansible-playbook -i "$DEMO_WORK/demo.gpu_nodes.yml" "$play" \
    > "$DEMO_WORK/calibrate.log" 2>&1 || { tail -20 "$DEMO_WORK/calibrate.log" >&2; log "calibration FAILED: no task-round figures"; echo "0 0"; return; }
  # The recap's per-task times, summed per kind.
  remote=$(awk '/^ping [0-9]+ -+ [0-9.]+s$/ { sub(/s$/, "", $NF); t += $NF } END { printf "%.3f", t }' "$DEMO_WORK/calibrate.log")
  ctl=$(awk '/^set_fact [0-9]+ -+ [0-9.]+s$/ { sub(/s$/, "", $NF); t += $NF } END { printf "%.3f", t }' "$DEMO_WORK/calibrate.log")
  awk -v r="$remote" -v l="$ctl" -v n="$n" 'BEGIN { printf "%.3f %.3f\n", r / n, l / n }'
}

# tasks LOG: the number of task rounds (TASK and RUNNING HANDLER headers) of one run.
tasks() { grep -cE '^(TASK|RUNNING HANDLER) \[' "$1" || true; }

changed_total() { grep -E '^[^ ]+ +: ok=' "$1" | sed -E 's/.*changed=([0-9]+).*/\1/' | awk '{ n += $1 } END { print n + 0 }'; }

for n in "${counts[@]}"; do
  DEMO_WORK=$base/n$n
  mkdir -p "$DEMO_WORK"
  log "--- $n nodes: provisioning against the simulator"
  demo_start_sim
  demo_write_files "$n"
  demo_artifacts
  ansible-playbook playbooks/provision.yml -e "@$DEMO_WORK/cluster.yml" > "$DEMO_WORK/provision.log" 2>&1 \
    || { tail -30 "$DEMO_WORK/provision.log"; die "provision failed"; }
  demo_wait_standins $((n + 1))
  log "--- $n nodes: first configure"
  first=$(timed "$DEMO_WORK/first.log")
  phases=(first)
  if [ -n "${FIRST_ONLY:-}" ]; then  # only the first run (tests/perf/pull_bench.sh compares it)
    rerun=0 full=0 slurm=0 slurm_current=0
    : > "$DEMO_WORK/rerun.log"
  else
    phases+=(rerun full slurm slurm-current)
    log "--- $n nodes: idempotent re-run"
    rerun=$(timed "$DEMO_WORK/rerun.log")
    # Every role must have been current on every host (the first run recorded them all).
    all_current "$DEMO_WORK/rerun.log" || die "the idempotent re-run found roles to run; see 'Say why each role runs' in $DEMO_WORK/rerun.log"
    log "--- $n nodes: full re-run (configure_skip_unchanged=false)"
    full=$(timed "$DEMO_WORK/full.log" -e configure_skip_unchanged=false)
    log "--- $n nodes: --tags slurm (configure_skip_unchanged=false)"
    slurm=$(timed "$DEMO_WORK/slurm.log" --tags slurm -e configure_skip_unchanged=false)
    log "--- $n nodes: --tags slurm (nothing changed: the role is current and skipped)"
    slurm_current=$(timed "$DEMO_WORK/slurm-current.log" --tags slurm)
    # The runs with configure_skip_unchanged=false made no comparison; what they recorded must match.
    all_current "$DEMO_WORK/slurm-current.log" || die "--tags slurm found the role to run after it was applied; see $DEMO_WORK/slurm-current.log"
  fi
  log "--- $n nodes: calibration (${CALIB_TASKS:-20} remote no-op tasks, ${CALIB_TASKS:-20} controller-only tasks)"
  read -r per_remote per_local < <(calibrate)
  rows+=("$(printf '%5s  %8.1f  %8.1f %5.0f%%  %8.1f %5.0f%%  %8.1f %5.0f%%  %8.1f %5.0f%%  %9s' "$n" "$first" "$rerun" \
    "$(awk -v a="$rerun" -v b="$first" 'BEGIN { print 100 * a / b }')" "$full" \
    "$(awk -v a="$full" -v b="$first" 'BEGIN { print 100 * a / b }')" "$slurm" \
    "$(awk -v a="$slurm" -v b="$first" 'BEGIN { print 100 * a / b }')" "$slurm_current" \
    "$(awk -v a="$slurm_current" -v b="$first" 'BEGIN { print 100 * a / b }')" \
    "$(( $(changed_total "$DEMO_WORK/rerun.log") + $(changed_total "$DEMO_WORK/full.log") ))")")
  calib+=("$(printf '%5s  %9.3f  %9.3f  %9s  %9.0f  %9s  %9.0f' "$n" "$per_remote" "$per_local" \
    "$(tasks "$DEMO_WORK/rerun.log")" "$(awk -v a="$rerun" -v b="$per_remote" 'BEGIN { print (b > 0 ? a / b : 0) }')" \
    "$(tasks "$DEMO_WORK/slurm.log")" "$(awk -v a="$slurm" -v b="$per_remote" 'BEGIN { print (b > 0 ? a / b : 0) }')")")
  for phase in "${phases[@]}"; do
    echo "  $n nodes, $phase: where the time went" >> "$base/recaps.txt"
    recap "$DEMO_WORK/$phase.log" >> "$base/recaps.txt"
  done
  demo_stop
done

echo
echo "configure.yml over SSH through the bastion (whole stack but nvme_scratch), strategy $STRATEGY, seconds:"
printf '%5s  %8s  %8s %6s  %8s %6s  %8s %6s  %8s %6s  %9s\n' nodes first re-run share full share 'slurm' share 'slurm-cur' share 'changed*'
printf '%s\n' "${rows[@]}"
echo "  re-run: roles current on every host are skipped (role_records); full: configure_skip_unchanged=false,"
echo "  every task of every role runs; slurm: --tags slurm with every task of the role; slurm-cur: --tags"
echo "  slurm with nothing changed (the role is current, so it is skipped)"
echo "  * tasks reported changed by the re-run and the full re-run, all hosts together (0 expected)"
echo "  goals: re-run and --tags slurm (applied whole) each at most 15 % of the first run"
echo
echo "task rounds on the same hosts right after (seconds a round; a run in rounds of a remote no-op task):"
printf '%5s  %9s  %9s  %9s  %9s  %9s  %9s\n' nodes 'remote' 'local' 're-run' 'as remote' 'slurm' 'as remote'
printf '%s\n' "${calib[@]}"
echo "  remote: one ansible.builtin.ping on every host; local: one set_fact; re-run and slurm: their task"
echo "  rounds (headers), then their time in remote no-op rounds - what the run would cost if every round"
echo "  were one module run on every host"
echo
cat "$base/recaps.txt"
echo
echo "reproduce: STRATEGY=$STRATEGY bash tests/perf/configure_bench.sh ${counts[*]}   (logs under .build/perf/)"
