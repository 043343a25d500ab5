#!/usr/bin/env python3
"""Capture traces of engine_under_test on a GPU machine with nsys.

Run from the repository root. Each nsys capture goes through ``$NSYS_CAPTURE``: by default
``.gpu/nsys-capture.sh`` where the machine has one (the H200 machine of the samples, whose
report importer needed carried libraries), else ``sample_traces/nsys_capture.sh`` (nsys on
PATH, or ``$NSYS``). Either is called as ``WRAPPER OUT_BASENAME -- COMMAND...`` and leaves
``OUT_BASENAME.sqlite``.

    python3 sample_traces/capture.py OUTDIR SPEC... [--timeout S] [--budget S] [--pack DIR]

SPEC is one of
  NAME:MODE:STEPS[:python|:aten|:graph|:][:ENGINE ARGS]  nsys capture of one engine command
                      (as capture.sh always took; ENGINE ARGS may hold --tp 2: nsys follows
                      the spawned ranks into the same report). ":python" adds 2 kHz Python
                      sampling (stacks exported as JSON), ":aten" --pytorch=autograd-nvtx,
                      ":graph" traces each graph replay as a whole (--cuda-graph-trace=graph,
                      nsys's default, instead of the samples' =node).
  pair:NAME:STEPS:ARGS0:ARGS1   nsys capture of TWO engine processes in one report, started
                      together by one shell: `CUDA_VISIBLE_DEVICES=0 ... ARGS0 &
                      CUDA_VISIBLE_DEVICES=1 ... ARGS1 & wait` (metrics: NAME.gpu0/1.json)
  kineto:NAME:MODE:STEPS[:ENGINE ARGS]   torch.profiler, no nsys: NAME.pt.trace.json.gz
  sleep:SECONDS       a pause (e.g. between runs that measure run-to-run noise)

Each capture runs under `timeout` (at most --timeout seconds, and never past --budget seconds
since the start: later captures are then skipped, so the whole command ends in time). nsys
captures leave OUTDIR/NAME.sqlite.xz (xz -T0 -6) and the engine's metrics OUTDIR/NAME.json.
OUTDIR/commands.txt gets each command and its result line, with the wall time;
OUTDIR/capture.log everything the commands printed; OUTDIR/environment.txt the versions.
A failing capture is logged and the next one runs. At the end OUTDIR is listed with sizes;
with --pack DIR its files are also packed into at most 8 tar files of <= 15 MiB in DIR (a
device run returns at most 8 files of 16 MiB). Exports hold the environment and paths: scrub
them on the development machine (nsysscope scrub), not here.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

NSYS = "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys"
# overridable, for tests on a machine without nsys: $NSYS_CAPTURE, $CAPTURE_PYTHON
_MACHINE_WRAPPER = ".gpu/nsys-capture.sh"
CAPTURE = os.environ.get("NSYS_CAPTURE") or (
    _MACHINE_WRAPPER if Path(_MACHINE_WRAPPER).is_file() else "sample_traces/nsys_capture.sh")
PYTHON = os.environ.get("CAPTURE_PYTHON", "python3")
ENGINE = [PYTHON, "-m", "engine_under_test"]
PY_FLAGS = ("--python-sampling=true --python-sampling-frequency=2000", "--include-json true")
ATEN_FLAGS = ("--pytorch=autograd-nvtx", "")
#: the wrappers' base flags (NSYS_BASE_FLAGS) for ":graph": one row per replay, as nsys
#: records by default (the flag may be given only once, so the base is replaced)
GRAPH_BASE = "-t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=graph"
EXTRAS = {"python": PY_FLAGS, "aten": ATEN_FLAGS, "graph": ("", ""), "": ("", "")}
KEEP = ("mode=", "error", "Error", "no report", "Traceback", "Killed", "timed out", "hung")
MIN_LEFT_S = 40  # a capture gets at least this much of the budget, else it is skipped
PACK_LIMIT = 15 * 2**20
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}


class Driver:
    def __init__(self, out: Path, timeout: float, budget: float, dry_run: bool = False) -> None:
        self.out, self.timeout, self.budget, self.dry_run = out, timeout, budget, dry_run
        self.t0 = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="capture-"))
        self.failed: list[str] = []
        self.env = dict(os.environ)
        for key, value in NCCL_ENV.items():
            self.env.setdefault(key, value)

    # -- logging ----------------------------------------------------------------------------
    def note(self, text: str) -> None:
        print(text, flush=True)
        with open(self.out / "commands.txt", "a") as f:
            f.write(text + "\n")

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def run(self, name: str, argv: list[str], env: dict | None = None) -> tuple[int, float]:
        """``argv`` under `timeout`; its output appended to capture.log, key lines noted."""
        limit = int(min(self.timeout, self.left() - 10))
        if self.dry_run:
            self.note(f"   (dry run: timeout {limit} s)")
            return 0, 0.0
        t = time.monotonic()
        cmd = ["timeout", "-k", "20", str(limit), *argv]
        with open(self.out / "capture.log", "a") as log:
            log.write(f"\n===== {name}: {shlex.join(argv)}\n")
            log.flush()
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=env or self.env, text=True, errors="replace")
            log.write(proc.stdout)
        wall = time.monotonic() - t
        for line in proc.stdout.splitlines():
            if any(k in line for k in KEEP):
                self.note(f"   {line.strip()[:300]}")
        if proc.returncode in (124, 137):
            self.note(f"   TIMED OUT after {limit} s")
        return proc.returncode, wall

    def finish(self, name: str, rc: int, wall: float, files: list[Path]) -> None:
        if self.dry_run:
            return
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.2f} MB" for p in files if p.exists())
        missing = [p.name for p in files if not p.exists()]
        ok = rc == 0 and not missing
        if not ok:
            self.failed.append(name)
        extra = ("; " + sizes if sizes else "") + \
            ("; missing " + ", ".join(missing) if missing else "")
        self.note(f"-- {name}: {'ok' if ok else 'FAILED'} rc={rc} wall={wall:.1f} s{extra}")

    def skip_if_late(self, name: str) -> bool:
        if self.left() < MIN_LEFT_S:
            self.failed.append(name)
            self.note(f"-- {name}: SKIPPED (budget: {self.left():.0f} s left "
                      f"of {self.budget:.0f} s)")
            return True
        return False

    # -- kinds of capture -------------------------------------------------------------------
    def nsys(self, name: str, argv: list[str], flags: tuple[str, str] = ("", ""),
             metrics: list[Path] | None = None, base: str | None = None) -> None:
        if self.skip_if_late(name):
            return
        env = dict(self.env, NSYS_FLAGS=flags[0], NSYS_EXPORT_FLAGS=flags[1])
        if base is not None:
            env["NSYS_BASE_FLAGS"] = base
        how = " ".join(filter(None, ("nsys", base, flags[0])))
        self.note(f"== {name}: {shlex.join(argv)}  [{how}]")
        out = self.work / name
        rc, wall = self.run(name, [CAPTURE, str(out), "--", *argv], env)
        sqlite, xz = out.with_suffix(".sqlite"), self.out / f"{name}.sqlite.xz"
        if sqlite.exists():
            t = time.monotonic()
            with open(xz, "wb") as f:
                xrc = subprocess.run(["xz", "-T0", "-6", "-c", str(sqlite)], stdout=f).returncode
            wall += time.monotonic() - t
            rc = rc or xrc
        for p in self.work.glob(f"{name}.*"):
            p.unlink()
        self.finish(name, rc, wall, [xz, *(metrics or [])])

    def plain(self, spec: str) -> None:
        name, mode, steps, extra, args = (spec.split(":", 4) + ["", ""])[:5]
        flags = EXTRAS.get(extra)
        if flags is None:
            raise SystemExit(f"capture: {spec!r}: the 4th field must be one of "
                             f"{', '.join(k for k in EXTRAS if k)} or empty")
        metrics = self.out / f"{name}.json"
        argv = [*ENGINE, "--mode", mode, "--steps", steps, *shlex.split(args),
                "--json", str(metrics)]
        self.nsys(name, argv, flags, [metrics], GRAPH_BASE if extra == "graph" else None)

    def pair(self, spec: str) -> None:
        _, name, steps, args0, args1 = (spec.split(":", 4) + [""] * 5)[:5]
        metrics = [self.out / f"{name}.gpu{g}.json" for g in (0, 1)]
        cmds = [f"CUDA_VISIBLE_DEVICES={g} " + shlex.join(
            [*ENGINE, "--steps", steps, *shlex.split(a), "--json", str(m)])
            for g, (a, m) in enumerate(zip((args0, args1), metrics, strict=True))]
        script = (f"{cmds[0]} & p0=$!; {cmds[1]} & p1=$!; "
                  "wait $p0; r0=$?; wait $p1; r1=$?; exit $(( r0 > r1 ? r0 : r1 ))")
        self.nsys(name, ["bash", "-c", script], metrics=metrics)

    def kineto(self, spec: str) -> None:
        _, name, mode, steps, args = (spec.split(":", 4) + ["", ""])[:5]
        if self.skip_if_late(name):
            return
        trace, metrics = self.out / f"{name}.pt.trace.json.gz", self.out / f"{name}.json"
        argv = [*ENGINE, "--mode", mode, "--steps", steps, *shlex.split(args),
                "--torch-profile", str(trace), "--json", str(metrics)]
        self.note(f"== {name}: {shlex.join(argv)}  [torch.profiler]")
        rc, wall = self.run(name, argv)
        traces = [trace] if "--tp" not in args else sorted(self.out.glob(f"{name}.pt.trace.rank*"))
        self.finish(name, rc, wall, [*(traces or [trace]), metrics])

    def sleep(self, spec: str) -> None:
        seconds = float(spec.split(":", 1)[1])
        self.note(f"== sleep {seconds:g} s")
        time.sleep(0 if self.dry_run else max(0.0, min(seconds, self.left() - MIN_LEFT_S)))

    @staticmethod
    def check(spec: str) -> None:
        """Reject a malformed spec before anything runs."""
        kind, fields = spec.split(":", 1)[0], spec.split(":")
        if kind == "sleep":
            ok = len(fields) == 2 and fields[1].replace(".", "", 1).isdigit()
        elif kind == "pair":
            ok = len(fields) >= 5 and fields[1] != "" and fields[2].isdigit()
        elif kind == "kineto":
            ok = len(fields) >= 4 and fields[1] != "" and fields[3].isdigit()
        else:
            ok = (len(fields) >= 3 and fields[0] != "" and fields[2].lstrip("-").isdigit()
                  and (len(fields) < 4 or fields[3] in EXTRAS))
        if not ok:
            raise SystemExit(f"capture: malformed spec {spec!r} (see -h)")

    def dispatch(self, spec: str) -> None:
        kind = spec.split(":", 1)[0]
        {"pair": self.pair, "kineto": self.kineto, "sleep": self.sleep}.get(kind, self.plain)(spec)


def environment(out: Path) -> None:
    lines = []
    try:
        nsys = os.environ.get("NSYS") or (NSYS if Path(NSYS).is_file() else "nsys")
        v = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout
        lines.append(f"nsys: {v.strip().splitlines()[-1] if v.strip() else '?'}")
    except OSError as e:
        lines.append(f"nsys: not found ({e})")
    probe = ("import torch; print('torch:', torch.__version__, '| gpus:', "
             "[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])")
    lines.append(subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True)
                 .stdout.strip() or "torch: ?")
    (out / "environment.txt").write_text("\n".join(lines) + "\n")


def listing(out: Path) -> str:
    rows = [f"{p.stat().st_size:>12,}  {p.name}" for p in sorted(out.iterdir()) if p.is_file()]
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return "\n".join([f"{out}:", *rows, f"{total:>12,}  total"])


def pack(out: Path, dest: Path, limit: int = PACK_LIMIT) -> list[Path]:
    """OUTDIR's files in as few tars of <= ``limit`` bytes as first-fit-decreasing gives."""
    dest.mkdir(parents=True, exist_ok=True)
    bins: list[list[Path]] = []
    sizes: list[int] = []
    for p in sorted((p for p in out.iterdir() if p.is_file()), key=lambda p: -p.stat().st_size):
        size = p.stat().st_size + 1024
        i = next((i for i, s in enumerate(sizes) if s + size <= limit), None)
        if i is None:
            bins.append([p])
            sizes.append(size)
        else:
            bins[i].append(p)
            sizes[i] += size
    tars = []
    for i, files in enumerate(bins, 1):
        tar = dest / f"{out.name}-part{i}.tar"
        with tarfile.open(tar, "w") as t:
            for p in sorted(files):
                t.add(p, arcname=f"{out.name}/{p.name}")
        tars.append(tar)
    if len(tars) > 8 or any(t.stat().st_size > 16 * 2**20 for t in tars):
        print(f"capture: WARNING: {len(tars)} tar files, some may not come back", flush=True)
    return tars


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", type=Path)
    p.add_argument("specs", nargs="+", metavar="SPEC")
    p.add_argument("--timeout", type=float, default=180, help="seconds per capture (180)")
    p.add_argument("--budget", type=float, default=float(os.environ.get("CAPTURE_BUDGET", 540)),
                   help="seconds for the whole command (540, or $CAPTURE_BUDGET)")
    p.add_argument("--pack", type=Path, metavar="DIR", default=os.environ.get("PACK_DIR") or None,
                   help="also pack OUTDIR into <= 8 tars of <= 15 MiB in DIR ($PACK_DIR)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the commands (and check the specs) without running them")
    p.add_argument("--no-environment", action="store_true",
                   help="skip environment.txt (its torch probe takes seconds; for tests)")
    a = p.parse_args(argv)
    for spec in a.specs:
        Driver.check(spec)
    a.outdir.mkdir(parents=True, exist_ok=True)
    out = a.outdir.resolve()
    driver = Driver(out, a.timeout, a.budget, a.dry_run)
    if not (a.no_environment or a.dry_run):
        environment(out)
    for spec in a.specs:
        try:
            driver.dispatch(spec)
        except SystemExit:
            raise
        except Exception as e:  # a broken capture must not stop the others
            driver.failed.append(spec)
            driver.note(f"-- {spec}: FAILED in the driver: {e!r}")
    elapsed = time.monotonic() - driver.t0
    result = "failed or skipped: " + ", ".join(driver.failed) if driver.failed else "all ok"
    driver.note(f"== done in {elapsed:.0f} s; {result}")
    text = listing(out)
    print(text, flush=True)
    with open(out / "capture.log", "a") as f:
        f.write("\n" + text + "\n")
    if a.pack:
        tars = pack(out, a.pack)
        print("\n".join(f"{t.stat().st_size:>12,}  {t}" for t in tars), flush=True)
    shutil.rmtree(driver.work, ignore_errors=True)
    return 1 if driver.failed else 0


if __name__ == "__main__":
    sys.exit(main())
