"""The gate's result as JUnit XML: one test case per metric, a ``<failure>`` for each
regression, ``<skipped>`` where a metric could not be measured. CI systems (GitHub Actions
test reporters, GitLab, Jenkins) show it as test results.

It is well-formed XML 1.0 whatever the traces' names hold: ElementTree escapes markup, and
what XML forbids (control characters, lone surrogates, U+FFFE/U+FFFF) never reaches it as
such: names are printable from the read on, and every renderer's output is made printable
(:class:`.base.FunctionRenderer`), tab and line feed kept."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..model import FAIL, IMPROVED, NA, GateResult
from .gate_text import cells, side_line, site_lines

SUITE = "nsysscope.gate"


def render(r: GateResult) -> str:
    failures = sum(c.status == FAIL for c in r.checks)
    skipped = sum(c.status == NA for c in r.checks)
    counts = {"tests": str(len(r.checks)), "failures": str(failures), "errors": "0",
              "skipped": str(skipped), "time": "0"}
    root = ET.Element("testsuites", {"name": "nsysscope gate", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts})
    props = ET.SubElement(suite, "properties")
    for name, val in (("verdict", r.verdict), ("baseline", side_line(r.baseline)),
                      ("candidate", side_line(r.candidate)), ("schema", r.schema)):
        ET.SubElement(props, "property", {"name": name, "value": val})
    findings = {f.check: f for f in (*r.regressions, *r.improvements)}
    for c in r.checks:
        case = ET.SubElement(suite, "testcase", {"classname": SUITE, "name": f"{c.name}: {c.label}",
                                                 "time": "0"})
        metric, base, cand, change, threshold, p, result = cells(c)
        summary = (f"baseline {base}, candidate {cand}, change {change}, threshold {threshold}, "
                   f"p {p}: {result}")
        f = findings.get(c.name)
        body = [summary]
        if f:
            body += [f.message, *site_lines(f, indent="  ")]
            if f.fix:
                body.append(f"fix: {f.fix}")
        if c.status == FAIL:
            el = ET.SubElement(case, "failure", {"message": f.message if f else summary,
                                                 "type": "OverlapRegression"})
            el.text = "\n".join(body)
        elif c.status == NA:
            ET.SubElement(case, "skipped", {"message": c.detail or "not measured"})
        if c.status != FAIL:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(body if c.status == IMPROVED else [summary])
    if r.notes:
        ET.SubElement(suite, "system-out").text = "\n".join(r.notes)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
