"""The result model: versioned serialisation, unknown keys kept, the launch classes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsysscope.errors import NewerSchema
from nsysscope.model import (
    FIXES,
    GATED_CLASSES,
    LAUNCH_CLASSES,
    SCHEMA,
    STALL_CLASSES,
    Distributions,
    GateResult,
    LaunchClass,
    Note,
    Percentiles,
    Side,
    StallSite,
    Summary,
    TraceInfo,
    registry,
)


def summary(**kw) -> Summary:
    base = dict(
        trace=TraceInfo("t.sqlite", "2025.3.2.0", "3.20.3", ("NVIDIA H200",), "node"),
        verdict="overlap healthy", overlap_ok=True, launches=10, steady_launches=4,
        warmup_launches=5, stalls={k: 0 for k in STALL_CLASSES},
        classes={k: 0 for k in LAUNCH_CLASSES}, no_wait=0,
        window_us=Percentiles(1.0, 2.0, 3.0), gpu_gap_us=Percentiles(None, None, None),
        gpu_busy=0.5, launches_per_s=100.0, steps_per_s=None,
        sites=[StallSite("gpu_to_cpu", 3, 12.5, 1.0, "sample", None, "cudaMemcpyAsync", "step",
                         "python3 (1)", 2.0, 7, FIXES["gpu_to_cpu"])],
        note_facts=[Note("no_nvtx")], config={"launch_bound_gap_us": 150.0},
        distributions=Distributions([1.0, None], [2.0, 3.0], ["healthy", "gpu_to_cpu"], 4))
    return Summary(**{**base, **kw})


def test_launch_class_values_are_the_strings_in_tables_and_json():
    assert [str(k) for k in LaunchClass] == ["gpu_to_cpu", "cpu_to_gpu", "other_stall",
                                             "launch_bound", "healthy", "last", "no_gpu_work"]
    assert LaunchClass.GPU_TO_CPU == "gpu_to_cpu" and f"{LaunchClass.CPU_TO_GPU}" == "cpu_to_gpu"
    assert {"gpu_to_cpu": 1}[LaunchClass.GPU_TO_CPU] == 1  # same hash as the string
    assert FIXES["launch_bound"] == FIXES[LaunchClass.LAUNCH_BOUND]
    assert (*STALL_CLASSES, LaunchClass.LAUNCH_BOUND) == GATED_CLASSES
    assert LaunchClass.OTHER_STALL.is_stall and not LaunchClass.LAUNCH_BOUND.is_stall
    assert json.dumps({LaunchClass.HEALTHY: LaunchClass.LAST}) == '{"healthy": "last"}'


def test_summary_round_trips():
    s = summary()
    d = json.loads(s.to_json(with_distributions=True))
    back = Summary.from_dict(d)
    assert back == s
    assert back.to_dict(with_distributions=True) == d
    # by default what `nsysscope summarize` writes, so a summary saved from a notebook is a
    # gate side (it left the distributions out, and the gate refused the file)
    assert s.to_dict() == d and "distributions" in d
    assert "distributions" not in s.to_dict(with_distributions=False)


@pytest.mark.parametrize("name", ["case1", "tp2_case1"])
def test_a_real_summary_round_trips(analysed, name):
    """Its config held the library paths as a tuple, which JSON gives back as a list: the
    summary read back from its own JSON was not equal to it."""
    s = analysed(name).summary
    assert Summary.from_dict(json.loads(s.to_json(with_distributions=True))) == s


def test_unknown_keys_from_a_newer_minor_version_are_kept():
    d = summary().to_dict(with_distributions=True)
    d["schema"] = "nsysscope.summary/1.4"
    d["new_top"] = {"x": 1}
    d["trace"]["host_arch"] = "aarch64"
    d["sites"][0]["new_site_field"] = [1, 2]
    d["window_us"]["p99"] = 4.0
    d["distributions"]["launch_ns"] = [1, 2]
    back = Summary.from_dict(d)
    assert back.extra == {"new_top": {"x": 1}} and back.trace.extra == {"host_arch": "aarch64"}
    assert back.to_dict(with_distributions=True) == d  # nothing lost
    assert back.schema == "nsysscope.summary/1.4"


def test_a_newer_major_version_is_refused_in_one_clear_error():
    d = summary().to_dict()
    d["schema"] = "nsysscope.summary/2"
    with pytest.raises(NewerSchema) as e:
        Summary.from_dict(d)
    assert str(e.value) == ("summary schema nsysscope.summary/2 is newer than this nsysscope "
                            f"reads ({SCHEMA}); upgrade nsysscope")
    with pytest.raises(ValueError, match="not an nsysscope summary"):
        Summary.from_dict({**d, "schema": "something/1"})


def test_gate_result_checks_its_schema_and_keeps_unknown_keys():
    side = Side("a", "a", "2025.3", ("NVIDIA H200",), 10, 4, 4, "ok")
    r = GateResult(True, "PASS", side, side, (), (), ())
    d = r.to_dict()
    assert d["exit_code"] == 0 and d["schema"] == "nsysscope.gate/1.2"
    d["future"] = 1
    back = GateResult.from_dict(d)
    assert back == r and back.to_dict() == d
    with pytest.raises(NewerSchema):
        GateResult.from_dict({**d, "schema": "nsysscope.gate/3"})


def test_repr_html_goes_through_the_registry():
    import nsysscope  # noqa: F401 - registers the renderers
    s = summary()
    assert registry.get("notebook", "summary").render(s, registry.RenderContext()) == \
        s._repr_html_()
    assert "overlap healthy" in s._repr_html_()


def test_registry_refuses_what_is_not_a_renderer_and_names_the_known_ones():
    import nsysscope.render  # noqa: F401 - registers the renderers
    with pytest.raises(TypeError):
        registry.register(object())  # type: ignore[arg-type]
    with pytest.raises(LookupError, match="known: text"):
        registry.get("report", "pdf")


def test_the_docs_name_the_schema_the_tool_writes():
    """README and docs/json.md name the summary's schema id and version as written (the
    README said 1.3 after 1.4 was out)."""
    from nsysscope.model.summary import SCHEMA

    root = Path(__file__).resolve().parents[2]
    version = SCHEMA.rsplit("/", 1)[1]
    report = (root / "docs" / "report.md").read_text(encoding="utf-8")  # (from the README)
    assert f"`{SCHEMA}` object" in report and f"Version {version} (this one)" in report
    assert f"# The summary JSON (`{SCHEMA}`)" in (root / "docs" / "json.md").read_text()


@pytest.mark.parametrize("value, words", [
    # were AttributeError ('list' object has no attribute 'get') and TypeError (the
    # constructor's "missing 17 required positional arguments")
    ([], "not an nsysscope summary (a JSON object is expected, not list)"),
    ({"schema": "nsysscope.summary/1"}, "no 'trace', 'verdict', 'overlap_ok', 'launches' and "
                                        "12 more"),
])
def test_a_summary_from_what_is_not_one_says_so(value, words):
    with pytest.raises(ValueError) as e:
        Summary.from_dict(value)
    assert str(e.value) == words
