"""``--per-launch`` as CSV, Parquet and SQLite: one table, the same cells in each, and a cell
that does not apply empty (NULL) in every column alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from nsysscope.cli import cli

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "h200_case2_300.sqlite.xz"


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, pd.DataFrame]:
    d = tmp_path_factory.mktemp("per_launch")
    out = {}
    for ext in ("csv", "parquet", "db"):
        f = d / f"launches.{ext}"
        r = CliRunner().invoke(cli, ["report", str(SAMPLE), "--per-launch", str(f)])
        assert r.exit_code == 0, r.output
        if ext == "csv":
            out[ext] = pd.read_csv(f)
        elif ext == "parquet":
            out[ext] = pd.read_parquet(f)
        else:
            with sqlite3.connect(f) as c:
                out[ext] = pd.read_sql("SELECT * FROM launches", c).drop(
                    columns=["trace", "trace_id"])
    return out


def test_what_does_not_apply_is_null_in_every_column(tables):
    """The copy's kinds, the API chain and the NVTX path were "" where the cause's name and
    the block's times were NULL: ``WHERE cause_copy_kind IS NULL`` missed the launches that
    no copy made wait."""
    t = tables["parquet"]
    no_cause, no_block = t["cause_name"].isna(), t["block_start_ns"].isna()
    # the case-2 sample: two launch-bound launches (183, 189) that no block waited on
    assert t.loc[no_block, "launch"].tolist() == [183, 189] and (no_cause >= no_block).all()
    for col in ("cause_copy_kind", "cause_src_kind", "cause_dst_kind"):
        assert (t[col].isna() == no_cause).all(), col
    assert (t["api_chain"].isna() == no_block).all()
    assert t.loc[t["nvtx_path"].isna(), "launch"].tolist() == [299]  # after the last step
    for ext, other in tables.items():
        text = [c for c in t.columns if t[c].dtype.kind not in "iufb"]
        assert not (other[text] == "").any().any(), ext


def test_the_three_formats_hold_the_same_cells(tables):
    p, db, csv = tables["parquet"], tables["db"], tables["csv"]
    assert list(p.columns) == list(db.columns) == list(csv.columns)
    for c in p.columns:
        for ext, other in (("db", db), ("csv", csv)):
            a = p[c].astype(object).where(p[c].notna(), None)
            b = other[c].astype(object).where(other[c].notna(), None)
            if p[c].dtype.kind == "b" or c == "stall":
                a, b = a.map(lambda v: v if v is None else bool(v)), \
                    b.map(lambda v: v if v is None else bool(v))
            elif pd.api.types.is_numeric_dtype(p[c].dtype) and c != "step":
                a, b = pd.to_numeric(a), pd.to_numeric(b)
                assert ((a == b) | (a.isna() & b.isna())).all(), (ext, c)
                continue
            assert [str(x) if x is not None else None for x in a] == \
                [str(x) if x is not None else None for x in b], (ext, c)
