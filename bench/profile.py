#!/usr/bin/env python3
"""Where ``nsysscope report`` spends its time: a cProfile top-10 as a markdown table.

Given a trace it runs ``nsysscope report TRACE`` in this process under cProfile (the import
of the CLI included, the report itself written to /dev/null), optionally saves the pstats
(``-o FILE.prof``), and prints two top-10 tables:

* by own time (``tottime``): the hot spots, whoever calls them;
* by cumulative time, nsysscope's own functions only: the phases (load, analysis, render)
  and what each costs with everything it calls.

Given a ``.prof`` file (e.g. the "before" profile made with ``python -m cProfile -o X.prof
-m nsysscope report TRACE``) it prints the same tables from it. cProfile sees the main
thread only: time spent waiting on worker threads shows up as ``acquire`` of a lock.

    python bench/profile.py TRACE.sqlite [-o after.prof]
    python bench/profile.py before.prof
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, where this file would stand in
# for the standard library's ``profile`` module that ``cProfile`` imports: move it last.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path.append(sys.path.pop(0))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import cProfile  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402

from proftables import render, tables  # noqa: E402


def profile_report(trace: str, out: str | None = None) -> pstats.Stats:
    """Run ``nsysscope report TRACE`` in-process under cProfile; its stats."""
    prof = cProfile.Profile()
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        prof.enable()
        try:
            from nsysscope.cli import main

            sys.argv = ["nsysscope", "report", trace]
            main()
        except SystemExit as e:
            if e.code:
                raise RuntimeError(f"nsysscope report exited {e.code}") from None
        finally:
            prof.disable()
    if out:
        prof.dump_stats(out)
    return pstats.Stats(prof)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="a trace to profile `nsysscope report` on, or a .prof file")
    ap.add_argument("-o", "--output", help="save the pstats of a profiled trace here")
    ap.add_argument("--json", action="store_true", help="print the tables as JSON")
    a = ap.parse_args()
    if a.input.endswith(".prof"):
        stats = pstats.Stats(a.input)
    else:
        stats = profile_report(a.input, a.output)
    t = tables(stats)
    print(json.dumps(t, indent=2) if a.json else render(t, f"`nsysscope report` ({a.input})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
