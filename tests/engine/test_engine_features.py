"""Tests of the engine's newer switches on its CPU backend: the runner/processor split, mode
aliases, ``--output-copy``, ``--wait poll|poll-async``, tensor parallel over gloo,
``--torch-profile`` and the command line's checks.

Each run uses the tiny model and short workloads; the one multi-process test (TP=2 on gloo)
has a hard timeout, so a hang fails instead of blocking CI.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine_under_test.__main__ import choose_model, main  # noqa: E402
from engine_under_test.backend import CpuBackend, Waiter  # noqa: E402
from engine_under_test.config import EngineConfig, ModelConfig  # noqa: E402
from engine_under_test.engine import Engine, ModelRunner  # noqa: E402
from engine_under_test.model import KVCache, Llama, shard_config  # noqa: E402
from engine_under_test.output import OutputProcessor  # noqa: E402
from engine_under_test.profiling import rank_path  # noqa: E402

MODEL = ModelConfig.tiny()
BASE = dict(seed=6, steps=48, max_batch=12, initial_requests=12, warmup_steps=5,
            prompt_len=(2, 6), max_new_tokens=(4, 24), arrivals_per_step=1.0,
            stop_string_fraction=0.5)


class _SpyEvent:
    def __init__(self, log: list) -> None:
        self.log, self.pending = log, 0

    def record(self, stream=None) -> None:
        self.log.append(("record", "side" if stream is not None else "main"))
        self.pending = 2  # query() says "not yet" twice, then done

    def synchronize(self) -> None:
        self.log.append(("synchronize",))

    def query(self) -> bool:
        self.log.append(("query",))
        self.pending -= 1
        return self.pending < 0


class SpyBackend(CpuBackend):
    """The CPU backend, logging which phase each event operation happens in."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple] = []
        self._stack: list[str] = []

    def phase(self, name):
        backend = self

        class _Phase:
            def __enter__(self):
                backend.phases.append(name)
                backend._stack.append(name)

            def __exit__(self, *exc):
                backend._stack.pop()

        return _Phase()

    def event(self, timing: bool = False):
        if timing:
            return super().event(timing)
        backend = self

        class _Event(_SpyEvent):
            def __init__(self) -> None:
                super().__init__([])

            def _log(self, *op) -> None:
                step = next((p for p in reversed(backend._stack) if p.startswith("step ")), None)
                where = backend._stack[-1] if backend._stack else None
                backend.ops.append((step, where, *op))

            def record(self, stream=None):
                super().record(stream)
                self._log("record", "side" if stream is not None else "main")

            def synchronize(self):
                self._log("synchronize")

            def query(self):
                self._log("query")
                self.pending -= 1
                return self.pending < 0

        return _Event()


@cache
def _run(items: tuple):
    backend = SpyBackend()
    result = Engine(MODEL, EngineConfig(**{**BASE, **dict(items)}), backend).run()
    return result, tuple(backend.phases), tuple(backend.ops)


def run(**overrides):
    return _run(tuple(sorted(overrides.items())))


# -- the split keeps the engine's behaviour ---------------------------------------------------
def test_engine_is_runner_plus_output_processor():
    engine = Engine(MODEL, EngineConfig(**BASE), CpuBackend())
    assert isinstance(engine.runner, ModelRunner) and isinstance(engine.output, OutputProcessor)
    assert ModelRunner.launch is ModelRunner._launch and ModelRunner.sample is ModelRunner._sample


def test_mode_aliases():
    assert EngineConfig(mode="readback-after-launch").mode == "case1"
    assert EngineConfig(mode="pageable-inputs").mode == "case2"
    assert EngineConfig(mode="case1").readback_at(0) == "all"
    assert EngineConfig(mode="pageable-inputs").pageable_inputs
    with pytest.raises(ValueError):
        EngineConfig(mode="readback")


# -- output copy on a side stream --------------------------------------------------------------
@pytest.mark.parametrize("extra", [dict(output_copy=True),
                                   dict(output_copy=True, mode="case1", stall_every=3),
                                   dict(output_copy=True, mode="both", wait="poll-async")])
def test_output_copy_emits_the_same_tokens(extra):
    base, other = run(), run(**extra)
    assert sum(len(t) for t in base[0].outputs.values()) > 200
    assert other[0].outputs == base[0].outputs and other[0].finished == base[0].finished
    assert other[1] == base[1]  # the same phases, in the same order


# -- piecewise CUDA graphs (--pieces) ---------------------------------------------------------
@pytest.mark.parametrize("pieces", [2, 3])  # the tiny model has 2 layers: 3 pieces make 2
def test_piecewise_graphs_emit_the_same_tokens(pieces):
    base, other = run(), run(pieces=pieces)
    assert other[0].outputs == base[0].outputs and other[0].finished == base[0].finished
    assert other[1] == base[1]


def test_piecewise_captures_a_graph_per_piece_and_copies_between_them():
    """One capture per piece and batch size; replaying a step runs the pieces in order, the
    hidden states handed on by an eager copy between them (torch.Tensor.copy_)."""
    class Counting(CpuBackend):
        def __init__(self) -> None:
            super().__init__()
            self.captured = 0

        def capture(self, fn):
            self.captured += 1
            return fn

    counts = {}
    for pieces in (1, 2):
        backend = Counting()
        engine = Engine(MODEL, EngineConfig(**BASE, pieces=pieces), backend)
        counts[pieces] = backend.captured
    assert counts[2] == 2 * counts[1] == 2 * len(engine.runner.graphs)
    with pytest.raises(ValueError):
        EngineConfig(pieces=0)


def _sample_waits(ops) -> dict[str, list]:
    out: dict[str, list] = {}
    for step, where, *op in ops:
        if where == "sample" and op[0] in ("synchronize", "query"):
            out.setdefault(step, []).append(op[0])
    return out


def test_output_copy_records_on_the_side_stream_and_waits_a_step_later():
    _, _, ops = run(output_copy=True)
    records = [op for op in ops if op[2] == "record" and op[1] == "sample"]
    assert records and all(op[3] == "side" for op in records)
    assert _sample_waits(ops) == {}  # healthy: never waits in `sample`
    waits = Counter(op[1] for op in ops if op[2] == "synchronize")
    assert waits == {"wait_prev": BASE["steps"] - 1, None: 1}  # None: the drain at the end


def test_output_copy_case1_waits_this_step_in_sample():
    _, _, ops = run(output_copy=True, mode="case1", stall_every=3)
    waits = _sample_waits(ops)
    steps = sorted(int(s.split()[1]) for s in waits)
    assert steps == list(range(0, BASE["steps"], 3))
    assert all(w == ["synchronize"] for w in waits.values())


# -- waiting by polling ------------------------------------------------------------------------
@pytest.mark.parametrize("wait, mode, readback", [("poll", "healthy", "all"),
                                                  ("poll", "case1", "all"),
                                                  ("poll-async", "case1", "all"),
                                                  ("poll", "both", "tolist")])
def test_poll_waits_emit_the_same_tokens_and_never_synchronize(wait, mode, readback):
    base, other = run(), run(wait=wait, mode=mode, readback=readback)
    assert other[0].outputs == base[0].outputs and other[1] == base[1]
    ops = other[2]
    assert not [op for op in ops if op[2] == "synchronize"]
    queries = Counter(op[1] for op in ops if op[2] == "query")
    assert queries["wait_prev"] >= 3 * (BASE["steps"] - 1)  # not ready, not ready, done
    if mode != "healthy":  # the flag's copy is polled inside `sample` every step
        assert set(_sample_waits(ops)) == {f"step {k}" for k in range(BASE["steps"])}
    else:
        assert _sample_waits(ops) == {}


def test_waiter_poll_async_uses_one_event_loop():
    waiter, log = Waiter("poll-async"), []
    event = _SpyEvent(log)
    event.record()
    waiter.wait(event)
    loop = waiter._loop
    event.record()
    waiter.wait(event)
    assert waiter._loop is loop and log.count(("query",)) == 6
    waiter.close()
    assert waiter._loop is None and loop.is_closed()


# -- tensor parallel ---------------------------------------------------------------------------
def test_shards_are_slices_of_the_full_weights():
    full = Llama(MODEL, torch.device("cpu"), torch.float32, seed=2)
    shards = [Llama(MODEL, torch.device("cpu"), torch.float32, seed=2, tp_rank=r, tp_size=2,
                    all_reduce=lambda t: t) for r in range(2)]
    local = shard_config(MODEL, 2)
    assert (local.n_heads, local.n_kv_heads, local.ffn) == (2, 1, 64)
    q, kv, hd = MODEL.n_heads * MODEL.head_dim, MODEL.n_kv_heads * MODEL.head_dim, MODEL.head_dim
    for i, layer in enumerate(full.layers):
        a, b = shards[0].layers[i], shards[1].layers[i]
        lq, lkv = q // 2, kv // 2
        for r, s in enumerate((a, b)):
            w = layer["wqkv"]
            want = torch.cat([w[:, r * lq:(r + 1) * lq], w[:, q + r * lkv:q + (r + 1) * lkv],
                              w[:, q + kv + r * lkv:q + kv + (r + 1) * lkv]], dim=1)
            assert torch.equal(s["wqkv"], want)
            f = MODEL.ffn // 2
            g = layer["w_gate_up"]
            up = g[:, MODEL.ffn + r * f:MODEL.ffn + (r + 1) * f]
            assert torch.equal(s["w_gate_up"], torch.cat([g[:, r * f:(r + 1) * f], up], 1))
        assert torch.equal(torch.cat([a["wo"], b["wo"]]), layer["wo"])
        assert torch.equal(torch.cat([a["w_down"], b["w_down"]]), layer["w_down"])
    assert all(torch.equal(s.lm_head, full.lm_head) and torch.equal(s.embed, full.embed)
               for s in shards)
    assert KVCache(local, 4, torch.device("cpu"), torch.float32).kv.shape[3] == 1
    assert hd == 16
    with pytest.raises(ValueError, match="does not divide"):
        shard_config(MODEL, 3)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _engine(args: list[str], timeout: float = 150) -> subprocess.CompletedProcess:
    """``python -m engine_under_test ARGS`` in its own session, killed whole on a timeout."""
    proc = subprocess.Popen([sys.executable, "-m", "engine_under_test", *args], cwd=REPO,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"engine_under_test {' '.join(args)} hung for {timeout} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kineto_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def test_tp2_on_gloo_matches_tp1(tmp_path, capsys):
    common = ["--tiny", "--device", "cpu", "--steps", "80", "--batch", "8"]
    assert main([*common, "--json", str(tmp_path / "tp1.json")]) == 0
    capsys.readouterr()
    tp1 = json.loads((tmp_path / "tp1.json").read_text())
    assert tp1["tokens_per_s"] > 0  # real tokens in the digest
    proc = _engine([*common, "--tp", "2", "--mode", "case1", "--readback-ranks", "0",
                    "--output-copy", "--json", str(tmp_path / "tp2.json")])
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("mode=")]
    assert len(lines) == 1 and "ranks_agree=yes" in lines[0]  # rank 0 alone prints
    tp2 = json.loads((tmp_path / "tp2.json").read_text())
    assert tp2["tp"] == 2 and tp2["ranks_agree"] and tp2["readback_ranks"] == [0]
    assert [r["rank"] for r in tp2["per_rank"]] == [0, 1]
    assert {r["tokens_digest"] for r in tp2["per_rank"]} == {tp1["tokens_digest"]}
    assert tp2["tokens_digest"] == tp1["tokens_digest"]


# -- torch.profiler ----------------------------------------------------------------------------
def test_torch_profile_writes_gzipped_kineto_trace(tmp_path, capsys):
    path = tmp_path / "run.pt.trace.json.gz"
    assert main(["--tiny", "--device", "cpu", "--steps", "8", "--batch", "4",
                 "--output-copy", "--mode", "case1", "--torch-profile", str(path)]) == 0
    assert "steps/s=" in capsys.readouterr().out
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    events = _kineto_events(path)
    cats = Counter(e.get("cat") for e in events)
    assert cats["python_function"] > 100 and cats["cpu_op"] > 100
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    names = Counter(e["name"] for e in ranges)
    assert all(names[f"step {k}"] == 1 for k in range(8))
    for phase in ("schedule", "prepare", "launch", "sample", "wait_prev", "post", "detokenize"):
        assert names[phase] >= 7, phase
    assert "capture_graphs" not in names  # profiled after the capture
    step0 = next(e for e in ranges if e["name"] == "step 0")
    sample0 = next(e for e in ranges if e["name"] == "sample")
    assert step0["ts"] <= sample0["ts"] <= step0["ts"] + step0["dur"]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left


def test_torch_profile_plain_json_and_rank_paths(tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["--tiny", "--device", "cpu", "--steps", "3", "--batch", "2",
                 "--torch-profile", str(path)]) == 0
    capsys.readouterr()
    assert any(e.get("name") == "step 2" for e in json.loads(path.read_text())["traceEvents"])
    assert rank_path("a/b.pt.trace.json.gz", 1, 2) == os.path.join("a", "b.pt.trace.rank1.json.gz")
    assert rank_path("b.json", 0, 2) == "b.rank0.json"
    assert rank_path("b.trace", 3, 4) == "b.rank3.trace"
    assert rank_path("b.json.gz", 0, 1) == "b.json.gz"


# -- the command line --------------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--steps", "-5"], "--steps: must be >= 1, got -5"),
    (["--steps", "0"], "--steps: must be >= 1, got 0"),
    (["--batch", "0"], "--batch: must be >= 1"),
    (["--tp", "0"], "--tp: must be >= 1"),
    (["--stall-every", "0"], "--stall-every: must be >= 1"),
    (["--layers", "0"], "--layers: must be >= 1"),
    (["--pieces", "0"], "--pieces: must be >= 1"),
    (["--host-work-us", "-1"], "--host-work-us: must be >= 0"),
    (["--host-work-us", "nan"], "--host-work-us: must be >= 0"),
    (["--steps", "x"], "--steps: not an integer"),
    (["--readback-ranks", "1"], "--readback-ranks 1: only 1 rank(s)"),
    (["--readback-ranks", "a"], "not a comma list"),
    (["--tiny", "--full-model"], "not allowed with"),
    (["--torch-profile", "no/such/dir/t.json.gz"], "no such directory"),
])
def test_cli_rejects_bad_numbers_in_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("python -m engine_under_test")


def test_cli_bad_steps_exit_nonzero_as_a_process():
    proc = _engine(["--steps", "-5"], timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "python -m engine_under_test: error: argument --steps: must be >= 1, got -5"]


def test_cpu_picks_the_tiny_model_and_says_so(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["--device", "cpu", "--steps", "4", "--batch", "2", "--mode", "pageable-inputs",
                 "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "tiny model" in lines[0] and "--full-model" in lines[0]
    metrics = json.loads(out.read_text())
    assert metrics["model_layers"] == MODEL.n_layers and metrics["mode"] == "case2"
    assert main(["--tiny", "--device", "cpu", "--steps", "4", "--batch", "2"]) == 0
    assert "tiny model" not in capsys.readouterr().out  # asked for: no notice


def test_full_model_on_cpu_prints_an_estimate():
    said: list[str] = []
    ns = argparse.Namespace(tiny=False, full_model=True, layers=None, batch=128, steps=300)
    model = choose_model(ns, "cpu", 1, said.append)
    assert model == ModelConfig() and len(said) == 1
    assert "s per step" in said[0] and "min for 300 steps" in said[0] and "GiB" in said[0]
    # explicit layers: the full width, those layers, an estimate; no TP scaling
    ns = argparse.Namespace(tiny=False, full_model=False, layers=2, batch=8, steps=10)
    said.clear()
    assert choose_model(ns, "cpu", 2, said.append).n_layers == 2 and len(said) == 1
    # a GPU: no notice; under TP the default model gets 6 x TP layers
    ns = argparse.Namespace(tiny=False, full_model=False, layers=None, batch=128, steps=10)
    said.clear()
    assert choose_model(ns, "cuda", 2, said.append).n_layers == 12 and not said
    assert choose_model(ns, "cuda", 1, said.append).n_layers == 6
