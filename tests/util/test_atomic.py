"""nsysscope.util.atomic, the one writer of every output, on the cases a review found it
mishandled: names at the length limit, links (dangling, looping), files in /dev/shm,
permissions (a folder it may not write, a write-only file, a cache entry's mode)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from permissions import obeying_permissions  # tests/ is on sys.path

from nsysscope.util import atomic
from nsysscope.util.atomic import atomic_file, is_stream, target, temp_beside


def write(path: Path, data: bytes = b"new") -> None:
    with atomic_file(path) as f:
        f.write(data)


def test_a_name_at_the_length_limit(tmp_path):
    out = tmp_path / ("r" * 250 + ".json")  # 255 bytes: the temporary name must stay shorter
    write(out)
    assert out.read_bytes() == b"new" and os.listdir(tmp_path) == [out.name]


def test_links_dangling_and_looping(tmp_path):
    (tmp_path / "later.html").symlink_to("sub/made.html")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "later.html")  # a link to a file still to be made: made, link kept
    assert (tmp_path / "sub" / "made.html").read_bytes() == b"new"
    assert (tmp_path / "later.html").is_symlink()
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError):  # it replaced the loop with a regular file
        write(tmp_path / "a")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_streams_are_open_files_and_devices_only():
    assert is_stream("/dev/stdout") and is_stream("/dev/null") and is_stream("/proc/self/fd/2")
    if Path("/dev/shm").is_dir():  # a regular file there: written whole like any other
        shm = Path("/dev/shm") / f"nsysscope-test-{os.getpid()}"
        try:
            shm.write_bytes(b"old")
            assert not is_stream(shm)
        finally:
            shm.unlink(missing_ok=True)


def test_modes_kept_new_and_private(tmp_path):
    old = tmp_path / "kept.txt"
    old.write_bytes(b"old")
    old.chmod(0o640)
    write(old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        write(tmp_path / "fresh.txt")
        private = temp_beside(tmp_path / "entry.sqlite", 0o600)
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE(private.stat().st_mode) == 0o600  # a cache entry: its owner's alone
    assert target(tmp_path / "fresh.txt") == tmp_path / "fresh.txt"


def test_permissions_as_a_user(tmp_path):
    """A file it may write, in a folder it may not, was written before atomic writes; and a
    write-only file failed (the temporary file was reopened for reading to sync it)."""
    wrap = obeying_permissions()
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f.txt").write_bytes(b"old")
    (ro / "f.txt").chmod(0o666)
    ro.chmod(0o555)
    wo = tmp_path / "wo.txt"
    wo.write_bytes(b"old")
    wo.chmod(0o200)
    code = ("import sys; from pathlib import Path; from nsysscope.util.atomic import atomic_file\n"
            "for p in sys.argv[1:]:\n"
            "    with atomic_file(Path(p)) as f: f.write(b'new')\n")
    try:
        r = subprocess.run([*wrap, sys.executable, "-c", code, str(ro / "f.txt"), str(wo)],
                           capture_output=True, text=True, timeout=60)
    finally:
        ro.chmod(0o755)
        wo.chmod(0o600)
    assert r.returncode == 0, r.stderr
    assert (ro / "f.txt").read_bytes() == b"new" and wo.read_bytes() == b"new"


def test_the_temporaries_dead_runs_left_go_with_the_next_write(tmp_path, monkeypatch):
    """A run killed while it exported a report (SIGKILL) left its hidden temporary beside the
    report for good; the next write of that file removes those untouched for
    DEAD_AFTER_S (its time and its status both: an export sets its temporary's time back
    to the report's just before renaming it), and no one else's."""
    final = tmp_path / "run [1].nsysscope-cache.sqlite"  # glob's own characters in the name
    dead = tmp_path / f".{final.name}.0a1b2c3d.tmp"
    other = tmp_path / ".other.sqlite.0a1b2c3d.tmp"
    for p in (dead, other):
        p.write_bytes(b"half")
    time.sleep(0.3)
    live = tmp_path / f".{final.name}.00ff00ff.tmp"
    live.write_bytes(b"half")
    renaming = tmp_path / f".{final.name}.12345678.tmp"
    renaming.write_bytes(b"done")
    os.utime(renaming, (1e9, 1e9))  # 2001, as a report's time can be
    monkeypatch.setattr(atomic, "DEAD_AFTER_S", 0.15)
    tmp = temp_beside(final)
    assert not dead.exists()
    assert live.exists() and renaming.exists() and other.exists() and tmp.exists()
