#!/bin/sh
# all_reduce_perf on the demo's stand-ins, which have no GPU: whatever its arguments, it prints the
# run seed 000 recorded on a BM.GPU4.8 (8x A100 40 GB, -b 10G -e 10G -g 8: 232.04 GB/s busbw), which
# standin.sh mounts beside it. The active NCCL check around it is the product's (the run under
# timeout, the gate, nccl-active.prom, the pull's report); the bandwidth is not measured here.
exec cat /usr/local/share/ocigpu-demo/all_reduce_perf.txt
