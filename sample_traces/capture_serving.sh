#!/bin/bash
# A server under real load (issue 56), on one GPU, from the repository root with .gpu carried:
#   sample_traces/capture_serving.sh OUTDIR      # PACK_DIR=$OUT packs OUTDIR
# Every capture holds the whole process (no capture range): start-up (the model, 15 bucket
# graphs, each replayed once and synchronised right after its capture), then three bursts of
# requests (96, 24 and 64, 8 arriving a step, each followed by 600 ms of idle in which the
# scheduler polls an empty queue and makes no CUDA call), the batch packed so that each step
# replays the smallest bucket holding it, an eager prefill between decode steps for newly
# admitted requests, and fresh pinned host buffers every step (as vLLM and sglang allocate
# them). nsys: healthy, case1, case2, case1 on every 4th step, speculative decoding (3 drafts
# and a verify a step, the accepted lengths read back), the forward thread (healthy, case1), a
# second healthy run with other bursts (for the gate), 35 buckets with one burst, case1 and
# healthy without NVTX ranges, healthy without per-step pinned buffers; torch.profiler (no
# Python stacks, start-up profiled too): healthy, case1, speculative decoding. The most
# important first: CAPTURE_BUDGET (default 540 s) skips what would not fit.
# CAPTURE_ARGS adds options of capture.py, e.g. CAPTURE_ARGS=--dry-run prints the commands only.
set -uo pipefail
out=${1:?usage: capture_serving.sh OUTDIR}
base="--startup-check --buckets 15 --prefill --pinned-alloc --max-new-tokens 16,96"
serve="$base --idle-ms 600 --bursts 96,24,64"
# torch.profiler: shorter bursts (its JSON is ~10x an nsys export), start-up included
kin="$base --idle-ms 600 --bursts 64,16 --torch-profile-no-stack --profile-startup"
cap=2000  # --steps: a cap; every run ends when its bursts are served
specs=("srv_healthy:healthy:$cap::$serve"
       "srv_case1:case1:$cap::$serve"
       "srv_case2:case2:$cap::$serve"
       "srv_spec:healthy:$cap::$serve --spec-decode 3"
       "srv_fwd_case1:case1:$cap::$serve --forward-thread"
       "srv_healthy_b2:healthy:$cap::$base --bursts 32,128,48 --idle-ms 400"
       "kineto:k_srv_healthy:healthy:$cap:$kin"
       "kineto:k_srv_case1:case1:$cap:$kin"
       "srv_case1_every4:case1:$cap::$serve --stall-every 4"
       "srv_b35_healthy:healthy:$cap::${base/--buckets 15/--buckets 35} --idle-ms 600 --bursts 48"
       "srv_case1_nonvtx:case1:$cap::$serve --no-nvtx"
       "srv_fwd_healthy:healthy:$cap::$serve --forward-thread"
       "srv_healthy_nopin:healthy:$cap::${serve/--pinned-alloc /}"
       "kineto:k_srv_spec:healthy:$cap:$kin --spec-decode 3"
       "srv_healthy_nonvtx:healthy:$cap::$serve --no-nvtx")
python3 "$(dirname "$0")/capture.py" "$out" "${specs[@]}" ${CAPTURE_ARGS:-}
rc=$?
ls -la "$out"
exit $rc
