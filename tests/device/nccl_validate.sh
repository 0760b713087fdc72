#!/usr/bin/env bash
# Proof of the nccl_tests role on a lent multi-GPU machine (Ubuntu 24.04, Python 3.12, CUDA, NCCL,
# Open MPI, root, no systemd, nothing reachable outside it). Runs from the repository root there:
#
#   bash tests/device/nccl_validate.sh          (results under $OUT, or ./device-out)
#
# Needs what tests/device/lib.sh needs (.whl/ and .nccl-src/ carried with the working tree).
#
# What it does, in one call:
#   1. validate.yml against localhost with the shape table's gate (BM.GPU.H200.8: 440 GB/s, an
#      8-GPU figure), GPU count from the machine: expected to FAIL with the verdict table on a
#      machine of fewer than 8 GPUs; the report is written all the same.
#   2. a direct all_reduce_perf over all GPUs with the same sizes (the figure to compare with).
#   3. validate.yml again with a threshold for this GPU count (NCCL_SINGLE_GBPS, default 330 GB/s
#      for 4x H200, about 90 % of the 365 GB/s measured there) plus a "cluster" run through the
#      role's mpirun launcher on this one host: expected to PASS.
#   4. compare the role's busbw with the direct run, size by size (must agree within 2 %).
set -uo pipefail
# shellcheck source=tests/device/lib.sh
. tests/device/lib.sh
SIZES=${NCCL_SIZES:--b 1G -e 16G -f 2 -n 50}
SINGLE_GBPS=${NCCL_SINGLE_GBPS:-330}
common=(-i /tmp/inventory.yml playbooks/validate.yml "${role_args[@]}" -e "nccl_tests_args='$SIZES'")

echo "=== 1. validate.yml with the shape's gate (expected to fail below 8 GPUs)"
python3 -m ansible playbook "${common[@]}" -e nccl_tests_report_dir=/tmp/report-shape-gate \
  -e nccl_tests_multi_node_enabled=false
echo "validate.yml (shape gate) exit status: $?"

echo "=== 2. direct all_reduce_perf"
read -ra size_args <<< "$SIZES"
"/opt/nccl-tests/$VERSION/build/all_reduce_perf" "${size_args[@]}" -g "$NGPU" | tee "$OUT/direct.txt"
echo "direct exit status: ${PIPESTATUS[0]}"

echo "=== 3. validate.yml with the $NGPU-GPU threshold $SINGLE_GBPS GB/s, plus the mpirun launcher on one host"
python3 -m ansible playbook "${common[@]}" -e nccl_tests_report_dir=/tmp/report-pass \
  -e nccl_tests_single_node_threshold_gbps="$SINGLE_GBPS" -e nccl_tests_multi_node_threshold_gbps="$SINGLE_GBPS" \
  -e nccl_tests_multi_node_min_hosts=1 -e nccl_tests_launcher=mpirun \
  -e '{"nccl_tests_mpirun_extra_args": ["--bind-to", "none", "--mca", "btl", "self,vader"]}'
echo "validate.yml (pass gate) exit status: $?"

for d in report-shape-gate report-pass; do
  (cd /tmp/$d && tar czf "$OUT/$d.tgz" .)
done

echo "=== 4. role against direct"
python3 - "$OUT/direct.txt" /tmp/report-shape-gate/*/report.json /tmp/report-pass/*/report.json <<'PY'
import json, sys
direct = {}
for line in open(sys.argv[1]):
    t = line.split()
    if len(t) >= 13 and t[0].isdigit() and not line.startswith('#'):
        direct[int(t[0])] = max(float(t[7]), float(t[11]))
worst = 0.0
for path in sys.argv[2:]:
    for run in json.load(open(path))['runs']:
        print('%s: %s (%s) gate busbw %s GB/s at %s B, passed=%s' % (path.split('/')[2], run['name'], run['scope'],
              run['gate']['busbw_gbps'], run['gate']['largest_size'], run['gate']['passed']))
        for row in run['rows']:
            role = max(row['out_of_place']['busbw'], row['in_place']['busbw'])
            d = direct.get(row['size'])
            diff = 100.0 * (role - d) / d if d else float('nan')
            if run['scope'] == 'node':
                worst = max(worst, abs(diff))
            print('   %12d  role %7.2f  direct %7s  diff %+6.2f %%' % (row['size'], role, d, diff))
print('largest difference role vs direct (single-node runs): %.2f %% -> %s' % (worst, 'OK' if worst <= 2.0 else 'OVER 2 %'))
PY
