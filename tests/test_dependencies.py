"""``pip install nsysscope`` brings no package that nsysscope never imports: every runtime
dependency in pyproject.toml is imported by some module of the package (issue 18)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: distribution name -> the module it installs, where they differ
MODULE = {"sqlite-utils": "sqlite_utils"}


def imported_modules() -> dict[str, set[str]]:
    """Top-level module -> the package modules that import it."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "nsysscope").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for n in names:
                found.setdefault(n.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_dependency_is_imported():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in deps]
    used = imported_modules()
    unused = [n for n in names if MODULE.get(n, n.replace("-", "_")) not in used]
    assert not unused, f"declared in pyproject.toml, imported by no nsysscope module: {unused}"
    # sqlite-utils does the scrubber's writes and the per-launch database
    assert {"nsysscope/scrub/write.py", "nsysscope/export/db.py"} <= used["sqlite_utils"]
