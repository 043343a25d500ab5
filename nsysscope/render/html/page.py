"""What every HTML page shares: the stylesheet, embedded figures, the page frame.

A page holds everything it shows: the CSS is inline and every figure is a base64 PNG in a
``data:`` URI, so it can be attached to a CI run or a bug report and opened anywhere, offline.
A figure that fails to draw becomes a short note on the page, never a missing report. The
footer names the input, not the time: the same input gives the same page, unless the caller
asks for a ``timestamp``.
"""

from __future__ import annotations

import base64
import gc
import os
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from ...util.version import __version__
from ..palette import class_color, is_light

_DPI = 100

_CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
  color:#1b1b1b;background:#fff;margin:0}
main{max-width:1320px;margin:0 auto;padding:18px 24px 40px}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:18px;margin:30px 0 8px;
  border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:14px 0 6px}
.sub{color:#555;font-size:12.5px;word-break:break-all}
.verdict{border-left:8px solid;padding:10px 14px;margin:14px 0;font-size:16px;font-weight:600}
.verdict.ok{border-color:#009E73;background:#E6F5F0}.verdict.bad{border-color:#D55E00;
  background:#FBEDE5}.verdict .detail{font-size:13.5px;font-weight:400;margin-top:4px}
table{border-collapse:collapse;margin:6px 0}td,th{padding:4px 10px;border-bottom:1px solid
  #e3e3e3;text-align:left;vertical-align:top}th{background:#f4f4f4;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12.5px/1.3 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f3f3;
  padding:1px 4px;border-radius:3px}
.chip{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;
  font-weight:600;white-space:nowrap}.chip.light{color:#000}
.site{border:1px solid #ddd;border-left:6px solid;border-radius:4px;padding:8px 14px;margin:10px 0}
.site dl{display:grid;grid-template-columns:110px 1fr;gap:3px 12px;margin:6px 0 0}
.site dt{color:#555}.site dd{margin:0}
figure{margin:8px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #e5e5e5}
figcaption{color:#444;font-size:13px;margin-top:4px;max-width:1100px}
.note{color:#555}.fail{color:#D55E00;font-weight:600}.pass{color:#009E73;font-weight:600}
.improved{color:#0072B2;font-weight:600}.changed{color:#555;font-weight:600}ul{margin:4px 0}
footer{color:#777;font-size:12px;margin-top:36px;border-top:1px solid #e5e5e5;padding-top:8px}
"""


TIMELINE_HELP = (
    "How to read it: one lane per host thread (its NVTX ranges, then its CUDA API calls, with "
    "<code>cudaMemcpyAsync</code> calls in yellow), one per GPU stream (graph replays in dark "
    "blue, eager kernels and copies in light blue). A "
    "host wait is coloured by what it did to the launch it waited on: "
    "<span style='color:#009E73'>green</span> the GPU still had queued work after it (healthy), "
    "<span style='color:#D55E00'>vermillion</span> a GPU&rarr;CPU readback stall, "
    "<span style='color:#B07800'>orange</span> a pageable CPU&rarr;GPU copy stall, "
    "<span style='color:#CC79A7'>purple</span> another stall. The bracket under the API lane is "
    "the overlap window, from the end of the launch call to the wait on it; hatched spans on the "
    "GPU lane are idle time, tinted by the stall that caused them, and the same span is a pale "
    "band across the host lanes, so you can see what the host was doing while the GPU waited. "
    "Dotted arrows join each <code>cudaGraphLaunch</code> to its replay.")

#: inline styles of the notebook fragments' cells
TD = 'style="padding:2px 10px;text-align:left;border-bottom:1px solid #e5e5e5;font-size:13px"'
TH = ('style="padding:2px 10px;text-align:left;background:#f4f4f4;border-bottom:1px solid '
      '#e5e5e5;font-size:13px"')


def figure_png(fig: Any, dpi: int = _DPI) -> bytes:
    """A matplotlib figure as PNG bytes (matplotlib is imported only once a figure exists)."""
    from ..plots.style import figure_png as png

    return png(fig, dpi)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{data}">'


def figure(make: Callable[[], Any], alt: str, caption: str = "") -> str:
    """A ``<figure>`` with the PNG of ``make()``, or a note saying why there is none."""
    try:
        body = _img(figure_png(make()), alt)
        gc.collect()  # the figure now: its artists are cycles, and a figure of a long trace
        # holds its per-launch arrays (0.3 GB at 10^6 launches) until a collection
    except Exception as e:  # noqa: BLE001 - a broken figure must not lose the report
        if os.environ.get("NSYSSCOPE_DEBUG"):
            raise
        body = (f'<p class="note">(figure not drawn: {escape(type(e).__name__)}: '
                f"{escape(str(e))})</p>")
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f"<figure>{body}{cap}</figure>"


def chip(klass: str) -> str:
    light = " light" if is_light(klass) else ""
    return (f'<span class="chip{light}" style="background:{class_color(klass)}">'
            f"{escape(klass)}</span>")


_CODE_SPAN = re.compile(r"`([^`]+)`")


def inline(text: str) -> str:
    """``text`` escaped for HTML, its Markdown code spans (```nsys export```) as ``<code>``."""
    return _CODE_SPAN.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text))


def notes(items: Sequence[str]) -> str:
    if not items:
        return '<p class="note">None.</p>'
    return "<ul>" + "".join(f"<li>{inline(n)}</li>" for n in items) + "</ul>"


def name(path: str) -> str:
    """The file name of a path as a trace recorded it (either slash)."""
    return Path(str(path).replace("\\", "/")).name


def page(title: str, body: str, identity: str, timestamp: datetime | str | None = None) -> str:
    """The whole page. ``identity`` says what it was made from (the trace, the two sides);
    ``timestamp``, when given, is added to the footer."""
    stamp = ""
    if timestamp is not None:
        when = timestamp.strftime("%Y-%m-%d %H:%M %Z").strip() \
            if isinstance(timestamp, datetime) else str(timestamp)
        stamp = f" &middot; {escape(when)}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n"
            f"<body><main>\n{body}\n<footer>nsysscope {escape(__version__)} &middot; "
            f"{escape(identity)}{stamp} &middot; a self-contained page: every figure is "
            f"embedded</footer></main></body></html>\n")
