"""A Llama-like decoder for one decode step over a slot-indexed KV cache.

RMSNorm, rotary embeddings, grouped-query attention over the cache, SwiGLU and an LM head,
with random weights drawn from a seeded generator. Slot ``i`` of the cache belongs to
whichever request the scheduler put in batch row ``i``, so a decode step of padded batch
``bs`` reads the cache rows ``[:bs]`` as a view and every tensor shape is static, as a CUDA
graph needs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import ModelConfig


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def _rotate(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x [B, H, D]`` by per-row unit complex numbers ``rot [B, 1, D/2]``."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rot).flatten(-2).to(x.dtype)


class KVCache:
    """Keys and values per layer and slot: ``[layers, 2, slots, kv_heads, max_seq, head_dim]``."""

    def __init__(self, cfg: ModelConfig, slots: int, device: torch.device, dtype: torch.dtype):
        shape = (cfg.n_layers, 2, slots, cfg.n_kv_heads, cfg.max_seq, cfg.head_dim)
        self.kv = torch.zeros(shape, device=device, dtype=dtype)


class Llama:
    """Weights and the decode step. Not an ``nn.Module``: there is nothing to train."""

    def __init__(self, cfg: ModelConfig, device: torch.device, dtype: torch.dtype, seed: int):
        self.cfg = cfg
        gen = torch.Generator(device=device).manual_seed(seed)

        def w(*shape: int) -> torch.Tensor:
            return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
                    * cfg.init_std).to(dtype)

        q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        self.embed = w(cfg.vocab, cfg.d_model)
        self.layers = [
            dict(attn_norm=torch.ones(cfg.d_model, device=device, dtype=dtype),
                 wqkv=w(cfg.d_model, q + 2 * kv), wo=w(q, cfg.d_model),
                 mlp_norm=torch.ones(cfg.d_model, device=device, dtype=dtype),
                 w_gate_up=w(cfg.d_model, 2 * cfg.ffn), w_down=w(cfg.ffn, cfg.d_model))
            for _ in range(cfg.n_layers)
        ]
        self.norm = torch.ones(cfg.d_model, device=device, dtype=dtype)
        self.lm_head = w(cfg.d_model, cfg.vocab)
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device).float()
                                        / cfg.head_dim))
        angles = torch.outer(torch.arange(cfg.max_seq, device=device).float(), inv)
        self.rot = torch.polar(torch.ones_like(angles), angles)  # [T, D/2] complex
        self.t_range = torch.arange(cfg.max_seq, device=device)

    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One decode step: ``tokens/positions [B]`` -> logits ``[B, vocab]`` (float32).

        Writes this step's keys and values into slots ``[:B]`` at ``positions``.
        """
        cfg = self.cfg
        b = tokens.shape[0]
        rows = torch.arange(b, device=tokens.device)
        rot = self.rot[positions][:, None]
        # additive mask, shared by every layer: 0 where visible, -inf past the row's position
        bias = torch.zeros(b, 1, cfg.max_seq, device=tokens.device, dtype=torch.float32)
        bias = bias.masked_fill(self.t_range[None, None, :] > positions[:, None, None],
                                float("-inf")).to(self.embed.dtype)
        bias = bias.repeat_interleave(cfg.n_kv_heads, 0)  # [B*Hkv, 1, T], one row per kv head
        groups = cfg.n_heads // cfg.n_kv_heads
        q_dim, kv_dim = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
        h = self.embed[tokens]
        for i, layer in enumerate(self.layers):
            x = _rms_norm(h, layer["attn_norm"], cfg.norm_eps)
            qkv = x @ layer["wqkv"]
            qk = _rotate(qkv[:, : q_dim + kv_dim].unflatten(-1, (-1, cfg.head_dim)), rot)
            q, k = qk[:, : cfg.n_heads], qk[:, cfg.n_heads:]
            v = qkv[:, q_dim + kv_dim:].unflatten(-1, (-1, cfg.head_dim))
            cache.kv[i][:, rows, :, positions] = torch.stack((k, v), dim=1)
            keys, values = cache.kv[i, 0, :b], cache.kv[i, 1, :b]  # [B, Hkv, T, D], contiguous
            qg = q.reshape(b * cfg.n_kv_heads, groups, cfg.head_dim)
            scores = torch.baddbmm(bias, qg, keys.flatten(0, 1).transpose(1, 2),
                                   alpha=cfg.head_dim ** -0.5)
            attn = torch.bmm(scores.softmax(-1), values.flatten(0, 1)).reshape(b, q_dim)
            h = h + attn @ layer["wo"]
            x = _rms_norm(h, layer["mlp_norm"], cfg.norm_eps)
            gate, up = (x @ layer["w_gate_up"]).chunk(2, dim=-1)
            h = h + (F.silu(gate) * up) @ layer["w_down"]
        return (_rms_norm(h, self.norm, cfg.norm_eps) @ self.lm_head).float()
