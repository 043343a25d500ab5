#!/bin/bash
# A server under real load (issue 56), on one GPU, from the repository root with .gpu carried:
#   sample_traces/capture_serving.sh OUTDIR      # PACK_DIR=$OUT packs OUTDIR
# Every capture holds the whole process (no capture range): start-up (the model, 15 bucket
# graphs, each replayed once and synchronised right after its capture, and a warm-up
# prefill), then bursts of requests (64, 16 and 48, 8 arriving a step, each followed by 500 ms
# of idle in which the scheduler polls an empty queue and makes no CUDA call), the batch
# packed so that each step
# replays the smallest bucket holding it, an eager prefill between decode steps for newly
# admitted requests (prompts of 100-300 words, ~190-560 tokens: the prefill's GPU time exceeds
# its launches' host time), and fresh pinned host buffers every step (as vLLM and sglang
# allocate them).
# - traced per node (the issue's command): healthy, case1, and healthy with other bursts
#   (24, 96, 32; 300 ms idle), for the gate;
# - traced per graph (nsys's default; a replay is one row, so the files stay small): case2,
#   case1 on every 4th step, speculative decoding (3 drafts and a verify a step, the accepted
#   lengths read back), the forward thread (case1, healthy), 35 buckets and one burst,
#   case1 and healthy without NVTX ranges, healthy without per-step pinned buffers, and the
#   healthy command again;
# - torch.profiler (no Python stacks, start-up profiled too; shorter bursts): healthy, case1.
# The most important first: CAPTURE_BUDGET (default 540 s) skips what would not fit.
# CAPTURE_ARGS adds options of capture.py, e.g. CAPTURE_ARGS=--dry-run prints the commands only.
set -uo pipefail
out=${1:?usage: capture_serving.sh OUTDIR}
base="--startup-check --buckets 15 --prefill --pinned-alloc --max-new-tokens 8,48 --prompt-words 100,300"
serve="$base --idle-ms 500 --bursts 64,16,48"
kin="$base --idle-ms 500 --bursts 32,8 --torch-profile-no-stack --profile-startup"
cap=2000  # --steps: a cap; every run ends when its bursts are served
specs=("srv_healthy:healthy:$cap::$serve"
       "srv_case1:case1:$cap::$serve"
       "srv_healthy_b2:healthy:$cap::$base --idle-ms 300 --bursts 24,96,32"
       "g_srv_spec:healthy:$cap:graph:$serve --spec-decode 3"
       "g_srv_fwd_case1:case1:$cap:graph:$serve --forward-thread"
       "kineto:k_srv_healthy:healthy:$cap:$kin"
       "kineto:k_srv_case1:case1:$cap:$kin"
       "g_srv_case2:case2:$cap:graph:$serve"
       "g_srv_case1_every4:case1:$cap:graph:$serve --stall-every 4"
       "g_srv_b35_healthy:healthy:$cap:graph:${base/--buckets 15/--buckets 35} --idle-ms 500 --bursts 48"
       "g_srv_case1_nonvtx:case1:$cap:graph:$serve --no-nvtx"
       "g_srv_fwd_healthy:healthy:$cap:graph:$serve --forward-thread"
       "g_srv_healthy_nopin:healthy:$cap:graph:${serve/--pinned-alloc /}"
       "g_srv_healthy:healthy:$cap:graph:$serve"
       "g_srv_healthy_nonvtx:healthy:$cap:graph:$serve --no-nvtx")
python3 "$(dirname "$0")/capture.py" "$out" "${specs[@]}" ${CAPTURE_ARGS:-}
rc=$?
ls -la "$out"
exit $rc
