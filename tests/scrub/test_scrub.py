"""nsysscope.scrub on real exports: the H200 sample traces and the shared 3.7.2 fixtures.

A "raw-like" export is rebuilt from a scrubbed sample trace by putting back what nsys writes
on a real machine (environment rows and blobs, absolute paths, user/host names, a GPU UUID,
a local time zone), so the scrubber is tested on real data without shipping the leaks.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import lzma
import os
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.scrub import Leak, ScrubError, find_leaks, rewrite_path, scrub
from nsysscope.scrub import write as scrub_write
from nsysscope.scrub.names import word_pattern
from nsysscope.scrub.paths import find_paths

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_traces"
# the smallest one, with kernels, NVTX ranges and Python stacks
BASE_SAMPLE = "h200_healthy_pysample_150"
FIXTURES = Path(os.environ.get("NSYSSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))

WORKDIR = "/tmp/tmp.Xk3vQ9/work"
VENV_SITE = "/home/alice/.venv/lib/python3.12/site-packages"
STDLIB = "/usr/lib/python3.12"
UUID = "d235f3ab-f2f5-8ce8-e3dd-a634dba21b2e"
SECRETS = [b"alice", b"gpu-node-17", b"/home/", b"/tmp/tmp.", b"PATH=", b"HOME=", b"HOSTNAME=",
           b"d235f3ab", b"hunter2"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def table_rows(path: Path, table: str) -> Counter:
    with connect(path) as c:
        return Counter(c.execute(f'SELECT * FROM "{table}"'))


def meta(path: Path, table: str) -> dict[str, str]:
    with connect(path) as c:
        return dict(c.execute(f"SELECT name, value FROM {table}"))


def trace_tables(path: Path) -> list[str]:
    with connect(path) as c:
        return [r[0] for r in c.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND "
            "(name LIKE 'CUPTI_%' OR name LIKE 'NVTX_%' OR name LIKE 'CUDA_%')")]


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """The scrubbed sample trace, decompressed once per module (read-only use)."""
    out = tmp_path_factory.mktemp("sample") / f"{BASE_SAMPLE}.sqlite"
    with lzma.open(SAMPLES / f"{BASE_SAMPLE}.sqlite.xz") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    out.chmod(0o444)
    return out


def make_raw_like(sample: Path, dst: Path) -> Path:
    """Put back into a copy of ``sample`` what a real export of that run would carry."""
    shutil.copy(sample, dst)
    dst.chmod(0o644)
    c = sqlite3.connect(dst)
    with c:
        # paths: the engine's sources under the working dir, a venv in the user's home, stdlib
        c.execute("UPDATE StringIds SET value = ? || substr(value, 1) "
                  "WHERE value LIKE 'engine_under_test/%'", (WORKDIR + "/",))
        c.execute("UPDATE StringIds SET value = ? || substr(value, 16) "
                  "WHERE value LIKE '<site-packages>/%'", (VENV_SITE,))
        c.execute("UPDATE StringIds SET value = ? || substr(value, 9) "
                  "WHERE value LIKE '<stdlib>/%'", (STDLIB,))
        c.execute("UPDATE StringIds SET value = replace(value, '<path>/', "
                  "'/tmp/nvidia/nsight_systems/quadd_session_4711/streams/') "
                  "WHERE value LIKE '%<path>/%'")
        top = c.execute("SELECT MAX(id) FROM StringIds").fetchone()[0]
        env_blob = "\x00".join(["OLDPWD=/", "HOME=/home/alice", f"PWD={WORKDIR}",
                                "HOSTNAME=gpu-node-17", "PATH=/home/alice/.venv/bin:/usr/bin",
                                "HF_TOKEN=hunter2"])
        c.execute("INSERT INTO StringIds VALUES (?, ?)", (top + 1, env_blob))
        # the capture's metadata
        c.execute("DELETE FROM META_DATA_CAPTURE "
                  "WHERE name IN ('PROCESS_0:WORKING_DIR', 'PROCESS_0:USER_NAME')")
        c.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", [
            ("PROCESS_0:WORKING_DIR", WORKDIR), ("PROCESS_0:USER_NAME", "alice"),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", 'HOME="/home/alice"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", 'PATH="/home/alice/.venv/bin:/usr/bin"'),
            ("PROCESS_0:ENVIRONMENT_VARIABLE", 'NCCL_VERSION="2.28.3-1"')])
        c.execute("UPDATE META_DATA_CAPTURE SET value = 'gpu-node-17' "
                  "WHERE name = 'DEVICE_DISPLAY_NAME'")
        c.execute("UPDATE META_DATA_CAPTURE SET value = '/home/alice/out/run.json' "
                  "WHERE value LIKE '<path>/%'")
        for name, value in [("EXPORT_HOST", "gpu-node-17"), ("EXPORT_USER", "alice"),
                            ("EXPORT_PARAM_INPUT_PATH_ABS", "/home/alice/traces/run.nsys-rep"),
                            ("EXPORT_TIME_LOCAL", "2026-11-29T14:54:04 +0100 CET")]:
            c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = ?", (value, name))
        c.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'gpu-node-17' WHERE name = 'Hostname'")
        c.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = "
                  "replace(value, '00000000-0000-0000-0000-000000000000', ?) "
                  "WHERE name = 'GpuInfo'", (UUID,))
        c.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV SELECT globalVid, devStateName, "
                  "'DeviceEnvironment', 610, 'HOME=/home/alice;USER=alice;PATH=/usr/bin' "
                  "FROM TARGET_INFO_SYSTEM_ENV LIMIT 1")
        c.execute("UPDATE TARGET_INFO_GPU SET uuid = ?", (UUID,))
        c.execute("UPDATE TARGET_INFO_SESSION_START_TIME SET localTime = '2026-11-29T14:53:57'")
        c.execute("UPDATE DIAGNOSTIC_EVENT "
                  "SET text = 'Profiling has started on gpu-node-17 for alice.' "
                  "WHERE text = 'Profiling has started.'")
        put_back_private(c, top + 2)
    c.close()
    return dst


OTHER_PROCESSES = [(4242, "kworker/3:1"), (4243, "sshd"), (4244, "alice-notebook")]
PROGRAM_OUTPUT = "prompt: what is the admin password? hunter2"


def put_back_private(c: sqlite3.Connection, next_id: int) -> None:
    """What nsys records beside the trace (nsysscope.scrub.private): the host's other
    processes and their threads, the program's stdout, the kernel string, the session UUID."""
    gpid = c.execute("SELECT globalPid FROM PROCESSES").fetchone()[0]
    vm = (gpid >> 24) & ~0xFFFFFF
    for i, (pid, name) in enumerate(OTHER_PROCESSES):
        key = vm | pid
        c.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (key << 24, pid, name))
        c.execute("INSERT INTO StringIds VALUES (?, ?)", (next_id + i, name))
        c.execute("INSERT INTO ThreadNames VALUES (?, 20, ?)", (next_id + i, (key << 24) | pid))
    out_name, out_text = next_id + 10, next_id + 11
    c.executemany("INSERT INTO StringIds VALUES (?, ?)", [
        (out_name, "/opt/nvidia/nsight_systems/streams/pid_1082_stdout.log"),
        (out_text, PROGRAM_OUTPUT)])
    c.execute("DELETE FROM ProcessStreams")
    c.execute("INSERT INTO ProcessStreams VALUES (?, ?, ?)", (gpid, out_name, out_text))
    c.execute("DELETE FROM ANALYSIS_FILE")
    c.execute("INSERT INTO ANALYSIS_FILE VALUES (0, ?, ?, ?)",
              ("/opt/nvidia/nsight_systems/streams/pid_1082_stdout.log", out_text, gpid))
    c.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV "
              "WHERE name IN ('SoftwareReleaseVersion', 'KernelVersion')")
    for name, enum, value in [("SoftwareReleaseVersion", 618, "6.8.0-1015-gpu-cloud-alice"),
                              ("KernelVersion", 882, "#15-Ubuntu SMP Tue Jun 4 2024")]:
        c.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV SELECT globalVid, devStateName, ?, ?, ? "
                  "FROM TARGET_INFO_SYSTEM_ENV LIMIT 1", (name, enum, value))
    c.execute("DELETE FROM META_DATA_CAPTURE WHERE name = 'PROFILING_SESSION_UUID'")
    c.execute("INSERT INTO META_DATA_CAPTURE VALUES ('PROFILING_SESSION_UUID', "
              "'b4f12def-cbf2-447b-b04d-5088785f374b')")


@pytest.fixture
def raw_like(sample, tmp_path) -> Path:
    return make_raw_like(sample, tmp_path / "raw.sqlite")


# --------------------------------------------------------------------------------------------


def test_rewrite_path_policy():
    wd = WORKDIR
    assert rewrite_path(f"{wd}/engine_under_test/sampler.py", wd) == "engine_under_test/sampler.py"
    assert rewrite_path(wd, wd) == "."
    assert rewrite_path(f"{wd}/.venv/lib/python3.12/site-packages/torch/cuda/graphs.py", wd) == \
        "<site-packages>/torch/cuda/graphs.py"
    assert rewrite_path("/opt/conda/lib/python3.11/site-packages/numpy/__init__.py", wd) == \
        "<site-packages>/numpy/__init__.py"
    assert rewrite_path("/usr/lib/python3/dist-packages/yaml/__init__.py", None) == \
        "<site-packages>/yaml/__init__.py"
    assert rewrite_path("/usr/lib/python3.12/threading.py", wd) == "<stdlib>/threading.py"
    assert rewrite_path("/root/.cache/x/kernel.cubin", wd) == "<path>/kernel.cubin"
    assert rewrite_path("/dev/nvidia0", wd) == "/dev/nvidia0"


def test_sample_traces_are_clean(tmp_path):
    """Every shipped nsys sample (sample_traces/, runs/, kineto/) decompresses to an export
    with nothing left to scrub, the private items included."""
    files = sorted(SAMPLES.rglob("h200_*.sqlite.xz"))
    assert len(files) >= 30
    for xz in files:
        if "long" in xz.name:
            continue  # same capture settings as h200_healthy_300; 100 MB, checked when it was made
        out = tmp_path / xz.name.removesuffix(".xz")
        with lzma.open(xz) as f, open(out, "wb") as g:
            shutil.copyfileobj(f, g, 1 << 20)
        assert find_leaks(out) == [], xz.name
        data = out.read_bytes()
        project = str(REPO).encode()  # this checkout's path
        for s in (b"/root", b"/tmp/tmp", b"/tmp/st", b"/home/", project, b"PATH=", b"HOME=",
                  b"CONTAINER_NAME"):
            assert s not in data, (xz.name, s)
        with connect(out) as c:
            m = dict(c.execute("SELECT name, value FROM META_DATA_EXPORT"))
            assert m["EXPORT_SCHEMA_VERSION"] == "3.20.3" and m["EXPORT_HOST"] == "host"
            assert c.execute("SELECT name FROM TARGET_INFO_GPU").fetchone()[0] == "NVIDIA H200"
        out.unlink()


def test_find_leaks_on_raw_like(raw_like):
    leaks = find_leaks(raw_like)
    assert all(isinstance(lk, Leak) for lk in leaks)
    kinds = Counter(lk.kind for lk in leaks)
    assert set(kinds) == {"env", "abs_path", "user", "host", "machine_id", "timezone",
                          "process_list", "program_output", "kernel", "session_id"}
    where = {(lk.table, lk.key, lk.kind) for lk in leaks}
    assert ("META_DATA_CAPTURE", "PROCESS_0:ENVIRONMENT_VARIABLE", "env") in where
    assert ("META_DATA_CAPTURE", "PROCESS_0:WORKING_DIR", "abs_path") in where
    assert ("META_DATA_CAPTURE", "PROCESS_0:USER_NAME", "user") in where
    assert ("META_DATA_EXPORT", "EXPORT_HOST", "host") in where
    assert ("META_DATA_EXPORT", "EXPORT_USER", "user") in where
    assert ("META_DATA_EXPORT", "EXPORT_PARAM_INPUT_PATH_ABS", "abs_path") in where
    assert ("TARGET_INFO_SYSTEM_ENV", "DeviceEnvironment", "env") in where
    assert ("TARGET_INFO_SYSTEM_ENV", "Hostname", "host") in where
    assert ("TARGET_INFO_GPU", 1, "machine_id") in where
    assert any(lk.table == "StringIds" and lk.kind == "env" and "(+5 more)" in lk.excerpt
               for lk in leaks)
    # the recurring user and host names in free text, and the Python sources in StringIds
    assert {("DIAGNOSTIC_EVENT", "user"), ("DIAGNOSTIC_EVENT", "host")} <= \
        {(lk.table, lk.kind) for lk in leaks}
    assert sum(lk.table == "StringIds" and lk.kind == "abs_path" for lk in leaks) > 400
    # excerpts say what leaks without repeating it
    for lk in leaks:
        for s in ("alice", "gpu-node-17", "hunter2", WORKDIR, UUID):
            assert s not in lk.excerpt, lk


def test_scrub_removes_leaks_and_restores_sample(raw_like, sample, tmp_path):
    out = tmp_path / "clean.sqlite"
    result = scrub(raw_like, out)
    assert result.remaining == () and find_leaks(out) == []
    assert result.working_dir == WORKDIR
    assert result.working_dir_from == "META_DATA_CAPTURE PROCESS_0:WORKING_DIR"
    assert result.rows_deleted == {"META_DATA_CAPTURE": 4, "StringIds": 6,
                                   "TARGET_INFO_SYSTEM_ENV": 3, "PROCESSES": 3, "ThreadNames": 3,
                                   "ProcessStreams": 1, "ANALYSIS_FILE": 1}
    data = out.read_bytes()
    for s in SECRETS + [b"kworker", b"alice-notebook", b"admin password", b"gpu-cloud",
                        b"b4f12def"]:
        assert s not in data, s
    # the paths come back exactly as in the shipped (scrubbed) sample
    with connect(sample) as a, connect(out) as b:
        q = "SELECT id, value FROM StringIds"
        assert dict(a.execute(q)) == dict(b.execute(q))
        assert b.execute("SELECT COUNT(*) FROM StringIds "
                         "WHERE value = 'engine_under_test/sampler.py'").fetchone()[0] == 1
    m = meta(out, "META_DATA_CAPTURE")
    assert m["PROCESS_0:WORKING_DIR"] == "." and m["PROCESS_0:USER_NAME"] == "user"
    assert m["DEVICE_DISPLAY_NAME"] == "host" and m["PROCESS_0:ARGUMENT_7"] == "<path>/run.json"
    e = meta(out, "META_DATA_EXPORT")
    assert (e["EXPORT_HOST"], e["EXPORT_USER"]) == ("host", "user")
    assert e["EXPORT_PARAM_INPUT_PATH_ABS"] == "<path>/run.nsys-rep"
    assert e["EXPORT_TIME_LOCAL"] == e["EXPORT_TIME_UTC"] + " +0000 UTC"
    with connect(out) as c:
        assert c.execute("SELECT uuid FROM TARGET_INFO_GPU").fetchone()[0] == \
            "00000000-0000-0000-0000-000000000000"
        assert c.execute("SELECT text FROM DIAGNOSTIC_EVENT "
                         "WHERE text LIKE 'Profiling has started on%'").fetchone()[0] == \
            "Profiling has started on host for user."


@pytest.mark.parametrize("suffix", [".xz", ".gz"])
def test_a_compressed_destination_is_the_same_bytes_each_time(raw_like, tmp_path, suffix):
    """A ``.gz`` destination was an internal error (gzip.open takes no mtime); each is the
    scrubbed export compressed, the same bytes for the same input, and reads as the plain
    one does."""
    plain = tmp_path / "clean.sqlite"
    scrub(raw_like, plain)
    outs = [tmp_path / f"{n}.sqlite{suffix}" for n in ("a", "b")]
    for out in outs:
        scrub(raw_like, out)
    assert outs[0].read_bytes() == outs[1].read_bytes()
    opener = lzma.open if suffix == ".xz" else gzip.open
    with opener(outs[0]) as f:
        assert f.read() == plain.read_bytes()


def test_scrub_changes_nothing_the_analysis_reads(raw_like, tmp_path):
    out = tmp_path / "clean.sqlite"
    scrub(raw_like, out)
    tables = trace_tables(raw_like)
    assert {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"} <= set(tables)
    for t in tables:  # every row of every trace table, timestamps, ids and JSON payloads included
        assert table_rows(raw_like, t) == table_rows(out, t), t
    for t in ("ENUM_CUDA_MEMCPY_OPER", "TARGET_INFO_CUDA_STREAM"):
        assert table_rows(raw_like, t) == table_rows(out, t), t
    # the traced process and its threads stay, with their names; the host's others go
    for t in ("PROCESSES", "ThreadNames"):
        before, after = table_rows(raw_like, t), table_rows(out, t)
        assert after and after < before, t
        assert len(before) - len(after) == len(OTHER_PROCESSES), t
    with connect(out) as c:
        assert c.execute("SELECT name FROM PROCESSES").fetchall() == [("python3",)]
        names = {r[0] for r in c.execute("SELECT s.value FROM ThreadNames t "
                                         "JOIN StringIds s ON s.id = t.nameId")}
        assert "python3" in names and not names & {n for _, n in OTHER_PROCESSES}
    with connect(raw_like) as a, connect(out) as b:
        q = ("SELECT DISTINCT s.id, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
             "JOIN StringIds s ON s.id = r.nameId "
             "UNION SELECT s.id, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
             "JOIN StringIds s ON s.id = k.shortName")
        api = sorted(a.execute(q))
        assert api == sorted(b.execute(q))
        assert any(v == "cudaGraphLaunch_v10000" for _, v in api)
        assert a.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == \
            b.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()


def test_scrub_never_touches_src(raw_like, tmp_path):
    before, mtime = sha256(raw_like), raw_like.stat().st_mtime_ns
    scrub(raw_like, tmp_path / "a.sqlite", drop_kernel_names=True, drop_nvtx_text=True)
    assert sha256(raw_like) == before and raw_like.stat().st_mtime_ns == mtime
    # no temp files left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite", "raw.sqlite"]
    with pytest.raises(ScrubError, match="--in-place"):
        scrub(raw_like, raw_like)
    assert sha256(raw_like) == before


def test_scrub_in_place(raw_like, tmp_path):
    rows = table_rows(raw_like, "CUPTI_ACTIVITY_KIND_KERNEL")
    result = scrub(raw_like, in_place=True)
    assert result.dst == raw_like and result.leaks_found > 500
    assert find_leaks(raw_like) == []
    assert table_rows(raw_like, "CUPTI_ACTIVITY_KIND_KERNEL") == rows
    assert [p.name for p in tmp_path.iterdir()] == ["raw.sqlite"]
    assert scrub(raw_like, in_place=True).leaks_found == 0  # idempotent


def test_drop_kernel_names(raw_like, tmp_path):
    out = tmp_path / "k.sqlite"
    result = scrub(raw_like, out, drop_kernel_names=True)
    assert result.kernel_names_dropped > 10
    with connect(out) as c:
        names = c.execute("SELECT DISTINCT k.demangledName, s.value "
                          "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                          "JOIN StringIds s ON s.id = k.demangledName").fetchall()
        assert names and all(v == f"kernel_{i}" for i, v in names)
        assert c.execute("SELECT COUNT(*) FROM StringIds "
                         "WHERE value LIKE 'cudaGraphLaunch%'").fetchone()[0] >= 1
    assert table_rows(raw_like, "NVTX_EVENTS") == table_rows(out, "NVTX_EVENTS")
    assert find_leaks(out) == []


def test_drop_nvtx_text(raw_like, tmp_path):
    out = tmp_path / "n.sqlite"
    result = scrub(raw_like, out, drop_nvtx_text=True)
    q = ("SELECT n.rowid, COALESCE(n.text, s.value), n.jsonText, n.start, n.end, n.domainId "
         "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId ORDER BY n.rowid")
    with connect(raw_like) as a, connect(out) as b:
        before, after = a.execute(q).fetchall(), b.execute(q).fetchall()
    assert len(before) == len(after)
    mapping: dict[str, str] = {}
    sampler_domains = {row[5] for row in before if row[2] is not None}
    for (r1, t1, j1, s1, e1, d1), (r2, t2, j2, s2, e2, d2) in zip(before, after, strict=True):
        assert (r1, j1, s1, e1, d1) == (r2, j2, s2, e2, d2)
        if d1 in sampler_domains:  # the Python sampler's own events and domain name stay
            assert t2 == t1
        elif t1 is None:
            assert t2 is None
        else:
            assert t2.startswith("range_")
            assert mapping.setdefault(t1, t2) == t2  # same text, same name
    assert len(set(mapping.values())) == len(mapping) == result.nvtx_texts_dropped
    assert "step 0" in mapping and "launch" in mapping
    assert "cub::DeviceScan::InclusiveScan" in mapping
    assert "Python Periodic Sampling" not in mapping
    with connect(out) as b:
        q = "SELECT COUNT(*) FROM NVTX_EVENTS WHERE text LIKE 'step %'"
        assert b.execute(q).fetchone()[0] == 0


def test_bad_input_raises_and_leaves_no_dst(tmp_path, raw_like):
    dst = tmp_path / "out.sqlite"
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(4096))
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    text = tmp_path / "notes.txt"
    text.write_text("PATH=/home/alice\n")
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE t (x)")
    cut = tmp_path / "cut.sqlite"  # an interrupted copy of a real export
    cut.write_bytes(raw_like.read_bytes()[:200_000])
    # exit codes as for every command: 2 unreadable, 5 SQLite that is not a whole export
    for bad, msg, code in [(junk, "not an SQLite file", 2), (empty, "not an SQLite file", 2),
                           (text, "not an SQLite file", 2), (foreign, "not an nsys export", 5),
                           (cut, "truncated export", 5),
                           (tmp_path / "missing.sqlite", "no such file", 2),
                           (tmp_path, "not a file", 2)]:
        with pytest.raises(ScrubError, match=msg) as e:
            scrub(bad, dst)
        assert "\n" not in str(e.value) and e.value.exit_code == code
        with pytest.raises(ScrubError):
            find_leaks(bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.sqlite", "empty.sqlite",
                                                         "foreign.sqlite", "junk.sqlite",
                                                         "notes.txt", "raw.sqlite"]


def test_a_damaged_page_past_the_schema_is_a_corrupt_export_for_the_check(tmp_path):
    """3 MB zeroed in the middle of a real export, its size unchanged: find_leaks (scrub
    --check) met SQLite's error deep in its scan (exit 70); it is a corrupt export, exit 5,
    as report says."""
    raw = bytearray(lzma.decompress((SAMPLES / "h200_case1_300.sqlite.xz").read_bytes()))
    mid = len(raw) // 3
    raw[mid:mid + 3_000_000] = bytes(3_000_000)
    bad = tmp_path / "zeroed.sqlite"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ScrubError, match=r"zeroed\.sqlite: truncated or corrupt export "
                                         r"\(database disk image is malformed\)$") as e:
        find_leaks(bad)
    assert e.value.exit_code == 5


def test_failure_midway_keeps_existing_dst(raw_like, tmp_path, monkeypatch):
    dst = tmp_path / "out.sqlite"
    dst.write_bytes(b"previous")

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(scrub_write, "_apply", boom)
    with pytest.raises(RuntimeError):
        scrub(raw_like, dst, force=True)
    assert dst.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.sqlite", "raw.sqlite"]


def test_working_dir_derived_from_sources(raw_like, tmp_path):
    with sqlite3.connect(raw_like) as c:  # nsys ran with a relative working directory
        c.execute("UPDATE META_DATA_CAPTURE SET value = '.' WHERE name = 'PROCESS_0:WORKING_DIR'")
    out = scrub(raw_like, tmp_path / "a.sqlite")
    assert (out.working_dir, out.working_dir_from) == \
        (WORKDIR, "prefix of the sources of 'engine_under_test'")
    # ...and no `-m PKG` either: common dir, up past __init__.py
    with sqlite3.connect(raw_like) as c:
        c.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:ARGUMENT_%'")
    out = scrub(raw_like, tmp_path / "b.sqlite")
    assert (out.working_dir, out.working_dir_from) == \
        (WORKDIR, "common directory of the program's .py sources")
    with connect(tmp_path / "b.sqlite") as c:
        assert c.execute("SELECT COUNT(*) FROM StringIds "
                         "WHERE value LIKE 'engine_under_test/%.py'").fetchone()[0] >= 9


@pytest.mark.parametrize("name", ["nsys2023.4_cuda13_partial.sqlite",
                                  "nsys2023.4_cpu_only_osrt.sqlite"])
def test_schema_3_7_2_fixtures(name, tmp_path):
    src = FIXTURES / name
    if not src.exists():
        pytest.skip(f"{src} not here")
    before = sha256(src)
    leaks = find_leaks(src)
    # scrubbed by hand before; the per-process environment blobs in StringIds were missed
    assert {"env", "host"} <= {lk.kind for lk in leaks}
    out = tmp_path / name
    result = scrub(src, out)
    assert sha256(src) == before and result.remaining == () and find_leaks(out) == []
    with connect(src) as c:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for t in sorted(set(trace_tables(src)) | ({"OSRT_API"} & tables)):
        assert table_rows(src, t) == table_rows(out, t), t
    # nsys 2023.4 records the host's processes too; only the traced ones stay
    n_out, n_src = (sum(table_rows(p, "PROCESSES").values()) for p in (out, src))
    assert 0 < n_out < n_src
    kept = scrub(src, tmp_path / "kept.sqlite", keep_process_list=True, keep_program_output=True,
                 keep_kernel_string=True, keep_session_uuid=True)
    assert kept.remaining == ()
    for t in ("PROCESSES", "ThreadNames", "ProcessStreams"):
        assert table_rows(src, t) == table_rows(tmp_path / "kept.sqlite", t), t


def test_secrets_addresses_and_odd_paths_anywhere_are_scrubbed(sample, tmp_path):
    """A server's command line and free text carried what the environment rules never saw
    (``scrub --check`` said clean): ``--api-key VALUE`` on two argument rows, a database URL's
    password, a token in the middle of an NVTX range, a rendezvous address, a path after ':'
    and one with a non-ASCII letter (the ASCII-only pattern stopped at it)."""
    raw = tmp_path / "server.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    secrets = ["mysecretvalue123", "Sup3rS3cret", "sk-abcdefghijklmnopqrstuvwx",
               "hf_AbCdEfGhIjKlMnOpQrStUv12", "10.1.2.3", "/home/bob/x.pt", "josé", "erin",
               "secret_project"]
    with sqlite3.connect(raw) as c:
        n = c.execute("SELECT COUNT(*) FROM META_DATA_CAPTURE "
                      "WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchone()[0]
        c.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", [
            (f"PROCESS_0:ARGUMENT_{n}", "--api-key"),
            (f"PROCESS_0:ARGUMENT_{n + 1}", "mysecretvalue123"),
            (f"PROCESS_0:ARGUMENT_{n + 2}", "--db=postgres://admin:Sup3rS3cret@db/x"),
            (f"PROCESS_0:ARGUMENT_{n + 3}", "--hf-token=hf_AbCdEfGhIjKlMnOpQrStUv12")])
        row = c.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'sample' "
                        "LIMIT 1").fetchone()[0]
        c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?",
                  ("sample OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx via 10.1.2.3:29500", row))
        top = c.execute("SELECT MAX(id) FROM StringIds").fetchone()[0]
        c.executemany("INSERT INTO StringIds VALUES (?, ?)", [
            (top + 1, "load ckpt:/home/bob/x.pt"), (top + 2, "/home/josé/model.pt"),
            (top + 3, "open file:///home/erin/secret_project/x.pt")])  # its path was kept
        c.execute("UPDATE NVTX_EVENTS SET textId = ? WHERE rowid = ?", (top + 1, row + 1))
        c.execute("UPDATE NVTX_EVENTS SET textId = ? WHERE rowid = ?", (top + 2, row + 2))
        c.execute("UPDATE NVTX_EVENTS SET textId = ? WHERE rowid = ?", (top + 3, row + 3))
    c.close()
    found = {(x.kind, x.table) for x in find_leaks(raw)}
    assert {("secret", "META_DATA_CAPTURE"), ("secret", "NVTX_EVENTS"),
            ("ip", "NVTX_EVENTS"), ("abs_path", "StringIds")} <= found
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    data = out.read_bytes()
    for s in secrets:
        assert s.encode() not in data, s
    assert find_leaks(out) == []
    m = dict(sqlite3.connect(out).execute("SELECT name, value FROM META_DATA_CAPTURE"))
    assert m[f"PROCESS_0:ARGUMENT_{n}"] == "--api-key"  # the option stays, its value goes
    assert m[f"PROCESS_0:ARGUMENT_{n + 1}"] == "<secret>"
    assert m[f"PROCESS_0:ARGUMENT_{n + 2}"] == "--db=postgres://admin:<secret>@db/x"


def test_windows_paths_spaced_paths_joined_names_domains_and_emails(sample, tmp_path):
    """Each of these was kept by the scrub and passed its own ``--check``: an export made on
    Windows (the report's path names the user), a source path with a space (the pattern
    ended at it), the user's name joined to other words by ``_`` or ``-``, the site's domain
    of a fully qualified host name, and an e-mail address."""
    raw = tmp_path / "windows.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = ?",
                  (r"C:\Users\dana\Documents\H200 runs\run.nsys-rep",
                   "EXPORT_PARAM_INPUT_PATH_ABS"))
        c.execute("UPDATE META_DATA_EXPORT SET value = 'gpu7.corp.example.com' "
                  "WHERE name = 'EXPORT_HOST'")
        top = c.execute("SELECT MAX(id) FROM StringIds").fetchone()[0]
        n = c.execute("SELECT COUNT(*) FROM META_DATA_CAPTURE "
                      "WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchone()[0]
        c.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", [
            (f"PROCESS_0:ARGUMENT_{n}", "--run-name=dana_experiments"),
            (f"PROCESS_0:ARGUMENT_{n + 1}", "--tag=exp-DANA")])
        # NVTX range names (which the analysis reads): paths, domains and e-mails go, and a
        # user name standing as a word; an identifier it is joined into stays whole
        texts = ["/data/My Models/qwen3/config.json", r"\\fs01\traces\dana\x.sqlite",
                 "sample by dana", "mount nfs.corp.example.com:/x",
                 "by dana.smith@othermail.org"]
        c.executemany("INSERT INTO StringIds VALUES (?, ?)",
                      [(top + 1 + i, t) for i, t in enumerate(texts)])
        rows = [r[0] for r in c.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'sample' "
                                        "LIMIT ?", (len(texts),))]
        c.executemany("UPDATE NVTX_EVENTS SET textId = ?, text = NULL WHERE rowid = ?",
                      [(top + 1 + i, r) for i, r in enumerate(rows)])
    c.close()
    found = {x.kind for x in find_leaks(raw)}
    assert {"abs_path", "user", "host", "email"} <= found
    out = tmp_path / "clean.sqlite"
    assert scrub(raw, out).remaining == ()
    data = out.read_bytes()
    for leak in ("dana", "DANA", "Models", "H200 runs", "fs01", "corp.example", "othermail"):
        assert leak.encode() not in data, leak
    assert find_leaks(out) == []
    with connect(out) as c:
        kept = {r[0] for r in c.execute("SELECT value FROM StringIds WHERE id > ?", (top,))}
        args = dict(c.execute("SELECT name, value FROM META_DATA_CAPTURE"))
    assert kept == {"<path>/config.json", "<path>/x.sqlite", "sample by user",
                    "mount nfs.host:/x", "by <email>"}
    assert (args[f"PROCESS_0:ARGUMENT_{n}"], args[f"PROCESS_0:ARGUMENT_{n + 1}"]) == \
        ("--run-name=user_experiments", "--tag=exp-user")


def test_addresses_options_shares_and_names_in_capitals(sample, tmp_path):
    """Each was kept, and the copy passed --check: an address on an argument row of its own
    (after --master-addr) or in a text that says 'rendezvous'; a path after a one-letter
    option, a redirection or as a network share; the host name in capitals; the UUID of a
    GPU the export's GPU tables do not list."""
    raw = tmp_path / "server.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        n = c.execute("SELECT COUNT(*) FROM META_DATA_CAPTURE "
                      "WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchone()[0]
        args = ["--master-addr", "10.42.17.5", "-I/scratch/kzhang/cutlass/include",
                "2>/scratch/kzhang/err.log", "//fs01/share/kzhang/x.bin"]
        c.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)",
                      [(f"PROCESS_0:ARGUMENT_{n + i}", a) for i, a in enumerate(args)])
        c.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'dgx-a100-031' "
                  "WHERE name = 'Hostname'")
        c.execute("UPDATE DIAGNOSTIC_EVENT SET text = 'worker on DGX-A100-031: rendezvous "
                  "10.42.17.6 port 29500, peer GPU-4f3c2a1b-8d7e-6f5a-4b3c-2d1e0f9a8b7c' "
                  "WHERE rowid = (SELECT MIN(rowid) FROM DIAGNOSTIC_EVENT)")
    c.close()
    out = tmp_path / "clean.sqlite"
    assert scrub(raw, out).remaining == ()
    data = out.read_bytes()
    for leak in ("10.42.17", "kzhang", "scratch", "fs01", "dgx-a100", "DGX-A100", "4f3c2a1b"):
        assert leak.encode() not in data, leak
    with connect(out) as c:
        m = dict(c.execute("SELECT name, value FROM META_DATA_CAPTURE"))
        diag = c.execute("SELECT text FROM DIAGNOSTIC_EVENT ORDER BY rowid").fetchone()[0]
    assert [m[f"PROCESS_0:ARGUMENT_{n + i}"] for i in range(len(args))] == \
        ["--master-addr", "<ip>", "-I<path>/include", "2><path>/err.log", "<path>/x.bin"]
    # a GPU the file's GPU tables do not list (the sample's own UUID is zeros already)
    assert diag == ("worker on host: rendezvous <ip> port 29500, peer "
                    "GPU-00000000-0000-0000-0000-000000000000")


@pytest.mark.parametrize("user", ["sample", "step", "launch"])
def test_a_user_named_like_the_programs_names_leaves_them_as_they_are(user, tmp_path):
    """A user named ``sample`` renamed the 'sample' phase in the copy's report (the verdict
    said "at phase 'user'"), one named ``step`` every 'step N' range, one named ``launch`` the
    kernel launch_clamp_scalar; the user's own fields still go."""
    raw = tmp_path / "raw.sqlite"
    with lzma.open(SAMPLES / "h200_case1_pysample_150.sqlite.xz") as f, open(raw, "wb") as g:
        shutil.copyfileobj(f, g)
    with sqlite3.connect(raw) as c:
        c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_USER'", (user,))
    c.close()
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    before, after = analyze(load(raw)).summary, analyze(load(out)).summary
    assert after.verdict == before.verdict and "phase 'sample'" in after.verdict
    assert [x.to_dict() for x in after.sites] == [x.to_dict() for x in before.sites]
    with connect(out) as c:
        assert c.execute("SELECT value FROM META_DATA_EXPORT "
                         "WHERE name = 'EXPORT_USER'").fetchone()[0] == "user"
        assert c.execute("SELECT COUNT(*) FROM StringIds "  # a kernel's demangled name
                         "WHERE value LIKE '%::launch_clamp_scalar(%'").fetchone()[0] == 1
    assert find_leaks(out) == []


def test_blobs_where_nsys_writes_text_are_scrubbed_not_a_crash(sample, tmp_path):
    """A process name and an NVTX JSON payload stored as blobs stopped scrub and --check with
    a TypeError (exit 70); report read the same file."""
    raw = tmp_path / "blobs.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        c.execute("INSERT INTO PROCESSES (globalPid, pid, name) "
                  "VALUES (4242 << 24, 4242, CAST('sshd' AS BLOB))")
        c.execute("UPDATE NVTX_EVENTS SET jsonText = CAST('{\"File\": 5}' AS BLOB) "
                  "WHERE rowid = (SELECT MIN(rowid) FROM NVTX_EVENTS WHERE text = 'sample')")
    c.close()
    assert ("process_list", "PROCESSES") in {(x.kind, x.table) for x in find_leaks(raw)}
    out = tmp_path / "clean.sqlite"
    assert scrub(raw, out).remaining == ()


@pytest.mark.parametrize(("text", "paths"), [
    (r"C:\Program Files\NVIDIA Corporation\Nsight Systems 2025.3.1\nsys.exe -x",
     [r"C:\Program Files\NVIDIA Corporation\Nsight Systems 2025.3.1\nsys.exe"]),
    ("/home/bob/My Models/x.pt", ["/home/bob/My Models/x.pt"]),
    ("file:///home/bob/My Models/x.pt", ["/home/bob/My Models/x.pt"]),
    # a command line is not one path: each path ends at a space
    ("/usr/bin/python3 -m x --out /a/b", ["/usr/bin/python3", "/a/b"]),
    ("load /home/bob/My Models/x.pt", ["/home/bob/My"]),
    ("a:\\nb", ["a:\\nb"]), ("steps/s 3", []),
    # a range name is not one path (the scrub rewrote it to '<path>/10')
    ("/step 5/10", ["/step"]), ("/v1/completions handler", ["/v1/completions"]),
    # escaped, as in a JSON payload: only 'C:\\' was found, and the rest stayed
    (r'{"file": "C:\\Users\\dana\\H200 runs\\run.py", "line": 3}',
     [r"C:\Users\dana\H200 runs\run.py"]),
    (r'{"cwd": "\\\\fs01\\traces\\x.sqlite"}', [r"\\fs01\traces\x.sqlite"]),
    # separators mixed: the Windows path ends at the '/', and its rest is no path of its own
    (r"C:\Users\dana/projects/x.py", [r"C:\Users\dana"])])
def test_paths_found_in_text(text, paths):
    assert find_paths(text) == paths


def test_an_escaped_windows_path_in_a_json_payload_is_scrubbed(sample, tmp_path):
    """An NVTX range's JSON payload written on Windows escapes its backslashes: the scrub
    took the drive for the whole path, kept the rest (the user's home folder) and passed its
    own check."""
    raw = tmp_path / "escaped.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    payload = json.dumps({"file": r"C:\Users\dana\H200 runs\engine.py", "line": 12,
                          "drive": "C:\\Windows", "tmp": "D:\\tmp"})  # two paths kept
    with sqlite3.connect(raw) as c:
        c.execute("UPDATE NVTX_EVENTS SET jsonText = ? WHERE rowid = (SELECT MIN(rowid) FROM "
                  "NVTX_EVENTS WHERE text = 'sample')", (payload,))
    c.close()
    assert ("NVTX_EVENTS", "abs_path") in {(x.table, x.kind) for x in find_leaks(raw)}
    out = tmp_path / "clean.sqlite"
    assert scrub(raw, out).remaining == ()
    with sqlite3.connect(f"file:{out}?mode=ro", uri=True) as c:
        (text,) = c.execute("SELECT jsonText FROM NVTX_EVENTS WHERE jsonText IS NOT NULL "
                            "AND jsonText LIKE '%engine.py%'").fetchone()
    c.close()
    # still JSON: a path kept stays escaped (it lost a backslash, "D:\tmp" read as a tab)
    assert json.loads(text) == {"file": "<path>/engine.py", "line": 12, "drive": "C:\\Windows",
                                "tmp": "D:\\tmp"}


@pytest.mark.parametrize(("name", "text", "scrubbed"), [
    ("alice", "alice_runs exp-alice alice.smith x.alice alicex",
     "X_runs exp-X X.smith x.alice alicex"),
    ("bob", "bob_1 bob_x bob-x bob", "X_1 bob_x bob-x X"),  # a short name: whole words only
    ("corp.example.com", "nfs.corp.example.com corp.example.com.au", "nfs.X corp.example.com.au")])
def test_where_a_user_or_host_name_recurs(name, text, scrubbed):
    assert word_pattern(name).sub("X", text) == scrubbed


def test_the_longest_name_is_replaced_first_users_and_hosts_alike():
    """Users were replaced before hosts: 'alice' ate into the host 'alice-ws.local' ("ssh
    user-ws.local"), and the host's own pattern no longer matched."""
    from nsysscope.scrub.names import users_and_hosts, word_patterns

    users, hosts = users_and_hosts([("EXPORT_USER", "alice"), ("EXPORT_HOST", "alice-ws.local"),
                                    ("PROCESS_0:USER_NAME", "Root")], [], {}, set())
    assert users == {"alice", "Root"} and hosts == {"alice-ws.local", "alice-ws"}
    text = "ssh alice-ws.local as alice, ROOT"
    for rx, rep, _, _ in word_patterns(users, hosts, set())[0]:  # Root is generic: not searched
        text = rx.sub(rep, text)
    assert text == "ssh host as user, ROOT"


NIC_INFO = ('{"Nics":[{"Name":"mlx5_0","Mac":"0c:42:a1:65:b0:d0","NodeGuid":"0c42:a103:0065:b0d0",'
            '"Ipv6":"fe80::0e42:a1ff:fe65:b0d0"}]}')


def test_network_cards_and_binary_payloads_are_scrubbed(sample, tmp_path):
    """What nsys records of a server's network cards (``NicInfo``: MAC addresses, InfiniBand
    GUIDs, the IPv6 link-local address that holds the MAC) and an NVTX range's binary payload
    were never looked at (the sample's ``NicInfo`` is ``{}``, its ``binaryData`` empty): they are
    now, and the analysis of the scrubbed copy is the original's. Text stored as a blob is text
    to the loader: searched as such, kept where clean (a range name the analysis reads) and
    rewritten as text where not (``StringIds.value`` may not be NULL)."""
    raw = tmp_path / "server.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    payload = b"\x00\x01comm 0x7f3a /home/bob/ckpt\xff"
    with sqlite3.connect(raw) as c:
        assert c.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'NicInfo'"
                         ).fetchone() == ("{}",)
        c.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'NicInfo'",
                  (NIC_INFO,))
        row = c.execute("SELECT MIN(rowid) FROM NVTX_EVENTS").fetchone()[0]
        c.execute("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", (payload, row))
        named = c.execute("SELECT MIN(rowid) FROM NVTX_EVENTS WHERE text = 'sample'").fetchone()[0]
        c.execute("UPDATE NVTX_EVENTS SET text = CAST(text AS BLOB) WHERE rowid = ?", (named,))
        # a NOT NULL text column holding a blob with a path in it
        c.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'CpuDescription'",
                  (b"Xeon, model at /home/bob/ckpt.pt",))
    c.close()
    found = {(x.kind, x.table) for x in find_leaks(raw)}
    assert {("machine_id", "TARGET_INFO_SYSTEM_ENV"), ("ip", "TARGET_INFO_SYSTEM_ENV"),
            ("binary", "NVTX_EVENTS")} <= found
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    data = out.read_bytes()
    for leak in (b"0c:42:a1:65:b0:d0", b"0c42:a103:0065:b0d0", b"fe80::", b"/home/bob"):
        assert leak not in data, leak
    assert find_leaks(out) == []
    with connect(out) as c:
        assert c.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'NicInfo'"
                         ).fetchone()[0] == ('{"Nics":[{"Name":"mlx5_0","Mac":"<mac>",'
                                             '"NodeGuid":"<guid>","Ipv6":"<ip>"}]}')
        assert c.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE binaryData IS NOT NULL"
                         ).fetchone() == (0,)
        assert c.execute("SELECT text FROM NVTX_EVENTS WHERE rowid = ?", (named,)
                         ).fetchone() == (b"sample",)
        assert c.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'CpuDescription'"
                         ).fetchone() == ("Xeon, model at <path>/ckpt.pt",)
        assert c.execute("SELECT COUNT(*) FROM NVTX_EVENTS").fetchone()[0] == \
            connect(sample).execute("SELECT COUNT(*) FROM NVTX_EVENTS").fetchone()[0]
    assert analyze(load(out)).summary.to_dict() | {"trace": None} == \
        analyze(load(sample)).summary.to_dict() | {"trace": None}


def test_text_that_is_not_utf8_is_scrubbed_and_kept_byte_for_byte(sample, tmp_path):
    """A text cell that is not UTF-8 (a range named with arbitrary bytes, program output) made
    the whole scrub stop ("Could not decode to UTF-8"), so such a trace could not be shared at
    all. Its leaks now go like any other's; the bytes that are not UTF-8 stay as they were,
    still stored as text, and the analysis of the copy is the original's (the loader reads
    such text with replacement characters)."""
    raw = tmp_path / "bytes.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        sid = c.execute("SELECT MIN(id) FROM StringIds WHERE value LIKE 'cuda%'").fetchone()[0]
        c.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id = ?",
                  (b"log \xff\xfe at /home/bob/run.py", sid))
        # a path whose user name and file name hold such bytes: it stopped at the first one,
        # and the rest of the user name stayed
        other = c.execute("SELECT MIN(id) FROM StringIds WHERE value LIKE 'cuda%' AND id > ?",
                          (sid,)).fetchone()[0]
        c.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE id = ?",
                  (b"/home/b\xffob/\xfe\xferun.py", other))
        rows = [r for (r,) in c.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'sample'")]
        c.execute("UPDATE NVTX_EVENTS SET text = CAST(? AS TEXT) WHERE rowid = ?",
                  (b"sample\x80", rows[0]))
    c.close()
    assert {(x.kind, x.table) for x in find_leaks(raw)} == {("abs_path", "StringIds"),
                                                            ("user", "StringIds")}
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    assert b"/home/bob" not in out.read_bytes() and b"b\xffob" not in out.read_bytes()
    assert find_leaks(out) == []
    with connect(out) as c:
        c.text_factory = bytes
        value, kind = c.execute("SELECT value, typeof(value) FROM StringIds WHERE id = ?",
                                (sid,)).fetchone()
        assert value.startswith(b"log \xff\xfe at ") and value.endswith(b"run.py")
        assert b"bob" not in value and kind == b"text"
        assert c.execute("SELECT value FROM StringIds WHERE id = ?", (other,)
                         ).fetchone()[0].endswith(b"\xfe\xferun.py")
        assert c.execute("SELECT text, typeof(text) FROM NVTX_EVENTS WHERE rowid = ?",
                         (rows[0],)).fetchone() == (b"sample\x80", b"text")
    assert analyze(load(out)).summary.to_dict() | {"trace": None} == \
        analyze(load(raw)).summary.to_dict() | {"trace": None}
    dropped = tmp_path / "dropped.sqlite"
    scrub(raw, dropped, drop_nvtx_text=True, drop_kernel_names=True)
    with connect(dropped) as c:
        c.text_factory = bytes
        assert c.execute("SELECT text FROM NVTX_EVENTS WHERE rowid = ?", (rows[0],)
                         ).fetchone()[0].startswith(b"range_")


@pytest.mark.parametrize("text", [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "cub::DeviceReduce", "std::vector<int>", "c10::Half", "12:34:56", "BusLocation 0000:00:06.0",
    "00:00:00:00:00:00", "0000:0000:0000:0000", "::1", "fe80::1", "a::b", "fa::de::ad",
    "cudnn 9.1.0.70", "trace_24-01-15-10-30-00.json", "layer 10:11:12:13:14:15", "fa::de:ad",
    "add::dead:beef", "step 1::2:3", "x 1:2:3:4:5:6:7:8", "dead:beef:cafe:babe",
    "hash 0x0123456789abcdef", "NVLink P2P 0x0000000000000001 0x00007f1234567890",
    "trace_machine_24-01-15-10-30-00.json", "together 11:22:33:44:55:66", "file.py:12:34",
    "sha 0123456789abcdef0123", "NVLink/P2P 0x00007f1234567890", "ts 1733012345678901 eth0 up",
    '"Speed":200000000000,"RxBytes":1234567890123456,"Mac":"<mac>"',
    "cutlass::gemm::kernel::GemmUniversal", "a1::b2",
    # a version alone, checkpoint and method names beside an '@': not addresses, not e-mails
    "8.6.1.6", "9.1.0.70", "model@best.pt", "/data/ckpt@step.pt", "Optimizer@Adam.step"])
def test_names_times_and_bus_addresses_are_not_network_addresses(text):
    from nsysscope.scrub.secrets import redact_secrets
    assert redact_secrets(text) == (text, ())


@pytest.mark.parametrize(("text", "scrubbed"), [
    ("eth0 AA-BB-CC-DD-EE-FF up", "eth0 <mac> up"),
    ("ib0 guid 0c42:a103:0065:b0d0", "ib0 guid <guid>"),
    ("peer 2001:db8:85a3:0:0:8a2e:370:7334", "peer <ip>"),
    ("fe80::0e42:a1ff:fe65:b0d0%eth0", "<ip>%eth0"),
    ("2001:db8:1234::/48", "<ip>/48"),
    ("mac 10:11:12:13:14:15", "mac <mac>"),
    ("ib0 link/infiniband 80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:65:b0:d0",
     "ib0 link/infiniband <mac>"),
    ("Node GUID: 0x0c42a1030065b0d0", "Node GUID: <guid>"),
    ("[1]eth1:fe80::e42:a1ff:fe65:b0d0%eth1<0>", "[1]eth1:<ip>%eth1<0>"),
    ('{"NodeGuid":"0c42a10300a1b2c3","MacAddress":"0C42A165B0D0"}',
     '{"NodeGuid":"<guid>","MacAddress":"<mac>"}'),
    ("NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>", "NCCL INFO Bootstrap : Using eth0:<ip><0>"),
    ("NET/Socket [1]bond0:192.168.7.4<0>", "NET/Socket [1]bond0:<ip><0>"),
    ("inet 10.1.2.3/24 brd 10.1.2.255", "inet <ip>/24 brd <ip>"),
    ("ib0:fe80::202:c903:31:7b81%ib0<0>", "ib0:<ip>%ib0<0>"),
    ("bond0:2001:db8:1::5<0>", "bond0:<ip><0>")])
def test_network_addresses_anywhere(text, scrubbed):
    from nsysscope.scrub.secrets import redact_secrets
    assert redact_secrets(text)[0] == scrubbed


@pytest.mark.parametrize(("text", "scrubbed"), [
    # each was kept whole: a URL with no user, JSON, a variable's name and a colon, Basic
    ("redis://:hunter2pass@cache.internal:6379", "redis://:<secret>@cache.internal:6379"),
    ('{"api_key": "jsonsecret777"}', '{"api_key": "<secret>"}'),
    ("HF_TOKEN: hfsecret999", "HF_TOKEN: <secret>"),
    ("Authorization: Basic YWxpY2U6aHVudGVyMg==", "Authorization: Basic <secret>"),
    # and what is no secret stays
    ("decode token: 42", "decode token: 42"), ("max_tokens: 128", "max_tokens: 128"),
    ("AUTHOR: bob", "AUTHOR: bob"), ('{"max_tokens": "12"}', '{"max_tokens": "12"}')])
def test_secrets_in_urls_json_and_headers(text, scrubbed):
    from nsysscope.scrub.secrets import redact_secrets
    assert redact_secrets(text)[0] == scrubbed


def test_metadata_stored_as_blobs_is_read_as_text(sample, tmp_path):
    """A META_DATA_* row whose name or value is a blob: the user name in it is searched for
    elsewhere (a blob ``EXPORT_USER`` named nobody), a secret option's value after it is a
    secret, and a blob name no longer stops the scan with a TypeError."""
    raw = tmp_path / "blobs.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_USER'", (b"alice",))
        n = c.execute("SELECT COUNT(*) FROM META_DATA_CAPTURE "
                      "WHERE name LIKE 'PROCESS_0:ARGUMENT_%'").fetchone()[0]
        c.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", [
            (f"PROCESS_0:ARGUMENT_{n}".encode(), b"--hf-token"),
            (f"PROCESS_0:ARGUMENT_{n + 1}", b"abcd1234efgh5678")])
        row = c.execute("SELECT MIN(rowid) FROM NVTX_EVENTS WHERE text = 'sample'").fetchone()[0]
        c.execute("UPDATE NVTX_EVENTS SET text = 'sample by alice' WHERE rowid = ?", (row,))
    c.close()
    assert {"user", "secret"} <= {x.kind for x in find_leaks(raw)}
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    assert b"alice" not in out.read_bytes() and b"abcd1234efgh5678" not in out.read_bytes()
    with connect(out) as c:
        assert c.execute("SELECT text FROM NVTX_EVENTS WHERE rowid = ?", (row,)).fetchone() == \
            ("sample by user",)
        assert c.execute("SELECT value FROM META_DATA_CAPTURE WHERE name = ?",
                         (f"PROCESS_0:ARGUMENT_{n + 1}",)).fetchone() == ("<secret>",)


def test_time_zone_and_private_rows_stored_as_blobs(sample, tmp_path):
    """A local export time, and a kernel string whose name is a blob: read as the text they
    hold (the first stopped the scan with a TypeError, the second was left in the copy)."""
    raw = tmp_path / "tz.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_TIME_LOCAL'",
                  (b"2026-12-01T04:00:00 +0200 CEST",))
        c.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'KernelVersion'")
        c.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, "
                  "value) SELECT globalVid, devStateName, ?, nameEnum, ? FROM "
                  "TARGET_INFO_SYSTEM_ENV LIMIT 1", (b"KernelVersion", "#1 SMP acme-cloud-42"))
    c.close()
    assert {"timezone", "kernel"} <= {x.kind for x in find_leaks(raw)}
    out = tmp_path / "clean.sqlite"
    scrub(raw, out)
    assert b"+0200" not in out.read_bytes() and b"acme-cloud" not in out.read_bytes()


def test_the_command_says_what_its_copy_still_leaks_and_exits_1(raw_like, tmp_path,
                                                                  monkeypatch):
    """scrub scans its own copy again (``ScrubResult.remaining``); the command printed
    'scrubbed copy written' and exit 0 whatever that scan found, so a copy that still leaked
    (two rules on one cell) looked safe to share."""
    from click.testing import CliRunner

    from nsysscope.cli import cli
    from nsysscope.scrub import policy

    real = scrub_write.scrub

    def leaky(*a, **k):
        r = real(*a, **k)
        leak = policy.Leak("TARGET_INFO_SESSION_START_TIME", "localTime", 1, "user", "a…")
        return dataclasses.replace(r, remaining=(leak,))
    monkeypatch.setattr("nsysscope.scrub.scrub", leaky)
    out = tmp_path / "out.sqlite"
    r = CliRunner().invoke(cli, ["scrub", str(raw_like), str(out)])
    assert r.exit_code == 1 and out.exists()
    assert r.stderr.splitlines()[1:] == [
        "TARGET_INFO_SESSION_START_TIME.localTime [user] a…",
        f"nsysscope: error: {out}: 1 potential leaks remain after the scrub (listed above): "
        "do not share it as it is"]
    monkeypatch.setattr("nsysscope.scrub.scrub", real)
    assert CliRunner().invoke(cli, ["scrub", str(raw_like), str(tmp_path / "b.sqlite")]
                              ).exit_code == 0


def test_a_tilde_home_in_a_range_name_is_a_user_name(sample, tmp_path):
    """``~carol/`` in an NVTX range's name (not an absolute path) was neither found nor
    scrubbed: user names came from the export's fields and absolute paths only."""
    raw = tmp_path / "tilde.sqlite"
    shutil.copy(sample, raw)
    raw.chmod(0o644)
    with sqlite3.connect(raw) as c:
        top = c.execute("SELECT MAX(id) FROM StringIds").fetchone()[0]
        c.execute("INSERT INTO StringIds VALUES (?, 'load ~carol/ckpts/run7')", (top + 1,))
        c.execute("UPDATE NVTX_EVENTS SET textId = ?, text = NULL WHERE rowid = (SELECT "
                  "MIN(rowid) FROM NVTX_EVENTS WHERE text = 'sample')", (top + 1,))
    c.close()
    assert ("StringIds", "user", "c…") in {(x.table, x.kind, x.excerpt)
                                           for x in find_leaks(raw)}
    out = tmp_path / "clean.sqlite"
    assert scrub(raw, out).remaining == ()
    with sqlite3.connect(f"file:{out}?mode=ro", uri=True) as c:
        names = {v for (v,) in c.execute("SELECT value FROM StringIds WHERE value LIKE "
                                         "'%ckpts%'")}
    c.close()
    assert names == {"load ~user/ckpts/run7"}


def test_the_stamp_of_a_reports_export_is_not_a_leak_and_is_dropped(tmp_path):
    """nsysscope's export of a .nsys-rep holds a table of its own: the report's size and a
    SHA-256 of its ends (nsysscope.trace.nsys.nsys_rep). ``scrub --check`` listed the hash as a
    binary leak (1 finding on a clean sample); the scrubbed copy drops the table."""
    from nsysscope.trace.nsys.nsys_rep import STAMP_TABLE, stamp

    src = SAMPLES / "h200_case1_300.sqlite.xz"
    out = tmp_path / "run.nsysscope-cache.sqlite"
    with lzma.open(src) as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    stamp(out, (123456, hashlib.sha256(b"report ends").digest()))
    assert find_leaks(out) == []
    clean = tmp_path / "clean.sqlite"
    scrub(out, clean)
    with connect(clean) as c:
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE name = ?",
                         (STAMP_TABLE,)).fetchone()[0] == 0
