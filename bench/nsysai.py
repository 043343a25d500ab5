"""nsys-ai 0.3 ``diagnose``, the comparison of issue 14: its own venv, and a timed run.

``nsys-ai diagnose TRACE.sqlite`` (PyPI ``nsys-ai==0.3.0``) runs its default evidence pack
(top kernels, idle gaps, overlap, NVTX, sync, critical path, ...) headless, without an LLM,
prints the ranked findings and publishes them to a session folder
(``$NSYS_AI_ARTIFACT_ROOT/sessions``). It reads the export in one of two ways:

* ``duckdb``: its normal path. DuckDB attaches the SQLite file through its ``sqlite``
  extension, builds a Parquet cache beside the trace (``TRACE.nsys-cache/``) and queries
  that; the trace is not written. DuckDB downloads the extension on first use; offline it
  cannot, so the venv pins ``duckdb==1.5.5`` and installs the extension from PyPI
  (``duckdb-extension-sqlite``) into a ``HOME`` of its own (``.venv-nsys-ai/home``).
* ``sqlite``: its offline fallback, "falls back to SQLite" in the issue: with no extension
  (an empty ``HOME``, no network) DuckDB cannot attach the file and every skill queries it
  through Python's ``sqlite3``, after creating a dozen ``_nsysai_*`` indexes *in the trace*.
  So this mode runs on a copy of the trace unless the trace is thrown away afterwards.

Each run is cold, as a first ``diagnose`` of a new trace is: no cache, no session, no index.
A run counts only if it exits 0 and prints its findings (``── Evidence Findings (N) ──``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from timing import timed

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-nsys-ai"
VENV_HOME = VENV / "home"
BIN = VENV / "bin"
PACKAGES = ["nsys-ai==0.3.0", "duckdb==1.5.5", "duckdb-extension-sqlite==1.5.5"]
MODES = ("duckdb", "sqlite")
FINDINGS = re.compile(r"Evidence Findings \((\d+)\)")

def gpu_rows(trace: Path) -> int:
    """Rows of the GPU activity tables, what nsys-ai's memory grows with."""
    import sqlite3
    with sqlite3.connect(f"file:{trace}?mode=ro", uri=True) as c:
        have = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return sum(c.execute(f"SELECT MAX(rowid) FROM {t}").fetchone()[0] or 0
                   for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                             "CUPTI_ACTIVITY_KIND_MEMSET") if t in have)


INSTALL_EXTENSION = """
import duckdb, duckdb_extension_sqlite, pathlib
ext = (pathlib.Path(duckdb_extension_sqlite.__file__).parent / "extensions"
       / f"v{duckdb.__version__}" / "sqlite.duckdb_extension")
duckdb.install_extension(str(ext))
duckdb.connect().load_extension("sqlite")
"""


def ensure_venv(python: str = sys.executable) -> tuple[dict | None, list[str], str]:
    """Make ``bench/.venv-nsys-ai`` ready: created if missing, ``PACKAGES`` installed unless
    DuckDB's sqlite extension already loads from its ``HOME``. Returns (versions, the modes
    that can run, a note): no modes when nsys-ai cannot be installed, only ``sqlite`` when
    the extension cannot."""
    if not (BIN / "python").exists():
        print(f"creating {VENV}", file=sys.stderr, flush=True)
        r = subprocess.run([python, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if r.returncode != 0:
            return None, [], f"python -m venv failed: {r.stderr[-500:]}"
    if not _extension_loads():
        print(f"installing {' '.join(PACKAGES)} into {VENV}", file=sys.stderr, flush=True)
        r = subprocess.run([str(BIN / "pip"), "install", "-q", *PACKAGES], capture_output=True,
                           text=True)
        if r.returncode != 0 and not (BIN / "nsys-ai").exists():
            return None, [], f"pip install failed: {(r.stderr or r.stdout)[-500:]}"
    if not (BIN / "nsys-ai").exists():
        return None, [], "nsys-ai is not in the venv"
    if _extension_loads():
        return versions(), list(MODES), ""
    return versions(), ["sqlite"], "DuckDB's sqlite extension does not load: SQLite mode only"


def _extension_loads() -> bool:
    """Install DuckDB's sqlite extension from its PyPI package into the venv's ``HOME``
    (a no-op once there) and load it."""
    if not (BIN / "python").exists():
        return False
    VENV_HOME.mkdir(exist_ok=True)
    r = subprocess.run([str(BIN / "python"), "-c", INSTALL_EXTENSION], capture_output=True,
                       env=_env(VENV_HOME))
    return r.returncode == 0


def versions() -> dict:
    """nsys-ai's and DuckDB's versions in the venv."""
    r = subprocess.run([str(BIN / "python"), "-c", "from importlib.metadata import version as v;"
                        "print(v('nsys-ai'), v('duckdb'))"], capture_output=True, text=True)
    nsys_ai, duckdb = r.stdout.split()
    return {"nsys-ai": nsys_ai, "duckdb": duckdb}


def _env(home: Path, artifacts: Path | None = None) -> dict:
    """A minimal environment: the venv first on PATH, ``HOME`` (where DuckDB looks for its
    extensions), and where nsys-ai writes its session."""
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONIOENCODING": "utf-8"}
    if artifacts:
        env["NSYS_AI_ARTIFACT_ROOT"] = str(artifacts)
    return env


def diagnose(trace: Path, mode: str, workdir: Path, disposable: bool,
             timeout: float | None) -> dict:
    """One cold ``nsys-ai diagnose`` of ``trace`` in ``mode`` (``duckdb`` or ``sqlite``).

    ``disposable``: the trace is deleted afterwards, so the ``sqlite`` mode may index it in
    place (no copy of a 22 GB file)."""
    trace = trace.resolve()  # nsys-ai refuses a path through a symbolic link, at its very end
    base = workdir / "nsys-ai"
    shutil.rmtree(base, ignore_errors=True)
    (base / "offline-home").mkdir(parents=True)
    target = trace
    if mode == "sqlite" and not disposable:
        target = base / trace.name
        shutil.copyfile(trace, target)
    _clear_cache(target)
    home = VENV_HOME if mode == "duckdb" else base / "offline-home"
    out = workdir / f"nsys-ai_{mode}_{trace.stem}.txt"
    r = timed([str(BIN / "nsys-ai"), "diagnose", str(target)], out=out,
              env=_env(home, base / "artifacts"), cwd=base, timeout=timeout)
    _clear_cache(target)
    shutil.rmtree(base, ignore_errors=True)
    return dict(r, **check(out.read_text(errors="replace"), r), mode=mode, output=str(out),
                stderr=r["stderr"][-1000:])


def _clear_cache(trace: Path) -> None:
    """Remove the Parquet cache nsys-ai keeps beside a trace, and its lock file."""
    shutil.rmtree(trace.with_suffix(".nsys-cache"), ignore_errors=True)
    trace.with_suffix(".nsys-cache.build.lock").unlink(missing_ok=True)


def check(stdout: str, run: dict) -> dict:
    """Did the run analyse the trace: its findings count, the path it took, and ``ok``."""
    m = FINDINGS.search(stdout)
    err = run["stderr"]
    if "falling back to sqlite3" in err:
        path = "sqlite3 (DuckDB could not attach the file)"
    elif "querying the SQLite export directly" in err:
        path = "DuckDB on the SQLite file (no Parquet cache)"
    else:
        path = "DuckDB + Parquet cache"
    ok = run["rc"] == 0 and m is not None and "Traceback" not in err
    return dict(ok=ok, findings=int(m.group(1)) if m else None, read_path=path)
