#!/bin/bash
# One nsys capture of a command, as capture.py takes it on any machine with nsys on PATH:
#   sample_traces/nsys_capture.sh OUT_BASENAME -- COMMAND [ARGS...]
# makes OUT_BASENAME.nsys-rep and exports OUT_BASENAME.sqlite. The flags are the samples'
# (sample_traces/README.md): CUDA and NVTX, CUDA graphs traced per node, no CPU sampling.
# NSYS: the nsys to run (default: nsys on PATH). NSYS_BASE_FLAGS replaces the flags above
# (capture.py's ":graph": --cuda-graph-trace=graph). NSYS_FLAGS: more profile flags (capture.py
# passes --python-sampling=true ... or --pytorch=autograd-nvtx); NSYS_EXPORT_FLAGS: export flags
# (--include-json true: the Python stacks are JSON NVTX payloads, exported only so).
# The H200 machine these samples came from needed its report importer run by hand (a missing
# library); capture.py uses such a machine's own wrapper, .gpu/nsys-capture.sh, when present.
set -uo pipefail
out=${1:?usage: nsys_capture.sh OUT_BASENAME -- COMMAND [ARGS...]}; shift
[ "${1:-}" = "--" ] && shift
nsys=${NSYS:-nsys}
rm -f "$out.nsys-rep" "$out.sqlite"
"$nsys" profile ${NSYS_BASE_FLAGS:--t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=node} \
    ${NSYS_FLAGS:-} \
    -o "$out" -f true "$@"
[ -f "$out.nsys-rep" ] || { echo "nsys_capture: no report made" >&2; exit 1; }
export_flags=${NSYS_EXPORT_FLAGS:-}
# --include-json came with nsys 2024: an older export refuses the whole command
# (the help read whole: grep -q stopping early would kill nsys, and pipefail say "unsupported")
if [[ " $export_flags " == *" --include-json"* ]]; then
  help=$("$nsys" export --help 2>&1)
  if [[ $help != *include-json* ]]; then
    export_flags=$(sed -E 's/--include-json((=| )(true|false))?//' <<< "$export_flags")
    echo "nsys_capture: this nsys exports no JSON payloads (--include-json left out)" >&2
  fi
fi
"$nsys" export --type sqlite $export_flags -o "$out.sqlite" -f true "$out.nsys-rep"
