"""``nsysscope export --perfetto``: the case-1 sample as a Perfetto timeline, checked twice:
by an independent reading of the Chrome trace event format, and by Perfetto's own trace
processor (see perfetto_tp.py), against the report's counts."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from perfetto_tp import WasmTraceProcessor, missing

from nsysscope.analysis import analyze
from nsysscope.cli import cli
from nsysscope.trace import load

REPO = Path(__file__).resolve().parents[2]
CASE1 = REPO / "sample_traces" / "h200_case1_300.sqlite.xz"
TWOPROC = REPO / "sample_traces" / "h200_twoproc_healthy_case1_200.sqlite.xz"
TWIN = REPO / "sample_traces" / "kineto" / "h200_nsys_twin_case1_60.sqlite.xz"
GRAPH_TRACED = REPO / "sample_traces" / "graph" / "h200_graph_case1_200.sqlite.xz"
CLASS, WINDOW, IDLE = ("nsysscope: class per launch", "nsysscope: overlap window",
                       "nsysscope: GPU idle (named by cause)")


def export(trace: Path, out: Path, *extra: str) -> Path:
    r = CliRunner().invoke(cli, ["export", str(trace), "--perfetto", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def case1(tmp_path_factory):
    out = export(CASE1, tmp_path_factory.mktemp("perfetto") / "case1.json.gz")
    return out, analyze(load(CASE1))


def read_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["source"] == "nsysscope"
    return doc["traceEvents"]


def thread_names(events: list[dict]) -> dict[tuple[int, int], str]:
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_chrome_trace_format(case1):
    """The Chrome trace event format, read independently of Perfetto: event shapes, strictly
    nested slices on every track, flows that pair, and the report's counts."""
    path, a = case1
    events = read_events(path)
    assert {e["ph"] for e in events} == {"M", "X", "s", "f"}
    names = thread_names(events)
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["name"], str)
            start, dur = round(e["ts"] * 1000), round(e["dur"] * 1000)  # ns, as nsys has them
            tracks[(e["pid"], e["tid"])].append((start, start + dur))
    for key, slices in tracks.items():
        assert key in names, key  # every track is named
        stack: list[int] = []
        for s, t in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or t <= stack[-1], (names[key], s, t)
            stack.append(t)
    flows = Counter((e["id"], e["ph"]) for e in events if e["ph"] in "sf")
    ids = {i for i, _ in flows}
    assert all(flows[(i, "s")] == flows[(i, "f")] == 1 for i in ids)
    by_track = Counter((names[(e["pid"], e["tid"])], e["name"], e.get("args", {}).get("steady"))
                       for e in events if e["ph"] == "X")
    s = a.summary
    assert sum(n for (t, _, _), n in by_track.items() if t == CLASS) == s.launches == 300
    assert by_track[(CLASS, "gpu_to_cpu", True)] == s.stalls["gpu_to_cpu"] == 293
    assert by_track[(IDLE, "gpu_to_cpu", True)] == 293
    # an idle slice's length is its gpu_gap_us (it showed gpu_idle_us only, which leaves out
    # the eager work inside the gap: 1695.83 us on a 1704.9 us slice)
    idle = [e for e in events if e["ph"] == "X" and names[(e["pid"], e["tid"])] == IDLE]
    assert all(e["args"]["gpu_gap_us"] == pytest.approx(e["dur"], abs=0.006) for e in idle)
    assert all(e["args"]["gpu_idle_us"] <= e["args"]["gpu_gap_us"] for e in idle)
    assert any(e["args"]["gpu_idle_us"] < e["args"]["gpu_gap_us"] - 1 for e in idle)
    replays = sum(n for (t, name, _), n in by_track.items() if name.startswith("graph replay"))
    assert replays == int(a.launches["gpu_start_ns"].notna().sum()) == 300


def _tp(path: Path, tmp: Path):
    why = missing()
    if why:
        pytest.skip(why)
    raw = tmp / path.name.removesuffix(".gz")
    raw.write_bytes(gzip.decompress(path.read_bytes()))
    return WasmTraceProcessor(raw)


def q(tp, sql: str) -> list:
    return [tuple(r) for r in tp.query(sql).as_pandas_dataframe().itertuples(index=False)]


TRACK_SLICES = ("SELECT s.name, s.arg_set_id, t.name AS track, p.name AS process FROM slice s "
                "JOIN thread_track tt ON s.track_id = tt.id JOIN thread t USING (utid) "
                "JOIN process p USING (upid)")


@pytest.mark.slow
def test_perfetto_trace_processor_reads_it_back(case1, tmp_path):
    path, a = case1
    tp = _tp(path, tmp_path)
    try:
        assert q(tp, "SELECT name, value FROM stats WHERE value > 0 "
                     "AND severity IN ('error', 'data_loss')") == []
        s = a.summary
        count = f"SELECT track, name, COUNT(*) FROM ({TRACK_SLICES}) GROUP BY track, name"
        counts = {(t, n): c for t, n, c in q(tp, count)}
        assert sum(c for (t, _), c in counts.items() if t == CLASS) == s.launches
        steady = (f"SELECT COUNT(*) FROM ({TRACK_SLICES}) WHERE track = '{{}}' "
                  "AND name = 'gpu_to_cpu' AND extract_arg(arg_set_id, 'args.steady') = 1")
        assert q(tp, steady.format(CLASS)) == [(s.stalls["gpu_to_cpu"],)]
        assert q(tp, steady.format(IDLE)) == [(293,)]
        assert q(tp, "SELECT COUNT(*) FROM slice WHERE name LIKE 'graph replay #%'") == [(300,)]
        flows = dict(q(tp, "SELECT CASE WHEN so.name = 'cudaGraphLaunch' THEN 'launch' "
                           "ELSE 'wait' END, COUNT(*) FROM flow f "
                           "JOIN slice so ON f.slice_out = so.id "
                           "JOIN slice si ON f.slice_in = si.id GROUP BY 1"))
        assert flows["launch"] == 300
        assert flows["wait"] == int((a.launches["block"] >= 0).sum())
        # the stall site's Python line is in the args when the trace has Python samples
        assert q(tp, "SELECT COUNT(DISTINCT upid) FROM process WHERE pid > 0") == [(1,)]
    finally:
        tp.close()


@pytest.mark.slow
def test_two_processes_and_all_kernels(tmp_path):
    out = export(TWOPROC, tmp_path / "two.json.gz")
    tp = _tp(out, tmp_path)
    try:
        procs = q(tp, "SELECT p.name, COUNT(*) FROM slice s JOIN thread_track tt "
                      "ON s.track_id = tt.id JOIN thread USING (utid) JOIN process p "
                      "USING (upid) GROUP BY p.name ORDER BY p.name")
        assert [name for name, _ in procs] == ["python3 (pid 1882)", "python3 (pid 1883)"]
        per_proc = q(tp, f"SELECT process, COUNT(*) FROM ({TRACK_SLICES}) "
                         f"WHERE track = '{CLASS}' GROUP BY process ORDER BY process")
        assert [n for _, n in per_proc] == [200, 200]
    finally:
        tp.close()
    out = export(TWIN, tmp_path / "twin.json.gz", "--all-kernels")
    a = analyze(load(TWIN))
    events = read_events(out)
    graph_ops = sum(1 for e in events if e.get("cat") == "gpu_graph")
    assert graph_ops == int(a.launches["n_ops"].sum())
    # the first lane of a stream's kernels has the track's own name, the overlapping ones
    # (2), (3)...: the numbering started at (2), with no track of the plain name
    names = {e["args"]["name"] for e in events if e.get("ph") == "M"
             and e.get("name") == "thread_name" and "graph kernels" in e["args"]["name"]}
    assert any(n.endswith(": graph kernels") for n in names), names
    lanes = sorted(int(n.rsplit("(", 1)[1][:-1]) for n in names if n.endswith(")"))
    assert lanes == list(range(2, len(lanes) + 2))


def test_a_launch_without_a_phase_is_still_strict_json(tmp_path):
    """Two launches of the two-process sample have no phase (244 and 260, the last, of pid
    1882): their findings were written as ``"phase":NaN``, which JSON has no word for (Python
    reads it, strict readers do not). Every launch's findings are there, theirs without the
    phase."""

    def refuse(word: str) -> None:
        raise ValueError(f"not JSON: {word}")

    out = export(TWOPROC, tmp_path / "two.json.gz")
    with gzip.open(out, "rt", encoding="utf-8") as f:
        events = json.load(f, parse_constant=refuse)["traceEvents"]
    L = analyze(load(TWOPROC)).launches
    no_phase = set(zip(L.loc[L["phase"].isna(), "proc"] & 0xFFFFFF,
                       L.loc[L["phase"].isna(), "launch"], strict=True))
    assert no_phase == {(1882, 244), (1882, 260)}
    classes = {(e["pid"], e["args"]["launch"]): e["args"] for e in events
               if e.get("cat") == "nsysscope" and e["name"] != "overlap window"
               and "gpu_gap_us" not in e["args"]}
    assert len(classes) == len(L) == 400
    assert {k for k, args in classes.items() if "phase" not in args} == no_phase


def test_all_kernels_of_a_graph_traced_export_says_it_has_none(tmp_path):
    """nsys's default --cuda-graph-trace=graph records no kernel of a replay: --all-kernels
    wrote the default timeline without a word. Each replay is still one slice, with its
    class, and the note says how to capture the kernels."""
    out = tmp_path / "g.json.gz"
    proc = subprocess.run([sys.executable, "-m", "nsysscope", "export", str(GRAPH_TRACED),
                           "--perfetto", str(out), "--all-kernels"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(
        "nsysscope: note: --all-kernels: this export traced each graph replay as a whole "), \
        proc.stderr
    assert "--cuda-graph-trace=node" in proc.stderr.splitlines()[0]
    events = read_events(out)
    replays = [e for e in events if e.get("cat") == "gpu" and "launch" in e.get("args", {})]
    assert len(replays) == 200 and {e["args"]["ops"] for e in replays} == {1}
    classes = analyze(load(GRAPH_TRACED)).launches["klass"].astype(str)
    assert Counter(e["args"]["class"] for e in replays) == Counter(classes)
    assert Counter(classes)["gpu_to_cpu"] >= 194  # every steady launch, some warm-up ones
    assert not any(e.get("cat") == "gpu_graph" for e in events)


def test_html_links_the_timeline(tmp_path):
    html, pf = tmp_path / "r.html", tmp_path / "r.json.gz"
    r = CliRunner().invoke(cli, ["report", str(TWIN), "--format", "html", "-o", str(html),
                                 "--perfetto", str(pf)])
    assert r.exit_code == 0, r.output
    assert pf.is_file() and 'href="r.json.gz"' in html.read_text(encoding="utf-8")


def test_unwritable_destination_is_one_line(tmp_path):
    r = CliRunner().invoke(cli, ["export", str(TWIN), "--perfetto",
                                 str(tmp_path / "missing" / "x.json.gz")])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output


def test_a_timeline_is_written_again_and_never_read_as_a_trace(tmp_path):
    """Running an export again failed (exit 2: "is a torch.profiler trace; nsysscope never
    writes over a trace"), as did report on it (exit 3, no CUDA data) and a folder holding it
    (an error row); plain and gzipped alike."""
    from nsysscope.trace.formats import json_kind
    for name in ("t.trace.json.gz", "t.trace.json"):
        out = tmp_path / name
        for _ in range(2):
            export(TWIN, out)
        assert json_kind(out) == "timeline"
        r = CliRunner().invoke(cli, ["report", str(out)])
        assert r.exit_code == 2 and r.stderr == (
            f"nsysscope: error: {out}: an nsysscope timeline (export or --perfetto output), not "
            "a trace: open it in https://ui.perfetto.dev, and give nsysscope the trace it was "
            "made from\n")
        assert CliRunner().invoke(cli, ["gate", str(out), str(TWIN)]).exit_code == 2
    (tmp_path / "rank0.sqlite.xz").symlink_to(TWIN)
    r = CliRunner().invoke(cli, ["report", str(tmp_path), "-j", "1"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("nsysscope report: ") and "t.trace.json" not in r.stdout
    assert sorted(r.stderr.splitlines()) == sorted(
        f"nsysscope: note: {tmp_path / n}: left out: nsysscope's timeline (export, --perfetto), "
        "not a trace" for n in ("t.trace.json", "t.trace.json.gz"))


def test_a_timeline_saved_again_or_written_as_xz_is_still_a_timeline(tmp_path):
    """Recognised by its bytes only, a timeline re-saved by json.dump (spaces, sorted keys)
    was read as a torch.profiler trace (exit 3, no CUDA data); and -- perfetto x.json.xz wrote
    plain JSON under the .xz name."""
    import lzma

    from nsysscope.trace.formats import json_kind
    xz = export(TWIN, tmp_path / "t.json.xz")
    assert xz.read_bytes().startswith(b"\xfd7zXZ\x00")
    doc = json.loads(lzma.decompress(xz.read_bytes()))
    assert doc["otherData"]["source"] == "nsysscope" and doc["traceEvents"]
    again = tmp_path / "again.trace.json"
    again.write_text(json.dumps(doc, indent=1, sort_keys=True))
    for path in (xz, again):
        assert json_kind(path) == "timeline"
        r = CliRunner().invoke(cli, ["report", str(path)])
        assert r.exit_code == 2 and "an nsysscope timeline" in r.stderr
