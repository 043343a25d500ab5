#!/usr/bin/env python3
"""Re-scrub every committed nsys sample with the current defaults, and prove nothing the
analysis reads changed.

For each ``sample_traces/**/*.sqlite.xz`` (the torch.profiler ``.json.gz`` files are left
alone): ``nsysscope report --format json`` on the committed file, then decompress, ``nsysscope
scrub`` (default options), ``xz -9 -T2``, and ``report --format json`` again on the result.
The two reports must be identical except for the trace's path, and ``scrub --check`` must
find nothing. Only then is the file replaced (``--dry-run``: never). Run from the repository
root::

    python bench/rescrub_samples.py              # re-scrub and replace
    python bench/rescrub_samples.py --dry-run    # verify only

Re-running it on already re-scrubbed samples is a no-op check: the scrub is idempotent.
Prints one line per sample (sizes before and after) and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def nsysscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nsysscope", *args], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "NSYSSCOPE_PROGRESS": "0"})


def report(path: Path) -> dict:
    r = nsysscope("report", "--format", "json", str(path))
    if r.returncode != 0:
        raise SystemExit(f"report {path} failed ({r.returncode}): {r.stderr.strip()}")
    d = json.loads(r.stdout)
    d["trace"]["path"] = "<trace>"  # the one field allowed to differ
    return d


def rescrub(xz: Path, work: Path, replace: bool) -> tuple[bool, int, int]:
    before = report(xz)
    raw, clean = work / "raw.sqlite", work / "clean.sqlite"
    with open(raw, "wb") as f:
        subprocess.run(["xz", "-dc", str(xz)], stdout=f, check=True)
    r = nsysscope("scrub", str(raw), str(clean))
    if r.returncode != 0:
        raise SystemExit(f"scrub {xz} failed: {r.stderr.strip()}")
    subprocess.run(["xz", "-9", "-T2", "-f", str(clean)], check=True)
    new = work / xz.name
    shutil.move(str(clean) + ".xz", new)
    check = nsysscope("scrub", "--check", str(new))
    after = report(new)
    same = before == after and check.returncode == 0
    if not same:
        print(f"  {xz.relative_to(REPO)}: report differs: {before != after}, "
              f"scrub --check: {check.stdout.strip()[:300]}")
    sizes = xz.stat().st_size, new.stat().st_size
    if same and replace:
        os.chmod(new, xz.stat().st_mode & 0o777)
        os.replace(new, xz)
    raw.unlink()
    new.unlink(missing_ok=True)
    return same, *sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="verify, never replace")
    ap.add_argument("--only", default="", help="only samples whose name contains this")
    args = ap.parse_args()
    samples = sorted(p for p in (REPO / "sample_traces").rglob("*.sqlite.xz")
                     if args.only in p.name)
    ok, total_before, total_after = True, 0, 0
    with tempfile.TemporaryDirectory(prefix="rescrub-") as tmp:
        for xz in samples:
            same, a, b = rescrub(xz, Path(tmp), replace=not args.dry_run)
            ok &= same
            total_before, total_after = total_before + a, total_after + b
            print(f"{'ok  ' if same else 'DIFF'} {xz.relative_to(REPO)}  {a:,} -> {b:,} bytes",
                  flush=True)
    print(f"{len(samples)} samples, {total_before:,} -> {total_after:,} bytes; "
          f"{'identical reports, nothing left to scrub' if ok else 'DIFFERENCES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
