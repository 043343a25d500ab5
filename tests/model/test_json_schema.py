"""The summary JSON's reference (docs/json.md) and schema (docs/summary.schema.json), checked
against what nsysscope really writes (issue 13)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from nsysscope.cli import cli
from nsysscope.model import Summary
from nsysscope.model.classes import schema_with_classes
from nsysscope.model.headline import Headline
from nsysscope.model.sites import Percentiles, SourceLine, StallSite
from nsysscope.model.summary import Distributions, TraceInfo
from nsysscope.render.json_ import render as summary_json

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "summary.schema.json").read_text(encoding="utf-8"))
REFERENCE = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")


def validate(d: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(d)


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("golden", ["healthy.json", "case1.json", "case2.json"])
def test_golden_reports_follow_the_schema(golden):
    validate(json.loads((ROOT / "tests" / "golden" / golden).read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", ["case1_py", "case2_cpubound", "both", "healthy_long"])
def test_sample_summaries_follow_the_schema(analysed, name):
    d = json.loads(summary_json(analysed(name).summary))
    validate(d)
    if name == "case1_py":  # a site with its Python source line
        assert d["sites"][0]["source"]["line"] > 0


def test_summarize_and_report_json_are_the_same_object(sample_path, tmp_path):
    a, b = tmp_path / "s.json", tmp_path / "r.json"
    trace = str(sample_path("case2"))
    assert CliRunner().invoke(cli, ["summarize", trace, "-o", str(a)]).exit_code == 0
    assert CliRunner().invoke(cli, ["report", trace, "-o", str(b)]).exit_code == 0  # from .json
    assert a.read_bytes() == b.read_bytes()
    validate(json.loads(a.read_text(encoding="utf-8")))


def test_schema_rejects_what_is_not_a_summary(analysed):
    d = json.loads(summary_json(analysed("case1").summary))
    for broken in ({k: v for k, v in d.items() if k != "trace"}, {**d, "launches": -1},
                   {**d, "schema": "nsysscope.gate/1"}, {**d, "gpu_busy": 1.5}):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)
    validate({**d, "a_key_from_a_newer_minor_version": [1, 2]})  # additions are allowed


def _required(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name != "extra" and
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


@pytest.mark.parametrize("cls, where", [
    (Summary, SCHEMA), (TraceInfo, SCHEMA["properties"]["trace"]),
    (StallSite, SCHEMA["$defs"]["site"]), (SourceLine, SCHEMA["$defs"]["source"]),
    (Distributions, SCHEMA["$defs"]["distributions"]),
    (Percentiles, SCHEMA["$defs"]["percentiles"]), (Headline, SCHEMA["$defs"]["headline"]),
])
def test_schema_and_reference_name_every_field(cls, where):
    """A field added to the model must be added to the schema and to docs/json.md."""
    fields = [f.name for f in dataclasses.fields(cls) if f.name != "extra"]
    assert set(_required(cls)) <= set(where["required"]) | {"schema"}
    assert set(fields) <= set(where.get("properties", {})) | {"p10", "p50", "p90"}
    missing = [f for f in fields if f"`{f}`" not in REFERENCE]
    assert not missing, f"fields not described in docs/json.md: {missing}"


def test_the_schemas_classes_are_the_class_tables():
    """docs/summary.schema.json lists the classes as nsysscope.model.classes.CLASS_TABLE says
    (a class added there is added here; NSYSSCOPE_UPDATE_GOLDEN=1 writes them)."""
    made = schema_with_classes(copy.deepcopy(SCHEMA))
    if os.environ.get("NSYSSCOPE_UPDATE_GOLDEN"):
        (ROOT / "docs" / "summary.schema.json").write_text(
            json.dumps(made, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert made == SCHEMA


def test_a_summary_older_than_a_class_reads_it_as_0(monkeypatch):
    """A class a newer summary version added (its row's ``since``) is read as 0 launches from
    a real older summary (nsysscope.summary/1.1, of the torch.profiler twin captures, nsys
    side), in the totals and in every process; a summary of that newer version that lacks it
    is refused (it lost its stalls)."""
    from nsysscope.model import checks, classes

    new = classes.ClassRow("future_stall", "a throwaway class", label="future", colour="#123456",
                           is_stall=True, since=9)
    monkeypatch.setattr(classes, "CLASS_TABLE", (*classes.CLASS_TABLE, new))
    monkeypatch.setattr(checks, "STALL_CLASSES", (*classes.STALL_CLASSES, "future_stall"))
    monkeypatch.setattr(checks, "LAUNCH_CLASSES", (*classes.LAUNCH_CLASSES, "future_stall"))
    path = ROOT / "sample_traces" / "kineto" / "h200_nsys_twin2_case1_60.summary.json"
    d = json.loads(path.read_text(encoding="utf-8"))
    assert d["schema"] == "nsysscope.summary/1.1"
    s = Summary.from_dict(d)
    assert s.stalls["future_stall"] == 0 and s.classes["future_stall"] == 0
    assert s.stalls["gpu_to_cpu"] == d["stalls"]["gpu_to_cpu"] > 0
    assert all(p.classes["future_stall"] == 0 for p in s.processes)
    with pytest.raises(ValueError, match="'stalls' has no count of .*future_stall"):
        Summary.from_dict({**d, "schema": "nsysscope.summary/1.9"})


@pytest.mark.parametrize("name, make, golden", [
    ("gate", "gate_schema", "gate_case1.json"), ("batch", "batch_schema", "batch.json")])
def test_gate_and_batch_schemas_are_made_from_the_model(name, make, golden):
    """docs/{gate,batch}.schema.json are what nsysscope.model.json_schema makes from the
    result types (NSYSSCOPE_UPDATE_GOLDEN=1 writes them), and the golden results follow
    them; a result that lost a required key does not."""
    from nsysscope.model import json_schema

    made = getattr(json_schema, make)()
    path = ROOT / "docs" / f"{name}.schema.json"
    if os.environ.get("NSYSSCOPE_UPDATE_GOLDEN"):
        path.write_text(json.dumps(made, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == made, (
        f"{path.name} is not what the model makes now (a field or a record's docstring "
        "changed): regenerate it with NSYSSCOPE_UPDATE_GOLDEN=1 python -m pytest "
        "tests/model/test_json_schema.py and commit it")
    jsonschema.Draft202012Validator.check_schema(made)
    d = json.loads((ROOT / "tests" / "golden" / golden).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(made).validate(d)
    for broken in ({k: v for k, v in d.items() if k != "schema"},
                   {**d, "schema": "nsysscope.summary/1.5"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(made).validate(broken)
