"""Which streams a host wait covers across ``cudaStreamWaitEvent``
(:mod:`nsysscope.analysis.streams`).

:func:`~nsysscope.analysis.streams.coverage` follows, per stream, only the edges out of the
streams whose reach grew in the last round. Checked against the plain fixed point (every edge
of the process in every pass, until nothing grows), on random dependency graphs and on the
real samples whose hosts wait on side streams.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsysscope.analysis import streams
from nsysscope.analysis.blocks import block_table, copy_calls
from nsysscope.analysis.calls import ThreadCalls
from nsysscope.analysis.config import AnalysisConfig
from nsysscope.trace.load import load

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def reference(blocks: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """The coverage rows by the definition: for the blocks of each process and stream,
    every edge of the process applied in every pass until no stream's reach grows; one row
    per block and stream reached."""
    out = [blocks[streams.COVERAGE_COLUMNS].astype({"boundary_ns": "float64"})]
    for (proc, origin), b in blocks.groupby(["proc", "stream"]):
        w = waits[waits["proc"] == proc]
        edges = [(s, x, e["wait_ns"].to_numpy(), e["record_ns"].to_numpy())
                 for (s, x), e in w.groupby(["stream", "src_stream"])]
        cov = {origin: b["boundary_ns"].to_numpy(dtype=np.float64)}
        grew = True
        while grew:
            grew = False
            for s, x, wait_ns, record_ns in edges:
                if s not in cov:
                    continue
                # per block: the latest record awaited by a wait on s enqueued before its reach
                awaited = np.where(wait_ns[None, :] < cov[s][:, None], record_ns[None, :],
                                   -np.inf).max(axis=1)
                before = cov.get(x, np.full(len(b), -np.inf))
                if (awaited > before).any():
                    cov[x], grew = np.maximum(awaited, before), True
        out += [pd.DataFrame({"block": b["block"].to_numpy()[c > -np.inf], "proc": proc,
                              "stream": x, "boundary_ns": c[c > -np.inf]})
                for x, c in cov.items() if x != origin]
    return _normal(pd.concat(out, ignore_index=True))


def _normal(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["block", "stream"], kind="stable").reset_index(drop=True)


@st.composite
def dependency_graphs(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Blocks and stream-wait edges of one or two processes over a few streams: each wait
    names a record issued before it (the host records an event before a stream waits on
    it), chains and cycles included."""
    n_streams = draw(st.integers(2, 7))
    waits, blocks = [], []
    for proc in range(draw(st.integers(1, 2))):
        for _ in range(draw(st.integers(0, 25))):
            stream, src = draw(st.lists(st.integers(0, n_streams - 1), min_size=2, max_size=2,
                                        unique=True))
            wait_ns = draw(st.integers(10, 1000))
            waits.append((proc, wait_ns, stream, src, draw(st.integers(0, wait_ns - 1))))
        for _ in range(draw(st.integers(1, 12))):
            blocks.append((len(blocks), proc, draw(st.integers(0, n_streams - 1)),
                           draw(st.integers(0, 1100))))
    w = pd.DataFrame(waits, columns=["proc", "wait_ns", "stream", "src_stream", "record_ns"],
                     dtype="int64")
    b = pd.DataFrame(blocks, columns=streams.COVERAGE_COLUMNS, dtype="int64")
    return b, w.sort_values(["proc", "wait_ns"], kind="stable").reset_index(drop=True)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(dependency_graphs())
def test_coverage_is_the_fixed_point_of_every_edge(graph: tuple[pd.DataFrame, pd.DataFrame]
                                                   ) -> None:
    blocks, waits = graph
    got = _normal(streams.coverage(blocks, waits))
    pd.testing.assert_frame_equal(got, reference(blocks, waits), check_dtype=False)


@pytest.mark.parametrize("name", ["outcopy_case1", "outcopy_healthy", "tp2_case1"])
def test_coverage_of_side_stream_waits_in_samples(sample_path, name: str) -> None:
    """The samples whose output copies run on a side stream that waits on the forward's
    stream: every exact block's coverage as the plain fixed point gives it, and some blocks
    reach a stream other than their own (the edges are followed at all)."""
    trace = load(sample_path(name))
    copies = copy_calls(trace)
    records = streams.event_records_with_calls(trace)
    blocks = block_table(trace, copies, ThreadCalls.of(trace.api), records, AnalysisConfig())
    exact = blocks[blocks["exact"] & (blocks["scope"] != "device")]
    waits = streams.stream_waits(trace, records)
    got = _normal(streams.coverage(exact, waits))
    assert len(got) > len(exact)  # some blocks cover another stream's work
    pd.testing.assert_frame_equal(got, reference(exact[streams.COVERAGE_COLUMNS], waits),
                                  check_dtype=False)
