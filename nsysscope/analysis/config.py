"""Every threshold the analysis uses, in one explicit object (no ambient configuration)."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

#: files that are not the user's code, as ``fnmatch`` globs on the path nsys recorded: the
#: standard library, site-packages (scrubbed traces say ``<stdlib>/`` and ``<site-packages>/``),
#: frozen modules, and torch wherever it is installed
LIBRARY_PATHS = ("<stdlib>/*", "<site-packages>/*", "<frozen *>", "*/site-packages/*",
                 "*/dist-packages/*", "*/lib/python3*/*", "*/lib64/python3*/*", "torch/*",
                 "*/torch/*")


@dataclass(frozen=True)
class AnalysisConfig:
    #: launches at the start treated as warm-up; None picks max(5, 2 % of launches)
    warmup_launches: int | None = None
    #: a GPU idle gap longer than this with no stall means the host is launch-bound. Healthy
    #: graph replays on the H200 samples are 30-60 us apart (launch latency plus the eager
    #: sampling ops), so 150 us flags a host that is really late, not jitter.
    launch_bound_gap_us: float = 150.0
    #: a block matched by timing alone (a blocking copy, a sync or polling loop with no sync
    #: record) waited on a launch only if it returned after the launch's GPU work ended, less
    #: this much clock slack. CPU and GPU times come from one clock in nsys, and a wait returns
    #: after the work it waited on: on every H200 sample the paired waits returned 9.8-30 us
    #: after it. 50 us (the old value) took a pageable upload that returned 41.7 us before the
    #: replay ended for its wait, and split case 2's one stall site in two.
    timing_slack_us: float = 0.0
    #: polling: queries (``cudaEventQuery``...) on one thread at most this far apart, with no
    #: other CUDA call between them, are one wait. On the H200 captures a tight
    #: ``while not e.query()`` loop leaves 0.5-1.6 us between tries (p10-p99) and an asyncio
    #: loop that yields between tries 3.4-12 us; 100 us is 8x the largest, and small enough
    #: that a host doing real work between tries is not called waiting (analysis/polling.py)
    poll_gap_us: float = 100.0
    #: polling: a loop needs this many tries to count as a wait (one query that finds the
    #: work done waited for nothing)
    poll_min_queries: int = 3
    #: a rank "waits for a peer" when its median time per step inside collectives, beyond the
    #: latest-arriving rank, is at least this long and this fraction of its step: healthy TP=2
    #: ranks on the H200 captures wait 11-25 us per step (noise), a rank whose peer stalls ~2 ms
    peer_wait_us: float = 100.0
    peer_wait_fraction: float = 0.05
    #: the verdict calls overlap broken when more than this fraction of steady launches stall
    stall_fraction_broken: float = 0.05
    #: Python sampling: a stall is blamed on the innermost frame of each sample whose file
    #: matches none of these globs (see LIBRARY_PATHS; pass () to blame the innermost frame)
    library_paths: tuple[str, ...] = LIBRARY_PATHS
    #: a line needs this share of a site's samples to be reported as a site of its own; the
    #: stalls of rarer lines join the site's dominant line (keeps sites stable under jitter)
    min_line_share: float = 0.2
    #: the folder the engine's source files are read under, for the line text (None: the
    #: current directory); nothing outside it is read, whatever path the trace names
    source_root: str | None = None

    def __post_init__(self) -> None:
        """ValueError, naming the field, for a setting no analysis can use (the command line
        refuses them itself; from Python a negative warm-up ran as 0 and was written into the
        summary as -3)."""
        w = self.warmup_launches
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise ValueError(f"warmup_launches must be None or an integer >= 0, not {w!r}")
        if isinstance(self.poll_min_queries, bool) or not isinstance(self.poll_min_queries, int) \
                or self.poll_min_queries < 1:
            raise ValueError(f"poll_min_queries must be an integer >= 1, not "
                             f"{self.poll_min_queries!r}")
        for name, low, high, closed in (
                ("launch_bound_gap_us", 0.0, math.inf, False),
                ("poll_gap_us", 0.0, math.inf, False),
                ("timing_slack_us", 0.0, math.inf, True), ("peer_wait_us", 0.0, math.inf, True),
                ("peer_wait_fraction", 0.0, 1.0, True), ("stall_fraction_broken", 0.0, 1.0, True),
                ("min_line_share", 0.0, 1.0, True)):
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
                and (low <= v if closed else low < v) and v <= high
            if not ok:
                where = f"in [{low:g}, {high:g}]" if high < math.inf else \
                    f"{'>=' if closed else '>'} {low:g}"
                raise ValueError(f"{name} must be a finite number {where}, not {v!r}")
        paths = self.library_paths
        if isinstance(paths, str | bytes) or not isinstance(paths, tuple | list) or \
                not all(isinstance(p, str) for p in paths):  # a string was one glob per letter,
            # and its '*' matched every frame: no stall had a source line
            raise TypeError(f"library_paths must be a tuple of glob strings, not {paths!r}")
        object.__setattr__(self, "library_paths", tuple(paths))  # hashable, as frozen needs
        root = self.source_root
        if root is not None:
            if not isinstance(root, str | os.PathLike):
                raise TypeError(f"source_root must be a folder's path or None, not {root!r}")
            if not os.path.isdir(root):  # as --source-root: the lines would go missing silently
                raise ValueError(f"source_root: {os.fspath(root)!r} is not a folder")
            object.__setattr__(self, "source_root", os.fspath(root))

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON has them (a tuple as a list, so that a summary read back from
        its JSON equals the one written)."""
        d = asdict(self)
        d.pop("source_root")  # where this machine keeps the source: not a setting, maybe private
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def warmup_for(self, n_launches: int) -> int:
        if self.warmup_launches is not None:
            return min(self.warmup_launches, n_launches)
        return min(n_launches, max(5, int(0.02 * n_launches)))


def config_of(config: object) -> AnalysisConfig:
    """``config`` as the analysis takes it: None is the defaults; anything but an
    :class:`AnalysisConfig` is a TypeError saying how to make one (a dict failed deep in the
    analysis with an AttributeError)."""
    if config is None:
        return AnalysisConfig()
    if not isinstance(config, AnalysisConfig):
        raise TypeError(f"config: an AnalysisConfig, not {type(config).__name__} (for "
                        "example AnalysisConfig(warmup_launches=3))")
    return config
