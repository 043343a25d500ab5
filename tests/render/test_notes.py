"""The notes' table (nsysscope/render/notes.py): each code said from its values as the
analysis said it before the sentences moved to render/ (issue 54, item 6: every sentence below
was made by the code of 2d760b3 from the same inputs), a summary's notes kept as values in its
JSON, and the sentences of older or newer summaries shown as they were written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsysscope.model import WRITTEN, Note, Summary
from nsysscope.render.json_ import render as summary_json
from nsysscope.render.notes import NOTES, note_text

ROOT = Path(__file__).resolve().parents[2]

#: [code, values, the sentence the analysis wrote for those values before], as
#: tests/render/notes_said.json holds them (made by the code of 2d760b3)
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
