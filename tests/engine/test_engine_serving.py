"""Tests of the engine's serving switches (``serving.py``, ``speculative.py``) on its CPU
backend: bursts and idle, batch buckets, start-up check replays, prefill, speculative
decoding, the forward thread, per-step pinned buffers, and their command line.

The tiny model, 8 slots and short requests keep each run to a few seconds. Every switch must
leave the tokens alone: the planted bugs, the forward thread, per-step buffers and packing the
batch change where the host waits and which graph replays, never what is emitted.
"""

from __future__ import annotations

import json
import sys
import threading
from functools import cache
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine_under_test.__main__ import main  # noqa: E402
from engine_under_test.backend import CpuBackend  # noqa: E402
from engine_under_test.config import EngineConfig, ModelConfig, bucket_sizes  # noqa: E402
from engine_under_test.model import KVCache, Llama  # noqa: E402
from engine_under_test.serving import ServingEngine  # noqa: E402

MODEL = ModelConfig.tiny()
# three bursts (5, 2 and 7 requests, 3 a step), short prompts and outputs, 4 buckets of 8 slots
BASE = dict(seed=3, steps=120, max_batch=8, initial_requests=0, warmup_steps=3,
            prompt_len=(2, 5), max_new_tokens=(3, 10), bursts=(5, 2, 7), burst_rate=3,
            idle_ms=5, graph_batch_sizes=bucket_sizes(4, 8), compact=True, prefill=True)


class _Spy(CpuBackend):
    """The CPU backend, noting which thread opens each phase."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[tuple[str, str]] = []

    def phase(self, name):
        self.threads.append((name, threading.current_thread().name))
        return super().phase(name)


@cache
def _run(**overrides):
    backend = _Spy()
    engine = ServingEngine(MODEL, EngineConfig(**{**BASE, **overrides}), backend)
    return engine, engine.run(), backend


def test_bucket_sizes_are_a_servers_capture_list():
    assert bucket_sizes(9, 128) == (1, 2, 4, 8, 32, 56, 80, 104, 128)
    assert len(bucket_sizes(35, 128)) == 35 and bucket_sizes(35, 128)[-1] == 128
    assert bucket_sizes(1, 128) == (128,) and bucket_sizes(3, 1) == (1,)
    assert bucket_sizes(35, 12) == (1, 2, 4, 8, 9, 10, 11, 12)  # no more sizes than slots


def test_bursts_idle_between_and_after_and_every_request_finishes():
    engine, result, backend = _run()
    assert len(result.finished) == sum(BASE["bursts"])
    assert len(engine.stats.idle_s) == len(BASE["bursts"])  # after each burst, the last too
    assert all(s >= BASE["idle_ms"] / 1e3 for s in engine.stats.idle_s)
    # the steps of each burst are contiguous, in order
    bursts = engine.stats.burst_of_step
    assert bursts == sorted(bursts) and set(bursts) == {0, 1, 2}
    # the idle periods are outside every step: no range opens between a burst's last
    # "detokenize" and the next burst's first "schedule" but the drain's and the schedule's
    names = [n for n, _ in backend.threads]
    assert names.count("schedule") > result.steps  # the polls that found nothing to run


def test_batch_follows_the_running_requests_through_the_buckets():
    engine, result, _ = _run()
    used = engine.stats.steps_per_bucket
    assert set(used) == {1, 2, 4, 8} and sum(used.values()) == result.steps
    assert engine.stats.moves > 0
    unpacked, *_ = _run(compact=False)
    assert unpacked.stats.moves == 0
    # packing moves requests and their caches, and leaves the tokens alone
    assert _run(compact=False)[1].digest == result.digest


@pytest.mark.parametrize("overrides", [dict(mode="case1"), dict(mode="case2"),
                                       dict(mode="both", readback="tolist"),
                                       dict(forward_thread=True),
                                       dict(forward_thread=True, mode="case1"),
                                       dict(pinned_alloc=True), dict(overlap=False)],
                         ids=str)
def test_every_switch_emits_the_same_tokens(overrides):
    assert _run(**overrides)[1].digest == _run()[1].digest


def test_forward_thread_launches_and_the_scheduler_waits():
    _, _, backend = _run(forward_thread=True)
    where = {}
    for name, thread in backend.threads:
        where.setdefault(name, set()).add(thread)
    assert where["launch"] == where["sample"] == where["forward"] == {"forward"}
    assert where["wait_prev"] == where["post"] == where["schedule"] == {"MainThread"}


def test_startup_check_replays_every_captured_graph_once():
    _, _, checked = _run(startup_check=True)
    sizes = len(BASE["graph_batch_sizes"])
    assert checked.phases.count("check_replay") == checked.captured == sizes
    assert _run()[2].phases.count("check_replay") == 0
    assert _run(startup_check=True)[1].digest == _run()[1].digest


def test_prefill_writes_the_prompt_as_decode_would():
    """Prefill then decode = decode alone, token for token (the CPU path is exact)."""
    assert _run(prefill=False)[1].digest == _run()[1].digest
    engine, *_ = _run()
    assert engine.stats.prefills >= len(BASE["bursts"])
    assert "prefill" in _run()[2].phases and "prefill" not in _run(prefill=False)[2].phases


def test_extend_equals_decode_one_token_at_a_time():
    m = Llama(MODEL, torch.device("cpu"), torch.float32, seed=1)
    tokens = torch.randint(0, MODEL.vocab, (3, 5))
    one = KVCache(m.local, 4, torch.device("cpu"), torch.float32)
    steps = [m.layers_forward(m.embed[tokens[:, t]], torch.full((3,), t), one, 0, 2)
             for t in range(5)]
    many = KVCache(m.local, 4, torch.device("cpu"), torch.float32)
    slots = torch.tensor([2, 0, 3])
    m.extend(tokens[:, :2], torch.zeros(3, dtype=torch.long), many, slots)
    later = m.extend(tokens[:, 2:], torch.full((3,), 2), many, slots)
    assert torch.equal(later, torch.stack(steps, 1)[:, 2:])
    assert torch.equal(many.kv[:, :, slots, :, :5], one.kv[:, :, :3, :, :5])


def test_speculative_decoding_is_lossless_and_advances_several_tokens():
    """Greedy verification emits the target's greedy tokens whatever the draft says."""
    greedy = dict(greedy_fraction=1.0)
    engine, spec, backend = _run(spec_decode=3, **greedy)
    plain = _run(**greedy)[1]
    assert spec.digest == plain.digest and spec.outputs == plain.outputs
    assert 0 < engine.stats.acceptance <= 3
    assert spec.steps < plain.steps  # accepted drafts save steps
    # draft_first, draft and verify per bucket, nothing else captured
    assert backend.captured == 3 * len(BASE["graph_batch_sizes"])
    assert _run(spec_decode=2, mode="case2", **greedy)[1].digest == plain.digest


def test_cli_serving_run_writes_its_metrics(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["--tiny", "--device", "cpu", "--batch", "8", "--steps", "200",
                 "--bursts", "4,2", "--burst-rate", "2", "--idle-ms", "5", "--buckets", "3",
                 "--max-new-tokens", "3,8", "--prompt-words", "2,9", "--startup-check",
                 "--prefill", "--pinned-alloc",
                 "--no-nvtx", "--json", str(out)]) == 0
    assert "steps/s=" in capsys.readouterr().out
    m = json.loads(out.read_text())
    assert m["graph_sizes"] == [1, 2, 8] and m["bursts"] == [4, 2] and m["idle_periods"] == 2
    assert m["finished"] == 6 and m["startup_check"] and m["pinned_alloc"] and m["prefill"]
    assert sum(m["steps_per_bucket"].values()) == m["steps"] and m["idle_s"] >= 0.01


def test_cli_torch_profile_with_startup(tmp_path, capsys):
    path = tmp_path / "t.json"
    assert main(["--tiny", "--device", "cpu", "--batch", "4", "--steps", "40", "--bursts", "2",
                 "--idle-ms", "1", "--buckets", "2", "--max-new-tokens", "2,4", "--prefill",
                 "--torch-profile", str(path), "--torch-profile-no-stack",
                 "--profile-startup"]) == 0
    capsys.readouterr()
    names = {e.get("name") for e in json.loads(path.read_text())["traceEvents"]}
    assert {"capture_graphs", "step 0", "prefill", "schedule"} <= names


@pytest.mark.parametrize("args, message", [
    (["--spec-decode", "2", "--mode", "case1"], "reads the accepted lengths back"),
    (["--spec-decode", "2", "--forward-thread"], "runs without"),
    (["--spec-decode", "0"], "--spec-decode: must be >= 1"),
    (["--bursts", "3,0"], "sizes must be >= 1"),
    (["--bursts", "a"], "not a comma list of sizes"),
    (["--max-new-tokens", "5,5"], "need 1 <= LO < HI"),
    (["--prompt-words", "0,3"], "need 1 <= LO < HI"),
    (["--buckets", "0"], "--buckets: must be >= 1"),
    (["--tp", "2", "--bursts", "3"], "run on one GPU"),
    (["--profile-startup"], "needs --torch-profile"),
])
def test_cli_refuses_what_cannot_run_in_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--tiny", "--device", "cpu", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
