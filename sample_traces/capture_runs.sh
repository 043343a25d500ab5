#!/bin/bash
# Run-to-run noise and torch.profiler vs nsys, on one GPU (kind nvidia-h200), from the
# repository root with .gpu carried:
#   sample_traces/capture_runs.sh OUTDIR [all|runs|twins|twins2|graph|pieces]   # PACK_DIR=$OUT packs OUTDIR
# runs:   five separate healthy 200-step nsys runs (run1..run5, 5 s apart), then case1, case2
#         and both, 200 steps each (about 5 minutes)
# twins:  torch.profiler captures kineto_{healthy,case1,case2,outcopy_case1} (60 steps of 16
#         layers) and nsys captures of exactly the same commands, nsys_twin_* (about 4 minutes;
#         sample_traces/kineto/, "device run C")
# twins2: the same without Python stacks (--torch-profile-no-stack), each followed by its nsys
#         twin, nsys_twin2_* (sample_traces/kineto/, "device run D"; not in all)
# graph:  nsys's default granularity, --cuda-graph-trace=graph (each replay one row, no node
#         rows): healthy, case1, case2 and both (200 steps), the side-stream output copy waited
#         at once (case1, 200) and the polled readback (case1, 100); then node twins of the
#         healthy, case1 and case2 commands, for a comparison within one run ("device run G";
#         not in all)
# pieces: piecewise CUDA graphs (vLLM's, for mixed batches): 24 layers in 24 graphs per step
#         (--layers 24 --pieces 24), healthy, case1 and case2, 100 steps, traced per graph (nsys's
#         default) and case1 also per node; then a host-bound healthy run (25 ms of host work a
#         step: the GPU waits for the host), and case1 under torch.profiler (no stacks, 40 steps)
#         ("device run P"; not in all)
# all (the default) is both parts in one command: about 9 minutes, at the edge of a device run's
# 10 minutes; CAPTURE_BUDGET (default 540 s) skips what would not fit, so prefer two runs:
#   capture_runs.sh OUT1 runs   and   capture_runs.sh OUT2 twins
# Compare modes within one part (one machine, one run), never across runs.
# CAPTURE_ARGS adds options of capture.py, e.g. CAPTURE_ARGS=--dry-run prints the commands only.
set -uo pipefail
out=${1:?usage: capture_runs.sh OUTDIR [all|runs|twins|twins2|graph|pieces]}
part=${2:-all}
specs=()
if [ "$part" = all ] || [ "$part" = runs ]; then
  specs+=("run1:healthy:200" "sleep:5" "run2:healthy:200" "sleep:5" "run3:healthy:200" "sleep:5"
          "run4:healthy:200" "sleep:5" "run5:healthy:200"
          "case1_200:case1:200" "case2_200:case2:200" "both_200:both:200")
fi
# --layers 16: a ~8 ms replay, so that the host slowed by torch.profiler stays ahead of the GPU
if [ "$part" = all ] || [ "$part" = twins ]; then
  specs+=("kineto:kineto_healthy:healthy:60:--layers 16" "kineto:kineto_case1:case1:60:--layers 16"
          "kineto:kineto_case2:case2:60:--layers 16"
          "kineto:kineto_outcopy_case1:case1:60:--layers 16 --output-copy"
          "nsys_twin_healthy:healthy:60::--layers 16" "nsys_twin_case1:case1:60::--layers 16"
          "nsys_twin_case2:case2:60::--layers 16"
          "nsys_twin_outcopy_case1:case1:60::--layers 16 --output-copy")
fi
if [ "$part" = twins2 ]; then
  # NAME:MODE:EXTRA ENGINE ARGS
  for twin in "healthy:healthy:" "case1:case1:" "case2:case2:" "outcopy_case1:case1: --output-copy"; do
    IFS=: read -r name mode extra <<< "$twin"
    specs+=("kineto:kineto_nostack_$name:$mode:60:--layers 16$extra --torch-profile-no-stack"
            "nsys_twin2_$name:$mode:60::--layers 16$extra")
  done
fi
if [ "$part" = graph ]; then
  specs+=("graph_healthy_200:healthy:200:graph" "graph_case1_200:case1:200:graph"
          "graph_case2_200:case2:200:graph" "graph_both_200:both:200:graph"
          "graph_outcopy_case1_200:case1:200:graph:--output-copy"
          "graph_poll_case1_100:case1:100:graph:--wait poll"
          "node_twin_healthy_200:healthy:200" "node_twin_case1_200:case1:200"
          "node_twin_case2_200:case2:200")
fi
if [ "$part" = pieces ]; then
  pw="--layers 24 --pieces 24"
  specs+=("pw24_graph_healthy_100:healthy:100:graph:$pw" "pw24_graph_case1_100:case1:100:graph:$pw"
          "pw24_graph_case2_100:case2:100:graph:$pw" "pw24_node_case1_100:case1:100::$pw"
          "pw24_graph_hostbound_60:healthy:60:graph:$pw --host-work-us 25000"
          "kineto:kineto_pw24_case1_40:case1:40:$pw --torch-profile-no-stack")
fi
[ ${#specs[@]} -gt 0 ] || { echo "capture_runs.sh: part must be all, runs, twins, twins2, graph or pieces" >&2
                            exit 2; }
python3 "$(dirname "$0")/capture.py" "$out" "${specs[@]}" ${CAPTURE_ARGS:-}
rc=$?
ls -la "$out"
exit $rc
