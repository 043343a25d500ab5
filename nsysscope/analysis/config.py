"""Every threshold the analysis uses, in one explicit object (no ambient configuration)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class AnalysisConfig:
    #: launches at the start treated as warm-up; None picks max(5, 2 % of launches)
    warmup_launches: int | None = None
    #: a GPU idle gap longer than this with no stall means the host is launch-bound. Healthy
    #: graph replays on the H200 samples are 30-60 us apart (launch latency plus the eager
    #: sampling ops), so 150 us flags a host that is really late, not jitter.
    launch_bound_gap_us: float = 150.0
    #: CPU and GPU timestamps come from one clock in nsys, but a sync returns a few us after the
    #: GPU work it waited on; this much slack is allowed when matching by timing alone
    timing_slack_us: float = 50.0
    #: the verdict calls overlap broken when more than this fraction of steady launches stall
    stall_fraction_broken: float = 0.05

    def to_dict(self) -> dict:
        return asdict(self)

    def warmup_for(self, n_launches: int) -> int:
        if self.warmup_launches is not None:
            return min(self.warmup_launches, n_launches)
        return min(n_launches, max(5, int(0.02 * n_launches)))
