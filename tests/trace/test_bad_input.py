"""The bad-input matrix: every kind of bad trace gets one line on stderr, its own exit code, no
traceback, and the input is left as it was (bytes, mode and mtime).

Each case runs ``python -m nsysscope report INPUT`` in a subprocess, as a user would; the
cases run in parallel (one session fixture starts them all) to keep the file fast. The exact
messages are the ones the README's Troubleshooting section lists.

Inputs made from real exports: the case1 H200 sample (schema 3.20.3), cut short, with tables
dropped, extra tables and columns added, or graph replays deleted; and the shared 3.7.2
fixtures (a CPU-only trace, and one where nsys 2023.4 lost the GPU data of a CUDA 13 run).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import synth  # tests/ is on sys.path (pytest rootdir-relative import)
from permissions import NO_DAC

from nsysscope.trace.nsys.nsys_rep import STAMP_TABLE

ACCEPTS = ("nsysscope reads .sqlite, .sqlite.xz, .sqlite.gz, .nsys-rep and torch.profiler JSON "
           "traces")
DATA = Path(__file__).resolve().parents[1] / "data"
CASE1_STEADY = 293  # steady launches of the case1 sample (300 launches, 6 warm-up, 1 last)
CASE1_CALLS = 24393  # rows of the case1 sample's CUDA runtime table


def report(path, *args: str, env: dict | None = None, wrap: list[str] = (), cwd=None,
           timeout: int = 120) -> subprocess.CompletedProcess:
    """``nsysscope report PATH ARGS`` in a subprocess."""
    e = dict(os.environ)
    e.update(env or {})
    e = {k: v for k, v in e.items() if v is not None}
    e.pop("NSYSSCOPE_DEBUG", None)
    return subprocess.run([*wrap, sys.executable, "-m", "nsysscope", "report", str(path), *args],
                          capture_output=True, text=True, env=e, cwd=cwd, timeout=timeout)


def fingerprint(p: Path):
    """What must not change about an input: its bytes, mode and mtime (or its absence)."""
    if not p.exists() and not p.is_symlink():
        return None
    st = p.lstat()
    digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) and \
        os.access(p, os.R_OK) and st.st_mode & 0o444 else None
    return (st.st_size, st.st_mtime_ns, st.st_mode, digest)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, message: str) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stderr == f"nsysscope: error: {message}\n", proc.stderr
    assert proc.stdout == ""


# -- inputs ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def case1_sqlite(sample_path) -> Path:
    """The case1 sample, decompressed once (read-only: tests copy it before changing it)."""
    from nsysscope.trace import resolve
    return resolve(sample_path("case1"))


def copy_of(src: Path, dst: Path, sql: str = "") -> Path:
    shutil.copyfile(src, dst)
    if sql:
        with sqlite3.connect(dst) as c:
            c.executescript(sql)
        c.close()
    return dst


GRAPH_LAUNCHES = ("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON "
                  "s.id = r.nameId WHERE s.value LIKE 'cudaGraphLaunch%' ORDER BY r.start")


def delete_graph_work(corrs_sql: str) -> str:
    return "".join(f"DELETE FROM {t} WHERE graphNodeId IS NOT NULL AND correlationId IN "
                   f"({corrs_sql});" for t in ("CUPTI_ACTIVITY_KIND_KERNEL",
                                               "CUPTI_ACTIVITY_KIND_MEMCPY",
                                               "CUPTI_ACTIVITY_KIND_MEMSET"))


@dataclass
class Case:
    path: Path
    code: int
    message: str | None = None  # the exact line after "nsysscope: error: " (code != 0)
    args: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    wrap: list[str] = field(default_factory=list)
    check: Callable[[dict], None] | None = None  # on the JSON summary (code 0)
    skip: str | None = None


def _no_dac_works() -> str | None:
    """Why a non-root-like run is impossible here, or None. As root, permissions are not
    enforced (CAP_DAC_OVERRIDE); dropping that capability makes root obey them."""
    if os.geteuid() != 0:
        return None
    if not shutil.which("setpriv"):
        return "running as root and setpriv is missing: cannot make a file unreadable to root"
    try:
        ok = subprocess.run([*NO_DAC, "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    return None if ok else "running as root and setpriv cannot drop CAP_DAC_OVERRIDE here"


def build_cases(d: Path, case1: Path) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    rng = random.Random(7)

    def add(name: str, case: Case) -> None:
        cases[name] = case

    # -- files --
    p = d / "missing.sqlite"
    add("missing", Case(p, 2, f"{p}: no such file"))
    p = d / "empty.sqlite"
    p.write_bytes(b"")
    add("empty", Case(p, 2, f"{p}: empty file"))
    p = d / "random.sqlite"
    p.write_bytes(bytes(rng.randrange(256) for _ in range(20_000)))
    add("random_bytes", Case(p, 2, f"{p}: not an SQLite file ({ACCEPTS})"))
    p = d / "notes.txt"
    p.write_text("just some text\n")
    add("text_file", Case(p, 2, f"{p}: not an SQLite file ({ACCEPTS})"))
    p = d / "foreign.sqlite"
    with sqlite3.connect(p) as c:
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users VALUES (1, 'ada')")
    c.close()
    add("not_an_nsys_export", Case(p, 5, f"{p}: SQLite, but not an nsys export (no "
                                         "META_DATA_EXPORT or EXPORT_META_DATA table); make one "
                                         "with: nsys export --type sqlite REPORT.nsys-rep"))
    size = case1.stat().st_size
    p = d / "truncated.sqlite"
    p.write_bytes(case1.read_bytes()[: size // 2])
    add("truncated_export", Case(p, 5, f"{p}: truncated export ({size // 2} of {size} bytes); "
                                       "copy or export it again"))
    p = d / "header_only.sqlite"
    p.write_bytes(case1.read_bytes()[:60])
    add("truncated_in_header", Case(p, 5, f"{p}: truncated export (only 60 bytes, shorter than an "
                                          "SQLite header); copy or export it again"))
    raw = case1.read_bytes()
    xz = lzma.compress(raw, preset=0)
    p = d / "cut.sqlite.xz"
    p.write_bytes(xz[: len(xz) // 2])
    # a cut compressed file is a truncated export, refused with its code (it was 2, the
    # uncompressed file 5: issue 55, item 12)
    add("truncated_xz", Case(p, 5, f"{p}: truncated compressed file (it ends before its "
                                   "end-of-stream marker); copy or export it again"))
    p = d / "flipped.sqlite.xz"
    bad = bytearray(xz)
    for i in range(200, len(bad), 997):
        bad[i] ^= 0x5A
    p.write_bytes(bytes(bad))
    add("corrupt_xz", Case(p, 2, f"{p}: corrupt compressed file (Corrupt input data)"))
    p = d / "renamed.sqlite.xz"
    p.write_bytes(b"PK\x03\x04" + bytes(rng.randrange(256) for _ in range(4096)))  # a zip
    add("xz_name_not_xz", Case(p, 2, f"{p}: corrupt compressed file (named .xz, but it does not "
                                     "start like xz data)"))
    gz = gzip.compress(raw[: 2 << 20], compresslevel=1)
    p = d / "cut.sqlite.gz"
    p.write_bytes(gz[: len(gz) // 2])
    add("truncated_gz", Case(p, 5, f"{p}: truncated compressed file (it ends before its "
                                   "end-of-stream marker); copy or export it again"))
    p = d / "crc.sqlite.gz"
    p.write_bytes(gz[:-8] + bytes(8))
    add("corrupt_gz", Case(p, 2, f"{p}: corrupt compressed file (CRC check failed "
                                 f"0x0 != {gzip.zlib.crc32(raw[: 2 << 20]):#x})"))
    p = d / "text.sqlite.gz"
    p.write_bytes(gzip.compress(b"hello, not a database\n"))
    add("gz_of_text", Case(p, 2, f"{p}: decompresses, but not to an SQLite file ({ACCEPTS})"))
    p = d / "a_directory.sqlite"
    p.mkdir()
    # report takes folders of traces (one per rank): an empty one is an error
    add("directory", Case(p, 2, f"{p}: no trace files in this folder (by name: .sqlite, "
                                ".sqlite.xz, .sqlite.gz, .nsys-rep, .qdrep, .trace.json, "
                                ".trace.json.gz, .trace.json.xz; or by content)"))
    add("device_file", Case(Path("/dev/null"), 2, f"/dev/null: not a regular file ({ACCEPTS})"))
    p = d / "capture.qdstrm"
    p.write_bytes(b"QDSTRM\x00" + bytes(64))
    add("qdstrm", Case(p, 2, f"{p}: a .qdstrm is a raw capture nsys never turned into a report; "
                             "convert it with 'QdstrmImporter -i FILE.qdstrm' (in nsys's "
                             "host-linux-x64 folder) and pass the .nsys-rep"))
    p = d / "unreadable.sqlite"
    shutil.copyfile(case1, p)
    p.chmod(0)
    why = _no_dac_works()
    add("no_read_permission", Case(p, 2, f"{p}: permission denied", skip=why,
                                   wrap=NO_DAC if os.geteuid() == 0 else []))
    p = d / "ok.sqlite.xz"
    p.write_bytes(xz)
    blocker = d / "a_file_not_a_folder"
    blocker.write_text("x")
    add("cache_folder_unwritable", Case(p, 2, f"cannot create the cache folder "
                                              f"{blocker / 'cache'}: Not a directory (set "
                                              "NSYSSCOPE_CACHE to a writable folder)",
                                        env={"NSYSSCOPE_CACHE": str(blocker / "cache")}))
    odd = d / "odd names #1 ?x=%41&y"
    odd.mkdir()
    p = odd / "trace #2 ?%20.sqlite"
    shutil.copyfile(case1, p)
    add("odd_characters_in_path", Case(p, 0, args=("--format", "json"),
                                       check=lambda s: s["classes"]["gpu_to_cpu"] == CASE1_STEADY))

    # -- traces --
    # real nsys 2023.4 exports (tests/data/README.md)
    cpu = DATA / "nsys2023.4_cpu_only_osrt.sqlite.xz"
    add("cpu_only_export", Case(cpu, 3, f"{cpu}: no CUDA data in this trace (was it captured "
                                        "with -t cuda, and does the program use the GPU?)"))
    partial = DATA / "nsys2023.4_cuda13_partial.sqlite.xz"
    add("profiler_lost_gpu_data", Case(partial, 7, (
        f"{partial}: CUDA tracing stops 3.16 s into the capture, yet 599 of 599 NVTX ranges "
        "follow with no CUDA activity: the profiler (nsys 2023.4.4.54) lost the GPU data. "
        "Profile again with an nsys that supports this CUDA version.")))
    s = synth.Synth()
    pr = s.process(4242)
    pr.at(1_000_000_000)
    for _ in range(20):
        pr.kernel(synth.gtid(4242, 100), 7, 50_000, 5_000, 1_000)
    s.add("DIAGNOSTIC_EVENT", timestamp=5, timestampType=1, source=1, severity=2,
          text="CUPTI buffers overflowed: 48211 CUDA activity records were lost",
          globalPid=synth.gpid(4242))
    p = s.write(d / "diagnostic_lost.sqlite")
    add("diagnostic_says_lost", Case(p, 7, f"{p}: the profiler reports lost data: CUPTI buffers "
                                           "overflowed: 48211 CUDA activity records were lost"))
    p = copy_of(case1, d / "no_graphs.sqlite", f"DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "
                f"correlationId IN ({GRAPH_LAUNCHES});")
    add("no_graph_launches", Case(p, 3, None))  # message checked in its own test
    p = copy_of(case1, d / "some_replays_missing.sqlite",
                delete_graph_work(f"{GRAPH_LAUNCHES} LIMIT 10 OFFSET 100"))

    def some_missing(s: dict) -> None:
        assert "10 of 300 graph launches have no GPU work in the trace (profiler buffer loss, or " \
               "capture stopped mid-replay); they are excluded" in s["notes"]
        # left out of the steady state: every launch that is judged still stalls
        assert s["steady_launches"] == s["classes"]["gpu_to_cpu"] == CASE1_STEADY - 10
        assert s["classes"]["no_gpu_work"] == 0 and s["overlap_ok"] is False
    add("some_replays_missing", Case(p, 0, args=("--format", "json"), check=some_missing))
    p = copy_of(case1, d / "all_replays_missing.sqlite", delete_graph_work(GRAPH_LAUNCHES))
    add("all_replays_missing", Case(p, 7, (
        f"{p}: none of the 300 graph launches has GPU work in the trace: the profiler lost the "
        "GPU activity, or kernels were not traced; profile again with -t cuda "
        "--cuda-graph-trace=node")))

    # -- schema drift --
    def classic_case1(s: dict) -> None:
        assert s["classes"]["gpu_to_cpu"] == CASE1_STEADY, s["classes"]
        assert s["sites"][0]["api_chain"] == "cudaMemcpyAsync DtoH 1 B \u2192 cudaStreamSynchronize"
    add("case1_reference", Case(case1, 0, args=("--format", "json"), check=classic_case1))
    grown = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
             "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
             "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "NVTX_EVENTS", "StringIds", "META_DATA_EXPORT",
             "ENUM_CUDA_MEM_KIND")
    extra = "".join(f"ALTER TABLE {t} ADD COLUMN futureColumn{i} INTEGER DEFAULT 42;"
                    for i, t in enumerate(grown))
    extra += ("CREATE TABLE CUPTI_ACTIVITY_KIND_FUTURE (start INTEGER, end INTEGER, payload BLOB);"
              "INSERT INTO CUPTI_ACTIVITY_KIND_FUTURE VALUES (1, 2, x'00ff');"
              "CREATE TABLE ENUM_SOMETHING_NEW (id INTEGER PRIMARY KEY, name TEXT);"
              "INSERT INTO META_DATA_EXPORT (name, value) VALUES ('EXPORT_FUTURE_FIELD', 'x');")
    p = copy_of(case1, d / "extra_tables_and_columns.sqlite", extra)
    add("unknown_tables_and_columns", Case(p, 0, args=("--format", "json"), check=classic_case1))
    # the kernels without globalPid, the copies and memsets with it: each replay was two
    # groups, one per table, and every launch was counted twice (600 launches, "2 graph
    # launches per step")
    p = copy_of(case1, d / "kernels_without_pid.sqlite",
                "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN globalPid;")

    def once_each(s: dict) -> None:
        classic_case1(s)
        assert s["launches"] == 300 and s["steady_launches"] == CASE1_STEADY
    add("kernels_without_pid", Case(p, 0, args=("--format", "json"), check=once_each))
    p = copy_of(case1, d / "schema4.sqlite",
                "UPDATE META_DATA_EXPORT SET value = '4.0.1' WHERE name = "
                "'EXPORT_SCHEMA_VERSION'; UPDATE META_DATA_EXPORT SET value = '4' WHERE name = "
                "'EXPORT_SCHEMA_VERSION_MAJOR';")
    add("unknown_schema_major", Case(p, 5, f"{p}: export schema 4.0.1 (nsys 2025.3.2.0) is not "
                                           "supported; nsysscope reads schema 2.x and 3.x "
                                           "(tested: 2.9.1, 3.7.2, 3.20.3, 3.25.0)"))
    # schema 2.x (nsys 2021.x-2022.x) as the public 2.9.1 exports of nsys 2022.1.1 and
    # 2022.2.1 have it (tests/data/external): the metadata table is EXPORT_META_DATA, and
    # SYNCHRONIZATION and CUDA_EVENT have eventId, no eventSyncId; without PROCESSES and the
    # GPU tables' globalPid too, as the oldest exports are (thread ids only). It was "SQLite,
    # but not an nsys export"; it reads as the export it came from, paired by timing
    gpu_tables = ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "CUDA_EVENT")
    p = copy_of(case1, d / "schema2.sqlite",
                "ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA;"
                "UPDATE EXPORT_META_DATA SET value = '2.9.1' WHERE name = "
                "'EXPORT_SCHEMA_VERSION'; UPDATE EXPORT_META_DATA SET value = '2' WHERE name = "
                "'EXPORT_SCHEMA_VERSION_MAJOR'; UPDATE EXPORT_META_DATA SET value = '2022.2.1.31' "
                "WHERE name = 'EXPORT_PRODUCT_VERSION';"
                "ALTER TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION DROP COLUMN eventSyncId;"
                "ALTER TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT DROP COLUMN eventSyncId;"
                "DROP TABLE PROCESSES;" + "".join(
                    f"ALTER TABLE CUPTI_ACTIVITY_KIND_{t} DROP COLUMN globalPid;"
                    for t in gpu_tables))

    def as_schema2(s: dict) -> None:
        classic_case1(s)
        assert (s["trace"]["schema_version"], s["trace"]["nsys_version"]) == \
            ("2.9.1", "2022.2.1.31")
        assert any(n.startswith("no sync-to-event records in this export") for n in s["notes"])
    add("schema2_export", Case(p, 0, args=("--format", "json"), check=as_schema2))
    # no metadata table at all: an older export (TARGET_INFO_CUDA_GPU: nsys 2021.1 or older),
    # or one that lost it; it was "SQLite, but not an nsys export", with no word of what to do
    redo = ("nsysscope cannot tell its schema; export its report again with nsys 2022.1 or "
            "newer: nsys export --type sqlite REPORT.nsys-rep (or .qdrep)")
    p = copy_of(case1, d / "unversioned.sqlite",
                "DROP TABLE META_DATA_EXPORT; CREATE TABLE TARGET_INFO_CUDA_GPU (vmId INT, name "
                "TEXT, deviceId INT);")
    add("unversioned_export", Case(p, 5, f"{p}: an export of nsys 2021.1 or older "
                                         f"(TARGET_INFO_CUDA_GPU, and no metadata table): {redo}"))
    p = copy_of(case1, d / "metadata_dropped.sqlite", "DROP TABLE META_DATA_EXPORT;")
    add("metadata_dropped", Case(p, 5, f"{p}: an nsys export without its metadata table "
                                       f"(META_DATA_EXPORT or EXPORT_META_DATA): {redo}"))
    no_sync = ("no sync-to-event records in this export (needs nsys >= 2024 with "
               "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.eventSyncId and CUDA_EVENT): event waits were "
               "matched to launches by timing alone")
    no_nvtx = ("no NVTX ranges: stalls cannot be attributed to loop phases; add torch.cuda.nvtx "
               "ranges around schedule/launch/sample/post")
    for name, tables, notes in (
            ("without_SYNCHRONIZATION", ["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"], [no_sync]),
            ("without_CUDA_EVENT", ["CUPTI_ACTIVITY_KIND_CUDA_EVENT"], [no_sync]),
            ("without_NVTX_EVENTS", ["NVTX_EVENTS"], [no_nvtx]),
            ("without_all_three", ["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                   "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "NVTX_EVENTS"],
             [no_sync, no_nvtx])):
        p = copy_of(case1, d / f"{name}.sqlite", "".join(f"DROP TABLE {t};" for t in tables))

        def degraded(s: dict, notes=notes, nvtx="NVTX_EVENTS" not in tables) -> None:
            assert s["classes"]["gpu_to_cpu"] == CASE1_STEADY, s["classes"]
            for note in notes:
                assert note in s["notes"], s["notes"]
            if nvtx:
                assert s["sites"][0]["phase"] == "sample"
            else:
                assert s["sites"][0]["phase"] is None
                # it said "attributed to NVTX phase and op only" above "no NVTX ranges"
                assert not [n for n in s["notes"] if "NVTX phase" in n], s["notes"]
                assert any("attributed to their CUDA calls only" in n for n in s["notes"])
        add(f"case1_{name}", Case(p, 0, args=("--format", "json"), check=degraded))
    # damage or drift in places the analysis reads around: each was an internal error (70)
    p = copy_of(case1, d / "schema_not_utf8.sqlite",
                "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = replace(sql, "
                "'busLocation', '''' || CAST(X'C0' AS TEXT)) WHERE name = 'TARGET_INFO_GPU';")
    add("schema_text_not_utf8", Case(p, 5, f"{p}: corrupt export: text that is not UTF-8 "
                                           "('utf-8' codec can't decode byte 0xc0 in position "
                                           "68: invalid start byte)"))
    def still_case1(s: dict) -> None:
        assert s["classes"]["gpu_to_cpu"] == CASE1_STEADY, s["classes"]

    def gpu_unknown(s: dict) -> None:
        still_case1(s)
        assert s["trace"]["gpus"] == []

    for column in ("text", "textId"):  # NVTX text inline or interned only: COALESCE(x) failed
        p = copy_of(case1, d / f"nvtx_without_{column}.sqlite",
                    f"ALTER TABLE NVTX_EVENTS DROP COLUMN {column};")
        add(f"nvtx_without_{column}", Case(p, 0, args=("--format", "json"), check=still_case1))
    p = copy_of(case1, d / "gpu_name_null.sqlite", "UPDATE TARGET_INFO_GPU SET name = NULL;")
    add("gpu_name_null", Case(p, 0, args=("--format", "json"), check=gpu_unknown))
    p = copy_of(case1, d / "export_meta_null.sqlite", "UPDATE META_DATA_EXPORT SET value = NULL;")
    add("export_meta_null", Case(p, 5, f"{p}: export schema unknown (nsys unknown) is not "
                                       "supported; nsysscope reads schema 2.x and 3.x (tested: "
                                       "2.9.1, 3.7.2, 3.20.3, 3.25.0)"))
    p = copy_of(case1, d / "enum_names_null.sqlite", "UPDATE ENUM_CUDA_MEM_KIND SET name = NULL;")
    add("enum_names_null", Case(p, 0, args=("--format", "json"), check=still_case1))
    p = copy_of(case1, d / "renamed_end.sqlite",
                'ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME COLUMN "end" TO "finish";')
    add("runtime_without_end", Case(p, 5, f"{p}: CUPTI_ACTIVITY_KIND_RUNTIME has no column end: "
                                          "an export schema nsysscope does not know (3.20.3, "
                                          "nsys 2025.3.2.0; tested: 2.9.1, 3.7.2, 3.20.3, 3.25.0)"))
    # a leaf of NVTX_EVENTS damaged (64 bytes a fuzzer wrote) where only the Python samples'
    # read decodes it (their payload columns): it was an internal error, exit 70
    p = copy_of(case1, d / "nvtx_payload_damaged.sqlite")
    with p.open("r+b") as f:
        f.seek(6_982_299)
        f.write(bytes.fromhex("56b6fbd73e6ac46891370c3c06974526bf9fdfb6a5003fe2e6b39cccadfc39c1"
                              "c368018e65ecd19c57e665b801c7dacfac22fc7e940ad04fcb8a5b2505b287d2"))
    add("nvtx_payload_damaged", Case(p, 5, f"{p}: truncated or corrupt export (database disk "
                                           "image is malformed)"))
    # the string table emptied: every CUDA call's nameId names nothing, and the loader, which
    # finds calls by their names' ids, read "0 CUDA calls", no graph launches (exit 3); in a
    # time range, "the capture has none anywhere" (exit 3)
    p = copy_of(case1, d / "strings_emptied.sqlite", "DELETE FROM StringIds;")
    lost = (f"{p}: corrupt export: {CASE1_CALLS} of {CASE1_CALLS} CUDA calls name a string "
            "StringIds lacks (their names are lost); copy or export it again")
    add("strings_emptied", Case(p, 5, lost))
    add("strings_emptied_in_a_range", Case(p, 5, lost, args=("--from", "1", "--to", "2")))
    p = d / "deep.pt.trace.json"
    p.write_text('{"traceEvents":' + "[" * 100_000 + "]" * 100_000 + "}")
    add("kineto_nested_too_deeply", Case(p, 5, f"{p}: corrupt torch.profiler trace: a value at "
                                               "character 16 is nested too deeply to be an "
                                               "event"))
    # an older export schema (nsys 2023.4): the real 3.7.2 DDL, a case1-like loop
    s = synth.Synth()
    synth.decode_loop(s.process(4242), [synth.Step("gpu_to_cpu") for _ in range(30)])
    p = s.write(d / "schema_3_7_2_case1_like.sqlite", schema="3.7.2")

    def old_schema(s: dict) -> None:
        assert s["trace"]["schema_version"] == "3.7.2"
        assert s["classes"]["gpu_to_cpu"] == s["steady_launches"] == 24, s["classes"]
        assert no_sync in s["notes"]
    add("schema_3_7_2", Case(p, 0, args=("--format", "json"), check=old_schema))
    return cases


CASES = [
    "missing", "empty", "random_bytes", "text_file", "not_an_nsys_export", "truncated_export",
    "truncated_in_header", "truncated_xz", "corrupt_xz", "xz_name_not_xz", "truncated_gz",
    "corrupt_gz", "gz_of_text", "directory", "device_file", "qdstrm", "no_read_permission",
    "cache_folder_unwritable", "odd_characters_in_path", "cpu_only_export",
    "profiler_lost_gpu_data", "diagnostic_says_lost", "no_graph_launches", "some_replays_missing",
    "all_replays_missing", "case1_reference", "unknown_tables_and_columns", "unknown_schema_major",
    "case1_without_SYNCHRONIZATION", "case1_without_CUDA_EVENT", "case1_without_NVTX_EVENTS",
    "case1_without_all_three", "schema_3_7_2", "schema_text_not_utf8", "nvtx_without_text",
    "nvtx_without_textId", "gpu_name_null", "export_meta_null", "enum_names_null",
    "kineto_nested_too_deeply", "runtime_without_end", "nvtx_payload_damaged",
    "kernels_without_pid", "strings_emptied", "strings_emptied_in_a_range", "schema2_export",
    "unversioned_export", "metadata_dropped",
]


@pytest.fixture(scope="session")
def matrix(tmp_path_factory, case1_sqlite):
    """Every case built, then run at once: ``{name: (case, before, proc, after)}``."""
    d = tmp_path_factory.mktemp("bad-input")
    cases = build_cases(d, case1_sqlite)
    assert set(cases) == set(CASES)
    cwd = tmp_path_factory.mktemp("cwd")

    def run(name: str):
        c = cases[name]
        before = fingerprint(c.path)
        proc = report(c.path, *c.args, env=c.env, wrap=c.wrap, cwd=cwd)
        return name, (c, before, proc, fingerprint(c.path))

    todo = [n for n in cases if not cases[n].skip]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        results = dict(pool.map(run, todo))
    for n in cases:
        if cases[n].skip:
            results[n] = (cases[n], None, None, None)
    return results


@pytest.mark.parametrize("name", CASES)
def test_bad_input(matrix, name):
    case, before, proc, after = matrix[name]
    if case.skip:
        pytest.skip(case.skip)
    assert after == before, "the input was modified"
    assert "Traceback" not in proc.stderr + proc.stdout
    if case.code == 0:
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr
        case.check(json.loads(proc.stdout))
    elif case.message is not None:
        assert_one_line_error(proc, case.code, case.message)
    else:
        assert proc.returncode == case.code and proc.stderr.count("\n") == 1, proc.stderr


def test_a_table_whose_read_ends_early_is_called_damaged(sample_path, tmp_path):
    """64 bytes a fuzzer wrote into a page of the healthy sample's CUDA calls: SQLite's scan
    of the table then ends after 75 of its 23,190 rows, with no error, and the run said "no
    CUDA graph launches" (exit 3) of a damaged file."""
    from nsysscope.trace import resolve
    p = copy_of(resolve(sample_path("healthy")), tmp_path / "healthy.sqlite")
    with p.open("r+b") as f:
        f.seek(645_139)
        f.write(bytes.fromhex("4f6cbd2dd417b5f5314f736fe07e33f70d7714947ff4b05a3a37b088990f9353"
                              "f1f6818e0bd7bf8ac5f4323fdccac597a514652f01b93811c37441c945f3ef37"))
    before = fingerprint(p)
    assert_one_line_error(report(p), 5, f"{p}: corrupt export (SQLite's check: On tree page 158 "
                                        "cell 53: Rowid 30580688651 out of order)")
    assert fingerprint(p) == before


def test_no_graph_launches_message(matrix):
    case, _, proc, _ = matrix["no_graph_launches"]
    assert proc.returncode == 3
    assert proc.stderr.startswith(f"nsysscope: error: {case.path}: no CUDA graph launches (")
    assert proc.stderr.endswith(" CUDA calls); nsysscope analyses engines that replay CUDA "
                                "graphs\n")


def test_exit_codes_are_distinct_per_kind_of_failure(matrix):
    """Files that cannot be read: 2; nothing to analyse: 3; not an export nsysscope reads: 5;
    the profiler lost the data: 7."""
    by_code: dict[int, set[str]] = {}
    for name, (_case, _, proc, _) in matrix.items():
        if proc is not None:
            by_code.setdefault(proc.returncode, set()).add(name)
    assert {"truncated_export", "not_an_nsys_export", "unknown_schema_major",
            "strings_emptied"} <= by_code[5]
    assert {"missing", "empty", "random_bytes", "directory", "corrupt_xz",
            "corrupt_gz"} <= by_code[2]
    assert {"cpu_only_export", "no_graph_launches"} <= by_code[3]
    assert {"profiler_lost_gpu_data", "diagnostic_says_lost", "all_replays_missing"} <= by_code[7]
    assert 70 not in by_code, by_code.get(70)


def test_two_processes_decompress_one_xz_without_a_torn_cache(sample_path, tmp_path):
    """Two runs at once on the same .xz, with an empty cache: both read a complete file, and
    the cache holds one complete export and no temporary files."""
    cache = tmp_path / "cache"
    src = sample_path("case1")
    before = fingerprint(src)
    env = dict(os.environ, NSYSSCOPE_CACHE=str(cache))
    cmd = [sys.executable, "-m", "nsysscope", "report", str(src), "--format", "json"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    assert outs[0][0] == outs[1][0]
    assert json.loads(outs[0][0])["classes"]["gpu_to_cpu"] == CASE1_STEADY
    files = sorted(cache.iterdir())
    assert [f.suffix for f in files] == [".sqlite"], files
    # the decompressed export, whole, and the stamp of what it was made from (issue 52)
    whole = lzma.decompress(src.read_bytes())
    with sqlite3.connect(files[0]) as c:
        assert c.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert c.execute(f"SELECT count(*) FROM {STAMP_TABLE}").fetchone() == (1,)
    assert files[0].stat().st_size >= len(whole)
    assert fingerprint(src) == before


def test_a_compressed_trace_replaced_keeping_size_and_time_is_decompressed_again(
        sample_path, tmp_path):
    """The cached copy of a compressed trace was named by the trace's path, size and time:
    another capture copied over it with the first one's size and time (``cp -p`` of a file
    padded as gzip allows, ``touch -r``) was analysed as the first, from the old copy. Its
    first and last 64 KiB now name the copy too."""
    cache, trace = tmp_path / "cache", tmp_path / "run.sqlite.gz"
    case1, healthy = (gzip.compress(lzma.decompress(sample_path(name).read_bytes()),
                                    compresslevel=1) for name in ("case1", "healthy"))
    size = max(len(case1), len(healthy))
    case1, healthy = case1.ljust(size, b"\0"), healthy.ljust(size, b"\0")  # gzip's padding
    env = {"NSYSSCOPE_CACHE": str(cache)}
    trace.write_bytes(case1)
    r = report(trace, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["classes"]["gpu_to_cpu"] == CASE1_STEADY
    stamp = trace.stat().st_mtime_ns
    trace.write_bytes(healthy)
    os.utime(trace, ns=(stamp, stamp))
    r = report(trace, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["classes"]["gpu_to_cpu"] == 0  # the healthy capture's
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_cache_entry_is_made_again_not_blamed_on_the_trace(sample_path, tmp_path):
    """A cached copy cut short (a full disk, a crash) or overwritten made every later run say
    that the intact .xz was a truncated export (exit 5), until the cache was cleared by hand.
    It is now decompressed again, with a note. So is one damaged inside, whole to its header
    (zeroed pages, a bad sector): found only when read, it was blamed on the trace by every
    run until `nsysscope cache clear`."""
    cache = tmp_path / "cache"
    src = sample_path("case1")
    env = {"NSYSSCOPE_CACHE": str(cache)}
    assert report(src, env=env).returncode == 0
    (entry,) = cache.iterdir()
    whole = entry.read_bytes()
    quarter = len(whole) // 4
    zeroed = whole[:quarter] + bytes(2 * quarter) + whole[3 * quarter:]
    for damage, how in ((whole[:100_000], "decompressing"), (b"not SQLite at all", "decompressing"),
                        (zeroed, "making")):
        entry.write_bytes(damage)
        r = report(src, "--format", "json", env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["classes"]["gpu_to_cpu"] == CASE1_STEADY
        assert r.stderr == (f"nsysscope: note: the cached copy of {src.name} ({entry}) was "
                            f"damaged: {how} it again\n")
        assert entry.read_bytes() == whole


def test_a_damaged_export_of_a_report_is_never_deleted(tmp_path, monkeypatch):
    """The retry above deleted any damaged ``*.nsysscope-cache.sqlite``, the export saved
    beside a .nsys-rep too, which only nsys can make again (it may be missing here): such
    damage is reported, the file kept."""
    from nsysscope.errors import DamagedExport
    from nsysscope.trace.nsys import sources

    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report" + bytes(100))
    export = tmp_path / "r.nsysscope-cache.sqlite"
    export.write_bytes(b"SQLite format 3\x00" + bytes(100))
    monkeypatch.setattr(sources, "resolve", lambda path, nsys=None: export)
    reads = []

    def read(db: Path) -> None:
        reads.append(db)
        raise DamagedExport(f"{rep}: truncated or corrupt export (database disk image is "
                            "malformed)")

    with pytest.raises(DamagedExport, match="database disk image is malformed"):
        sources.read_resolved(rep, None, read)
    assert reads == [export] and export.exists()


def test_a_trace_is_opened_read_only(case1_sqlite, tmp_path):
    """Even a writable trace in a writable folder: no journal, no WAL, not a byte changed."""
    p = copy_of(case1_sqlite, tmp_path / "trace.sqlite")
    before = fingerprint(p)
    proc = report(p, "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert fingerprint(p) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.sqlite"]


def test_unreadable_file_is_refused_by_the_loader(case1_sqlite, tmp_path):
    """Readability is checked by opening the file (``os.access`` says yes to root)."""
    why = _no_dac_works()
    if why:
        pytest.skip(why)
    p = tmp_path / "locked.sqlite"
    shutil.copyfile(case1_sqlite, p)
    p.chmod(0)
    code = ("from nsysscope.trace import load\n"
            "from nsysscope.errors import NsysscopeError\n"
            f"try:\n    load(r'{p}')\n"
            "except NsysscopeError as e:\n    print(e.exit_code, e)\n")
    proc = subprocess.run([*(NO_DAC if os.geteuid() == 0 else []), sys.executable, "-c", code],
                          capture_output=True, text=True)
    assert proc.stdout == f"2 {p}: permission denied\n", proc.stdout + proc.stderr
