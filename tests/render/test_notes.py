"""The notes' table (nsysscope/render/notes.py, the gate's rows in render/gate_notes.py): each
code said from its values as the analysis or the gate said it before the sentences moved to
render/ (issue 54, item 6: every sentence below was made by the code of 4f3716f, the gate's by
that of 67a5ea7, from the same inputs: real sample pairs, or real summaries edited where no
pair meets the case), a result's notes kept as values in its JSON, and the sentences of older
or newer results shown as they were written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsysscope.model import WRITTEN, GateResult, Note, Summary
from nsysscope.render.json_ import render as summary_json
from nsysscope.render.notes import NOTES, note_text

ROOT = Path(__file__).resolve().parents[2]

#: [code, values, the sentence the analysis or the gate wrote for those values before], as
#: tests/render/notes_said.json holds them
SAID = [tuple(row) for row in json.loads(
    (Path(__file__).with_name("notes_said.json")).read_text(encoding="utf-8"))]


@pytest.mark.parametrize("code, values, text", SAID)
def test_each_note_is_said_as_before(code, values, text):
    assert note_text(Note(code, values)) == text


def test_every_code_is_said_above():
    """A note added to the table is tested here with the sentence its values make."""
    assert set(NOTES) - {WRITTEN} <= {code for code, _, _ in SAID}


def test_a_summarys_notes_are_values_in_its_json(analysed):
    """``notes`` is said from ``note_facts``, both in the JSON; read back, the notes are the
    same values and say the same sentences."""
    s = analysed("case1_py").summary
    d = json.loads(summary_json(s))
    assert [n["code"] for n in d["note_facts"]] == [n.code for n in s.note_facts]
    assert d["notes"] == [note_text(n) for n in s.note_facts] == s.notes
    back = Summary.from_dict(d)
    assert back.note_facts == s.note_facts and back.notes == s.notes
    assert summary_json(back) == summary_json(s)


def test_an_older_summarys_notes_are_shown_as_written():
    """A summary written before notes kept their values (1.1, of the torch.profiler twin
    captures) has only sentences: read as notes of code ``written``, shown and written back
    as they were."""
    path = ROOT / "sample_traces" / "kineto" / "h200_nsys_twin2_case1_60.summary.json"
    d = json.loads(path.read_text(encoding="utf-8"))
    assert "note_facts" not in d and d["notes"]
    s = Summary.from_dict(d)
    assert {n.code for n in s.note_facts} == {WRITTEN} and s.notes == d["notes"]
    assert json.loads(summary_json(s))["notes"] == d["notes"]


def test_a_newer_summarys_unknown_note_is_shown_as_written(analysed):
    """A code a newer minor version added is not in this version's table: its sentence is
    the one the file wrote beside it, not lost."""
    d = json.loads(summary_json(analysed("case1").summary))
    d["note_facts"].append({"code": "a_note_from_the_future", "values": {"n": 3}})
    d["notes"].append("3 things this version has no words for")
    s = Summary.from_dict(d)
    assert s.notes[-1] == "3 things this version has no words for"
    assert json.loads(summary_json(s))["notes"] == d["notes"]


def test_a_note_whose_sentence_is_lost_shows_its_values():
    assert note_text(Note("a_note_from_the_future", {"n": 3})) == \
        "a_note_from_the_future: {'n': 3}"


def test_a_gate_results_notes_are_values_and_an_older_ones_sentences(analysed):
    """A gate result (TP=2: processes matched by rank, a rank that now waits for its peer)
    keeps its notes as values in its JSON and says them; the same result as nsysscope.gate/1.1
    wrote it (sentences only) reads its notes as written."""
    from nsysscope.gate import compare

    r = compare(analysed("tp2_healthy").summary, analysed("tp2_case1_rank0").summary)
    d = json.loads(r.to_json())
    assert [n["code"] for n in d["note_facts"]] == ["processes_matched", "waits_for_peer_now"]
    assert d["notes"] == r.notes and r.notes[0].startswith("processes matched by rank: ")
    assert GateResult.from_dict(d).notes == r.notes
    older = {k: v for k, v in d.items() if k != "note_facts"}
    back = GateResult.from_dict({**older, "schema": "nsysscope.gate/1.1"})
    assert {n.code for n in back.note_facts} == {WRITTEN} and back.notes == r.notes
