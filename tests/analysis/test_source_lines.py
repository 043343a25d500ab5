"""Stalls named by their Python source line, from nsys Python sampling (real H200 traces)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysscope import analyze, load
from nsysscope.analysis import AnalysisConfig
from nsysscope.analysis.config import LIBRARY_PATHS
from nsysscope.analysis.source_lines import attach_source_lines, source_text
from nsysscope.cli import cli
from nsysscope.trace.python_samples import NO_PAYLOAD, NOT_CAPTURED, OK, read_python_samples

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "engine_under_test"
PERIOD_NS = 500_000  # --python-sampling-frequency=2000


def line_of(path: Path, needle: str) -> int:
    """The 1-based number of the one line of ``path`` whose text is ``needle``."""
    hits = [i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip() == needle]
    assert len(hits) == 1, f"{needle!r} occurs {len(hits)} times in {path}"
    return hits[0]


CASE1_LINE = ("engine_under_test/sampler.py", "if is_greedy.all():", "finish_sampling")
CASE2_LINE = ("engine_under_test/engine.py", "self.d_ints.copy_(torch.from_numpy(ints))", "_launch")


def steady_agreement(a) -> float:
    """Of the samples inside the steady stalls' blocks, the share naming each stall's line."""
    s = a.launches[a.launches["steady"] & a.launches["stall"]].drop_duplicates("block")
    return float(s["src_samples"].sum() / s["src_block_samples"].sum())


@pytest.mark.parametrize("name, expected", [("case1_py", CASE1_LINE), ("case2_py", CASE2_LINE)])
def test_top_site_is_the_line_that_stalls(analysed, name, expected):
    file, text, function = expected
    a = analysed(name)
    assert a.python_samples.status == OK
    top = a.summary.sites[0]
    assert top.source is not None, a.summary.notes
    assert (top.source.file, top.source.line) == (file, line_of(ROOT / file, text))
    assert top.source.function == function
    assert top.source.text == text  # found relative to the working directory (the repo root)
    assert top.source.agreement >= 0.9
    assert top.source.samples >= top.count  # 0.5 ms sampling, blocks of 1-3 ms
    assert steady_agreement(a) >= 0.9
    # every steady stall is named, and all name that one line
    stalls = a.launches[a.launches["steady"] & a.launches["stall"]]
    assert set(zip(stalls["src_file"], stalls["src_line"], strict=True)) == \
        {(top.source.file, top.source.line)}
    assert top.where.startswith(f"{file}:{top.source.line}")
    assert a.summary.verdict.count(f"{file}:{top.source.line}") == 1
    assert not [n for n in a.summary.notes if "Python" in n]


def test_healthy_with_samples_has_no_stall_sites(analysed):
    a = analysed("healthy_py")
    assert a.python_samples.status == OK and a.python_samples.marks > 1000
    assert a.summary.sites == []
    assert a.summary.notes == []


def test_reader_resolves_frames(sample_path):
    ps = read_python_samples(load(sample_path("case1_py")).source)
    assert ps.ok and ps.hint is None and len(ps.samples) == ps.marks > 10_000
    assert ps.samples["tid"].nunique() == 1  # the profiled main thread
    assert set(ps.samples["state"].dropna()) <= {"Running", "Uninterruptible", "Sleeping",
                                                 "Waiting", "Stopped", "Idle"}
    f = ps.frames
    assert (f.groupby("sample")["depth"].min() == 0).all()
    # StringIds are resolved and unescaped: <module>, not &lt;module&gt;
    assert "<module>" in set(f["function"]) and not f["function"].str.contains("&lt;").any()
    assert "engine_under_test/sampler.py" in set(f["file"])
    # sorted by thread, then time
    t = ps.samples["time_ns"].to_numpy()
    assert (np.diff(t) >= 0).all()


def test_json_gives_each_site_a_source(sample_path):
    res = CliRunner().invoke(cli, ["report", str(sample_path("case1_py")), "--format", "json",
                                   "--source-root", str(ROOT)])
    assert res.exit_code == 0, res.output
    site = json.loads(res.output)["sites"][0]
    src = site["source"]
    assert {"file", "line", "function", "samples"} <= set(src)
    assert (src["file"], src["line"]) == ("engine_under_test/sampler.py",
                                          line_of(ENGINE / "sampler.py", "if is_greedy.all():"))
    assert src["function"] == "finish_sampling" and src["samples"] > 0
    assert src["text"] == "if is_greedy.all():"


def test_text_and_markdown_name_the_line_first(sample_path):
    n = line_of(ENGINE / "engine.py", CASE2_LINE[1])
    for fmt in ("text", "markdown"):
        res = CliRunner(env={"COLUMNS": "1000"}).invoke(  # one line per item, unwrapped
            cli, ["report", str(sample_path("case2_py")), "--format", fmt,
                  "--source-root", str(ROOT)])
        assert res.exit_code == 0, res.output
        site_line = next(ln for ln in res.output.splitlines()
                         if "cpu_to_gpu" in ln and "launches" in ln or ln.startswith("| 1 |"))
        assert f"engine_under_test/engine.py:{n}" in site_line
        assert site_line.index(f"engine.py:{n}") < site_line.index("phase 'launch'")
        assert CASE2_LINE[1] in res.output


def test_source_root_elsewhere_keeps_the_line_but_not_its_text(sample_path, tmp_path):
    a = analyze(load(sample_path("case1_py")), AnalysisConfig(source_root=str(tmp_path)))
    src = a.summary.sites[0].source
    assert src.file == "engine_under_test/sampler.py" and src.text is None
    (tmp_path / "engine_under_test").mkdir()
    shutil.copy(ENGINE / "sampler.py", tmp_path / "engine_under_test" / "sampler.py")
    a = analyze(load(sample_path("case1_py")), AnalysisConfig(source_root=str(tmp_path)))
    assert a.summary.sites[0].source.text == "if is_greedy.all():"


def test_source_text_lookup(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("a = 1\n    if x.all():\n")
    assert source_text("pkg/m.py", 2, tmp_path) == "if x.all():"
    assert source_text("pkg/m.py", 3, tmp_path) is None
    assert source_text(str(tmp_path / "pkg" / "m.py"), 1, tmp_path) == "a = 1"
    # an absolute path from another machine, matched under the root by its end
    assert source_text("/build/job/pkg/m.py", 2, tmp_path) == "if x.all():"
    assert source_text("/home/dev/serving/m.py", 1, tmp_path / "pkg") == "a = 1"
    for placeholder in ("<stdlib>/os.py", "<path>/m.py", "<string>"):
        assert source_text(placeholder, 1, tmp_path) is None
    # the sample's function name guards against another version of the file
    (tmp_path / "pkg" / "f.py").write_text(
        "import x\n\ndef outer(a,\n          b):\n    if a:\n        return b.all()\n"
        "    return [y for y in b]\n\nz = outer(1, 2)\n")
    assert source_text("pkg/f.py", 6, tmp_path, function="outer") == "return b.all()"
    assert source_text("pkg/f.py", 6, tmp_path, function="inner") is None
    assert source_text("pkg/f.py", 7, tmp_path, function="<listcomp>") == "return [y for y in b]"
    assert source_text("pkg/f.py", 9, tmp_path, function="<module>") == "z = outer(1, 2)"
    assert source_text("pkg/f.py", 6, tmp_path, function="<module>") is None


def test_library_paths_change_the_culprit_frame(sample_path):
    """Declaring the sampler a library blames its caller: Engine._sample."""
    cfg = AnalysisConfig(library_paths=(*LIBRARY_PATHS, "engine_under_test/sampler.py"))
    a = analyze(load(sample_path("case1_py")), cfg)
    src = a.summary.sites[0].source
    assert (src.file, src.function) == ("engine_under_test/engine.py", "_sample")
    assert src.agreement >= 0.9
    # the call of finish_sampling, inside Engine._sample (the exact number depends on the
    # engine version the trace was captured with, so only the function's span is checked)
    lines = (ENGINE / "engine.py").read_text().splitlines()
    start = line_of(ENGINE / "engine.py",
                    "def _sample(self, k: int, rows: list[Row], bs: int) -> _InFlight:")
    end = next(i for i in range(start + 1, len(lines) + 1)
               if lines[i - 1].lstrip().startswith("def "))
    assert start < src.line < end


# -- robustness: sample timing jitter ----------------------------------------------------------

_FULL: dict = {}


def full_samples(sample_path, analysed, name):
    """Every sample of the trace (not only those inside blocks), and the analysis."""
    if name not in _FULL:
        a = analysed(name)
        ps = read_python_samples(a.trace.source)
        _FULL[name] = (a, ps, _lines(attach_source_lines(a.launches, ps, a.config)))
    return _FULL[name]


def _lines(launches):
    s = launches[launches["stall"]]
    return list(zip(s.index, s["src_file"], s["src_line"].astype("float64").fillna(-1),
                    strict=True))


@pytest.mark.parametrize("name", ["case1_py", "case2_py"])
@settings(derandomize=True, max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shift=st.integers(-(PERIOD_NS - 1), PERIOD_NS - 1),
       jitter_seed=st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_shifting_samples_within_a_period_never_moves_a_stall(sample_path, analysed, name, shift,
                                                               jitter_seed):
    """A common shift, or an independent shift per sample, of less than the sampling period."""
    a, ps, base = full_samples(sample_path, analysed, name)
    if jitter_seed is None:
        dt = shift
    else:
        dt = np.random.default_rng(jitter_seed).integers(-(PERIOD_NS - 1), PERIOD_NS,
                                                         size=len(ps.samples))
    moved = attach_source_lines(a.launches, ps.shifted(dt), a.config)
    assert _lines(moved) == base
    assert all(f for _, f, _ in base)  # every stall has a line to move


# -- degrading -----------------------------------------------------------------------------------

def test_without_samples_attribution_falls_back_with_a_capture_hint(analysed):
    a = analysed("case1")
    assert a.python_samples.status == NOT_CAPTURED
    top = a.summary.sites[0]
    assert top.source is None and top.phase == "sample"
    assert top.where.startswith("phase 'sample'")
    hints = [n for n in a.summary.notes if "--python-sampling=true" in n]
    assert len(hints) == 1 and "--include-json true" in hints[0]
    assert "\n" not in hints[0]


def _copy(sample_path, tmp_path, name) -> Path:
    db = load(sample_path(name)).source
    out = tmp_path / f"{name}.sqlite"
    shutil.copy(db, out)
    return out


def test_export_without_json_says_how_to_reexport(sample_path, tmp_path):
    db = _copy(sample_path, tmp_path, "case1_py")
    with sqlite3.connect(db) as c:
        c.execute("UPDATE NVTX_EVENTS SET jsonText = NULL, jsonTextId = NULL")
    ps = read_python_samples(db)
    assert ps.status == NO_PAYLOAD and ps.marks > 10_000
    assert "--include-json true" in ps.hint
    a = analyze(load(db))
    assert a.summary.sites[0].source is None and a.summary.sites[0].phase == "sample"
    notes = [n for n in a.summary.notes if "--include-json true" in n]
    assert len(notes) == 1 and "no JSON payloads" in notes[0]


def test_domain_is_found_by_its_registered_name(sample_path, tmp_path):
    """Swap the ids of the two NVTX domains: the samples are still found, and only they."""
    db = _copy(sample_path, tmp_path, "case1_py")
    before = read_python_samples(db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE NVTX_EVENTS SET domainId = CASE domainId WHEN 1 THEN 2 WHEN 2 THEN 1 "
                  "ELSE domainId END")
    after = read_python_samples(db)
    assert after.ok and after.marks == before.marks
    assert after.samples["time_ns"].tolist() == before.samples["time_ns"].tolist()
    with sqlite3.connect(db) as c:  # no domain of that name: no samples, and the capture hint
        c.execute("UPDATE NVTX_EVENTS SET text = 'Something else' "
                  "WHERE text = 'Python Periodic Sampling'")
    gone = read_python_samples(db)
    assert gone.status == NOT_CAPTURED and "--python-sampling=true" in gone.hint


def test_samples_are_parsed_only_inside_the_blocks(analysed):
    a = analysed("case1_py")
    ps = a.python_samples
    assert 0 < len(ps.samples) < ps.marks / 5
    w = a.launches[a.launches["stall"]]
    assert len(ps.samples) == int(w.drop_duplicates("block")["src_block_samples"].sum())


def test_summary_round_trips_with_sources(analysed):
    from nsysscope.model import Summary
    s = analysed("case2_py").summary
    back = Summary.from_dict(json.loads(s.to_json()))
    assert back.sites[0].source == s.sites[0].source
    assert dataclasses.asdict(back.sites[0]) == dataclasses.asdict(s.sites[0])


# -- sites split by line only where the samples show two lines ---------------------------------

def _synthetic(lines_per_stall: list[list[tuple[str, int, str]]]):
    """Stalls of one site (same class, phase, chain, thread), each a 2 ms block holding one
    sample per listed frame (under a library frame), and the PythonSamples to match."""
    import pandas as pd

    from nsysscope.trace.python_samples import PythonSamples
    n = len(lines_per_stall)
    start = np.arange(n) * 10_000_000
    launches = pd.DataFrame({
        "launch": np.arange(n), "block": np.arange(n), "klass": "gpu_to_cpu", "stall": True,
        "steady": True, "phase": "sample", "op": None, "api_chain": "cudaStreamSynchronize",
        "thread": "python3 (1)", "nvtx_path": "sample", "block_tid": 7, "proc": 1,
        "block_polls": 0,
        "block_start_ns": start.astype(float), "block_end_ns": (start + 2_000_000).astype(float),
        "gpu_idle_ns": 1_000_000.0})
    samples, frames = [], []
    for i, stack in enumerate(lines_per_stall):
        for j, (file, line, fn) in enumerate(stack):
            sid = len(samples)
            samples.append((sid, 7, int(start[i]) + 250_000 + 500_000 * j, "Running"))
            frames += [(sid, 0, "<site-packages>/torch/_tensor.py", 1, "__bool__"),
                       (sid, 1, file, line, fn), (sid, 2, "main.py", 9, "<module>")]
    s = pd.DataFrame(samples, columns=["sample", "tid", "time_ns", "state"])
    f = pd.DataFrame(frames, columns=["sample", "depth", "file", "line", "function"])
    return launches, PythonSamples("ok", s, f, marks=len(s))


def test_a_site_splits_by_line_only_where_the_samples_show_two_lines(tmp_path):
    from nsysscope.analysis.sites import stall_sites
    a, b, c = ("eng.py", 10, "step"), ("eng.py", 20, "post"), ("eng.py", 30, "rare")
    plan = [[a] * 4] * 6 + [[b] * 4] * 4 + [[c]] + [[]]
    launches, ps = _synthetic(plan)
    # an empty folder: no source text is read
    out = attach_source_lines(launches, ps, AnalysisConfig(source_root=str(tmp_path)))
    got = list(zip(out["src_file"], out["src_line"].astype("float64").fillna(-1), strict=True))
    # the one-sample stall on a rare line, and the stall with no sample, join the main line
    assert got == [("eng.py", 10)] * 6 + [("eng.py", 20)] * 4 + [("eng.py", 10)] * 2
    sites = stall_sites(out)
    assert [(s.source.line, s.count, s.source.samples) for s in sites] == [(10, 8, 24), (20, 4, 16)]
    assert sites[0].source.agreement == round(24 / 25, 4) and sites[1].source.agreement == 1.0
    assert sites[0].source.function == "step" and sites[0].where.startswith("eng.py:10")
    # with no library paths the innermost frame (torch's) is blamed instead
    out = attach_source_lines(launches, ps, AnalysisConfig(library_paths=()))
    assert set(out["src_file"]) == {"<site-packages>/torch/_tensor.py"}


def test_resummarising_keeps_the_lines_and_adds_no_capture_hint(analysed):
    """Callers that summarise attributed launches again (the gate's windows) keep the lines."""
    from nsysscope.analysis import summarize
    a = analysed("case1_py")
    s, _ = summarize(a.trace, a.launches, a.config)
    assert s.sites[0].source == a.summary.sites[0].source
    assert s.note_facts == a.summary.note_facts  # (the gain's range: no note on samples)
    assert not [n for n in s.note_facts if "python" in n.code or "source" in n.code]
    assert "source_root" not in s.config  # a local path, not a setting to compare or publish


def test_damaged_python_samples_are_left_out_not_a_crash(sample_path, tmp_path):
    """Samples whose frames are not what nsys writes (a frame that is no object, a line that
    is null, NaN or 1e400) made an internal error (exit 70). They now name no line; the
    others still name the readback's."""
    import sqlite3

    from nsysscope.trace import resolve
    p = tmp_path / "damaged.sqlite"
    shutil.copyfile(resolve(sample_path("case1_py")), p)
    with sqlite3.connect(p) as c:
        rows = c.execute("SELECT rowid FROM NVTX_EVENTS WHERE eventType = 34 ORDER BY rowid")
        ids = [r[0] for r in rows]
        damage = ['{"Python Periodic Sampling":{"Frames":[1,2]}}',
                  '{"Python Periodic Sampling":{"Frames":[{"Function":1,"File":2,"Line":null}]}}',
                  '{"Python Periodic Sampling":{"Frames":[{"Function":1,"File":2,"Line":NaN}]}}',
                  '{"Python Periodic Sampling":{"Frames":[{"Function":1,"File":2,"Line":1e400}]}}',
                  '{"Python Periodic Sampling":{"Frames":7}}']
        c.executemany("UPDATE NVTX_EVENTS SET jsonText = ? WHERE rowid = ?",
                      [(damage[i % len(damage)], r) for i, r in enumerate(ids[::3])])
    c.close()
    a = analyze(load(p))
    src = a.summary.sites[0].source
    assert src is not None and (src.file, src.line) == ("engine_under_test/sampler.py", 58)


def test_missing_line_text_gets_only_advice_that_can_work(sample_path, tmp_path, monkeypatch):
    """Issue 55, item 6: every line without text said "pass --source-root DIR", also where
    that could not help (a folder already given, code run from a string). A path recorded on
    another machine is matched by its end under the root, so --source-root is the one
    option (no --path-map)."""
    from nsysscope.analysis.source_lines import missing_text_note
    from nsysscope.render.notes import note_text

    trace = sample_path("case1_py")
    monkeypatch.chdir(tmp_path)  # no engine_under_test/ here
    s = analyze(load(trace)).summary
    assert s.sites[0].source.text is None
    note = next(n for n in s.notes if n.startswith("the text of a stall's source line"))
    assert "engine_under_test/sampler.py is not under the current folder: pass --source-root " \
        "DIR" in note
    # a folder given that does not hold it: not advised again
    s = analyze(load(trace), AnalysisConfig(source_root=str(tmp_path))).summary
    note = next(n for n in s.notes if n.startswith("the text of a stall's source line"))
    assert "not under the --source-root folder" in note and "pass --source-root" not in note
    assert str(tmp_path) not in note  # a path of this machine stays out of the summary
    # the folder that holds it: the text, and no note
    repo = Path(__file__).resolve().parents[2]
    s = analyze(load(trace), AnalysisConfig(source_root=str(repo))).summary
    assert s.sites[0].source.text == "if is_greedy.all():"
    assert not any(n.startswith("the text of a stall's source line") for n in s.notes)
    # code with no file: no advice at all
    site = s.sites[0]
    exec_site = dataclasses.replace(site, source=dataclasses.replace(site.source,
                                                                     file="<string>", text=None))
    assert note_text(missing_text_note([exec_site], AnalysisConfig())) == (
        "the text of a stall's source line is missing: <string> is no source file on disk "
        "(code run from a string, or not Python): no text to show")
    # and the report's line says where to look, not what to pass
    text = CliRunner().invoke(cli, ["report", str(trace)]).stdout
    assert "(source text not found: see the notes)" in text
