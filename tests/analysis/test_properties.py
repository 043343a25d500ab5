"""Properties of the overlap analysis on synthetic timelines in the real nsys schema.

hypothesis draws decode loops (:func:`tests.synth.decode_loop`): one CUDA graph launch per
step (graph node kernels carrying the launch's correlation id and a ``graphNodeId``), pinned
input uploads, event records and ``cudaEventSynchronize`` linked by ``eventSyncId``, DtoH
readbacks into pinned or pageable memory followed by ``cudaStreamSynchronize``, pageable HtoD
uploads followed by a sync, bare stream or device syncs, NVTX phases, on one or several host
threads, with every duration drawn at random. Each step plants a class: ``healthy`` (the host
waits on the previous step's event after queuing the next launch), ``nowait``,
``gpu_to_cpu``, ``cpu_to_gpu`` or ``other_stall``. The simulator records which launches each
blocking call waited for by stream order, and :func:`tests.synth.expected` derives from that
the block, window, gap, idle time and class every launch must get.

Checked: every planted stall is found with its class and phase; no healthy wait is called a
stall; windows, block times, GPU gaps and idle times equal the simulated values to the
nanosecond; the results do not change when every table's rows are shuffled, nor when
unrelated threads, streams and processes (another rank on its own GPU, with the same stream
ids) are added.

Profiles (hypothesis settings, chosen with ``NSYSSCOPE_HYPOTHESIS=<name>``):

* ``ci`` (default): ``derandomize=True`` (a fixed seed: every run draws the same examples,
  so CI is reproducible), no example database, no deadline, no shrinking (a failure prints
  the drawn example and its ``@reproduce_failure`` blob at once instead of minutes later),
  ``max_examples`` 35 (classes, windows, gaps), 15 (row order), 15 (unrelated threads,
  streams, processes) and 12 (optional tables dropped): the file runs in about 20 s on two
  cores.
* ``thorough``: random seeds, shrinking, 400 examples per property, for hunting bugs
  locally: ``NSYSSCOPE_HYPOTHESIS=thorough pytest tests/test_properties.py``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

hypothesis = pytest.importorskip("hypothesis")
import synth  # noqa: E402  (tests/ is on sys.path: pytest rootdir-relative import)
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nsysscope import analyze, load  # noqa: E402

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported at once
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "thorough", derandomize=False, deadline=None, max_examples=400,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(os.environ.get("NSYSSCOPE_HYPOTHESIS", "ci"))
CI = os.environ.get("NSYSSCOPE_HYPOTHESIS", "ci") == "ci"


def examples(n: int) -> settings:
    return settings(PROFILE, max_examples=n) if CI else settings(PROFILE)


KLASSES = ("healthy", "nowait", "gpu_to_cpu", "cpu_to_gpu", "other_stall")


@st.composite
def steps(draw, threads: int) -> synth.Step:
    """One decode step. The bounds keep each plant unambiguous: a graph replay (>= 600 us)
    outlasts the host's work between a launch and the wait on it (<= ~470 us), so a healthy
    host is always ahead of the GPU and a stalled one always waits."""
    return synth.Step(
        klass=draw(st.sampled_from(KLASSES)),
        launch_ns=draw(st.integers(2_000, 40_000)),
        lat_ns=draw(st.integers(2_000, 50_000)),
        q_ns=draw(st.integers(1_000, 20_000)),
        nodes=tuple(draw(st.lists(st.integers(300_000, 1_500_000), min_size=2, max_size=3))),
        pre_ns=draw(st.integers(1_000, 60_000)),
        window_ns=draw(st.integers(1_000, 200_000)),
        post_ns=draw(st.integers(1_000, 100_000)),
        call_ns=draw(st.integers(1_000, 20_000)),
        copy_ns=draw(st.integers(1_000, 30_000)),
        ret_ns=draw(st.integers(500, 10_000)),
        pinned_input=draw(st.booleans()),
        pageable_readback=draw(st.booleans()),
        device_sync=draw(st.booleans()),
        wait_thread=draw(st.integers(0, threads - 1)),
        memset_node=draw(st.booleans()),
        output_copy=draw(st.booleans()),
        # sync waits, a tight polling loop, or an asyncio loop that yields between tries
        poll_gap_ns=draw(st.sampled_from([None, None, 1_000, 4_000, 40_000])),
    )


@st.composite
def loops(draw):
    threads = draw(st.integers(1, 3))
    return threads, draw(st.lists(steps(threads), min_size=3, max_size=12))


MAIN_PID, OTHER_PID = 4242, 5151


def build(threads: int, plan: list[synth.Step], extras: bool = False):
    s = synth.Synth()
    main = s.process(MAIN_PID, device=0)
    synth.decode_loop(main, plan, threads=threads)
    if extras:
        t0, t1 = 1_000_000_000, max(ln.gpu_end for ln in main.launches)
        synth.unrelated_thread(s.process(MAIN_PID, device=1, corr_base=5_000_000), t0, t1)
        synth.watchdog_thread(main)
        other = s.process(OTHER_PID, device=2, corr_base=9_000_000)
        synth.unrelated_process(other, t0, t1)
    return s, main


def analyse(s: synth.Synth, **write):
    with tempfile.TemporaryDirectory() as d:
        return analyze(load(s.write(Path(d) / "synthetic.sqlite", **write)))


def same(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return a == b


def check_against_oracle(a, proc: synth.Proc) -> None:
    exp = synth.expected(proc)
    rows = a.launches.set_index("corr_id")
    mine = rows[rows["tid"].to_numpy() // (1 << 24) % (1 << 24) == proc.pid]
    assert sorted(mine.index) == sorted(exp), "every launch of the process is in the table"
    for corr, e in exp.items():
        r = mine.loc[corr]
        where = f"launch corr {corr}: planted {e.planted}, expected {e.klass}"
        if e.planted is not None:
            assert e.klass == e.planted, f"generator: {where}"  # the plant is unambiguous
        assert r["klass"] == e.klass, f"{where}, got {r['klass']}"
        if e.klass in ("healthy", "nowait", "launch_bound"):
            assert not r["stall"], f"{where}: a healthy wait called a stall"
        assert same(e.window_ns, r["window_ns"]), \
            f"{where}: window {r['window_ns']} != {e.window_ns}"
        assert same(e.gap_ns, r["gpu_gap_ns"]), f"{where}: gap {r['gpu_gap_ns']} != {e.gap_ns}"
        assert same(e.idle_ns, r["gpu_idle_ns"]), f"{where}: idle {r['gpu_idle_ns']} != {e.idle_ns}"
        if e.block is not None:
            assert (r["block_start_ns"], r["block_end_ns"]) == (e.block.start, e.block.end), where
            assert r["block_tid"] == e.block.tid, where
        else:
            assert not r["waited"], where
        if e.klass in synth.STALLS and proc.pid == MAIN_PID:
            assert r["phase"] == synth.phase_of(e.klass), f"{where}: phase {r['phase']}"


@examples(35)
@given(loops())
def test_planted_classes_windows_and_gaps_are_found_exactly(loop):
    threads, plan = loop
    s, main = build(threads, plan)
    check_against_oracle(analyse(s), main)


COMPARED = ["klass", "stall", "waited", "window_ns", "gpu_gap_ns", "gpu_idle_ns", "block_start_ns",
            "block_end_ns", "block_tid", "api_chain", "phase", "step", "gpu_start_ns", "gpu_end_ns"]


def table(a, pid: int = MAIN_PID):
    rows = a.launches[a.launches["tid"].to_numpy() // (1 << 24) % (1 << 24) == pid]
    out = rows.set_index("corr_id").sort_index()[COMPARED].copy()
    out["step"] = out["step"].astype("float64")  # ints, or floats once another process adds NaN
    for col in ("phase", "api_chain"):  # None or NaN, object or str dtype: the same "missing"
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


@examples(15)
@given(loops(), st.integers(0, 2**32 - 1))
def test_results_do_not_depend_on_row_order(loop, seed):
    threads, plan = loop
    s, _ = build(threads, plan)
    base, shuffled = analyse(s), analyse(s, shuffle=seed)
    assert_frame_equal(table(base), table(shuffled))
    summaries = [a.summary.to_dict(with_distributions=True) for a in (base, shuffled)]
    for d in summaries:
        d["trace"].pop("path")  # two temporary files
    assert summaries[0] == summaries[1]


@examples(15)
@given(loops())
def test_unrelated_threads_streams_and_processes_change_nothing(loop):
    threads, plan = loop
    plain, _ = build(threads, plan)
    busy, main = build(threads, plan, extras=True)
    base, noisy = analyse(plain), analyse(busy)
    assert_frame_equal(table(base), table(noisy), check_dtype=False)
    # the other rank's own launches are analysed correctly too
    other = next(p for p in busy.procs if p.pid == OTHER_PID)
    check_against_oracle(noisy, other)


@examples(15)
@given(loops(), st.booleans())
def test_processes_with_the_same_ids_are_kept_apart(loop, same_device):
    """Correlation ids, stream ids and event sync ids restart in every process, and with
    ``CUDA_VISIBLE_DEVICES`` two processes on two GPUs both say device 0: nothing is joined
    on any of them alone. Two ranks run the same plan (so the same ids), the second one's
    GPU 50 us behind and its replays shorter."""
    threads, plan = loop
    s = synth.Synth()
    rank0 = s.process(MAIN_PID, device=0)
    synth.decode_loop(rank0, plan, threads=threads)
    rank1 = s.process(OTHER_PID, device=0 if same_device else 1)
    synth.decode_loop(rank1, [dataclasses.replace(st, nodes=tuple(n - 100_000 for n in st.nodes))
                              for st in plan], threads=threads, start=1_000_050_000)
    a = analyse(s)
    check_against_oracle(a, rank0)
    check_against_oracle(a, rank1)


NO_SYNC_NOTE = "no sync-to-event records in this export"
DROPS = [("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",), ("CUPTI_ACTIVITY_KIND_CUDA_EVENT",),
         ("NVTX_EVENTS",), ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
                            "NVTX_EVENTS")]


@examples(12)
@given(loops(), st.sampled_from(DROPS))
def test_without_optional_tables_the_timing_analysis_finds_the_same_classes(loop, drop):
    """Exports without SYNCHRONIZATION / CUDA_EVENT / NVTX_EVENTS (older nsys, other flags):
    waits are matched by timing, and still every planted class is found; the notes say so."""
    threads, plan = loop
    s, main = build(threads, plan)
    a = analyse(s, drop=drop)
    exp = synth.expected(main)
    got = a.launches.set_index("corr_id")["klass"]
    assert {c: got[c] for c in exp} == {c: e.klass for c, e in exp.items()}
    notes = " ".join(a.summary.notes)
    if "NVTX_EVENTS" in drop:
        assert "no NVTX ranges" in notes
        assert "(no NVTX range)" not in a.summary.verdict  # it names the API chain instead
        if a.summary.verdict.startswith("OVERLAP BROKEN"):
            assert f" in {a.summary.sites[0].api_chain})" in a.summary.verdict
    if set(drop) - {"NVTX_EVENTS"}:
        assert NO_SYNC_NOTE in notes


@pytest.mark.parametrize("kw,words", [
    # from Python these ran: a warm-up of -3 as 0, written into the summary as -3 (which the
    # summary's JSON schema refuses); a launch-bound gap of 0 called every launch late
    (dict(warmup_launches=-3), "warmup_launches must be None or an integer >= 0, not -3"),
    (dict(warmup_launches=2.5), "warmup_launches must be None or an integer >= 0, not 2.5"),
    (dict(launch_bound_gap_us=0), "launch_bound_gap_us must be a finite number > 0, not 0"),
    (dict(poll_gap_us=float("nan")), "poll_gap_us must be a finite number > 0, not nan"),
    (dict(stall_fraction_broken=1.5),
     "stall_fraction_broken must be a finite number in [0, 1], not 1.5"),
    (dict(poll_min_queries=0), "poll_min_queries must be an integer >= 1, not 0"),
])
def test_a_setting_no_analysis_can_use_is_refused(kw, words):
    from nsysscope import AnalysisConfig
    with pytest.raises(ValueError) as e:
        AnalysisConfig(**kw)
    assert str(e.value) == words
    AnalysisConfig(warmup_launches=0, timing_slack_us=0, peer_wait_us=0)  # edges that are fine
