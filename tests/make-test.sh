#!/usr/bin/env bash
# `make test`: every test, in stages, each with a one-line summary, its duration and how busy the
# machine's CPUs were meanwhile. Every stage runs even when an earlier one failed, so one run shows
# all that is wrong; the exit status is non-zero when any stage failed.
#
# Select stages with STAGES="lint sanity unit molecule integration install demo" (the default is
# below; demo is demo-whole-stack then demo-ondemand); stages joined by "+" run at the same time,
# each into its own log; a stage written "name&" starts in the background, runs beside the stages
# after it and is waited for at the next group written "wait", or before the summary. Molecule
# scenarios are chosen with SCENARIOS="common firewall" (default: every folder under molecule/ with
# a molecule.yml; the VM's scenario node_vm is left to the stage molecule-vm where STAGES names it);
# MOLECULE_JOBS=N runs N scenarios at a time (default 2 beside molecule-vm, else 3: with three
# lanes both CPUs of the 2-core test machine stay busy, 99 % in the last full run).
set -uo pipefail
. "$(dirname "$0")/infra/lib.sh"
cd "$OCIGPU_ROOT" || exit 1

# The default order: the Debian packages first; the image builds (mostly downloads and unpacking) in
# the background beside the venv (mostly downloads), then beside the checks that need the venv alone
# (lint, sanity and unit together: from empty caches the images took 231 s, the venv 86 s). Then the
# VM's scenario in the background (software emulation keeps one CPU busy: 20 minutes in a lane of
# its own; the longest stage), beside the container scenarios (two at a time). Once those are done,
# the whole-stack demo (65 % busy alone) with the user's install beside it at a lower priority, then
# the on-demand demo beside the integration tests at a lower priority. On 2026-11-30, from empty
# caches: the install took 143 s beside the whole-stack demo against 287 s beside the container
# scenarios, which took 713 s alone against 766 s with it; the demo 524 s against 580 s (the VM's
# scenario had ended; it overlapped the demo by 183 s in the run before). The on-demand demo mostly
# waits (its nodes' boots, Slurm's power saving, the self-healing loop's steps: 49 % busy after the
# tests), and the tests fill those waits; they share nothing with it (their simulators are their own
# processes on their own ports, with no container). On 2026-11-30: the on-demand demo alone 853 s,
# the tests alone 764 s (1,267 CPU-seconds), the two together 953 s and 870 s. Before, the tests ran
# beside both demos, whole-stack first: it took 964 s beside them against 570 s alone, and the
# on-demand demo ran alone after them, half of the CPUs idle (2,966 s for the whole run on 6398f46;
# the demos' part 1,836 s against 1,610 s on 492c733, on a slower day). Beside the container
# scenarios (at nice 10) the on-demand demo took 1,670 s against 1,031 s (docs/testing.md). The two
# demos never run together: they use the same podman networks and artifact port; the VM's network is
# qemu's own (user mode), with no host interface.
STAGES=${STAGES:-host images& venv lint+sanity+unit wait molecule-vm& molecule demo-whole-stack+install integration+demo-ondemand}
# VM_APART: the VM's scenario has a stage of its own (molecule-vm), so the molecule stage leaves it out.
VM_APART=''
for _m in $(tr '+&' '  ' <<< "$STAGES"); do [ "$_m" != molecule-vm ] || VM_APART=1; done
LOGDIR=${LOGDIR:-$OCIGPU_ROOT/tests/output/logs}
mkdir -p "$LOGDIR"
rm -f "$LOGDIR/.molecule-retried" "$LOGDIR/.molecule-skipped"
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$OCIGPU_ROOT/.build/collections"
export PYTHONUNBUFFERED=1

RESULTS=$LOGDIR/.results   # one line per finished stage: STATUS NAME SECONDS CPU% RC
: > "$RESULTS"

# cpu_ticks: the machine's busy and total CPU ticks so far ("busy total"), from /proc/stat.
cpu_ticks() {
  local _cpu u n s i w q sq st _rest
  read -r _cpu u n s i w q sq st _rest < /proc/stat
  echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}

# busy_pct "BUSY0 TOTAL0": how busy the CPUs were since that cpu_ticks reading, in percent.
busy_pct() {
  local b0 t0 b1 t1
  read -r b0 t0 <<< "$1"
  read -r b1 t1 <<< "$(cpu_ticks)"
  echo $(( (b1 - b0) * 100 / (t1 - t0 > 0 ? t1 - t0 : 1) ))
}

# record STATUS NAME SECONDS CPU RC LOG: one result line, and its summary line printed now.
record() {
  printf '%s %s %s %s %s %s\n' "$@" >> "$RESULTS"
  summary_line "$@" | sed 's/^/==> /'
}

# summary_line STATUS NAME SECONDS CPU RC LOG
summary_line() {
  if [ "$1" = PASS ]; then
    printf 'PASS  %-34s %5ss  cpu %3s%%\n' "$2" "$3" "$4"
  else
    printf 'FAIL  %-34s %5ss  cpu %3s%%  (rc=%s, log: %s)\n' "$2" "$3" "$4" "$5" "${6#"$OCIGPU_ROOT"/}"
  fi
}

# stage NAME COMMAND... : run one stage and record its result. Its output goes to the terminal and
# its log, or to its log alone when it runs beside other stages (QUIET=1).
stage() {
  local name=$1; shift
  local log="$LOGDIR/$name.log" start ticks rc
  start=$(date +%s); ticks=$(cpu_ticks)
  log "stage $name: $* ${QUIET:+(beside others; log: ${log#"$OCIGPU_ROOT"/})}"
  if [ -n "${QUIET:-}" ]; then
    "$@" > "$log" 2>&1
    rc=$?
  else
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
  fi
  record "$([ "$rc" -eq 0 ] && echo PASS || echo FAIL)" "$name" "$(( $(date +%s) - start ))" "$(busy_pct "$ticks")" "$rc" "$log"
  return 0
}

# tests/molecule-excluded.txt lists scenarios that `make test` does not run yet, each with its
# reason; every one is announced loudly and shown in the summary. SCENARIOS=... still runs them.
excluded_reason() {
  [ -f tests/molecule-excluded.txt ] || return 1
  awk -v sc="$1" '$1 == sc { $1 = ""; sub(/^ +/, ""); print; found = 1 } END { exit !found }' tests/molecule-excluded.txt
}

# Longest first (by the last CI run: the VM scenario first, rdma_exporter last), so the three lanes
# end close together instead of on a long scenario started late. The qemu VM (software emulation)
# keeps one core busy whenever its guest runs; the container scenarios take turns with it.
# Scenarios not listed follow in alphabetical order.
MOLECULE_FIRST=${MOLECULE_FIRST:-node_vm containerd_rootless_archive rdma_network pyxis enroot mpi_ssh common slurm containerd_rootless firewall nvidia_container_toolkit rdma_exporter}

scenarios() {
  # shellcheck disable=SC2086  # SCENARIOS is a space-separated list
  if [ -n "${SCENARIOS:-}" ]; then printf '%s\n' $SCENARIOS; return; fi
  local d sc reason seen=""
  # shellcheck disable=SC2086  # MOLECULE_FIRST is a space-separated list
  for d in $(printf 'molecule/%s/molecule.yml\n' $MOLECULE_FIRST) molecule/*/molecule.yml; do
    [ -e "$d" ] || continue
    sc=$(basename "$(dirname "$d")")
    case " $seen " in *" $sc "*) continue ;; esac
    seen="$seen $sc"
    # Run by its own stage (molecule-vm) when STAGES names it.
    if [ "$sc" = node_vm ] && [ -n "$VM_APART" ]; then continue; fi
    if reason=$(excluded_reason "$sc"); then
      printf '\n!!! LOUD SKIP: molecule scenario %s is not run by make test: %s\n\n' "$sc" "$reason" >&2
      echo "$sc" >> "$LOGDIR/.molecule-skipped"
      continue
    fi
    echo "$sc"
  done
}

# molecule_test SCENARIO: `molecule test`, tried again once (MOLECULE_RETRIES) when it fails, so a
# one-off hiccup of the container or VM tooling does not hide the other results. A retry is
# printed loudly here and counted in the summary; the first attempt's output stays in the log.
molecule_test() {
  local sc=$1 attempt=0 rc
  while :; do
    molecule test -s "$sc" && return 0
    rc=$?
    attempt=$((attempt + 1))
    [ "$attempt" -le "${MOLECULE_RETRIES:-1}" ] || return "$rc"
    printf '\n!!! RETRY: molecule scenario %s failed (rc=%s); trying it once more\n\n' "$sc" "$rc"
    echo "$sc" >> "$LOGDIR/.molecule-retried"
  done
}

# parallel_molecule: MOLECULE_JOBS scenarios at a time, each logging to its own file; the summary
# lines come in the order the scenarios finish; a failed one's last lines come after the summary.
parallel_molecule() {
  local sc running=0
  for sc in $(scenarios); do
    if [ "$running" -ge "$MOLECULE_JOBS" ]; then wait -n; running=$((running - 1)); fi
    QUIET=1 stage "molecule:$sc" molecule_test "$sc" &
    running=$((running + 1))
  done
  wait
}

# run_stage NAME: one stage of STAGES (some run several stages one after the other).
run_stage() {
  case $1 in
    setup)
      run_stage host
      run_stage venv ;;
    host)
      stage setup:host bash tests/infra/host.sh ;;
    venv)
      stage setup:venv bash tests/infra/venv.sh ;;
    images)
      # One after the other (alphabetical: the VM image reuses the container image's Debian tarball).
      local b
      for b in tests/infra/build-*.sh; do
        [ -e "$b" ] && stage "images:$(basename "$b" .sh | sed 's/^build-//')" bash "$b"
      done ;;
    lint)
      stage lint:ansible-lint ansible-lint --profile production ;;
    sanity)
      stage sanity:ansible-test bash tests/sanity/run.sh ;;
    unit)
      stage unit:pytest pytest -p no:cacheprovider -n 2 tests/unit ;;
    molecule-vm)
      # The VM's scenario alone (the default order starts it in the background: it outlasts the
      # container scenarios, and the stages after them need no VM).
      stage molecule:node_vm molecule_test node_vm ;;
    molecule)
      # Two lanes when the VM's scenario runs apart (it keeps a CPU of its own), three otherwise.
      if [ "${MOLECULE_JOBS:=$([ -n "$VM_APART" ] && echo 2 || echo 3)}" -le 1 ]; then
        for sc in $(scenarios); do
          stage "molecule:$sc" molecule_test "$sc"
        done
      else
        # In a subshell of its own: its waits are for its scenarios alone, not for a stage started in
        # the background before it (the VM's scenario), which would hold the stages after it.
        ( parallel_molecule )
      fi ;;
    integration)
      if compgen -G 'tests/integration/test_*.py' >/dev/null; then
        # At a lower priority: beside the on-demand demo (the default order), whose checks have time
        # limits (a job told within 60 s why it waits), the tests take the CPU the demo leaves.
        stage integration:pytest nice -n 10 pytest -p no:cacheprovider -n 2 --dist load --maxschedchunk 1 --durations=8 tests/integration
      else
        log "LOUD SKIP: no integration tests exist yet (tests/integration/test_*.py)"
        echo "SKIP integration 0 0 0 (no tests yet)" >> "$RESULTS"
      fi ;;
    install)
      # The collection as a user gets it: its tarball installed into an empty collections path and
      # a fresh venv, the playbooks and inventory plugin run from there, ansible-builder on it.
      # At a lower priority: beside the whole-stack demo (the default order), it takes what the demo leaves.
      stage install:user nice -n 10 bash tests/install/user-install.sh ;;
    demo)
      # Both demos, one after the other: they use the same podman networks and artifact port.
      run_stage demo-whole-stack
      run_stage demo-ondemand ;;
    demo-whole-stack)
      # The whole stack on the same nodes, over SSH through the bastion (what `make demo` shows).
      stage demo:whole-stack bash tests/demo/run.sh ;;
    demo-ondemand)
      # Seed 003's on-demand cluster: sbatch on an empty cluster -> resume -> nodes pull their
      # configuration -> the job runs -> idle -> suspend -> teardown (what `make demo-ondemand` shows).
      stage demo:on-demand bash tests/demo/ondemand.sh ;;
    *) die "unknown stage $1" ;;
  esac
}

# wait_background: the stages started in the background ("name&") end; the list is emptied.
wait_background() {
  [ "${#background[@]}" -eq 0 ] || { log "waiting for the stages in the background"; wait "${background[@]}"; }
  background=()
}

total_start=$(date +%s)
total_ticks=$(cpu_ticks)
background=()
for group in $STAGES; do
  if [ "${group%&}" != "$group" ]; then
    # "name&": started now, beside the groups that follow, and waited for before the summary.
    log "stage ${group%&} in the background, beside the stages that follow"
    QUIET=1 run_stage "${group%&}" &
    background+=("$!")
    continue
  fi
  if [ "$group" = wait ]; then
    # "wait": the stages started in the background so far end before the groups that follow.
    wait_background
    continue
  fi
  IFS=+ read -r -a members <<< "$group"
  if [ "${#members[@]}" -eq 1 ]; then
    run_stage "$group"
    continue
  fi
  # Stages joined by "+": each in the background with its output in its own log.
  log "stages ${members[*]} at the same time"
  pids=()
  for m in "${members[@]}"; do
    QUIET=1 run_stage "$m" &
    pids+=("$!")
  done
  wait "${pids[@]}"
done
wait_background

summary=()
while read -r status name dur cpu rc log; do
  case $status in
    SKIP) summary+=("$(printf 'SKIP  %-34s        %s' "$name" "$log")") ;;
    *) summary+=("$(summary_line "$status" "$name" "$dur" "$cpu" "$rc" "$log")") ;;
  esac
done < "$RESULTS"
if [ -s "$LOGDIR/.molecule-skipped" ]; then
  while read -r sc; do
    summary+=("$(printf 'SKIP  %-34s        (%s)' "molecule:$sc" "$(excluded_reason "$sc")")")
  done < "$LOGDIR/.molecule-skipped"
fi
if [ -s "$LOGDIR/.molecule-retried" ]; then
  summary+=("NOTE  molecule scenarios that needed a second attempt: $(sort -u "$LOGDIR/.molecule-retried" | tr '\n' ' ')")
fi
n_pass=$(grep -c '^PASS ' "$RESULTS")
n_fail=$(grep -c '^FAIL ' "$RESULTS")
echo
echo "make test summary (total $(( $(date +%s) - total_start ))s, cpu $(busy_pct "$total_ticks")% busy on $(nproc) CPUs):"
printf '  %s\n' "${summary[@]}"
# The last lines of each failed stage's log come after the summary, so that the tail of a CI
# run's output says why a stage failed, not only that it did.
while read -r status name dur cpu rc log; do
  if [ "$status" = FAIL ] && [ -f "$log" ]; then
    printf '\nlast lines of %s:\n' "${log#"$OCIGPU_ROOT"/}"
    tail -n 15 "$log" | cut -c1-300 | sed 's/^/  | /'
  fi
done < "$RESULTS"
echo "stages: $n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
