"""``--torch-profile PATH``: the run under ``torch.profiler``, exported as a Kineto Chrome trace.

The whole run after graph capture (with ``--profile-startup`` the start-up too) is profiled
(no schedule), with CPU and, on a GPU, CUDA activities and Python stacks (``with_stack=True``:
``python_function`` events), no shapes.
Every engine phase is then also a ``record_function`` range of the same name, so the trace
has ``user_annotation`` events ``step N``, ``schedule``, ``sample``, ``wait_prev``...
The file is gzipped when PATH ends in ``.gz``, and appears only when complete (written under a
temporary name, then renamed). Under tensor parallel each rank writes its own file:
``trace.json.gz`` becomes ``trace.rank0.json.gz``, ``trace.rank1.json.gz``...
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
from typing import Iterator

import torch

from .backend import Backend


def rank_path(path: str, rank: int, world: int) -> str:
    """``path`` with ``.rankR`` before its extension (``.json`` / ``.json.gz``) when world > 1."""
    if world <= 1:
        return path
    head, tail = os.path.split(path)
    for ext in (".json.gz", ".json", ".gz"):
        if tail.endswith(ext) and len(tail) > len(ext):
            return os.path.join(head, f"{tail[:-len(ext)]}.rank{rank}{ext}")
    stem, ext = os.path.splitext(tail)
    return os.path.join(head, f"{stem}.rank{rank}{ext}")


def export(prof: torch.profiler.profile, path: str) -> None:
    """Write ``prof``'s Chrome trace to ``path`` (gzipped for ``.gz``), atomically."""
    tmp = f"{path}.tmp{os.getpid()}"
    raw = tmp + ".json"
    try:
        prof.export_chrome_trace(raw)
        if path.endswith(".gz"):
            with open(raw, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.remove(raw)
        else:
            os.replace(raw, tmp)
        os.replace(tmp, path)
    finally:
        for leftover in (raw, tmp):
            if os.path.exists(leftover):
                os.remove(leftover)


@contextlib.contextmanager
def torch_profile(path: str, backend: Backend, stacks: bool = True,
                  annotate: bool = True) -> Iterator[torch.profiler.profile]:
    """Profile the block; phases become ``record_function`` ranges (unless ``annotate`` is
    False: ``--no-nvtx``); export to ``path``. ``stacks=False`` leaves the Python stacks out:
    much less host overhead, no line names."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if backend.device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    prof = torch.profiler.profile(activities=activities, with_stack=stacks, record_shapes=False)
    backend.annotate = annotate
    try:
        with prof:
            yield prof
    finally:
        backend.annotate = False
    export(prof, path)
