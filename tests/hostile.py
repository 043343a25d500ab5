"""Real sample traces made hostile, as a sender could (issue 52): names that hold terminal
escapes, bidirectional overrides, Markdown, HTML and XML structure, and run to a megabyte,
planted with ``sqlite3`` in an nsys export and by editing the JSON of a torch.profiler trace;
and the checks every output of nsysscope must pass on them.

The planted names are those a report shows: the NVTX phase every case-1 stall is blamed on
(``sample``), the most frequent kernel, the thread, the process, the GPU; in the Kineto
capture the same phase, its culprit Python frame, threads, processes and devices."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
KINETO_CASE1 = SAMPLES / "kineto" / "h200_kineto_case1_60.pt.trace.json.gz"

#: what a hostile name holds: terminal escapes (clear the screen, set the window title, an
#: OSC 8 hyperlink, OSC 52 writing the clipboard, the one-byte C1 CSI), bidirectional
#: overrides and isolates, CR; then, after a line break, a fake verdict heading, a
#: link, a remote image, raw HTML, an @mention, a code fence, a table pipe, the end of an XML
#: CDATA section, a C0 control and a noncharacter XML forbids
ATTACK = ("\x1b[2J\x1b]0;pwned\x07\x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\"
          "\x1b]52;c;ZXZpbA==\x07\x9b31m\u202egnp.exe\u2066\u2069\r"
          "\n## \u2705 overlap healthy\n\n[click](https://evil.example/) "
          "![x](https://evil.example/x.png) <img src=x onerror=alert(1)> @everyone "
          "``` | ]]> \x01\ufffe")
#: a planted name: the attack, then a megabyte
BIG = 1 << 20

#: what must never be in any text nsysscope writes (tab and line feed aside)
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                         "\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def hostile_name(tag: str, size: int = BIG, nul: bool = False) -> str:
    """``tag``, the attack (and a NUL where ``nul``), then ``A`` up to ``size`` characters."""
    head = f"{tag}{ATTACK}{chr(0) if nul else ''}"
    return head + "A" * max(0, size - len(head))


def plant_nsys(export: Path, dst: Path, size: int = BIG) -> Path:
    """A copy of the nsys export ``export`` whose phase ``sample`` (one interned string for
    every range; one range's own text too), most frequent kernel, threads, process and GPU are
    named :func:`hostile_name`; the process's with a NUL after the attack (SQLite's text
    functions end a text there: so does the name nsysscope reads)."""
    shutil.copy(export, dst)
    with sqlite3.connect(dst) as c:
        sid = c.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        c.execute("INSERT INTO StringIds VALUES (?, ?)", (sid, hostile_name("nvtx", size)))
        assert c.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE text = 'sample'",
                         (sid,)).rowcount >= 100
        c.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = (SELECT min(rowid) FROM "
                  "NVTX_EVENTS WHERE textId = ?)", (hostile_name("own", size), sid))
        kernel = c.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 "
                           "ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
        c.execute("UPDATE StringIds SET value = ? WHERE id = ?", (hostile_name("kernel", size),
                                                                   kernel))
        c.execute("UPDATE StringIds SET value = ? WHERE id IN (SELECT nameId FROM ThreadNames)",
                  (hostile_name("thread", size),))
        c.execute("UPDATE PROCESSES SET name = ?", (hostile_name("process", size, nul=True),))
        c.execute("UPDATE TARGET_INFO_GPU SET name = ?", (hostile_name("gpu", size),))
    return dst


def plant_kineto(dst: Path, size: int = BIG, trace: Path = KINETO_CASE1) -> Path:
    """A copy of the torch.profiler capture ``trace`` whose phase ``sample``, culprit Python
    frame's function, threads, processes and devices are named :func:`hostile_name`."""
    data = json.loads(gzip.decompress(trace.read_bytes()))
    frame = "engine_under_test/sampler.py(50): finish_sampling"
    hits = 0
    for e in data["traceEvents"]:
        name = e.get("name")
        if e.get("cat") == "user_annotation" and name == "sample":
            e["name"] = hostile_name("nvtx", size)
            hits += 1
        elif name == frame:
            e["name"] = f"engine_under_test/sampler.py(50): {hostile_name('frame', size)}"
        elif e.get("ph") == "M" and name in ("process_name", "thread_name"):
            e["args"]["name"] = hostile_name(name, size, nul=True)
    for d in data.get("deviceProperties", []):
        d["name"] = hostile_name("gpu", size)
    assert hits > 50
    dst.write_bytes(gzip.compress(json.dumps(data).encode(), compresslevel=1))
    return dst


def assert_printable(text: str, where: str = "") -> None:
    """No control character (but tab and line feed), bidirectional override, lone surrogate
    or noncharacter in ``text``."""
    bad = UNPRINTABLE.search(text)
    assert bad is None, f"{where}: {bad.group()!r} at {bad.start()}: " \
                        f"{text[max(0, bad.start() - 40):bad.start() + 40]!r}"


def strings_of(value: object) -> list[str]:
    """Every string in a JSON value, keys too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings_of(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_of(v)]
    return []


def run_measured(*args: object, cwd: Path = ROOT, timeout: int = 600,
                 env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """``python -m nsysscope ARGS`` and the peak resident memory (KB) of it and its worker
    processes, read by a parent of its own (``RUSAGE_CHILDREN``: the largest of them)."""
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
             "sys.exit(r.returncode)")
    res = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "nsysscope",
                          *map(str, args)], capture_output=True, text=True, timeout=timeout,
                         cwd=cwd, env=env)
    *err, peak = res.stderr.rstrip("\n").split("\n")
    res.stderr = "\n".join(err)
    return res, int(peak)
