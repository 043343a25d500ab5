#!/bin/bash
# Capture the sample traces on the GPU machine (see ../shared/gpu/README.md), from the repo root:
#   sample_traces/capture.sh OUTDIR NAME:MODE:STEPS[:python|:aten|:][:ENGINE ARGS] ...
# Each NAME is profiled with nsys (CUDA + NVTX, graphs traced per node), exported to SQLite,
# its engine metrics written to NAME.json, and the SQLite xz-compressed into OUTDIR.
# ":python" adds 2 kHz Python sampling and exports the stacks as JSON.
# ":aten" adds --pytorch=autograd-nvtx (an NVTX range per aten op).
set -uo pipefail
out=$1; shift
mkdir -p "$out"
work=$(mktemp -d)
{
  echo "nsys: $(/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys --version 2>&1 | tail -1)"
  python3 -c "import torch; print('torch:', torch.__version__, '| gpu:', torch.cuda.get_device_name(0))"
} > "$out/environment.txt"
for spec in "$@"; do
  IFS=: read -r name mode steps extra args <<< "$spec"
  flags="" ; eflags=""
  case "$extra" in
    python) flags="--python-sampling=true --python-sampling-frequency=2000"; eflags="--include-json true" ;;
    aten) flags="--pytorch=autograd-nvtx" ;;
  esac
  cmd="python3 -m engine_under_test --mode $mode --steps $steps ${args:-}"
  echo "== $name: $cmd  [nsys $flags]" | tee -a "$out/commands.txt"
  NSYS_FLAGS="$flags" NSYS_EXPORT_FLAGS="$eflags" .gpu/nsys-capture.sh "$work/$name" -- $cmd --json "$out/$name.json" \
    2>&1 | grep -E "mode=|error|Error|no report" | tee -a "$out/commands.txt"
  [ -f "$work/$name.sqlite" ] && xz -T0 -6 -c "$work/$name.sqlite" > "$out/$name.sqlite.xz"
  rm -f "$work/$name".*
done
rm -rf "$work"
ls -la "$out"
