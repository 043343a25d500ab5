"""A small but real overlap LLM inference engine, profiled under nsys to prove nsysscope.

It decodes a Llama-like model with CUDA graphs and an overlap scheduler (launch step k,
wait only on step k-1, post-process k-1 and prepare k+1 while k runs). Its ``--mode`` plants
the two bugs nsysscope must find: a GPU->CPU readback right after the launch (``case1``) and a
pageable host->device copy at the launch (``case2``). The fixed code paths are the default.

The mode names for what they do are ``readback-after-launch`` (= ``case1``) and
``pageable-inputs`` (= ``case2``). ``--tp N`` runs a tensor-parallel engine (one process per
GPU, NCCL all-reduces captured in the decode graphs), ``--output-copy`` copies the tokens back
on a side stream (vLLM's async output copy), ``--wait poll|poll-async`` waits by querying
events, and ``--torch-profile PATH`` writes a Kineto trace of the run. The serving switches
(``serving.py``: bursts and idle, batch buckets, start-up checks, prefill, speculative decoding,
a forward thread, per-step pinned buffers) make it a server under load.
"""

from .config import EngineConfig, ModelConfig, MODES

__all__ = ["EngineConfig", "ModelConfig", "MODES"]
