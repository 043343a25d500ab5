"""The exporters' table: every export is a row, found by the option and the file's name; the
command line's checks and messages are made from it."""

from __future__ import annotations

import pytest

from nsysscope.export import EXPORTERS, exporters_of
from nsysscope.export import exporters as module  # the module


def test_each_option_finds_its_exports_by_name():
    assert [e.name for e in exporters_of("--per-launch")] == ["csv", "parquet", "db"]
    assert module.exporter_for("--per-launch", "x.CSV").name == "csv"
    assert module.exporter_for("--per-launch", "x.sqlite3").name == "db"
    assert module.exporter_for("--per-launch", "x.txt") is None
    # the one export of an option writes whatever the file is named
    assert module.exporter_for("--perfetto", "timeline.trace").name == "perfetto"
    assert len({(e.option, e.name) for e in EXPORTERS}) == len(EXPORTERS)


def test_a_new_export_is_a_row(monkeypatch, tmp_path, analysed):
    """A writer and a row: ``--per-launch x.tsv`` is checked and written through the table."""
    from nsysscope.cli.options import check_per_launch, write_export
    from nsysscope.errors import UnreadableInput

    def tsv(path, a, context):
        a.launches.to_csv(path, sep="\t", index=False)
        return len(a.launches)

    monkeypatch.setattr(module, "EXPORTERS",
                        (*EXPORTERS, module.Exporter("tsv", "--per-launch", (".tsv",), tsv)))
    out = tmp_path / "x.tsv"
    check_per_launch(str(out))
    assert write_export("--per-launch", str(out), analysed("case1")) == 300
    assert out.read_text().count("\n") == 301
    with pytest.raises(UnreadableInput, match=r"name a \.csv, \.parquet, \.db or \.tsv file"):
        check_per_launch(str(tmp_path / "x.txt"))
