"""The per-launch table's column contract (nsysscope.analysis.columns) against the table a
real trace gives, and docs/per-launch.md made from it."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from nsysscope.analysis.columns import COLUMNS, EXPORT_ONLY, LAUNCH_TABLE, Kind, Section
from nsysscope.export import per_launch_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "per-launch.md"
#: what the generated part of the document lies between
START, END = "## Columns\n", "## The database's other tables"


def kind_of(col: pd.Series) -> Kind:
    """The kind of a column of the table as ``--per-launch`` writes it."""
    if pd.api.types.is_bool_dtype(col):
        return Kind.FLAG
    if pd.api.types.is_integer_dtype(col):
        return Kind.MAYBE_INT if isinstance(col.dtype, pd.api.extensions.ExtensionDtype) \
            else Kind.INT
    return Kind.TEXT


@pytest.mark.parametrize("name", ["case1", "case1_py", "tp2_case1"])
def test_the_table_has_the_contracts_columns(analysed, name):
    """The columns, in order and of their kinds, of real traces: one stall kind, one with
    Python source lines, two tensor-parallel ranks with collectives."""
    a = analysed(name)
    table = per_launch_table(a)
    assert list(table.columns) == list(COLUMNS)
    assert {c: kind_of(table[c]) for c in table.columns} == COLUMNS
    assert list(a.launches.columns) == [c for c in COLUMNS if c not in EXPORT_ONLY]


def columns_markdown() -> str:
    """The document's part that lists the columns, one table per section."""
    out = [START.rstrip("\n")]
    for section in Section:
        out += ["", f"### {section}", "", "| column | type | meaning |", "|---|---|---|"]
        for c in (c for c in LAUNCH_TABLE if c.section == section):
            kinds = set(c.kinds().values())
            kind = kinds.pop() if len(kinds) == 1 else \
                ", ".join(f"{k} (`{n}`)" for n, k in c.kinds().items())
            out.append(f"| {', '.join(f'`{n}`' for n in c.names)} | {kind} | {c.meaning} |")
    return "\n".join(out) + "\n\n"


def test_the_document_is_made_from_the_contract():
    """docs/per-launch.md's column tables are LAUNCH_TABLE's (NSYSSCOPE_UPDATE_GOLDEN=1
    writes them; the text around them is the document's own)."""
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    tail = rest[rest.index(END):]
    made = head + columns_markdown() + tail
    if os.environ.get("NSYSSCOPE_UPDATE_GOLDEN"):
        DOC.write_text(made, encoding="utf-8")
    assert made == text
