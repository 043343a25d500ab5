"""Sampling: a device part captured in the decode graph, and a host part right after launch.

The device part computes, for every row, the greedy token and a temperature/top-p sample.
Top-p is applied within the ``TOP_K`` most likely tokens, as serving engines do to avoid a
full-vocabulary sort. Randomness is a counter-based hash of (request seed, position, rank), so a request's tokens do
not depend on its slot, its batch or the step it ran in.

The host part (the ``sample`` phase) merges the two into the tokens that feed the next step.
It skips the merge when every request is greedy. How it knows *that* is the seed note's bug:
``case1`` asks the GPU tensor, which copies device->host and synchronises the stream, so the
host waits for the forward pass it has just launched. The fixed path uses the flag the host
already computed from the requests' own parameters.
"""

from __future__ import annotations

import torch

TOP_K = 64
_MASK32 = 0xFFFFFFFF
_MUL = 0x045D9F3B  # < 2**27, so products of 32-bit values stay inside int64


def _mix32(x: torch.Tensor) -> torch.Tensor:
    x = ((x ^ (x >> 16)) * _MUL) & _MASK32
    x = ((x ^ (x >> 16)) * _MUL) & _MASK32
    return x ^ (x >> 16)


def uniform_noise(seed: torch.Tensor, position: torch.Tensor, width: int) -> torch.Tensor:
    """Uniform (0, 1) noise ``[B, width]``, a pure function of each row's seed and position."""
    rank = torch.arange(width, device=seed.device)
    key = _mix32((seed[:, None] * 1_000_003 + position[:, None]) & _MASK32)
    bits = _mix32((key * 65_537 + rank[None, :]) & _MASK32)
    return ((bits >> 9).float() + 0.5) * (1.0 / (1 << 23))  # 23 bits: never rounds to 1.0


def sample_device(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor,
                  seed: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(greedy, sampled)`` token ids for ``logits [B, V]``: argmax, and a top-p sample."""
    greedy = logits.argmax(-1)
    probs = (logits / temperature.clamp_min(1e-4)[:, None]).softmax(-1)
    sorted_p, order = probs.topk(min(TOP_K, logits.shape[1]), dim=-1)
    keep = (sorted_p.cumsum(-1) - sorted_p) < top_p[:, None]  # the top token is always kept
    race = (sorted_p * keep) / -uniform_noise(seed, position, sorted_p.shape[1]).log()
    sampled = order.gather(-1, race.argmax(-1, keepdim=True))[:, 0]
    return greedy, sampled


def finish_sampling(greedy: torch.Tensor, sampled: torch.Tensor, is_greedy: torch.Tensor,
                    all_greedy: bool, readback: str | None = None) -> torch.Tensor:
    """The ``sample`` phase: the next tokens, on the device, from the graph's two candidates.

    ``readback="all"`` plants case 1, the seed note's line, exactly as it reads there;
    ``"tolist"`` is the same bug written the other common way. ``None`` is the fix.
    """
    if readback == "all":
        if is_greedy.all():
            return greedy
    elif readback == "tolist":
        if all(is_greedy.tolist()):
            return greedy
    elif all_greedy:
        return greedy
    return torch.where(is_greedy, greedy, sampled)
