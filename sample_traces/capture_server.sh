#!/bin/bash
# The server-shaped captures, in one device run on a 2-GPU machine (kind nvidia-h200-x2), from
# the repository root with .gpu carried:
#   sample_traces/capture_server.sh OUTDIR            # PACK_DIR=$OUT packs OUTDIR into <= 8 tars
# Tensor parallel (TP=2, 12 layers per rank: 6 x TP), vLLM-style output copy on a side stream,
# two independent engines (one per GPU) in one report, and event-polling waits (100 steps:
# polling makes ~550k cudaEventQuery rows per 200 steps). Each capture runs under a timeout,
# and captures that would end past CAPTURE_BUDGET (default 540 s) are skipped; a failing one
# does not stop the rest. Expect about 7-8 minutes.
set -uo pipefail
out=${1:?usage: capture_server.sh OUTDIR}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 "$(dirname "$0")/capture.py" "$out" \
  "tp2_healthy_200:healthy:200::--tp 2" \
  "tp2_case1_200:case1:200::--tp 2" \
  "tp2_case1_rank0_200:case1:200::--tp 2 --readback-ranks 0" \
  "outcopy_healthy_200:healthy:200::--output-copy" \
  "outcopy_case1_200:case1:200::--output-copy" \
  "outcopy_case1_every8_200:case1:200::--output-copy --stall-every 8" \
  "pair:twoproc_200:200:--mode healthy:--mode case1" \
  "poll_healthy_100:healthy:100::--wait poll" \
  "poll_case1_100:case1:100::--wait poll" \
  "poll_async_case1_100:case1:100::--wait poll-async"
rc=$?
ls -la "$out"
exit $rc
