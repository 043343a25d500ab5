"""Every registered renderer: the contract, and an empty result drawn without an error."""

from __future__ import annotations

import pytest

import nsysscope  # noqa: F401 - registers the renderers
from nsysscope.batch import aggregate
from nsysscope.model import (
    BatchResult,
    GateResult,
    Percentiles,
    Renderer,
    Side,
    Summary,
    TraceInfo,
    registry,
)

ALL = [(kind, name) for kind in registry.kinds() for name in registry.names(kind)]


def empty_summary() -> Summary:
    nothing = Percentiles(None, None, None)
    return Summary(trace=TraceInfo("empty.sqlite", "?", "?", (), "?"), verdict="no launches",
                   overlap_ok=False, launches=0, steady_launches=0, warmup_launches=0,
                   stalls={}, classes={}, no_wait=0, window_us=nothing, gpu_gap_us=nothing,
                   gpu_busy=None, launches_per_s=None, steps_per_s=None, sites=[], note_facts=[],
                   config={})


def empty_gate() -> GateResult:
    side = Side("empty.json", "empty.sqlite", "?", (), 0, 0, 0, "no launches")
    return GateResult(passed=True, verdict="PASS: no overlap regression (0 checks)",
                      baseline=side, candidate=side, checks=(), regressions=(),
                      improvements=())


EMPTY = {"report": empty_summary, "gate": empty_gate,
         "batch": lambda: BatchResult(traces=[], aggregate=aggregate([])),
         ("notebook", "summary"): empty_summary, ("notebook", "gate"): empty_gate}


def test_every_kind_has_its_formats():
    assert registry.names("report") == ("text", "json", "markdown", "html")
    assert registry.names("gate") == ("text", "json", "markdown", "junit", "html")
    assert registry.names("batch") == ("text", "json", "markdown")
    assert registry.names("notebook") == ("summary", "gate")


@pytest.mark.parametrize("kind,name", ALL, ids=[f"{k}-{n}" for k, n in ALL])
def test_renderer_draws_an_empty_result(kind, name):
    r = registry.get(kind, name)
    assert isinstance(r, Renderer) and r.kind == kind and r.name == name
    assert r.file_extension == r.extensions[0] and all(e.startswith(".") for e in r.extensions)
    assert r.noun.split(" ", 1)[0] in ("a", "an")
    make = EMPTY.get((kind, name)) or EMPTY[kind]
    out = r.render(make(), registry.RenderContext())
    assert isinstance(out, bytes if r.is_binary else str) and len(out) > 0
