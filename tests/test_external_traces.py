"""Traces nobody here made: public torch.profiler and nsys files of other projects (issue 53).

The corpus (tests/data/external/README.md: sources, commits, licences, sizes, what was
redacted) is placed in ``tests/data/external/`` from ``shared/external/``, or named by
``$NSYSSCOPE_EXTERNAL_TRACES``; a test whose file is not there is skipped.

Every number asserted is read from the raw file by this module's own readers (``json``,
``decimal``, ``sqlite3`` and numpy only: nothing of nsysscope), and those readings are pinned
too, so that a change of either side fails:

* the two public Kineto traces with CUDA graphs (HTA's ``negative_queue_length_values_check``
  and ``trace_diff/test``, Unix-epoch microseconds): launches, steady launches, stalls, launch-
  bound gaps and the GPU idle percentiles, from an independent pairing of each replay with the
  next and of the host calls that blocked across a replay's end (:func:`graph_facts`);
* eager-only traces of every era: exit 3, with the eager GPU ops and CUDA calls the raw file
  holds;
* epoch times written to the nanosecond read to the nanosecond; ``cuda_sync`` events paired
  through the record they name;
* nsys exports of schema 2.9.1 (nsys 2022.1 and 2022.2), 3.24 and 3.25 (2026.1, 2026.2) read,
  and one with no metadata table refused with what it is;
* and no file of the corpus gives a traceback, or "no CUDA data" where it holds CUDA events.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import re
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from nsysscope import analyze, load

ROOT = Path(__file__).resolve().parents[1]


def _corpus() -> Path:
    env = os.environ.get("NSYSSCOPE_EXTERNAL_TRACES")
    here = ROOT / "tests" / "data" / "external"
    for d in ([Path(env)] if env else []) + [here, ROOT.parent / "shared" / "external"]:
        if any(d.glob("*.gz")) or any(d.glob("*.xz")):
            return d
    return here


CORPUS = _corpus()
#: the files of the corpus (README.md): what nsysscope must answer on each
KINETO_GRAPHS = ("hta_negative_queue_rank0.json.gz", "hta_trace_diff_test.json.gz")
KINETO_EAGER = ("kineto_resnet50_torch1.8.pt.trace.json.gz", "hta_inference_rank_1.json.gz",
                "hta_ns_resolution_rank0.json.gz", "hta_nccl_data.json.gz",
                "hta_cuda_event_sync.json.gz", "hta_cuda_event_sync_multi_stream.json.gz",
                "hta_critical_path_alexnet.json.gz", "hta_amd_mi250_rocm.json.gz")
NSYS_EAGER = ("pipit_saxpy_nsys2022.2_schema2.9.1.sqlite.xz",
              "extrap_con_kernel_nsys2022.1_schema2.9.1.sqlite.xz",
              "nsysai_h100_2gpu_nsys2026.2_schema3.25.0.sqlite.xz",
              "nsysai_mock_nsys2026.1_schema3.24.14.sqlite.xz")
REFUSED = {  # name: (exit code, what the one line says)
    "hta_cpu_only_rank34.json.gz": (3, "no CUDA data in this trace"),
    "hta_execution_trace_et.json.gz": (5, "JSON, but not a torch.profiler trace"),
    "extrap_ex-gpu_s10_no_metadata.sqlite.xz": (
        5, "an export of nsys 2021.1 or older (TARGET_INFO_CUDA_GPU, and no metadata table): "
           "nsysscope cannot tell its schema; export its report again with nsys 2022.1 or "
           "newer"),
}
ALL = KINETO_GRAPHS + KINETO_EAGER + NSYS_EAGER + tuple(REFUSED)


def need(name: str) -> Path:
    p = CORPUS / name
    if not p.is_file():
        pytest.skip(f"{name} is not in {CORPUS} (tests/data/external/README.md)")
    return p


def report(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NSYSSCOPE_DEBUG"}
    return subprocess.run([sys.executable, "-m", "nsysscope", "report", str(path), *args],
                          capture_output=True, text=True, timeout=300, env=env)


# -- the raw files, read without nsysscope --------------------------------------------------

_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
_API_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}


def raw_events(path: Path, exact: bool = False) -> list[dict]:
    """The complete events (``ph: X``) of a Kineto file; ``exact``: numbers as Decimals."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        d = json.load(f, parse_float=Decimal) if exact else json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    return [e for e in ev if isinstance(e, dict) and e.get("ph") == "X"]


def kineto_counts(path: Path) -> tuple[int, int, int]:
    """(GPU ops, CUDA calls, cudaGraphLaunch calls) of a Kineto file."""
    ev = raw_events(path)
    cats = [str(e.get("cat", "")).lower() for e in ev]
    gpu = sum(c in _GPU_CATS for c in cats)
    api = [e for e, c in zip(ev, cats, strict=True) if c in _API_CATS]
    return gpu, len(api), sum(e.get("name") == "cudaGraphLaunch" for e in api)


def nsys_counts(path: Path, tmp: Path) -> tuple[int, int, int]:
    """(GPU ops, CUDA calls, graph launches) of an nsys export (``.sqlite.xz``)."""
    db = tmp / (path.name + ".sqlite")
    db.write_bytes(lzma.decompress(path.read_bytes()))
    c = sqlite3.connect(db)
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    gpu = sum(c.execute(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_{t}").fetchone()[0]
              for t in ("KERNEL", "MEMCPY", "MEMSET") if f"CUPTI_ACTIVITY_KIND_{t}" in tables)
    calls, launches = c.execute(
        "SELECT count(*), count(CASE WHEN s.value LIKE 'cudaGraphLaunch%' THEN 1 END) FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME r LEFT JOIN StringIds s ON s.id = r.nameId").fetchone()
    c.close()
    return gpu, calls, launches


#: calls that block the host until GPU work ends; an async copy does only when it touches
#: pageable memory (the runtime then copies synchronously)
_BLOCKING = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
             "cudaMemcpy", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}


def graph_facts(path: Path, warmup: int = 5, bound_us: float = 150.0) -> dict:
    """Each cudaGraphLaunch's replay (the GPU ops with its correlation id), the next replay on
    its stream, the GPU idle time between them (the gap less the device's other GPU work in
    it), and whether the thread that issues the next launch was blocked across this replay's
    end before issuing it (a stall). Launches after the first ``warmup`` and before the last
    are steady; a steady gap over ``bound_us`` with no stall is launch-bound."""
    ev = raw_events(path)
    api = [e for e in ev if str(e.get("cat", "")).lower() in _API_CATS]
    gpu = [e for e in ev if str(e.get("cat", "")).lower() in _GPU_CATS]
    launches = sorted((e for e in api if e["name"] == "cudaGraphLaunch"), key=lambda e: e["ts"])
    corr = {e["args"]["correlation"] for e in launches}
    spans: dict[int, list[float]] = {}
    stream: dict[int, int] = {}
    for g in gpu:
        c = g["args"].get("correlation")
        if c in corr:
            s = spans.setdefault(c, [np.inf, -np.inf])
            s[0], s[1] = min(s[0], g["ts"]), max(s[1], g["ts"] + g["dur"])
            stream.setdefault(c, g["args"].get("stream"))
    pageable = {g["args"].get("correlation") for g in gpu if "Pageable" in g["name"]}
    busy = sorted((g["ts"], g["ts"] + g["dur"]) for g in gpu)
    idle, stalled = [], []
    for i, e in enumerate(launches[:-1]):
        c = e["args"]["correlation"]
        nxt = next(f for f in launches[i + 1:] if stream[f["args"]["correlation"]] == stream[c])
        end, start = spans[c][1], spans[nxt["args"]["correlation"]][0]
        inside, reach = 0.0, end  # the union of the device's work inside (end, start)
        for s, t in busy:
            s, t = max(s, reach), min(t, start)
            if t > s:
                inside += t - s
                reach = t
        idle.append(start - end - inside)
        stalled.append(any(
            r["tid"] == nxt["tid"] and r["pid"] == nxt["pid"]
            and (r["name"] in _BLOCKING or (r["name"] == "cudaMemcpyAsync"
                                            and r["args"].get("correlation") in pageable))
            and r["ts"] < end < r["ts"] + r["dur"] <= nxt["ts"] for r in api))
    steady_idle, steady_stalls = np.array(idle[warmup:]), np.array(stalled[warmup:])
    return {"launches": len(launches), "steady": len(steady_idle),
            "stalls": int(steady_stalls.sum()),
            "launch_bound": int(((steady_idle > bound_us) & ~steady_stalls).sum()),
            "idle_us": tuple(round(float(np.percentile(steady_idle, q)), 1) for q in (10, 50, 90))}


# -- what nsysscope must say ---------------------------------------------------------------

#: graph_facts of the two traces, as it read them (2026-12-06); nsysscope must agree
GRAPH_FACTS = {
    "hta_negative_queue_rank0.json.gz": {"launches": 70, "steady": 64, "stalls": 0,
                                         "launch_bound": 34, "idle_us": (21.3, 495.0, 8316.6)},
    "hta_trace_diff_test.json.gz": {"launches": 12, "steady": 6, "stalls": 1,
                                    "launch_bound": 5, "idle_us": (769.5, 1287.0, 2478.0)},
}


@pytest.mark.parametrize("name", KINETO_GRAPHS)
def test_the_public_graph_traces_are_analysed_as_their_raw_events_say(name):
    """They were "no CUDA data in this trace", exit 3: every time is Unix-epoch microseconds
    (1.66e15-1.68e15), past the 1e15 us taken for the end of any clock."""
    path = need(name)
    facts = graph_facts(path)
    assert facts == GRAPH_FACTS[name]
    s = analyze(load(path)).summary
    assert (s.launches, s.warmup_launches, s.steady_launches) == \
        (facts["launches"], 5, facts["steady"])
    assert sum(s.stalls.values()) == facts["stalls"]
    assert s.classes["launch_bound"] == facts["launch_bound"]
    assert (s.gpu_gap_us.p10, s.gpu_gap_us.p50, s.gpu_gap_us.p90) == facts["idle_us"]
    if facts["stalls"]:  # trace_diff: a pageable DtoH copy blocked the main thread 40.9 ms
        assert s.stalls["gpu_to_cpu"] == 1
        assert s.sites[0].api_chain.startswith("cudaMemcpyAsync DtoH 3920 B")


@pytest.mark.parametrize("name", KINETO_EAGER + NSYS_EAGER)
def test_eager_traces_exit_3_with_what_they_hold(name, tmp_path):
    """No graph to analyse: exit 3, counting the eager GPU ops and the CUDA calls the file
    holds (it counted only the calls nsysscope reads: 1632 of resnet50's 10920)."""
    path = need(name)
    gpu, calls, launches = (nsys_counts(path, tmp_path) if name.endswith(".xz")
                            else kineto_counts(path))
    assert launches == 0 and gpu and calls
    r = report(path)
    assert r.returncode == 3, r.stderr
    assert r.stderr == (f"nsysscope: error: {path}: no CUDA graph launches ({gpu} eager GPU "
                        f"ops, {calls} CUDA calls); nsysscope analyses engines that replay CUDA "
                        "graphs\n")


def test_eager_counts_are_the_ones_read_when_the_corpus_was_made():
    """The raw readings, pinned (an era's parser that miscounts fails here too)."""
    want = {"kineto_resnet50_torch1.8.pt.trace.json.gz": (10015, 10920, 0),
            "hta_inference_rank_1.json.gz": (4, 8, 0),
            "hta_cuda_event_sync.json.gz": (5, 12, 0)}
    for name, counts in want.items():
        assert kineto_counts(need(name)) == counts


def test_epoch_times_written_to_the_nanosecond_are_read_to_the_nanosecond():
    """HTA's ns_resolution_trace (PyTorch ~2.3): ``"ts": 1712195495519689.047``, where a float
    holds 0.25 us steps only. The GPU ops' starts, one after the other, are the raw text's to
    the nanosecond (differences: exact decimals, times 1000)."""
    path = need("hta_ns_resolution_rank0.json.gz")
    ev = raw_events(path, exact=True)
    starts = sorted(e["ts"] for e in ev if str(e.get("cat")) in _GPU_CATS)
    assert any(t != int(t) for t in starts[:100])  # fractions of a microsecond
    want = np.diff(np.array([int((t - starts[0]) * 1000) for t in starts], dtype=np.int64))
    got = np.diff(np.sort(load(path).gpu_ops["start_ns"].to_numpy()))
    assert len(got) == len(want) == 6094
    assert np.array_equal(got, want)


def test_cuda_sync_events_pair_event_waits_through_their_record():
    """HTA's cuda_event_sync trace: PyTorch's cuda_sync events say which cudaEventRecord each
    event wait waited on (wait_on_cuda_event_record_corr_id): the syncs and records tables hold
    exactly the raw events', the event waits are exact blocks bounded by that record's call
    (they were timing guesses), and the note on timing is not given."""
    from nsysscope.analysis import streams
    from nsysscope.analysis.blocks import block_table, copy_calls
    from nsysscope.analysis.calls import ThreadCalls
    from nsysscope.analysis.config import AnalysisConfig

    path = need("hta_cuda_event_sync.json.gz")
    ev = raw_events(path)
    raw = sorted((e["args"]["correlation"], e["args"].get("wait_on_cuda_event_record_corr_id", -1),
                  e["args"]["stream"]) for e in ev if e.get("cat") == "cuda_sync")
    trace = load(path)
    assert trace.meta.has_sync_records and trace.meta.has_event_records
    got = sorted(zip(trace.syncs["corr_id"], trace.syncs["event_sync_id"],
                     trace.syncs["stream"], strict=True))
    assert got == raw == [(1512, -1, 7), (1536, 1533, -1), (1537, 1533, -1), (1549, -1, -1)]
    assert trace.event_records[["corr_id", "event_sync_id", "stream"]].values.tolist() == \
        [[1533, 1533, 7]]
    records = streams.event_records_with_calls(trace)
    blocks = block_table(trace, copy_calls(trace), ThreadCalls.of(trace.api), records,
                         AnalysisConfig())
    record_start = int(trace.api.loc[trace.api["corr_id"] == 1533, "start_ns"].iloc[0])
    wait = blocks[blocks["corr_id"] == 1536].iloc[0]
    assert (wait["name"], wait["scope"], bool(wait["exact"])) == \
        ("cudaEventSynchronize", "event", True)
    assert (wait["boundary_ns"], wait["stream"], wait["anchor_corr"]) == (record_start, 7, 1533)
    stream_sync = blocks[blocks["corr_id"] == 1512].iloc[0]
    assert (stream_sync["scope"], stream_sync["stream"], bool(stream_sync["exact"])) == \
        ("stream", 7, True)


def test_a_stream_wait_event_joins_the_two_streams():
    """HTA's multi-stream trace: a cudaStreamWaitEvent (stream 24 waits for an event recorded
    on stream 20) is an edge between the streams, as nsys's sync records make it."""
    from nsysscope.analysis import streams

    trace = load(need("hta_cuda_event_sync_multi_stream.json.gz"))
    edges = streams.stream_waits(trace, streams.event_records_with_calls(trace))
    assert edges[["stream", "src_stream"]].values.tolist() == [[24, 20]]


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_is_not_analysable_is_refused_with_what_it_is(name):
    path = need(name)
    code, said = REFUSED[name]
    r = report(path)
    assert r.returncode == code and said in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_no_file_gives_a_traceback_or_no_cuda_data_where_it_holds_cuda_events(tmp_path):
    """Every file of the corpus: one line on stderr at most, a documented exit code, and "no
    CUDA data" only where the raw file holds no CUDA call and no GPU op."""
    present = [n for n in ALL if (CORPUS / n).is_file()]
    if not present:
        pytest.skip(f"no corpus in {CORPUS} (tests/data/external/README.md)")
    for name in present:
        path = CORPUS / name
        r = report(path, "--format", "json")
        assert "Traceback" not in r.stderr + r.stdout, name
        assert r.returncode in (0, 3, 5, 7), (name, r.stderr)
        assert r.stderr.count("\n") <= 1, (name, r.stderr)
        if name.endswith(".xz"):
            holds = not name.startswith("extrap_ex-gpu") and any(nsys_counts(path, tmp_path)[:2])
        elif name == "hta_execution_trace_et.json.gz":
            holds = False  # no events at all: an execution trace, not a Kineto one
        else:
            holds = any(kineto_counts(path)[:2])
        if holds:
            assert not re.search(r"no CUDA data", r.stderr), (name, r.stderr)


@pytest.mark.parametrize("name,base", [("hta_inference_rank_1.json.gz", False),
                                       ("hta_nccl_data.json.gz", True)])
def test_a_torch_profiler_trace_says_its_rank_and_its_wall_clock(name, base):
    """Public HTA traces of two eras: epoch microseconds (rank 1) and microseconds from
    ``baseTimeNanoseconds`` (rank 0): each names its ``distributedInfo`` rank, and its time
    zero is a wall-clock time inside the trace's own span."""
    path = need(name)
    d = json.loads(gzip.decompress(path.read_bytes()))
    ts = [float(e["ts"]) for e in d["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    zero = d.get("baseTimeNanoseconds", 0) if base else 0
    meta = load(path).meta
    assert meta.rank == d["distributedInfo"]["rank"]
    assert zero + min(ts) * 1000 - 1000 <= meta.session_start_ns <= zero + max(ts) * 1000
