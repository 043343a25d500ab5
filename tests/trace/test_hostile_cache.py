"""The cache under attack (issue 52, item 8): a decompression bomb, an entry that is not the
trace's (a cache shared or restored from elsewhere, a file planted under the trace's entry
name), and ``cache clear`` while reports read their entries. Real samples throughout."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


def report(trace: Path, cache: Path, *args: str, config: Path | None = None,
           **kw) -> subprocess.Popen:
    env = dict(os.environ, NSYSSCOPE_CACHE=str(cache))
    if config is not None:  # another user's key (a cache made elsewhere)
        env["XDG_CONFIG_HOME"] = str(config)
    return subprocess.Popen([sys.executable, "-m", "nsysscope", "report", str(trace),
                             "--format", "json", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def finish(p: subprocess.Popen) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=600)
    return p.returncode, out, err


def test_a_decompression_bomb_is_refused_once_and_not_cached(tmp_path):
    """The case-1 export's first page, then 100 MB of zeros: 15 KB of xz. It was decompressed
    whole, found damaged, decompressed again, and kept (1 GiB from 156 KB in the issue)."""
    head = lzma.decompress((SAMPLES / "h200_case1_300.sqlite.xz").read_bytes())[:4096]
    bomb = tmp_path / "bomb.sqlite.xz"
    bomb.write_bytes(lzma.compress(head + bytes(100 << 20), preset=1))
    dud = tmp_path / "dud.sqlite.xz"  # under the cap: a damaged export, made once
    dud.write_bytes(lzma.compress(head + bytes(10 << 20), preset=1))
    cache = tmp_path / "cache"
    code, _, err = finish(report(bomb, cache))
    assert code == 2 and err.count("\n") == 1 and "inflates to more than 200 times" in err
    code, _, err = finish(report(dud, cache))
    assert code == 5 and err.count("\n") == 1 and "again" not in err, err
    assert list(cache.iterdir()) == []  # neither kept


def test_a_torch_profiler_bomb_is_refused_before_it_is_parsed_whole(tmp_path):
    """100 MB of white space in an events array, 100 KB of gzip: it was parsed to its end."""
    import gzip

    bomb = tmp_path / "bomb.pt.trace.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20) + b"]}", 9))
    code, _, err = finish(report(bomb, tmp_path / "cache"))
    assert code == 2 and err.count("\n") == 1 and "inflates to more than 200 times" in err


@pytest.fixture(scope="module")
def healthy_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("healthy") / "healthy.sqlite"
    out.write_bytes(lzma.decompress((SAMPLES / "h200_healthy_300.sqlite.xz").read_bytes()))
    return out


def test_an_entry_not_made_from_the_trace_here_is_not_trusted(tmp_path, healthy_export):
    """The case-1 trace's entry name holding the healthy export (planted, or a cache copied
    from elsewhere): it read as healthy. An entry another user's run made (their key) is
    made again too; this user's own is reused."""
    case1 = tmp_path / "case1.sqlite.xz"
    shutil.copy(SAMPLES / "h200_case1_300.sqlite.xz", case1)
    cache = tmp_path / "cache"
    cache.mkdir()
    code, out, err = finish(report(case1, cache, config=tmp_path / "elsewhere"))
    assert code == 0 and json.loads(out)["stalls"]["gpu_to_cpu"] == 293
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    # another user's cache: their stamp does not verify here
    code, out, err = finish(report(case1, cache))
    assert code == 0 and "not made from it here" in err
    assert json.loads(out)["stalls"]["gpu_to_cpu"] == 293
    code, _, err = finish(report(case1, cache))  # this user's own: reused, said nothing
    assert code == 0 and err == ""
    mtime = entry.stat().st_mtime_ns
    shutil.copy(healthy_export, entry)  # planted: the healthy trace under case 1's name
    os.utime(entry, ns=(time.time_ns(), mtime))
    code, out, err = finish(report(case1, cache))
    assert code == 0 and "not made from it here" in err
    assert json.loads(out)["stalls"]["gpu_to_cpu"] == 293  # case 1, not the planted export


@pytest.mark.slow
def test_cache_clear_while_reports_run_fails_none(tmp_path):
    """Two reports of the 5000-step sample (~0.1 GB decompressed) and ``cache clear`` while
    they read: a report whose entry vanished under it exited 2, 'cannot open as SQLite'."""
    trace = SAMPLES / "h200_healthy_long_5000.sqlite.xz"
    cache = tmp_path / "cache"
    assert finish(report(trace, cache))[0] == 0  # the entry is there: reports start reading
    env = dict(os.environ, NSYSSCOPE_CACHE=str(cache))
    for delay in (0.5, 1.5):
        runs = [report(trace, cache) for _ in range(2)]
        time.sleep(delay)
        cleared = subprocess.run([sys.executable, "-m", "nsysscope", "cache", "clear"],
                                 env=env, capture_output=True, text=True, timeout=60)
        assert cleared.returncode == 0, cleared.stderr
        for code, out, err in map(finish, runs):
            assert code == 0 and json.loads(out)["launches"] == 5000, err
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # links gone
