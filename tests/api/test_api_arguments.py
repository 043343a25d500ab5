"""The Python API on arguments of the wrong type or value: a TypeError or ValueError that
says what to pass, at the call, never a crash deep inside or a wrong answer; and results a
notebook can change without changing the analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nsysscope as ns
from nsysscope import AnalysisConfig, TimeRange

PYSAMPLE = "case1_py"


@pytest.mark.parametrize("args", [("5.5s", "6.2s"), ("0 OR 1=1", None), ("9", "10"),
                                  (5.5e9, None), (True, None)])
def test_a_time_range_takes_nanoseconds_or_says_to_parse(args):
    """Strings went into the SQL: "corrupt export (unrecognized token: "6.2s")", blamed on
    a healthy trace (and its cached copy made again); others failed with an IndexError or
    inside the range's own error message."""
    with pytest.raises(TypeError, match=r"^TimeRange\.start_ns takes whole nanoseconds \(an "
                                        r"int\) or None, not .*TimeRange\.parse\(start, end\)"):
        TimeRange(*args)


def test_a_time_range_of_numpy_integers_is_python_ints():
    import numpy as np

    r = TimeRange(np.int64(5_500_000_000), np.int64(6_000_000_000))
    assert (r.start_ns, r.end_ns) == (5_500_000_000, 6_000_000_000)
    assert type(r.start_ns) is int and r == TimeRange.parse("5.5", "6")


def test_library_paths_as_one_string_is_refused(sample_path):
    """A string was one glob per letter, and its '*' matched every frame: no stall had a
    source line (and the summary's config failed its own JSON schema)."""
    with pytest.raises(TypeError, match=r"^library_paths must be a tuple of glob strings, "
                                        r"not '\*/x/\*'$"):
        AnalysisConfig(library_paths="*/x/*")
    cfg = AnalysisConfig(library_paths=["*/x/*"])  # a list is taken, as a tuple
    assert cfg.library_paths == ("*/x/*",) and hash(cfg)
    site = ns.open(sample_path(PYSAMPLE), config=cfg).summary.sites[0]
    assert site.source is not None and site.source.file.endswith("sampler.py")


def test_source_root_must_be_a_folder(tmp_path):
    """The command line refuses a missing --source-root; from Python the line texts went
    missing silently, and a number failed later in pathlib."""
    with pytest.raises(ValueError, match=r"^source_root: '.*nowhere' is not a folder$"):
        AnalysisConfig(source_root=str(tmp_path / "nowhere"))
    with pytest.raises(TypeError, match=r"^source_root must be a folder's path or None, not 3$"):
        AnalysisConfig(source_root=3)
    assert AnalysisConfig(source_root=tmp_path).source_root == str(tmp_path)


def test_a_dict_for_config_or_a_path_for_analyze_says_what_to_pass(sample_path):
    """Both were AttributeErrors from deep inside ('dict' object has no attribute
    'poll_gap_us', 'str' object has no attribute 'api')."""
    case1 = sample_path("case1")
    message = r"^config: an AnalysisConfig, not dict \(for example AnalysisConfig\("
    with pytest.raises(TypeError, match=message):
        ns.open(case1, config={"warmup_launches": 3})
    with pytest.raises(TypeError, match=message):
        ns.compare(case1, case1, config={"warmup_launches": 3})
    with pytest.raises(TypeError, match=message):
        ns.analyze(ns.load(case1), {"warmup_launches": 3})
    with pytest.raises(TypeError, match=r"^analyze\(\) takes a Trace from nsysscope\.load\("
                                        r"path\), not str; nsysscope\.open\(path\)"):
        ns.analyze(str(case1))


def test_plots_take_whole_numbers(sample_path):
    """A string launch or pid was looked up as is: "no launch 7 in this trace (launches
    0-299)", "no graph launches of pid 938 in this trace (pids 937, 938)"."""
    t = ns.open(sample_path("case1"))
    with pytest.raises(TypeError, match=r"^launch: a whole number, not str '7'$"):
        t.plot.caption("7")
    with pytest.raises(TypeError, match=r"^launches: a whole number, not str '7'$"):
        t.plot.timeline(launches=["7"])
    pid = int(t.processes["pid"].iloc[0])
    with pytest.raises(TypeError, match=rf"^pid: a whole number, not str '{pid}'$"):
        t.plot.timeline(which="worst", pid=str(pid))
    assert t.plot.caption(7).startswith("After launch #7 the host ran")


def test_tables_are_the_notebooks_to_change(sample_path):
    """``t.launches`` was the analysis's own frame: dropping its ``klass`` column made
    ``plot.timeline(which="worst")`` a KeyError, and overwriting ``stall`` emptied
    ``t.stalls``."""
    t = ns.open(sample_path("case1"))
    n = len(t.stalls)
    t.launches.pop("klass")
    L = t.launches
    L["stall"] = False
    blocks = t.blocks
    for c in list(blocks.columns):
        del blocks[c]
    del t.processes["pid"]
    assert "klass" in t.launches and len(t.stalls) == n == 293
    assert len(t.blocks.columns) and "pid" in t.processes
    t.plot.timeline(which="worst")


def test_summary_to_json_is_what_the_command_writes(sample_path, tmp_path):
    """Its docstring said so; it was another layout (schema last, arrows escaped, every
    value of the distributions on a line of its own: 23,910 bytes against 15,677)."""
    from click.testing import CliRunner

    from nsysscope.cli import cli

    out = tmp_path / "s.json"
    r = CliRunner().invoke(cli, ["summarize", str(sample_path("case1")), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = ns.open(sample_path("case1")).summary.to_json()
    assert text == out.read_text(encoding="utf-8")
    assert json.loads(ns.open(sample_path("case1")).summary.to_json(indent=None)) == \
        json.loads(text)


def test_every_result_record_writes_and_reads_itself(sample_path):
    """The README says every result type has to_dict/from_dict; the smaller ones had only
    from_dict (``t.summary.sites[0].to_dict()`` was an AttributeError)."""
    s = ns.open(sample_path(PYSAMPLE)).summary
    for record in (s.sites[0], s.sites[0].source, s.processes[0], s.trace, s.window_us):
        d = record.to_dict()
        json.dumps(d)
        assert type(record).from_dict(d) == record
    assert Path(s.trace.path).name == "h200_case1_pysample_150.sqlite.xz"


def test_summary_is_a_property_as_the_tables_are(sample_path):
    """Issue 55, item 13: `t.summary` was a method while `t.stalls`, `t.launches` and
    `t.processes` are properties. The old call still works, with a DeprecationWarning."""
    import warnings

    t = ns.open(sample_path("case1"))
    s = t.summary
    assert s.headline.klass == "gpu_to_cpu" and s is t.analysis.summary
    assert isinstance(type(t).summary, property) and isinstance(type(t).stalls, property)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert t.summary() is s
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "write t.summary, not t.summary()" in str(caught[0].message)
