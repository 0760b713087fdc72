#!/usr/bin/env bash
# `make test`: every test, in stages, each with a one-line summary and its duration.
# Every stage runs even when an earlier one failed, so one run shows all that is wrong;
# the exit status is non-zero when any stage failed.
#
# Select stages with STAGES="lint sanity unit molecule integration install demo" and molecule scenarios with
# SCENARIOS="common firewall" (default: every folder under molecule/ with a molecule.yml);
# MOLECULE_JOBS=N runs N scenarios at a time (default 3: most of a scenario's time is spent
# waiting on systemd, apt and ssh, so three at once finish in about half the time of one by one).
set -uo pipefail
. "$(dirname "$0")/infra/lib.sh"
cd "$OCIGPU_ROOT" || exit 1

STAGES=${STAGES:-setup images lint sanity unit molecule integration install demo}
LOGDIR=${LOGDIR:-$OCIGPU_ROOT/tests/output/logs}
mkdir -p "$LOGDIR"
rm -f "$LOGDIR/.molecule-retried" "$LOGDIR/.molecule-skipped"
export PATH="$VENV/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$OCIGPU_ROOT/.build/collections"
export PYTHONUNBUFFERED=1

summary=()
n_pass=0
n_fail=0

# stage NAME COMMAND... : run one stage, print its summary line, record the result.
stage() {
  local name=$1; shift
  local log="$LOGDIR/$name.log" start rc dur
  start=$(date +%s)
  log "stage $name: $*"
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  dur=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    summary+=("$(printf 'PASS  %-34s %5ss' "$name" "$dur")"); n_pass=$((n_pass + 1))
  else
    summary+=("$(printf 'FAIL  %-34s %5ss  (rc=%s, log: %s)' "$name" "$dur" "$rc" "${log#"$OCIGPU_ROOT"/}")"); n_fail=$((n_fail + 1))
  fi
  printf '==> %s\n' "${summary[-1]}"
  return 0
}

# tests/molecule-excluded.txt lists scenarios that `make test` does not run yet, each with its
# reason; every one is announced loudly and shown in the summary. SCENARIOS=... still runs them.
excluded_reason() {
  [ -f tests/molecule-excluded.txt ] || return 1
  awk -v sc="$1" '$1 == sc { $1 = ""; sub(/^ +/, ""); print; found = 1 } END { exit !found }' tests/molecule-excluded.txt
}

# Longest first (by the last CI run: the VM scenario first, rdma_exporter last), so the three lanes
# end close together instead of on a long scenario started late. The qemu VM takes most of one core
# for its whole run; the container scenarios share the other.
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
# lines come in the order the scenarios finish.
parallel_molecule() {
  local sc running=0 results=$LOGDIR/.molecule-results
  : > "$results"
  run_one() {
    local sc=$1 start rc dur
    start=$(date +%s)
    molecule_test "$sc" > "$LOGDIR/molecule:$sc.log" 2>&1
    rc=$?
    dur=$(( $(date +%s) - start ))
    printf '%s %s %s\n' "$sc" "$rc" "$dur" >> "$results"
    printf '==> %s molecule:%s %ss\n' "$([ "$rc" -eq 0 ] && echo PASS || echo FAIL)" "$sc" "$dur"
  }
  for sc in $(scenarios); do
    if [ "$running" -ge "$MOLECULE_JOBS" ]; then wait -n; running=$((running - 1)); fi
    log "stage molecule:$sc (in parallel, log: $LOGDIR/molecule:$sc.log)"
    run_one "$sc" &
    running=$((running + 1))
  done
  wait
  while read -r sc rc dur; do
    if [ "$rc" -eq 0 ]; then
      summary+=("$(printf 'PASS  %-34s %5ss' "molecule:$sc" "$dur")"); n_pass=$((n_pass + 1))
    else
      summary+=("$(printf 'FAIL  %-34s %5ss  (rc=%s, log: %s)' "molecule:$sc" "$dur" "$rc" "tests/output/logs/molecule:$sc.log")"); n_fail=$((n_fail + 1))
      tail -n 40 "$LOGDIR/molecule:$sc.log"
    fi
  done < "$results"
}

total_start=$(date +%s)
for s in $STAGES; do
  case $s in
    setup)
      stage setup:host bash tests/infra/host.sh
      stage setup:venv bash tests/infra/venv.sh ;;
    images)
      for b in tests/infra/build-*.sh; do
        [ -e "$b" ] && stage "images:$(basename "$b" .sh | sed 's/^build-//')" bash "$b"
      done ;;
    lint)
      stage lint:ansible-lint ansible-lint --profile production ;;
    sanity)
      stage sanity:ansible-test bash tests/sanity/run.sh ;;
    unit)
      stage unit:pytest pytest -p no:cacheprovider -n 2 tests/unit ;;
    molecule)
      if [ "${MOLECULE_JOBS:=3}" -le 1 ]; then
        for sc in $(scenarios); do
          stage "molecule:$sc" molecule_test "$sc"
        done
      else
        parallel_molecule
      fi ;;
    integration)
      if compgen -G 'tests/integration/test_*.py' >/dev/null; then
        stage integration:pytest pytest -p no:cacheprovider -n 2 tests/integration
      else
        log "LOUD SKIP: no integration tests exist yet (tests/integration/test_*.py)"
        summary+=("SKIP  integration (no tests yet)")
      fi ;;
    install)
      # The collection as a user gets it: its tarball installed into an empty collections path and
      # a fresh venv, the playbooks and inventory plugin run from there, ansible-builder on it.
      stage install:user bash tests/install/user-install.sh ;;
    demo)
      # The whole stack on the same nodes, over SSH through the bastion (what `make demo` shows).
      stage demo:whole-stack bash tests/demo/run.sh
      # Seed 003's on-demand cluster: sbatch on an empty cluster -> resume -> nodes pull their
      # configuration -> the job runs -> idle -> suspend -> teardown (what `make demo-ondemand` shows).
      stage demo:on-demand bash tests/demo/ondemand.sh ;;
    *) die "unknown stage $s" ;;
  esac
done

if [ -s "$LOGDIR/.molecule-skipped" ]; then
  while read -r sc; do
    summary+=("$(printf 'SKIP  %-34s        (%s)' "molecule:$sc" "$(excluded_reason "$sc")")")
  done < "$LOGDIR/.molecule-skipped"
fi
if [ -s "$LOGDIR/.molecule-retried" ]; then
  summary+=("NOTE  molecule scenarios that needed a second attempt: $(sort -u "$LOGDIR/.molecule-retried" | tr '\n' ' ')")
fi
echo
echo "make test summary (total $(( $(date +%s) - total_start ))s):"
printf '  %s\n' "${summary[@]}"
# The last lines of each failed stage's log come after the summary, so that the tail of a CI
# run's output says why a stage failed, not only that it did.
for line in "${summary[@]}"; do
  case $line in FAIL*) ;; *) continue ;; esac
  log=${line##*log: }; log=${log%)}
  case $log in /*) ;; *) log=$OCIGPU_ROOT/$log ;; esac
  [ -f "$log" ] || continue
  printf '\nlast lines of %s:\n' "${log#"$OCIGPU_ROOT"/}"
  tail -n 15 "$log" | cut -c1-300 | sed 's/^/  | /'
done
echo "stages: $n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
