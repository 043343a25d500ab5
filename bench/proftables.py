"""cProfile top-10 tables: the rows from a ``pstats.Stats``, and their markdown.

Used by ``bench/profile.py`` (which makes or reads the profile) and by ``bench/run`` (which
renders the tables that ``profile.py --json`` gave it into results.md).
"""

from __future__ import annotations

from pathlib import Path
from pstats import Stats

N = 10


def where(func: tuple[str, int, str]) -> str:
    """``path:line(name)`` with the path shortened to what follows site-packages or the
    checkout (``nsysscope/...``, ``pandas/...``); built-ins as cProfile names them."""
    path, line, name = func
    if path == "~":
        return name
    for marker in ("site-packages/", "/nsysscope/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            path = ("nsysscope/" if marker == "/nsysscope/" else "") + path
            break
    else:
        path = Path(path).name
    return f"{path}:{line}({name})"


def top(stats: Stats, sort: str, nsysscope_only: bool = False, n: int = N) -> list[dict]:
    """The ``n`` functions with the most ``sort`` time (``tottime`` or ``cumulative``)."""
    key = 2 if sort == "tottime" else 3
    rows = []
    for func, (_cc, ncalls, tt, ct, _callers) in stats.stats.items():
        if nsysscope_only and "/nsysscope/" not in func[0]:
            continue
        rows.append(dict(function=where(func), calls=ncalls, cumulative_s=round(ct, 3),
                         tottime_s=round(tt, 3), _key=(0, ncalls, tt, ct)[key]))
    rows.sort(key=lambda r: -r["_key"])
    return [{k: v for k, v in r.items() if k != "_key"} for r in rows[:n]]


def tables(stats: Stats) -> dict:
    """Both top-10s, and the profile's total seconds."""
    return dict(total_s=round(stats.total_tt, 2), by_tottime=top(stats, "tottime"),
                by_cumulative=top(stats, "cumulative", nsysscope_only=True))


def markdown(rows: list[dict]) -> str:
    """A top-10 as a markdown table."""
    lines = ["| function (file:line) | calls | cumulative s | tottime s |", "|---|---:|---:|---:|"]
    lines += [f"| `{r['function']}` | {r['calls']:,} | {r['cumulative_s']:.2f} | "
              f"{r['tottime_s']:.2f} |" for r in rows]
    return "\n".join(lines)


def render(t: dict, title: str) -> str:
    """Both tables of ``tables()`` under a title."""
    return (f"{title}: {t['total_s']} s profiled.\n\nBy own time:\n\n"
            f"{markdown(t['by_tottime'])}\n\nBy cumulative time, nsysscope's functions:\n\n"
            f"{markdown(t['by_cumulative'])}")
