#!/bin/bash
# The server-shaped captures, from the repository root with .gpu carried:
#   sample_traces/capture_server.sh OUTDIR [all|tp2|one]    # PACK_DIR=$OUT packs OUTDIR
# tp2 (needs 2 GPUs, kind nvidia-h200-x2; about 4 minutes): tensor parallel (TP=2: 12 layers,
#     each rank holding half of every layer's heads and FFN) healthy, case1, case1 on rank 0
#     only (with Python sampling), 100 steps ("device run C"); and two independent engines,
#     healthy on GPU 0 and case1 on GPU 1, in one report
# one (1 GPU is enough; about 4 minutes): vLLM-style output copy on a side stream (healthy,
#     case1, case1 every 8th step) and event-polling waits (100 steps: polling makes ~550k
#     cudaEventQuery rows per 200 steps)
# all (the default, 2 GPUs): both, about 7-8 minutes. Each capture runs under a timeout;
# captures that would end past CAPTURE_BUDGET (default 540 s) are skipped, and a failing one
# does not stop the rest.
# CAPTURE_ARGS adds options of capture.py, e.g. CAPTURE_ARGS=--dry-run prints the commands only.
set -uo pipefail
out=${1:?usage: capture_server.sh OUTDIR [all|tp2|one]}
part=${2:-all}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
specs=()
if [ "$part" = all ] || [ "$part" = tp2 ]; then
  specs+=("tp2_healthy_100:healthy:100::--tp 2"
          "tp2_case1_100:case1:100::--tp 2"
          "tp2_case1_rank0_py_100:case1:100:python:--tp 2 --readback-ranks 0")
fi
if [ "$part" = all ] || [ "$part" = one ]; then
  specs+=("outcopy_healthy_200:healthy:200::--output-copy"
          "outcopy_case1_200:case1:200::--output-copy"
          "outcopy_case1_every8_200:case1:200::--output-copy --stall-every 8")
fi
if [ "$part" = all ] || [ "$part" = tp2 ]; then
  specs+=("pair:twoproc_200:200:--mode healthy:--mode case1")
fi
if [ "$part" = all ] || [ "$part" = one ]; then
  specs+=("poll_healthy_100:healthy:100::--wait poll"
          "poll_case1_100:case1:100::--wait poll"
          "poll_async_case1_100:case1:100::--wait poll-async")
fi
[ ${#specs[@]} -gt 0 ] || { echo "capture_server.sh: part must be all, tp2 or one" >&2; exit 2; }
python3 "$(dirname "$0")/capture.py" "$out" "${specs[@]}" ${CAPTURE_ARGS:-}
rc=$?
ls -la "$out"
exit $rc
