#!/usr/bin/env bash
# `make test`: every test, in stages, each with a one-line summary and its duration.
# Every stage runs even when an earlier one failed, so one run shows all that is wrong;
# the exit status is non-zero when any stage failed.
#
# Select stages with STAGES="lint sanity unit molecule integration" and molecule scenarios with
# SCENARIOS="common firewall" (default: every folder under molecule/).
set -uo pipefail
. "$(dirname "$0")/infra/lib.sh"
cd "$OCIGPU_ROOT"

STAGES=${STAGES:-setup images lint sanity unit molecule integration}
LOGDIR=${LOGDIR:-$OCIGPU_ROOT/tests/output/logs}
mkdir -p "$LOGDIR"
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

scenarios() {
  if [ -n "${SCENARIOS:-}" ]; then printf '%s\n' $SCENARIOS; return; fi
  local d
  for d in molecule/*/molecule.yml; do [ -e "$d" ] && basename "$(dirname "$d")"; done
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
      stage unit:pytest pytest -p no:cacheprovider tests/unit ;;
    molecule)
      for sc in $(scenarios); do
        stage "molecule:$sc" molecule test -s "$sc"
      done ;;
    integration)
      if compgen -G 'tests/integration/test_*.py' >/dev/null; then
        stage integration:pytest pytest -p no:cacheprovider tests/integration
      else
        log "LOUD SKIP: no integration tests exist yet (tests/integration/test_*.py)"
        summary+=("SKIP  integration (no tests yet)")
      fi ;;
    *) die "unknown stage $s" ;;
  esac
done

echo
echo "make test summary (total $(( $(date +%s) - total_start ))s):"
printf '  %s\n' "${summary[@]}"
echo "stages: $n_pass passed, $n_fail failed"
[ "$n_fail" -eq 0 ]
