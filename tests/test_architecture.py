"""The architecture README.md describes, checked: imports run one way (and what must never be
imported is not), modules stay small."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: "no module over ~400 lines": past it a module is named in a warning (split it where its
#: meaning divides, not at a line count); past ``MAX_LINES`` the test fails
WARN_LINES = 400
MAX_LINES = 600


def test_imports_run_one_way():
    """cli > api > render > gate | batch | scrub > analysis > trace > model > util | errors,
    and what must never be imported (renderers never load or analyse a trace; nothing below
    the command line draws, prints one or runs torch; result types hold no pandas), as the
    [tool.importlinter] contracts in pyproject.toml say."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or \
        shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (it is in the test extra)")
    p = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_no_module_is_too_long():
    lines = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in (ROOT / "nsysscope").rglob("*.py")}
    growing = {p: n for p, n in lines.items() if WARN_LINES < n <= MAX_LINES}
    if growing:
        warnings.warn(f"modules over {WARN_LINES} lines (split them where their meaning "
                      f"divides): {growing}", stacklevel=1)
    long = {p: n for p, n in lines.items() if n > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_module_imports_another_modules_private_names():
    """A name one module imports from another is part of that module's interface, so it has
    no leading underscore (an underscore says: used here only)."""
    private = sorted(
        f"{p.relative_to(ROOT)}: from {'.' * node.level}{node.module or ''} import {a.name}"
        for p in (ROOT / "nsysscope").rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom)
        for a in node.names if a.name.startswith("_") and not a.name.startswith("__"))
    assert not private, "\n".join(private)
