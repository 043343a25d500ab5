"""torch.profiler traces as every PyTorch era writes them, on the committed H200 samples (issue 53).

Each test rewrites one real sample the way another PyTorch version writes the same events,
byte for byte elsewhere, and requires the very analysis of the original:

* Unix-epoch timestamps (PyTorch 1.x to ~2.3: ``"ts": 1712195495519689.047``, where a float
  holds microseconds to 0.25 us only), where the samples hold times from a base
  (``5180585417457.018``); nsysscope read every event of such a trace as "beyond any clock"
  and said "no CUDA data" (exit 3);
* the category names of PyTorch < 1.10 (``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``,
  ``Operator``);
* a Python frame without a line (``file.py(0): f``), which was printed as ``file.py:0``.

The public traces of other eras (HTA's test data) are tested in ``tests/test_external_traces.py``.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.render import render
from nsysscope.render.notes import note_text

ROOT = Path(__file__).resolve().parents[2]
KINETO = ROOT / "sample_traces" / "kineto"
NOSTACK_CASE1 = KINETO / "h200_kineto_nostack_case1_60.pt.trace.json.gz"
CASE1 = KINETO / "h200_kineto_case1_60.pt.trace.json.gz"
#: 2024-04-04 in Unix-epoch microseconds (HTA's ns_resolution_trace was captured then)
EPOCH_US = 1_712_195_495_519_689
_TS = re.compile(r'("ts":\s*)(-?\d+(?:\.\d+)?)')

_SUMMARIES: dict[Path, dict] = {}


def _summary(path: Path) -> dict:
    """The summary of ``path`` as JSON, without the path."""
    d = analyze(load(path)).summary.to_dict()
    d["trace"].pop("path")
    return d


def _original(path: Path) -> dict:
    if path not in _SUMMARIES:
        _SUMMARIES[path] = _summary(path)
    return _SUMMARIES[path]


def _text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def _write(tmp_path: Path, text: str, name: str = "era.pt.trace.json.gz") -> Path:
    out = tmp_path / name
    out.write_bytes(gzip.compress(text.encode(), 1))
    return out


def _shift(text: str, by: int) -> tuple[str, int]:
    """Every ``ts`` moved by ``by`` microseconds, in exact decimal arithmetic, written with
    the digits it had (3 decimals stay 3): as a Unix-epoch trace writes them."""
    first = Decimal(_TS.search(text).group(2))
    offset = Decimal(by) - first.to_integral_value()
    n = 0

    def moved(m: re.Match[str]) -> str:
        nonlocal n
        n += 1
        return m.group(1) + str(Decimal(m.group(2)) + offset)
    return _TS.sub(moved, text), n


def test_unix_epoch_timestamps_with_a_fraction_are_read_to_the_nanosecond(tmp_path):
    """Every ts 1.7e15 us with its three decimals: the analysis is the original's, number
    for number. A float holds 1.7e15 to 0.25 us, so reading the times as floats changes the
    windows' percentiles (checked: they differ); they are decoded exactly instead."""
    text, n = _shift(_text(NOSTACK_CASE1), EPOCH_US)
    assert n > 10_000 and '"ts":1712195495' in text.replace(" ", "")
    got = _summary(_write(tmp_path, text))
    assert got == _original(NOSTACK_CASE1)
    assert got["launches"] == 60 and got["classes"]["gpu_to_cpu"] == 54


def test_unix_epoch_timestamps_in_whole_microseconds_are_read(tmp_path):
    """PyTorch 1.x wrote integer microseconds since the epoch (HTA's traces of 2022-2023:
    1.66e15): each time rounded to the microsecond, as such a trace holds it. The counts
    are the original's, the times within the microsecond the rounding moves them."""
    first = Decimal(_TS.search(_text(NOSTACK_CASE1)).group(2)).to_integral_value()
    text = _TS.sub(lambda m: m.group(1) + str(int(Decimal(m.group(2)).to_integral_value()
                                                  - first) + 1_661_000_000_000_000),
                   _text(NOSTACK_CASE1))
    text = re.sub(r'("dur":\s*)(\d+)\.\d+', r"\g<1>\2", text)  # whole microseconds too
    got, want = _summary(_write(tmp_path, text)), _original(NOSTACK_CASE1)
    for key in ("launches", "steady_launches", "warmup_launches", "stalls", "classes"):
        assert got[key] == want[key]
    assert got["window_us"]["p50"] == pytest.approx(want["window_us"]["p50"], abs=2.0)


def test_times_past_any_clock_are_counted_and_named(tmp_path):
    """Nanoseconds written as microseconds (1.7e18, past the 3e15 us any clock of this
    century gives): the CUDA calls so damaged are left out, counted and named in a note,
    never dropped in silence."""
    d = json.loads(_text(NOSTACK_CASE1))
    calls = [e for e in d["traceEvents"] if e.get("cat") == "cuda_runtime"
             and e.get("name") == "cudaEventQuery"][:3]
    assert len(calls) == 3
    for e in calls:
        e["ts"] = e["ts"] * 1e3 + 1.7e18
    trace = load(_write(tmp_path, json.dumps(d)))
    assert [note_text(n) for n in trace.meta.reader_notes] == [
        "3 events without a usable time (ts, dur: missing, negative, not a number, or beyond "
        "any clock) left out: 3 cuda_runtime (first: cudaEventQuery)"]


def test_old_category_names_are_read_as_todays(tmp_path):
    """PyTorch < 1.10 named the categories ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``
    and ``Operator`` (HTA's trace_file_list/inference_rank_1.json.gz has the first two)."""
    old = {"cuda_runtime": "Runtime", "kernel": "Kernel", "gpu_memcpy": "Memcpy",
           "gpu_memset": "Memset", "cpu_op": "Operator"}
    text = re.sub(r'"cat":\s*"(cuda_runtime|kernel|gpu_memcpy|gpu_memset|cpu_op)"',
                  lambda m: f'"cat":"{old[m.group(1)]}"', _text(NOSTACK_CASE1))
    assert '"cat":"Runtime"' in text and '"cat":"cuda_runtime"' not in text
    assert _summary(_write(tmp_path, text)) == _original(NOSTACK_CASE1)


@pytest.mark.parametrize(("function", "said"), [
    ("<module>", "module-level code in engine_under_test/sampler.py (torch.profiler records "
                 "no line)"),
    ("finish_sampling", "finish_sampling in engine_under_test/sampler.py (torch.profiler "
                        "records no line)")])
def test_a_frame_without_a_line_is_named_by_file_and_function(tmp_path, function, said):
    """The stall's frame recorded as line 0 (Kineto records code objects; 0 is no line): the
    headline, every format and the timeline name it by file and function, never
    ``sampler.py:0``, and no format advises --source-root, which cannot find a line 0."""
    frame = "engine_under_test/sampler.py(50): finish_sampling"
    text = _text(CASE1)
    assert text.count(frame) == 60
    path = _write(tmp_path, text.replace(frame, f"engine_under_test/sampler.py(0): {function}"))
    a = analyze(load(path))
    site = a.summary.sites[0]
    assert (site.source.file, site.source.line) == ("engine_under_test/sampler.py", 0)
    assert site.source.location == said
    for fmt in ("text", "markdown", "html", "json"):
        out = " ".join(str(render("report", fmt, a)).split())  # text: wrapped
        assert "sampler.py:0" not in out
        assert "--source-root" not in out or fmt == "json"
        if fmt != "json":
            assert said.replace("<", "&lt;").replace(">", "&gt;") in out if fmt == "html" \
                else said in out
    headline = " ".join(" ".join(str(render("report", "text", a)).splitlines()[3:6]).split())
    assert f"at {said}" in headline
