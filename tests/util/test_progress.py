"""The progress line: drawn only on a terminal, erased when done."""

from __future__ import annotations

import io


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_off_when_not_a_tty(monkeypatch):
    from nsysscope.util.progress import enabled, progress
    monkeypatch.delenv("NSYSSCOPE_PROGRESS", raising=False)
    buf = io.StringIO()
    assert not enabled(buf) and enabled(_Tty())
    with progress("x", total=2, stream=buf, delay=0) as p:
        p.advance()
    assert buf.getvalue() == ""
    monkeypatch.setenv("NSYSSCOPE_PROGRESS", "0")
    assert not enabled(_Tty())


def test_progress_draws_and_erases_on_a_tty(monkeypatch):
    import time

    from nsysscope.util.progress import progress
    monkeypatch.delenv("NSYSSCOPE_PROGRESS", raising=False)
    tty = _Tty()
    with progress("reading t.sqlite", total=4, stream=tty, delay=0, interval=0.01) as p:
        p.advance(2)
        time.sleep(0.1)
    out = tty.getvalue()
    assert "reading t.sqlite" in out and "2/4" in out
    assert out.endswith("\r")  # the line is erased at the end
