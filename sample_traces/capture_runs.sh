#!/bin/bash
# Run-to-run noise and torch.profiler vs nsys, on one GPU (kind nvidia-h200), from the
# repository root with .gpu carried:
#   sample_traces/capture_runs.sh OUTDIR [all|runs|twins]   # PACK_DIR=$OUT packs OUTDIR
# runs:  five separate healthy 200-step nsys runs (run1..run5, 5 s apart), then case1, case2
#        and both, 200 steps each (about 5 minutes)
# twins: torch.profiler captures kineto_{healthy,case1,case2,outcopy_case1} (100 steps) and
#        nsys captures of exactly the same commands, nsys_twin_* (about 4 minutes)
# all (the default) is both parts in one command: about 9 minutes, at the edge of a device run's
# 10 minutes; CAPTURE_BUDGET (default 540 s) skips what would not fit, so prefer two runs:
#   capture_runs.sh OUT1 runs   and   capture_runs.sh OUT2 twins
# Compare modes within one part (one machine, one run), never across runs.
# CAPTURE_ARGS adds options of capture.py, e.g. CAPTURE_ARGS=--dry-run prints the commands only.
set -uo pipefail
out=${1:?usage: capture_runs.sh OUTDIR [all|runs|twins]}
part=${2:-all}
specs=()
if [ "$part" = all ] || [ "$part" = runs ]; then
  specs+=("run1:healthy:200" "sleep:5" "run2:healthy:200" "sleep:5" "run3:healthy:200" "sleep:5"
          "run4:healthy:200" "sleep:5" "run5:healthy:200"
          "case1_200:case1:200" "case2_200:case2:200" "both_200:both:200")
fi
if [ "$part" = all ] || [ "$part" = twins ]; then
  specs+=("kineto:kineto_healthy:healthy:100" "kineto:kineto_case1:case1:100"
          "kineto:kineto_case2:case2:100" "kineto:kineto_outcopy_case1:case1:100:--output-copy"
          "nsys_twin_healthy:healthy:100" "nsys_twin_case1:case1:100"
          "nsys_twin_case2:case2:100" "nsys_twin_outcopy_case1:case1:100::--output-copy")
fi
[ ${#specs[@]} -gt 0 ] || { echo "capture_runs.sh: part must be all, runs or twins" >&2; exit 2; }
python3 "$(dirname "$0")/capture.py" "$out" "${specs[@]}" ${CAPTURE_ARGS:-}
rc=$?
ls -la "$out"
exit $rc
