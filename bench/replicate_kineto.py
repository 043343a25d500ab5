#!/usr/bin/env python3
"""Make a large torch.profiler (Kineto) JSON trace by replicating a real one K times in time.

Replica ``k`` (0-based) is every event of the source shifted by ``k * dt`` in ``ts``, ``dt``
= the source's time span + 1 ms, and by ``k * d`` in every id that links events:
``args.correlation`` (CUDA call <-> GPU work) and the ``id`` of its ``ac2g`` flow events,
``args["Python id"]``/``args["Python parent id"]`` and ``args["External id"]``, each by its
maximum + 1, and GPU events (``pid`` = device) by ``k * s`` in their stream (``tid`` and
``args.stream``, s = the largest stream + 1), so each replica's graphs replay on streams of
their own and its last launch stays the last one on its stream, as bench/replicate.py does for
nsys. Metadata events (``"ph": "M"``: process and thread names) and the top-level
fields are written once. So a replica is the same process running the same steps again,
later: each launch keeps its class, and ``report`` on K replicas finds K x the launches.

``--pad-python N`` adds N one-microsecond ``<built-in function len>`` python_function events
per graph launch (children of the outermost python_function of the launching thread, spread
over the step): the committed samples are slimmed (sample_traces/README.md), and this puts
back the density of a real ``with_stack=True`` trace (the raw case-1 capture: 3,470
python_function events per step) without touching any stack the analysis reads (C functions
are never a frame).

The output is written as a stream (plain JSON, or gzip for a ``.gz`` name), one event per
line; the source is held in memory (it is small). Usage::

    python bench/replicate_kineto.py SRC.pt.trace.json[.gz] DST.pt.trace.json
        (--k K | --size-gb G) [--pad-python N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path

ID_ARGS = ("correlation", "Python id", "Python parent id", "External id")


def read(src: Path) -> dict:
    opener = gzip.open if src.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(src, "rt", encoding="utf-8") as f:
        return json.load(f)


def _pad(events: list[dict], per_launch: int) -> list[dict]:
    """``per_launch`` leaf python_function events per graph launch, inside the outermost
    python_function of the launching thread."""
    launches = sorted(e["ts"] for e in events if e.get("cat") == "cuda_runtime"
                      and e.get("name") == "cudaGraphLaunch")
    py = [e for e in events if e.get("cat") == "python_function" and e.get("ph") == "X"]
    if not launches or not py or per_launch <= 0:
        return []
    root = max(py, key=lambda e: e["dur"])
    step = (launches[-1] - launches[0]) / max(len(launches) - 1, 1)
    first = max(root["ts"] + 1.0, launches[0] - step)
    last = min(root["ts"] + root["dur"] - 2.0, launches[-1] + step)
    n = per_launch * len(launches)
    top = max(int(e["args"].get("Python id", 0) or 0) for e in py) + 1
    out = []
    for i in range(n):
        ts = round(first + (last - first) * i / max(n - 1, 1), 3)
        out.append({"ph": "X", "cat": "python_function", "name": "<built-in function len>",
                    "pid": root["pid"], "tid": root["tid"], "ts": ts, "dur": 1.0,
                    "args": {"Python parent id": root["args"].get("Python id"),
                             "Python id": top + i, "Ev Idx": 0}})
    return out


def replicate(src: Path, dst: Path, k: int | None = None, size_gb: float | None = None,
              pad_python: int = 0) -> dict:
    t0 = time.time()
    doc = read(src)
    events = doc.get("traceEvents", [])
    events = events + _pad(events, pad_python)
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    times = [float(e["ts"]) + float(e.get("dur") or 0) for e in body
             if isinstance(e.get("ts"), (int, float))]
    starts = [float(e["ts"]) for e in body if isinstance(e.get("ts"), (int, float))]
    dt = round(max(times) - min(starts) + 1000.0, 3)
    shift: dict[str, int] = {}
    for name in ID_ARGS:
        vals = [e["args"][name] for e in body if isinstance(e.get("args"), dict)
                and isinstance(e["args"].get(name), int)]
        shift[name] = max(vals, default=0) + 1
    flow_shift = shift["correlation"]
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    streams = [e["args"]["stream"] for e in body if e.get("cat") in gpu_cats
               and isinstance(e.get("args"), dict) and isinstance(e["args"].get("stream"), int)]
    stream_shift = max(streams, default=0) + 1
    lines = [json.dumps(e, separators=(",", ":")) for e in body]
    one = sum(len(x) + 2 for x in lines)
    if k is None:
        k = max(1, math.ceil((size_gb or 1.0) * 1e9 / one))
    opener = gzip.open if dst.name.endswith(".gz") else open
    tmp = dst.with_name(dst.name + ".tmp")
    n = 0
    with opener(tmp, "wt", encoding="utf-8") as out:
        out.write("{\n")
        for key, value in doc.items():
            if key != "traceEvents":
                out.write(f"{json.dumps(key)}: {json.dumps(value)},\n")
        out.write('"traceEvents": [\n')
        first = True
        for e in meta:
            out.write(("" if first else ",\n") + json.dumps(e, separators=(",", ":")))
            first = False
        for r in range(k):
            if r == 0:
                chunk = lines
            else:
                chunk = []
                for e in body:
                    e2 = dict(e)
                    if isinstance(e2.get("ts"), (int, float)):
                        e2["ts"] = round(e2["ts"] + r * dt, 3)
                    args = e2.get("args")
                    if isinstance(args, dict):
                        a2 = dict(args)
                        for name in ID_ARGS:
                            if isinstance(a2.get(name), int):
                                a2[name] = a2[name] + r * shift[name]
                        e2["args"] = a2
                    if e2.get("cat") == "ac2g" and isinstance(e2.get("id"), int):
                        e2["id"] = e2["id"] + r * flow_shift
                    if e2.get("cat") in gpu_cats:  # streams of its own: see the docstring
                        if isinstance(e2.get("args"), dict) and \
                                isinstance(e2["args"].get("stream"), int):
                            e2["args"]["stream"] += r * stream_shift
                        if isinstance(e2.get("tid"), int):
                            e2["tid"] += r * stream_shift
                    chunk.append(json.dumps(e2, separators=(",", ":")))
            out.write(("" if first else ",\n") + ",\n".join(chunk))
            first = False
            n += len(chunk)
        out.write("\n]\n}\n")
    os.replace(tmp, dst)
    launches = sum(1 for e in body if e.get("cat") == "cuda_runtime"
                   and e.get("name") == "cudaGraphLaunch")
    return {"k": k, "events": n + len(meta), "source_events": len(body) + len(meta),
            "launches": k * launches, "source_launches": launches, "bytes": dst.stat().st_size,
            "dt_us": dt, "seconds": round(time.time() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--k", type=int, help="number of replicas")
    g.add_argument("--size-gb", type=float, help="replicate up to about this size (GB)")
    ap.add_argument("--pad-python", type=int, default=0, metavar="N",
                    help="add N leaf python_function events per graph launch")
    args = ap.parse_args(argv)
    info = replicate(args.src, args.dst, k=args.k, size_gb=args.size_gb,
                     pad_python=args.pad_python)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
