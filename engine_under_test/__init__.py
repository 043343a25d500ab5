"""A small but real overlap LLM inference engine, profiled under nsys to prove nsysscope.

It decodes a Llama-like model with CUDA graphs and an overlap scheduler (launch step k,
wait only on step k-1, post-process k-1 and prepare k+1 while k runs). Its ``--mode`` plants
the two bugs nsysscope must find: a GPU->CPU readback right after the launch (``case1``) and a
pageable host->device copy at the launch (``case2``). The fixed code paths are the default.
"""

from .config import EngineConfig, ModelConfig, MODES

__all__ = ["EngineConfig", "ModelConfig", "MODES"]
