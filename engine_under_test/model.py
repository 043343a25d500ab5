"""A Llama-like decoder for one decode step over a slot-indexed KV cache.

RMSNorm, rotary embeddings, grouped-query attention over the cache, SwiGLU and an LM head,
with random weights drawn from a seeded generator. Slot ``i`` of the cache belongs to
whichever request the scheduler put in batch row ``i``, so a decode step of padded batch
``bs`` reads the cache rows ``[:bs]`` as a view and every tensor shape is static, as a CUDA
graph needs.

Tensor parallel (Megatron-style): with ``tp_size > 1`` rank ``tp_rank`` keeps
``n_heads/tp`` query heads, ``n_kv_heads/tp`` KV heads and ``ffn/tp`` of the MLP. QKV and
gate/up are column-parallel (no communication), the attention output and down projections
are row-parallel, each followed by an all-reduce of its partial sums; embedding and LM head are
replicated. Every rank draws the FULL weights from the same seed, in the same order as a
single process, and keeps its slice, so any ``tp`` computes the same function as ``tp=1``.

``exact`` (default: on a CPU device) computes the projections and the LM head in float64 and
rounds once to the model dtype, after the all-reduce: the sum over shards then rounds like the
unsplit product (whatever the split or the thread count), so on a CPU ``tp=2`` emits exactly
the tokens of ``tp=1``. On a GPU (bf16) the shards' sums round differently: close, not equal.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F

from .config import ModelConfig

AllReduce = Callable[[torch.Tensor], torch.Tensor]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _rotate(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x [B, H, D]`` by per-row unit complex numbers ``rot [B, 1, D/2]``."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rot).flatten(-2).to(x.dtype)


def shard_config(cfg: ModelConfig, tp_size: int) -> ModelConfig:
    """The per-rank shapes: ``n_heads``, ``n_kv_heads`` and ``ffn`` divided by ``tp_size``."""
    for name in ("n_heads", "n_kv_heads", "ffn"):
        if getattr(cfg, name) % tp_size:
            raise ValueError(f"tensor parallel {tp_size} does not divide {name}={getattr(cfg, name)}")
    return dataclasses.replace(cfg, n_heads=cfg.n_heads // tp_size,
                               n_kv_heads=cfg.n_kv_heads // tp_size, ffn=cfg.ffn // tp_size)


class KVCache:
    """Keys and values per layer and slot: ``[layers, 2, slots, kv_heads, max_seq, head_dim]``.

    Pass the rank's ``shard_config`` under tensor parallel: it holds only that rank's KV heads.
    """

    def __init__(self, cfg: ModelConfig, slots: int, device: torch.device, dtype: torch.dtype):
        shape = (cfg.n_layers, 2, slots, cfg.n_kv_heads, cfg.max_seq, cfg.head_dim)
        self.kv = torch.zeros(shape, device=device, dtype=dtype)


class Llama:
    """Weights and the decode step. Not an ``nn.Module``: there is nothing to train."""

    def __init__(self, cfg: ModelConfig, device: torch.device, dtype: torch.dtype, seed: int,
                 tp_rank: int = 0, tp_size: int = 1, all_reduce: AllReduce | None = None,
                 exact: bool | None = None):
        if tp_size > 1 and all_reduce is None:
            raise ValueError("tensor parallel needs an all_reduce")
        self.cfg, self.local = cfg, shard_config(cfg, tp_size)
        self.tp_rank, self.tp_size, self._all_reduce = tp_rank, tp_size, all_reduce
        self.exact = device.type == "cpu" if exact is None else exact
        gen = torch.Generator(device=device).manual_seed(seed)

        def w(*shape: int) -> torch.Tensor:
            return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
                    * cfg.init_std).to(dtype)

        def cols(full: torch.Tensor, *widths: int) -> torch.Tensor:
            """This rank's share of each consecutive column block of ``full``."""
            if tp_size == 1:
                return full
            parts, start = [], 0
            for width in widths:
                part = width // tp_size
                parts.append(full[:, start + tp_rank * part: start + (tp_rank + 1) * part])
                start += width
            return torch.cat(parts, dim=1)

        def rows(full: torch.Tensor) -> torch.Tensor:
            part = full.shape[0] // tp_size
            return full if tp_size == 1 else full[tp_rank * part:(tp_rank + 1) * part].clone()

        q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        self.embed = w(cfg.vocab, cfg.d_model)
        self.layers = []
        for _ in range(cfg.n_layers):  # the draws in the order of a single process
            wqkv, wo = w(cfg.d_model, q + 2 * kv), w(q, cfg.d_model)
            w_gate_up, w_down = w(cfg.d_model, 2 * cfg.ffn), w(cfg.ffn, cfg.d_model)
            self.layers.append(dict(
                attn_norm=torch.ones(cfg.d_model, device=device, dtype=dtype),
                wqkv=cols(wqkv, q, kv, kv), wo=rows(wo),
                mlp_norm=torch.ones(cfg.d_model, device=device, dtype=dtype),
                w_gate_up=cols(w_gate_up, cfg.ffn, cfg.ffn), w_down=rows(w_down)))
            del wqkv, wo, w_gate_up, w_down
        self.norm = torch.ones(cfg.d_model, device=device, dtype=dtype)
        self.lm_head = w(cfg.d_model, cfg.vocab)
        if self.exact:  # the same values, held in float64 once instead of cast every step
            for layer in self.layers:
                for name in ("wqkv", "wo", "w_gate_up", "w_down"):
                    layer[name] = layer[name].double()
            self.lm_head = self.lm_head.double()
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device).float()
                                        / cfg.head_dim))
        angles = torch.outer(torch.arange(cfg.max_seq, device=device).float(), inv)
        self.rot = torch.polar(torch.ones_like(angles), angles)  # [T, D/2] complex
        self.t_range = torch.arange(cfg.max_seq, device=device)

    def _column(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """A column-parallel projection: this rank's output columns, no communication."""
        if self.exact:
            return (x.double() @ weight).to(x.dtype)
        return x @ weight

    def _row(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """A row-parallel projection: partial sums over this rank's rows, all-reduced."""
        out = x.double() @ weight if self.exact else x @ weight
        if self.tp_size > 1:
            out = self._all_reduce(out)  # type: ignore[misc]
        return out.to(x.dtype)

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One decode step: ``tokens/positions [B]`` -> logits ``[B, vocab]`` (float32).

        Writes this step's keys and values into slots ``[:B]`` at ``positions``.
        """
        h = self.layers_forward(self.embed[tokens], positions, cache, 0, len(self.layers))
        return self.head(h)

    def layers_forward(self, h: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                       first: int, end: int) -> torch.Tensor:
        """Layers ``first`` to ``end - 1`` on the hidden states ``h [B, d_model]``: what one
        piece of a piecewise-captured step runs (``--pieces``); :meth:`decode` runs them all."""
        cfg = self.local  # this rank's heads and FFN width (all of them without TP)
        b = h.shape[0]
        rows = torch.arange(b, device=h.device)
        rot = self.rot[positions][:, None]
        # additive mask, shared by every layer: 0 where visible, -inf past the row's position
        bias = torch.zeros(b, 1, cfg.max_seq, device=h.device, dtype=torch.float32)
        bias = bias.masked_fill(self.t_range[None, None, :] > positions[:, None, None],
                                float("-inf")).to(self.embed.dtype)
        bias = bias.repeat_interleave(cfg.n_kv_heads, 0)  # [B*Hkv, 1, T], one row per kv head
        groups = cfg.n_heads // cfg.n_kv_heads
        q_dim, kv_dim = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        for i in range(first, end):
            layer = self.layers[i]
            x = _rms_norm(h, layer["attn_norm"], cfg.norm_eps)
            qkv = self._column(x, layer["wqkv"])
            qk = _rotate(qkv[:, : q_dim + kv_dim].unflatten(-1, (-1, cfg.head_dim)), rot)
            q, k = qk[:, : cfg.n_heads], qk[:, cfg.n_heads:]
            v = qkv[:, q_dim + kv_dim:].unflatten(-1, (-1, cfg.head_dim))
            cache.kv[i][:, rows, :, positions] = torch.stack((k, v), dim=1)
            keys, values = cache.kv[i, 0, :b], cache.kv[i, 1, :b]  # [B, Hkv, T, D], contiguous
            qg = q.reshape(b * cfg.n_kv_heads, groups, cfg.head_dim)
            scores = torch.baddbmm(bias, qg, keys.flatten(0, 1).transpose(1, 2),
                                   alpha=cfg.head_dim ** -0.5)
            attn = torch.bmm(scores.softmax(-1), values.flatten(0, 1)).reshape(b, q_dim)
            h = h + self._row(attn, layer["wo"])
            x = _rms_norm(h, layer["mlp_norm"], cfg.norm_eps)
            gate, up = self._column(x, layer["w_gate_up"]).chunk(2, dim=-1)
            h = h + self._row(F.silu(gate) * up, layer["w_down"])
        return h

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """The final norm and the LM head: hidden states -> logits ``[B, vocab]`` (float32)."""
        return self._column(_rms_norm(h, self.norm, self.local.norm_eps), self.lm_head).float()

    def extend(self, tokens: torch.Tensor, start: torch.Tensor, cache: KVCache,
               slots: torch.Tensor | None = None) -> torch.Tensor:
        """Several tokens per row at once: ``tokens [B, T]`` at positions ``start[b] + t``
        -> hidden states ``[B, T, d_model]``, each token attending to its row's cache up to
        its own position (causal). Writes the T keys and values into cache slots ``slots``
        (default ``[:B]``).

        An eager prefill runs it with ``start = 0`` on newly admitted requests' prompts
        (``--prefill``); speculative decoding's verify graph on the last token and the drafts
        (``--spec-decode``). Keys past a row's own length (padding) are written too: harmless,
        as a later step at that position overwrites them before reading, like :meth:`decode`."""
        cfg = self.local
        b, t = tokens.shape
        pos = start[:, None] + torch.arange(t, device=tokens.device)  # [B, T]
        rot = self.rot[pos][:, :, None]  # [B, T, 1, D/2]
        hidden = pos[:, :, None] < self.t_range[None, None, :]  # [B, T, max_seq]
        bias = torch.zeros(hidden.shape, device=tokens.device, dtype=torch.float32)
        bias = bias.masked_fill(hidden, float("-inf")).to(self.embed.dtype)
        groups = cfg.n_heads // cfg.n_kv_heads
        # [B*Hkv, T*groups, max_seq]: query rows (t, g) of each kv head share its row's mask
        bias = bias[:, None, :, None].expand(b, cfg.n_kv_heads, t, groups, cfg.max_seq)
        bias = bias.reshape(b * cfg.n_kv_heads, t * groups, cfg.max_seq)
        q_dim, kv_dim = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        index = torch.arange(b, device=tokens.device) if slots is None else slots
        h = self.embed[tokens]
        for i, layer in enumerate(self.layers):
            x = _rms_norm(h, layer["attn_norm"], cfg.norm_eps)
            qkv = self._column(x, layer["wqkv"])  # [B, T, q + 2 kv]
            qk = _rotate(qkv[..., : q_dim + kv_dim].unflatten(-1, (-1, cfg.head_dim)), rot)
            q, k = qk[:, :, : cfg.n_heads], qk[:, :, cfg.n_heads:]
            v = qkv[..., q_dim + kv_dim:].unflatten(-1, (-1, cfg.head_dim))
            cache.kv[i][:, index[:, None], :, pos] = torch.stack((k, v), dim=2)
            if slots is None:
                keys, values = cache.kv[i, 0, :b], cache.kv[i, 1, :b]  # views, no copy
            else:
                keys, values = cache.kv[i, 0][slots], cache.kv[i, 1][slots]
            qg = q.reshape(b, t, cfg.n_kv_heads, groups, cfg.head_dim).transpose(1, 2)
            qg = qg.reshape(b * cfg.n_kv_heads, t * groups, cfg.head_dim)
            scores = torch.baddbmm(bias, qg, keys.flatten(0, 1).transpose(1, 2),
                                   alpha=cfg.head_dim ** -0.5)
            attn = torch.bmm(scores.softmax(-1), values.flatten(0, 1))
            attn = attn.reshape(b, cfg.n_kv_heads, t, groups, cfg.head_dim).transpose(1, 2)
            h = h + self._row(attn.reshape(b, t, q_dim), layer["wo"])
            x = _rms_norm(h, layer["mlp_norm"], cfg.norm_eps)
            gate, up = self._column(x, layer["w_gate_up"]).chunk(2, dim=-1)
            h = h + self._row(F.silu(gate) * up, layer["w_down"])
        return h
