"""The gate's sides: what :func:`~.compare.compare` and ``nsysscope gate`` take as a side
(a trace, the files of one job, a summary file, an analysis) read as a
:class:`~nsysscope.model.Summary` (or an Analysis, where a page draws its figures), both at
once where the OS can fork; and the summary of a part of one analysis (:func:`part_summary`,
the false-alarm measurement)."""

from __future__ import annotations

import json
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import Analysis, AnalysisConfig, Events, analyze_file, summarize
from ..analysis.config import config_of
from ..analysis.job import analyze_files
from ..errors import NsysscopeError, UnreadableInput
from ..model import Summary, summary_in
from ..model.schema import WrongKind
from ..trace.formats import TRACE_JSON, json_kind
from ..trace.windows import is_long


def is_summary_file(path: str | Path) -> bool:
    """True for a JSON file (``summarize`` or ``report --format json`` output); traces are
    SQLite or compressed."""
    p = Path(path)
    try:
        if json_kind(p) in TRACE_JSON:  # .json like a summary: a trace, or a timeline
            return False  # (load says it is not a trace)
    except (UnreadableInput, OSError):
        pass
    if p.suffix.lower() == ".json":
        return True
    try:
        with p.open("rb") as f:
            head = f.read(64).lstrip()
    except OSError:
        return False
    return head.startswith(b"{")


def read_summary(path: str | Path) -> Summary:
    """A :class:`Summary` from ``nsysscope summarize`` (or ``report --format json``) output,
    or :class:`UnreadableInput`."""
    p = Path(path)
    if not p.exists():
        raise UnreadableInput(f"{p}: no such file")
    if p.is_dir():
        raise UnreadableInput(f"{p}: is a directory, not a summary file")
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UnreadableInput(f"{p}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise UnreadableInput(f"{p}: not valid JSON ({e})") from None
    except RecursionError:  # arrays or objects nested deeper than Python's stack
        raise UnreadableInput(f"{p}: not an nsysscope summary (JSON nested too deeply to "
                              "read)") from None
    except ValueError:  # an integer of more digits than Python converts (4300)
        raise UnreadableInput(f"{p}: not an nsysscope summary (a number too long to "
                              "read)") from None
    if not isinstance(d, dict):
        raise UnreadableInput(f"{p}: not an nsysscope summary (a JSON object is expected)")
    missing = _missing_keys(d)
    if isinstance(d.get("schema"), str) and d["schema"].startswith("nsysscope.summary/") \
            and missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4
                                          else "")
        raise UnreadableInput(f"{p}: an incomplete nsysscope summary: no {shown}; write it "
                              "with 'nsysscope summarize TRACE -o FILE.json'")
    try:
        return Summary.from_dict(d)
    except NsysscopeError as e:  # a newer schema
        raise type(e)(f"{p}: {e}") from None
    except WrongKind as e:
        raise UnreadableInput(f"{p}: {e}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UnreadableInput(f"{p}: not an nsysscope summary ({e})") from None


def _missing_keys(d: dict[str, Any]) -> list[str]:
    """The keys every summary has (fields without a default) that ``d`` lacks."""
    import dataclasses
    return [f.name for f in dataclasses.fields(Summary)
            if f.name not in d and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING]


def summary_of(x: Any, config: AnalysisConfig | None = None, nsys: str | None = None) -> Summary:
    """The :class:`Summary` of a Summary, Analysis, OpenTrace, summary JSON or trace path."""
    summary = summary_in(x)  # a Summary, an Analysis or an OpenTrace
    if summary is not None:
        return summary
    if isinstance(x, (str, Path)):
        if is_summary_file(x):
            return read_summary(x)
        return analyze_file(x, config, nsys, events="none").summary
    if isinstance(x, (list, tuple)):  # the files of one job
        return analyze_files(x, config_of(config), nsys).summary
    raise TypeError(f"cannot gate a {type(x).__name__}: give a trace path, a summary JSON path, "
                    "a Summary, an Analysis or an OpenTrace")


#: a side as the gate command names it: a trace or summary file, or the files of one job
Side = str | list[str]


def read_side(x: Side, config: AnalysisConfig | None = None, nsys: str | None = None,
              events: Events = "shown") -> Summary | Analysis:
    """One side as the gate command reads it: a summary file as its Summary, a trace analysed
    once (an HTML page draws its figures from the analysis: ``events``, as
    :func:`~nsysscope.analysis.pipeline.analyze_file`), the files of one job as one server
    (:func:`~nsysscope.analysis.job.analyze_files`: no events)."""
    if isinstance(x, list):
        return analyze_files(x, config_of(config), nsys)
    if is_summary_file(x):
        return read_summary(x)
    return analyze_file(x, config, nsys, events=events)


def read_sides(baseline: Side, candidate: Side, config: AnalysisConfig | None = None,
               nsys: str | None = None,
               events: Events = "shown") -> tuple[Summary | Analysis, Summary | Analysis]:
    """Both sides, read at once where the OS can fork: the baseline in a child process (a
    copy of this one, nothing to import again), the candidate here, so two traces take the
    time of one on two CPUs. An error is the baseline's first. Sides whose figures are
    drawn (``events`` ``"shown"``) are read here when one is long: its rows, on disk, would
    go with the child process that read them."""
    if "fork" not in mp.get_all_start_methods() or any(
            isinstance(x, list) or is_summary_file(x) for x in (baseline, candidate)) or \
            (events == "shown" and any(_is_long(str(x), nsys) for x in (baseline, candidate))):
        return (read_side(baseline, config, nsys, events),
                read_side(candidate, config, nsys, events))
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
        base = pool.submit(read_side, baseline, config, nsys, events)
        try:
            cand = read_side(candidate, config, nsys, events)
        except NsysscopeError:
            base.result()  # the baseline's error, if it has one, comes first
            raise
        return base.result(), cand


def _is_long(trace: str, nsys: str | None) -> bool:
    """Whether ``trace`` is read in windows (:func:`~nsysscope.trace.windows.is_long`); a
    file that cannot be read is not, and its read says what is wrong, in the sides' order."""
    try:
        return is_long(trace, nsys)
    except NsysscopeError:
        return False


def part_summary(analysis: Analysis, start: int, stop: int) -> Summary:
    """The summary of steady launches ``[start, stop)`` (positions among the steady launches)
    of an :class:`~nsysscope.Analysis`, built exactly as the full summary is. Used to measure
    the gate's false-alarm rate on windows of one healthy capture."""
    launches = analysis.launches.copy()
    steady = np.flatnonzero(launches["steady"].to_numpy())
    keep = np.zeros(len(launches), dtype=bool)
    keep[steady[start:stop]] = True
    launches["steady"] = keep
    return summarize(analysis.trace, launches, analysis.config,
                     latent=analysis.summary.latent, steps=analysis.steps)[0]
