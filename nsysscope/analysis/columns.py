"""The per-launch table's column contract: every column's name, type and meaning, in the order
the table has them (:attr:`nsysscope.Analysis.launches`, and ``report --per-launch`` with the
operating system's ``pid`` and ``os_tid`` added), said once. ``docs/per-launch.md`` is made
from it, and the tests check that the table a real trace gives has these columns, in this
order, of these types.

A type is a kind of value, not a pandas dtype: the analysis keeps times as floats (NaN where
a time does not apply) where the file has nullable integers, and text as categoricals where
the file has strings; what a reader may rely on is the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..model import CLASS_TABLE


class Kind(StrEnum):
    """What a column's values are, as the file holds them."""

    INT = "integer"
    MAYBE_INT = "integer, or empty"
    FLAG = "true or false"
    TEXT = "text"


INT, MAYBE_INT, FLAG, TEXT = Kind.INT, Kind.MAYBE_INT, Kind.FLAG, Kind.TEXT


class Section(StrEnum):
    """The part of the documentation a column is described in."""

    LAUNCH = "The launch"
    BLOCK = "The host block that waited on it"
    STEADY = "Steady state, collectives, attribution"
    SOURCE = "Python source line (with `--python-sampling=true` captures)"


LAUNCH, BLOCK, STEADY, SOURCE = Section.LAUNCH, Section.BLOCK, Section.STEADY, Section.SOURCE


@dataclass(frozen=True)
class Column:
    """One column (or a few that mean the same of different moments, documented together)."""

    names: tuple[str, ...]
    #: the kind of every one of ``names``, or of each
    kind: Kind | tuple[Kind, ...]
    section: Section
    meaning: str

    def kinds(self) -> dict[str, Kind]:
        """Each name's kind."""
        each = self.kind if isinstance(self.kind, tuple) else (self.kind,) * len(self.names)
        return dict(zip(self.names, each, strict=True))


#: every column of the per-launch table, in its order
LAUNCH_TABLE: tuple[Column, ...] = (
    Column(("launch",), INT, LAUNCH,
        "0-based index of the launch, in issue order over the part of the trace read (the "
        "whole trace, or the `--from`/`--to` range: there it counts from the range's first "
        "launch, so use `step` to find one launch in both)"),
    Column(("tid",), INT, LAUNCH,
        "nsys global thread id of the thread that called `cudaGraphLaunch`"),
    Column(("pid",), INT, LAUNCH,
        "operating-system process id of that thread (from `tid`)"),
    Column(("os_tid",), INT, LAUNCH,
        "operating-system thread id of that thread (from `tid`)"),
    Column(("proc",), INT, LAUNCH,
        "nsys's process key (`tid >> 24`: VM id and pid): CUDA correlation ids, streams and "
        "events are unique only within one"),
    Column(("corr_id",), INT, LAUNCH,
        "CUDA correlation id of the launch call: it joins the call to its GPU work in nsys's "
        "tables"),
    Column(("api_start_ns", "api_end_ns"), INT, LAUNCH,
        "start and end of the `cudaGraphLaunch` call on the host"),
    Column(("gpu_start_ns", "gpu_end_ns"), MAYBE_INT, LAUNCH,
        "start and end of the graph's replay on the GPU (first kernel start, last kernel "
        "end); empty when the GPU work is missing from the trace"),
    Column(("stream",), INT, LAUNCH,
        "CUDA stream the graph was launched on (-1 when unknown)"),
    Column(("device",), INT, LAUNCH,
        "GPU the replay ran on (-1 when unknown)"),
    Column(("n_ops",), INT, LAUNCH,
        "kernels, copies and memsets of the replay found in the trace (1 with "
        "`--cuda-graph-trace=graph`: the replay is one row)"),
    Column(("graph_exec",), INT, LAUNCH,
        "the executable graph the launch replayed (a server captures one per batch-size "
        "bucket): nsys's id of it (the `graphExecId` of a graph-trace row, the graph of a "
        "node's `graphNodeId`); torch.profiler names none, so there it is a number given to "
        "each distinct sequence of kernels a replay runs (execs that run the very same "
        "kernels share one); -1 where unknown"),
    Column(("next_api_start_ns", "next_api_end_ns"), MAYBE_INT, LAUNCH,
        "the next launch call of the same process on the same stream"),
    Column(("next_gpu_start_ns",), MAYBE_INT, LAUNCH,
        "the start of that next launch's replay on the GPU"),
    Column(("gpu_gap_ns",), MAYBE_INT, LAUNCH,
        "`next_gpu_start_ns - gpu_end_ns`: the time between this replay and the next on the "
        "stream"),
    Column(("gpu_idle_ns",), MAYBE_INT, LAUNCH,
        "the **GPU idle gap**: `gpu_gap_ns` minus any other GPU work of the same process on "
        "the device inside it (eager sampling kernels, copies). The report's \"GPU idle gap\" "
        "and the summary's `gpu_gap_us` are this column, in microseconds"),
    Column(("busy_before_start_ns", "busy_before_end_ns"), MAYBE_INT, LAUNCH,
        "the GPU busy time of the same process on the device (its replays and every other GPU"
        " op, overlaps counted once) from the start of its first replay on that device to "
        "this replay's start / end: 0 at the first replay's start. The busy time between two "
        "replays is a difference, `busy_before_end_ns` of the later one minus "
        "`busy_before_start_ns` of the earlier one (over their span, `gpu_end_ns - "
        "gpu_start_ns`: the GPU busy fraction of any stretch of launches); the summary's "
        "`gpu_busy` is that over the steady launches"),
    Column(("block",), INT, BLOCK,
        "index of the host block (a sync, an event wait, a blocking copy or a polling loop) "
        "that waited on this launch's GPU work; -1 when none did"),
    Column(("waited",), FLAG, BLOCK,
        "whether a host block waited on this launch (`block >= 0`); `False` is the report's "
        "\"host never waited\": nothing on the host blocked on this launch's GPU work before "
        "the next launch"),
    Column(("block_start_ns", "block_end_ns"), MAYBE_INT, BLOCK,
        "when that block started and returned"),
    Column(("block_name",), TEXT, BLOCK,
        "the blocking call (`cudaStreamSynchronize`, `cudaEventSynchronize`, "
        "`cudaMemcpyAsync`...)"),
    Column(("block_tid",), INT, BLOCK,
        "nsys global thread id of the thread that blocked"),
    Column(("block_polls",), INT, BLOCK,
        "for a polling loop (`cudaEventQuery`/`cudaStreamQuery` until done), how many queries"
        " it made; 0 otherwise"),
    Column(("window_ns",), MAYBE_INT, BLOCK,
        "the **effective overlap window**: `block_start_ns - api_end_ns`, how long the host "
        "worked ahead after launching before it waited on this launch"),
    Column(("stall",), FLAG, BLOCK,
        "the block held up the next launch: the next launch was issued only after the block "
        "returned, when the GPU had already finished this replay, so the GPU ran dry"),
    Column(("cause_name",), TEXT, BLOCK,
        "the API call that made the block wait for the GPU: the copy (`cudaMemcpyAsync`) when"
        " a copy did, else empty"),
    Column(("cause_copy_kind",), TEXT, BLOCK,
        "that copy's direction: `HtoD`, `DtoH`, `DtoD`, `PtoP`, `HtoH`, `HtoA`, `AtoH`, "
        "`AtoA`, `AtoD`, `DtoA`, `UVM HtoD`, `UVM DtoH`, `UVM DtoD`, `unknown`"),
    Column(("cause_src_kind", "cause_dst_kind"), TEXT, BLOCK,
        "the copy's source and destination memory: `pageable`, `pinned`, `device`, `array`, "
        "`managed`, `device static`, `managed static`, `unknown`"),
    Column(("cause_bytes",), MAYBE_INT, BLOCK,
        "the copy's size in bytes"),
    Column(("cause_start_ns",), MAYBE_INT, BLOCK,
        "when the copy call started"),
    Column(("cause_tid",), MAYBE_INT, BLOCK,
        "nsys global thread id of the thread that issued the copy"),
    Column(("klass",), TEXT, BLOCK,
        "the launch's class (the class table, `nsysscope/model/classes.py`): "
        + "; ".join(f"`{r.klass}`: {r.meaning}" for r in CLASS_TABLE)),
    Column(("api_chain",), TEXT, BLOCK,
        "the calls that made the stall, as the report shows them: `cudaMemcpyAsync DtoH 1 B →"
        " cudaStreamSynchronize`"),
    Column(("graphs_building", "graphs_built"), FLAG, STEADY,
        "whether a graph of its process is instantiated (`cudaGraphInstantiate*`) after the "
        "launch call, and whether one was before it, in the part of the trace read: what a "
        "server's start-up is found from"),
    Column(("quiet_start_ns", "quiet_ns"), MAYBE_INT, STEADY,
        "the longest quiet gap of its process between the end of its call and the next "
        "launch of the process (no CUDA call the loader reads, no GPU work): its start and "
        "length; empty for none and for the process's last launch: what idle periods are "
        "found from"),
    Column(("startup",), FLAG, STEADY,
        "the launch is a server's start-up: one of its process's first launches, each waited "
        "on at once with a plain sync while its graphs were being instantiated, or as the "
        "first replay of its graph exec right after (a check replay); left out of warm-up and "
        "of the steady state (summary `startup`)"),
    Column(("warmup",), FLAG, STEADY,
        "the launch is warm-up (the first `--warmup` launches of its process after its "
        "start-up; default max(5, 2 %))"),
    Column(("steady",), FLAG, STEADY,
        "the launch counts in the report's numbers: not start-up, not warm-up, not the last "
        "one (on its stream, or before an idle period), and with GPU work"),
    Column(("idle_ns",), MAYBE_INT, STEADY,
        "the idle period after the launch: its `quiet_ns`, where that gap followed the "
        "launch's own host wait and lasted 20 steps or more (summary `idle`); empty for none"),
    Column(("collective_group",), INT, STEADY,
        "the group of ranks its process waits with in collectives, named by the group's "
        "smallest process key (`proc`): ranks whose collective kernels end together (an "
        "export of several tensor-parallel groups holds several); -1 for a process without "
        "collectives"),
    Column(("collective_wait_ns",), INT, STEADY,
        "time this launch's replay spent inside collectives (NCCL all-reduce...) waiting for "
        "a later rank, from traces with several ranks; 0 otherwise"),
    Column(("waited_for",), INT, STEADY,
        "the process key (`proc`) of the rank it waited for most in those collectives; -1 "
        "when none"),
    Column(("waited_in",), TEXT, STEADY,
        "the collective it waited in longest (`all-reduce`, `all-gather`...); empty when it "
        "waited for nobody"),
    Column(("nvtx_path",), TEXT, STEADY,
        "the NVTX ranges around the block (or, with no block, around the launching thread "
        "when the GPU ran dry), outermost first: `step 11 > sample > aten::item`"),
    Column(("phase",), TEXT, STEADY,
        "the loop phase from those ranges (`schedule`, `launch`, `sample`, `post`...)"),
    Column(("op",), TEXT, STEADY,
        "the innermost aten op, with `--pytorch=autograd-nvtx` captures"),
    Column(("step",), MAYBE_INT, STEADY,
        "the number of the NVTX `step N` range around the launch call itself, when the engine"
        " emits them"),
    Column(("thread",), TEXT, STEADY,
        "name and OS thread id of the thread that blocked (or launched, with no block): "
        "`python3 (605)`"),
    Column(("src_file", "src_line", "src_function"), (TEXT, MAYBE_INT, TEXT), SOURCE,
        "the user-code line the Python samples inside this launch's block name (the stall's "
        "line)"),
    Column(("src_text",), TEXT, SOURCE,
        "that line's text, read from the source file (`--source-root DIR` says where the "
        "source is); empty when the file is not found"),
    Column(("src_samples",), INT, SOURCE,
        "this block's samples that named that line (with a torch.profiler trace: its "
        "`python_function` events on the blocking call's stack, one per CUDA call)"),
    Column(("src_block_samples",), INT, SOURCE,
        "all Python samples of the blocking thread inside the block (torch.profiler: those "
        "events)"),
    Column(("period_ns",), MAYBE_INT, STEADY,
        "the host's cadence: the next launch call of the process on the stream minus this one"
        " (the projection's step)"),
    Column(("gpu_work_ns",), MAYBE_INT, STEADY,
        "what the GPU did for this step: the replay plus other GPU work of the process before"
        " the next replay (`gpu_end_ns - gpu_start_ns + gpu_gap_ns - gpu_idle_ns`)"),
    Column(("host_blocked_ns",), MAYBE_INT, STEADY,
        "time the launching thread spent blocked in host waits during the step (`period_ns - "
        "host_blocked_ns` is the host's own work)"),
    Column(("burst",), INT, STEADY,
        "the launch's step as the host issued it: how many host blocks of its process's "
        "launching threads (threads that launch graphs) started before the launch call, "
        "counted from the start of what was read (`--from`: the range's start); launches of a"
        " process with the same number were issued with no wait of those threads between them"
        " (one per step with the whole step in one graph; every piece of a step with "
        "piecewise CUDA graphs). The summary's `bursts` counts them"),
)
#: the columns ``report --per-launch`` adds to the analysis's table (from ``tid``)
EXPORT_ONLY = ("pid", "os_tid")
#: every column's name and kind, in the table's order
COLUMNS: dict[str, Kind] = {n: k for c in LAUNCH_TABLE for n, k in c.kinds().items()}
