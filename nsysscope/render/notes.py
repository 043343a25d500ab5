"""Every note a result can carry, said: one row per code (:class:`~nsysscope.model.Note`); the
gate's rows are in :mod:`.gate_notes`.

The analysis, the trace readers and the gate emit a note as a code and its values; this table
is where each is worded. A new note is one row here and the line that emits it; a code this
version does not know (a newer minor version's) is shown as the file wrote it beside its
values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..model import WRITTEN, Note
from ..trace.python_samples import STACKS_HINT
from ..util.units import us
from .gate_notes import GATE_NOTES

Values = Mapping[str, Any]


def said(template: str) -> Callable[[Values], str]:
    """A note whose sentence is ``template`` with its values put in (``str.format``)."""
    return lambda v: template.format(**v)


def _attributed_to(v: Values) -> str:
    return "NVTX phase and op" if v["has_nvtx"] else "their CUDA calls"


def _backwards(v: Values) -> str:
    n = v["rows"]
    return (f"{n} row{'s' if n > 1 else ''} of CUDA calls, GPU work or NVTX ranges end before "
            f"{'they start' if n > 1 else 'it starts'}: a damaged export; read as "
            f"{'they are' if n > 1 else 'it is'}, the figures around them may be off")


def _names_cut(v: Values) -> str:
    many = v["names"] > 1
    return (f"{v['names']} name{'s' if many else ''} longer than {v['cap']} characters "
            f"{'were' if many else 'was'} cut to {v['cap']} (ending with '\u2026')")


def _calls(v: Values) -> str:
    return f"{v['calls']} CUDA call{'s' if v['calls'] > 1 else ''}"


def _events_without_time(v: Values) -> str:
    kinds = ", ".join(f"{count} {cat} (first: {first})" for cat, count, first in v["kinds"])
    more = f" and {v['more_kinds']} more kinds" if v["more_kinds"] else ""
    n = v["events"]
    return (f"{n} event{'s' if n > 1 else ''} without a usable time (ts, dur: missing, "
            f"negative, not a number, or beyond any clock) left out: {kinds}{more}")


def _rank_groups(v: Values) -> str:
    groups = v["groups"]
    listed = "; ".join("pids " + ", ".join(str(p) for p in g) for g in groups)
    return (f"{len(groups)} groups of ranks wait for each other in collectives ({listed}): "
            "each rank's waits are counted within its own group (ranks are grouped by how "
            "their collectives line up, the k-th of each rank with its peers' k-th; nsys "
            "records no NCCL communicator)")


def _negative_windows(v: Values) -> str:
    other = v["other_thread"]
    where = f"; {other} of them on another thread than the launching one" if other else ""
    return (f"{v['launches']} steady launches have a negative overlap window (down to "
            f"{us(v['lowest_us'])}): the host wait on the launch began before its launch call "
            "returned, on a thread that waits on the stream while another issues the launch"
            + where + "; such a window is no overlap at all, and the percentiles above count it "
            "as it is")


def _are(files: Sequence[str]) -> str:
    return f"{', '.join(files[:3])} {'is' if len(files) == 1 else 'are'}"


def _source_text_missing(v: Values) -> str:
    said_ = []
    if v["nowhere"]:
        said_.append(f"{_are(v['nowhere'])} no source file on disk (code run from a string, or "
                     "not Python): no text to show")
    if v["not_found"] and v["source_root"]:
        said_.append(f"{_are(v['not_found'])} not under the --source-root folder (looked up by "
                     "the end of the recorded path), or the file found there is another "
                     "version of the source than the one profiled")
    elif v["not_found"]:
        said_.append(f"{_are(v['not_found'])} not under the current folder: pass --source-root "
                     "DIR, the folder the program's source is in (a path recorded on another "
                     "machine is matched by its end: /home/dev/app/x.py as DIR/app/x.py or "
                     "DIR/x.py)")
    return "the text of a stall's source line is missing: " + "; ".join(said_)


def _signed(v_us: float) -> str:
    return f"{'+' if v_us >= 0 else '-'}{us(abs(v_us))}"


def _job_clocks(v: Values) -> str:
    moved = "; ".join(
        f"{f['name']} {_signed(f['session_us'])} by its session start" +
        ("" if f["refined_us"] is None else f", {_signed(f['refined_us'])} more by its "
         "collectives") for f in v["moved"])
    return (f"one job of {v['files']} files, analysed as one server; their clocks put on "
            f"{v['on']}'s: {moved}")


#: each note's code, and how it is said from its values
NOTES: dict[str, Callable[[Values], str]] = {
    # a result written before notes kept their values: the sentence it held
    WRITTEN: said("{text}"),
    # where stalls are placed
    "no_python_stacks": lambda v: (
        f"no Python stacks: stalls are attributed to "
        f"{'ranges and op' if v['has_nvtx'] else _attributed_to(v)} only; {STACKS_HINT}"),
    "no_python_payloads": lambda v: (
        f"this export has Python samples but no JSON payloads: stalls are attributed to "
        f"{_attributed_to(v)} only; re-export with "
        "`nsys export --type sqlite --include-json true`"),
    "no_python_samples": lambda v: (
        f"no Python samples: stalls are attributed to {_attributed_to(v)} only; to name the "
        "source line of each stall, capture with `nsys profile --python-sampling=true "
        "--python-sampling-frequency=2000` and export with "
        "`nsys export --type sqlite --include-json true`"),
    "sites_without_source": said(
        "{unnamed} of {stalls} stall sites have no source line: no Python sample of the "
        "blocking thread fell inside their blocks with a frame outside the library paths "
        "(AnalysisConfig.library_paths)"),
    "source_text_missing": _source_text_missing,
    "no_nvtx": said(
        "no NVTX ranges: stalls cannot be attributed to loop phases; add torch.cuda.nvtx "
        "ranges around schedule/launch/sample/post"),
    # how waits were paired
    "no_sync_records": said(
        "{lacking}: event waits were matched to launches by timing alone"),
    # what the trace lost
    "launches_without_gpu_work": said(
        "{missing} of {launches} graph launches have no GPU work in the trace (profiler buffer "
        "loss, or capture stopped mid-replay); they are excluded"),
    "profiler_lost_data": said("the profiler reports lost data: {diagnostic}"),
    "cuda_tracing_stopped": lambda v: (
        f"CUDA tracing stops {v['after_s']:.2f} s into the capture, yet {v['later']} of "
        f"{v['ranges']} NVTX ranges follow with no CUDA activity: the profiler (nsys "
        f"{v['nsys_version']}) lost the GPU data. Profile again with an nsys that supports "
        "this CUDA version."),
    "rows_backwards": _backwards,
    "names_cut": _names_cut,
    "events_without_time": _events_without_time,
    "calls_outside_capture": lambda v: (
        f"{_calls(v)} starting outside the capture nsys recorded (damaged times) left out"),
    "calls_recorded_twice": lambda v: (
        f"{_calls(v)} recorded twice (the same thread, times and correlation id): a damaged "
        "export; read once"),
    # several processes
    "rank_groups": _rank_groups,
    "graph_traced_ranks": said(
        "graph replays were traced whole (--cuda-graph-trace=graph, nsys's default): the "
        "collectives inside them are not recorded, so a tensor-parallel rank that waits in its "
        "graph for a late peer would read as healthy; capture with --cuda-graph-trace=node to "
        "see which rank waits for which"),
    "job_clocks": _job_clocks,
    # what the numbers mean
    "negative_windows": _negative_windows,
    "gain_withheld": said("the gain of a fix is not projected: {why}"),
    "gain_range": said(
        "the gain of a fix is a range: the fixed steps' GPU work was measured after the idle "
        "gaps their stalls left, and a replay may run longer back to back (on another "
        "machine's H200 captures 9-12 % longer: the low end; on this repository's, no longer: "
        "the high end); a trace with stalls every few steps measures it"),
    # the gate's (render/gate_notes.py)
    **GATE_NOTES,
}


def note_text(note: Note, written: str | None = None) -> str:
    """``note`` said; ``written``: the sentence a file held beside it, shown for a code this
    version does not know (a newer one's)."""
    say = NOTES.get(note.code)
    if say is None:
        return written if written is not None else f"{note.code}: {dict(note.values)}"
    return say(note.values)


def notes_text(notes: Sequence[Note], written: Sequence[str] | None = None) -> list[str]:
    """Each of ``notes`` said (``written``: the sentences a file held beside them)."""
    return [note_text(n, written[i] if written and i < len(written) else None)
            for i, n in enumerate(notes)]
