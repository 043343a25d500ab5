#!/bin/bash
# Capture traces of engine_under_test on a GPU machine with nsys (capture.py says which nsys
# wrapper it runs), from the repository root:
#   sample_traces/capture.sh OUTDIR NAME:MODE:STEPS[:python|:aten|:][:ENGINE ARGS] ...
# A thin wrapper of capture.py, which also takes pair:..., kineto:... and sleep:... specs, a
# per-capture timeout and a budget for the whole command: see `python3 sample_traces/capture.py -h`.
# Each NAME is profiled with nsys (CUDA + NVTX, graphs traced per node), exported to SQLite,
# its engine metrics written to NAME.json, and the SQLite xz-compressed into OUTDIR.
# ":python" adds 2 kHz Python sampling and exports the stacks as JSON.
# ":aten" adds --pytorch=autograd-nvtx (an NVTX range per aten op); ":graph" traces each graph
# replay as one row (--cuda-graph-trace=graph, nsys's default) instead of per node.
exec python3 "$(dirname "$0")/capture.py" "$@"
