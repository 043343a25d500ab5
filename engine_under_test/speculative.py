"""Speculative decoding (``--spec-decode K``), as EAGLE/MTP run it in sglang and vLLM.

Each step replays, per batch bucket, a draft graph K times and then one verify graph:

- the first draft replay (its own graph, ``draft_first``) also takes the step's input token
  (the prompt's last token, or the last accepted one) into the drafts' buffers; each replay
  runs a one-layer draft model on its input and appends its greedy token to the step's K+1
  token row (a shift register, so every replay is the same graph);
- the verify graph runs the target model on the input token and the K drafts at once
  (:meth:`Llama.extend`), takes the greedy token after each, and counts the accepted drafts
  (the leading ones the target agrees with); the last accepted token feeds the next step.

The host must know how many tokens each request advanced before it can place the next step,
so right after the verify launch it reads the accepted lengths back (``.tolist()``: a
device->host copy and a stream synchronisation): the step's stall, as in sglang's spec v1. The
K+1 tokens go back through the usual pinned copy, waited on a step later.

Verification is greedy (temperature 0, the usual setting for speculative decoding): the
requests' sampling parameters are not used. The draft model is the target's first layer alone
(its embedding and LM head shared: an early exit) with its own KV cache, written only by the
draft passes; the acceptance rate is in the metrics.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .config import ModelConfig
from .engine import _POS, ModelRunner, _InFlight
from .model import KVCache, Llama
from .scheduler import Row


@dataclass
class SpecInFlight(_InFlight):
    """A verified step: ``tokens`` holds K+1 tokens per slot, ``accepted`` the accepted
    drafts per slot (read back right after the verify launch)."""

    accepted: list[int] = dataclasses.field(default_factory=list)


class SpecDecoder:
    """Draft and verify graphs per bucket, installed as the runner's step graphs, and the
    accepted-length readback that replaces the runner's ``sample``."""

    def __init__(self, runner: ModelRunner, model_cfg: ModelConfig, drafts: int,
                 batch_sizes: tuple[int, ...]) -> None:
        self.runner, self.k = runner, drafts
        be, n = runner.backend, runner.cfg.max_batch
        dev = be.device
        # the draft: the target's embedding, first layer and LM head (an early exit), so that
        # with random weights it still agrees with the target on some tokens
        self.draft = Llama(dataclasses.replace(model_cfg, n_layers=1, vocab=2, max_seq=2), dev,
                           be.dtype, seed=runner.cfg.seed + 1)
        target = runner.model
        self.draft.cfg, self.draft.local = model_cfg, target.local
        self.draft.embed, self.draft.lm_head, self.draft.layers = (
            target.embed, target.lm_head, target.layers[:1])
        self.draft.norm, self.draft.rot = target.norm, target.rot
        self.draft.t_range = target.t_range
        self.draft_cache = KVCache(self.draft.local, n, dev, be.dtype)
        self.d_row = torch.zeros((n, drafts + 1), dtype=torch.int64, device=dev)
        self.d_draft_in = torch.zeros(n, dtype=torch.int64, device=dev)
        self.d_draft_pos = torch.zeros(n, dtype=torch.int64, device=dev)
        self.d_verified = torch.zeros((n, drafts + 1), dtype=torch.int64, device=dev)
        self.d_accepted = torch.zeros(n, dtype=torch.int64, device=dev)
        self.h_tokens = [be.host_buffer((n, drafts + 1), torch.int64) for _ in range(2)]
        self.accepted_total = self.verified_rows = 0
        with be.phase("capture_graphs"):
            runner.graphs.update({bs: self._capture(bs) for bs in batch_sizes})

    def _capture(self, bs: int):
        be, runner = self.runner.backend, self.runner

        def draft_pass() -> None:
            logits = self.draft.decode(self.d_draft_in[:bs], self.d_draft_pos[:bs],
                                       self.draft_cache)
            token = logits.argmax(-1)
            self.d_row[:bs, 1:].copy_(torch.cat((self.d_row[:bs, 2:], token[:, None]), 1))
            self.d_draft_in[:bs].copy_(token)
            self.d_draft_pos[:bs].add_(1)

        def draft_first() -> None:
            first = runner.step_tokens(bs)
            self.d_row[:bs, 0].copy_(first)
            self.d_draft_in[:bs].copy_(first)
            self.d_draft_pos[:bs].copy_(runner.d_ints[_POS, :bs])
            draft_pass()

        def verify() -> None:
            h = runner.model.extend(self.d_row[:bs], runner.d_ints[_POS, :bs], runner.cache)
            best = runner.model.head(h).argmax(-1)  # [bs, K+1]
            agree = (self.d_row[:bs, 1:] == best[:, :-1]).long()
            accepted = agree.cumprod(-1).sum(-1)
            self.d_verified[:bs].copy_(best)
            self.d_accepted[:bs].copy_(accepted)
            runner.d_last_token[:bs].copy_(best.gather(1, accepted[:, None])[:, 0])

        first, later, check = be.capture(draft_first), be.capture(draft_pass), be.capture(verify)

        def step() -> None:
            first()
            for _ in range(self.k - 1):
                later()
            check()
        return step

    def sample(self, k: int, rows: list[Row], bs: int) -> SpecInFlight:
        """Read the accepted lengths back now (the host places the next step with them), then
        copy the tokens out as usual; each request advances by its accepted drafts."""
        accepted = self.d_accepted[:bs].tolist()
        host, done = self.h_tokens[k % 2], self.runner.copy_done[k % 2]
        host[:bs].copy_(self.d_verified[:bs], non_blocking=True)
        done.record()
        for row in rows:
            row.request.fed += accepted[row.slot]
        self.accepted_total += sum(accepted[row.slot] for row in rows)
        self.verified_rows += len(rows)
        return SpecInFlight(k, rows, host, done, accepted=accepted)

    @property
    def acceptance(self) -> float | None:
        """Accepted drafts per verified row, over the run (0..K)."""
        return self.accepted_total / self.verified_rows if self.verified_rows else None
