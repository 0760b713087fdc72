#!/usr/bin/env bash
# ocigpu-healthcheck (the node_health role's program) on a lent GPU machine, against its real
# nvidia-smi and kernel log, with the library as the role installs it:
#   1. expecting the GPUs the machine has: every GPU check must pass, and the values read are kept
#   2. expecting one GPU more: gpu_count must fail and name the real count (the check can fail)
# --no-slurm: the lent machine runs no Slurm. Results go to $OUT (or /tmp/node-health).
#   run it through the device tool:  bash tests/device/node_health.sh
set -euo pipefail
out=${OUT:-/tmp/node-health}
mkdir -p "$out"
lib=$(mktemp -d)
cp plugins/module_utils/_health.py "$lib/ocigpu_health.py"
cp plugins/module_utils/_slurm.py "$lib/ocigpu_slurm.py"
export OCIGPU_HEALTH_LIB=$lib
n=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,driver_version,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,remapped_rows.failure,retired_pages.pending,pcie.link.width.current,pcie.link.width.max,pcie.link.gen.current,pcie.link.gen.max,clocks_throttle_reasons.hw_slowdown \
  --format=csv > "$out/nvidia-smi.csv" 2>&1 || true
cat "$out/nvidia-smi.csv"
run() {  # run NAME GPUS: the program with an expectation of GPUS GPUs; prints the results and the time it took
  printf '{"gpus": %s, "slurm_node_name": "lent"}\n' "$2" > "$out/expect-$1.json"
  local start end rc=0
  start=$(date +%s.%N)
  python3 roles/node_health/files/ocigpu-healthcheck --expect "$out/expect-$1.json" --no-slurm --json \
    --metrics "$out/health-$1.prom" > "$out/$1.json" || rc=$?
  end=$(date +%s.%N)
  echo "== $1 (expecting $2 GPUs): exit $rc in $(python3 -c "print('%.2f' % ($end - $start))") s"
  python3 -c 'import json,sys; [print("%-5s %-15s %s" % ({True:"ok",False:"FAIL",None:"?"}[r["ok"]], r["check"], r["reason"])) for r in json.load(open(sys.argv[1]))["results"]]' "$out/$1.json"
  return $rc
}
run healthy "$n"
cat "$out/health-healthy.prom"
if run one-more "$((n + 1))"; then echo "FAILED: expecting $((n + 1)) GPUs passed"; exit 1; fi
grep -q "\"$n GPUs visible, the shape has $((n + 1))\"" "$out/one-more.json" || grep -q "$n GPUs visible, the shape has $((n + 1))" "$out/one-more.json"
echo "PASS: the checks pass on this machine's $n GPU(s) and fail when told to expect $((n + 1))"
