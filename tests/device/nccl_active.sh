#!/usr/bin/env bash
# The active node health check (validate.yml --tags health) on a lent GPU machine, which runs no Slurm:
#
#   bash tests/device/nccl_active.sh          (results under $OUT, or ./device-out)
#
# Needs what tests/device/lib.sh needs (.whl/ and .nccl-src/ carried with the working tree).
#   1. against the default fraction (0.8) of the shape's gate (BM.GPU.H200.8: 440 GB/s, an 8-GPU
#      figure, so 352 GB/s): expected to FAIL below 8 GPUs, with the figure; nccl-tests is built by the
#      role here. 2x H200 measure about 345-350 GB/s, close to 352, so what is checked is that the
#      verdict follows the figure (a pass below 8 GPUs is printed as a NOTE, not counted)
#   2. a direct all_reduce_perf with the check's sizes: the figure to compare with
#   3. against 0.8 x the direct figure: must PASS
#   4. against 2 x the direct figure: must FAIL, naming the node
#   5. and 6. steps 3 and 4 again with Mitogen's strategy (validate_health_strategy, as a node's pull
#      runs the check): the same verdicts, all_reduce_perf started from Mitogen's long-lived Python
#      (.whl/ then holds Mitogen too)
# Each step prints its figure and its time; the script exits non-zero when an expectation fails.
set -uo pipefail
# shellcheck source=tests/device/lib.sh
. tests/device/lib.sh
ARGS="-b 1G -e 4G -f 2 -n 20 -w 5"
# An all_reduce over one GPU moves nothing over a bus (busbw 0): the thresholds below would mean nothing.
[ "$NGPU" -ge 2 ] || { echo "UNEXPECTED: $NGPU GPU(s) here; the check needs 2 or more (ask for nvidia-h200-x2)"; exit 1; }
failures=0
check() {  # check NAME EXPECT(pass|fail|figures) EXTRA-ARGS...: the active check, judged by its exit
  # status; "figures": it must pass exactly when its busbw reaches its threshold (from nccl-active.prom)
  local name=$1 expect=$2 start rc
  shift 2
  start=$(date +%s)
  python3 -m ansible playbook -i /tmp/inventory.yml playbooks/validate.yml --tags health "${role_args[@]}" \
    -e nccl_tests_metrics_dir="$OUT/metrics-$name" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  if [ "$expect" = figures ]; then
    expect=$(awk '$1 == "ocigpu_nccl_active_busbw_gbps" { b = $2 } $1 == "ocigpu_nccl_active_threshold_gbps" { t = $2 }
                  END { print ((b != "" && t != "" && b + 0 >= t + 0) ? "pass" : "fail") }' "$OUT/metrics-$name/nccl-active.prom" 2>/dev/null)
  fi
  echo "== $name: exit $rc in $(( $(date +%s) - start )) s (expected to $expect)"
  grep -E '(PASS|FAIL): all_reduce busbw|Slurm:|failed the active NCCL check' "$OUT/$name.log" | sed 's/^ *//' | sort -u
  grep -v '^#' "$OUT/metrics-$name/nccl-active.prom" || { echo "UNEXPECTED: no nccl-active.prom"; failures=$((failures + 1)); }
  if { [ "$expect" = pass ] && [ $rc -ne 0 ]; } || { [ "$expect" = fail ] && [ $rc -eq 0 ]; }; then
    echo "UNEXPECTED: $name"; tail -40 "$OUT/$name.log"; failures=$((failures + 1))
  fi
}

echo "=== 1. the default fraction of the shape's gate (expected to fail below 8 GPUs; builds nccl-tests)"
check shape-gate figures
if [ "$NGPU" -lt 8 ] && grep -q '^ocigpu_nccl_active_passed 1' "$OUT/metrics-shape-gate/nccl-active.prom" 2>/dev/null; then
  echo "NOTE: $NGPU GPUs reached 0.8 of the 8-GPU gate this time"
fi

echo "=== 2. direct all_reduce_perf with the same sizes"
read -ra size_args <<< "$ARGS"
start=$(date +%s)
"/opt/nccl-tests/$VERSION/build/all_reduce_perf" "${size_args[@]}" -g "$NGPU" > "$OUT/direct.txt" 2>&1
# busbw at the largest size, the better of out-of-place (column 8) and in-place (12), as the check reads it.
direct=$(awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ { b = ($8 > $12 ? $8 : $12) } END { print b }' "$OUT/direct.txt")
echo "direct busbw at the largest size: $direct GB/s ($(( $(date +%s) - start )) s)"
[ -n "$direct" ] || { echo "UNEXPECTED: no direct figure"; cat "$OUT/direct.txt"; exit 1; }

low=$(python3 -c "print(round(0.8 * $direct, 2))")
high=$(python3 -c "print(round(2 * $direct, 2))")
echo "=== 3. against 0.8 x direct = $low GB/s (must pass)"
check below-direct pass -e nccl_tests_active_threshold_gbps="$low"
echo "=== 4. against 2 x direct = $high GB/s (must fail)"
check above-direct fail -e nccl_tests_active_threshold_gbps="$high"
grep -q 'localhost failed the active NCCL check' "$OUT/above-direct.log" || { echo "UNEXPECTED: the failure does not name the node"; failures=$((failures + 1)); }
mitogen=(-e validate_health_strategy=ocigpu.cluster.mitogen_linear)
echo "=== 5. step 3 with Mitogen's strategy (must pass)"
check below-direct-mitogen pass -e nccl_tests_active_threshold_gbps="$low" "${mitogen[@]}"
echo "=== 6. step 4 with Mitogen's strategy (must fail)"
check above-direct-mitogen fail -e nccl_tests_active_threshold_gbps="$high" "${mitogen[@]}"
grep -q 'localhost failed the active NCCL check' "$OUT/above-direct-mitogen.log" || { echo "UNEXPECTED: the failure does not name the node"; failures=$((failures + 1)); }
for name in below-direct-mitogen above-direct-mitogen; do
  grep -qE 'DEPRECATION WARNING.*strategy plugins|ansible_mitogen' "$OUT/$name.log" || { echo "UNEXPECTED: $name did not run with Mitogen's strategy"; failures=$((failures + 1)); }
done
echo "expectations not met: $failures"
exit $((failures > 0))
