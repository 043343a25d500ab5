"""Fuzz the loader with damaged copies of a real export: cut short, zero-filled, bit-flipped.

Every variant must either be analysed or refused with a typed :class:`NsysscopeError` (exit
2, 3, 5 or 7): never another exception, which the CLI would report as an internal error
(exit 70). The variants are deterministic (fixed seeds) and made from the case1 H200 sample.
All of them run in-process (fast); a few also through the CLI, to check for one clean line
and no traceback end to end.

Random bit flips mostly land where SQLite notices them ("database disk image is malformed").
The flips it cannot notice change a value, or a value's type (a flipped serial-type byte
turns an integer into NULL, text or a blob, whatever the column's declared type): the
``value_*`` variants plant those directly, in every column the loader reads.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import struct

import pytest
from test_bad_input import case1_sqlite, fingerprint, report  # noqa: F401  (fixture)

from nsysscope import analyze, load
from nsysscope.errors import NsysscopeError

TYPED_EXIT = {2, 3, 5, 7}


def _set_page_count(data: bytearray, size: int) -> None:
    """Make the header agree with a cut: its page count is what the file now holds."""
    page = struct.unpack(">H", data[16:18])[0]
    page = 65536 if page == 1 else page
    data[28:32] = struct.pack(">I", size // page)


def variants(src: bytes) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    n = len(src)
    page = struct.unpack(">H", src[16:18])[0]
    for frac in (0.0001, 0.01, 0.1, 0.33, 0.5, 0.9, 0.999):
        cut = int(n * frac)
        out[f"cut_{frac}"] = src[:cut]
        fixed = bytearray(src[:cut - cut % page or page])
        _set_page_count(fixed, len(fixed))
        out[f"cut_{frac}_header_fixed"] = bytes(fixed)
    for frac in (0.05, 0.5, 0.95):  # the tail never written: zeros
        keep = int(n * frac)
        out[f"zero_tail_{frac}"] = src[:keep] + bytes(n - keep)
    rng = random.Random(20251129)
    for flips in (1, 4, 16, 64, 256, 2048):
        for k in range(2):
            data = bytearray(src)
            for _ in range(flips):
                i = rng.randrange(100, n)  # past the header: the header check is tested elsewhere
                data[i] ^= 1 << rng.randrange(8)
            out[f"flip_{flips}_{k}"] = bytes(data)
    # damage where the schema lives: the first pages
    for k in range(4):
        data = bytearray(src)
        for _ in range(32):
            i = rng.randrange(100, 4 * page)
            data[i] = rng.randrange(256)
        out[f"schema_pages_{k}"] = bytes(data)
    # a page of garbage in the middle of the data
    data = bytearray(src)
    start = (n // 2) // page * page
    data[start:start + page] = bytes(rng.randrange(256) for _ in range(page))
    out["garbage_page"] = bytes(data)
    return out


@pytest.fixture(scope="module")
def fuzzed(case1_sqlite, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("fuzz")
    src = case1_sqlite.read_bytes()
    paths = {}
    for name, data in variants(src).items():
        p = d / f"{name}.sqlite"
        p.write_bytes(data)
        paths[name] = p
    return paths


def _names() -> list[str]:
    """The variant names (for test ids), from a stand-in of the sample's page size."""
    fake = bytearray(64 * 4096)
    fake[16:18] = struct.pack(">H", 4096)
    return list(variants(bytes(fake)).keys())


@pytest.mark.parametrize("name", _names())
def test_damaged_export_is_analysed_or_refused_cleanly(fuzzed, name):
    p = fuzzed[name]
    before = fingerprint(p)
    try:
        a = analyze(load(p))
    except NsysscopeError as e:
        assert e.exit_code in TYPED_EXIT, (type(e).__name__, e)
        assert "\n" not in str(e) and str(e).startswith(f"{p}: "), str(e)
    else:
        assert a.summary.launches >= 0
    assert fingerprint(p) == before


# (table, column, value): what a flip the SQLite page checks cannot see leaves in a row
VALUES = [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start", "NULL"), ("CUPTI_ACTIVITY_KIND_RUNTIME", "end", "'x'"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", "x'00ff'"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", "NULL"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", "-1"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "start", str(2**62)),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "end", "NULL"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "correlationId", "1.5"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "streamId", "'7'"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "graphNodeId", "NULL"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "copyKind", "x'02'"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "bytes", "-1"),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "eventSyncId", "'garbage'"),
    ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "streamId", "NULL"),
    ("NVTX_EVENTS", "end", "-" + str(2**62)), ("NVTX_EVENTS", "text", "x'00ff'"),
    ("StringIds", "value", "x'00ff'"), ("StringIds", "value", "CAST(x'70797468ff6e' AS TEXT)"),
    ("ThreadNames", "globalTid", "NULL"), ("META_DATA_EXPORT", "value", "NULL"),
    ("ANALYSIS_DETAILS", "startTime", "'soon'"), ("ENUM_CUDA_MEMCPY_OPER", "name", "NULL"),
]


@pytest.mark.parametrize("table,column,value", VALUES)
def test_damaged_value_is_analysed_or_refused_cleanly(case1_sqlite, tmp_path, table, column, value):  # noqa: F811
    p = tmp_path / "value.sqlite"
    shutil.copyfile(case1_sqlite, p)
    with sqlite3.connect(p) as c:  # NOT NULL is checked on write only: drop it to plant NULLs
        c.execute("PRAGMA writable_schema=ON")
        c.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type='table'")
    c.close()
    with sqlite3.connect(p) as c:
        c.execute(f"UPDATE {table} SET {column} = {value} WHERE rowid % 7 = 3")
    c.close()
    try:
        analyze(load(p))
    except NsysscopeError as e:
        assert e.exit_code in TYPED_EXIT, (type(e).__name__, e)
        assert "\n" not in str(e), str(e)


@pytest.mark.parametrize("name", ["cut_0.5_header_fixed", "flip_256_0", "schema_pages_0",
                                  "garbage_page"])
def test_damaged_export_through_the_cli(fuzzed, name, tmp_path):
    p = fuzzed[name]
    proc = report(p, cwd=tmp_path)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert proc.returncode in TYPED_EXIT | {0}, proc.stderr
    if proc.returncode:
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("nsysscope: error: ")
