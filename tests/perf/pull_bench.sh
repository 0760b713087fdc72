#!/usr/bin/env bash
# Benchmark (c) of the on-demand cluster: the same roles configured by pull (each new node runs
# them against itself at boot) and by push (configure.yml from the operator over SSH through the
# bastion), at 2, 4 and 8 stand-ins, measured in the same run.
#
#   bash tests/perf/pull_bench.sh [COUNTS]      (default "2 4 8"; logs in .build/perf-pull/)
#
# Pull: `make demo-ondemand` with an N-node job (tests/demo/ondemand.sh, DEMO_NODES=N); the figure
# is the slowest node's roles time (configure) and its whole pull after its tags. Push: the
# configure benchmark's first run at N nodes (tests/perf/configure_bench.sh), the same roles but
# nvme_scratch. On a real cluster every node has its own CPUs, so the pull stays flat as N grows;
# here all stand-ins share this machine's cores, and the pull grows with N/cores: the ratio to a
# single node's pull shows how much of that is this machine.
set -euo pipefail
. "$(dirname "$0")/../infra/lib.sh"
cd "$OCIGPU_ROOT"
counts=${1:-2 4 8}
out=$OCIGPU_ROOT/.build/perf-pull   # configure_bench.sh empties .build/perf
mkdir -p "$out"
declare -A pull pull_all push
for n in $counts; do
  log "pull: an on-demand job for $n nodes"
  DEMO_NODES=$n DEMO_DIR=$out/pull-$n bash tests/demo/ondemand.sh > "$out/pull-$n.log" 2>&1 \
    || die "the on-demand run for $n nodes failed; see $out/pull-$n.log"
  pull[$n]=$(jq -r '.pull_configure' "$out/pull-$n/figures.json")
  pull_all[$n]=$(jq -r '.pull_after_tags' "$out/pull-$n/figures.json")
  log "push: configure.yml over SSH at $n nodes"
  FIRST_ONLY=1 bash tests/perf/configure_bench.sh "$n" > "$out/push-$n.log" 2>&1 || die "the push run for $n nodes failed; see $out/push-$n.log"
  cp -r "$OCIGPU_ROOT/.build/perf" "$out/push-$n"
  push[$n]=$(awk -v n="$n" '$1 == n && $2 ~ /^[0-9.]+$/ { print $2; exit }' "$out/push-$n.log")
done
printf '\n%-6s %16s %22s %16s %12s\n' nodes "pull: roles (s)" "pull: after tags (s)" "push: first (s)" "pull/push"
for n in $counts; do
  printf '%-6s %16.1f %22.1f %16.1f %12.2f\n' "$n" "${pull[$n]}" "${pull_all[$n]}" "${push[$n]}" "$(echo "${pull_all[$n]} / ${push[$n]}" | bc -l)"
done
echo "reproduce: bash tests/perf/pull_bench.sh \"$counts\"   ($(nproc) cores)"
