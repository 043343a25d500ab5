"""``find_leaks`` for Kineto traces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..names import program_word_pattern, word_pattern
from ..paths import find_paths, is_leaky_path, redact_path
from ..policy import Leak, PathLike
from ..secrets import redact_secrets
from .survey import stream_events, strings_in, survey_trace


def find_kineto_leaks(src: PathLike) -> list[Leak]:
    """What in the Kineto trace ``src`` identifies a machine or a person: absolute paths, and
    host and user names (one :class:`Leak` per string and kind)."""
    src = Path(src)
    ctx = survey_trace(src, slim=False)
    words = [(h, "host") for h in ctx.hosts] + [(u, "user") for u in ctx.users]
    # an event's name (a kernel, an op, a range) as the scrub matches it there: whole words
    patterns = {False: [(word_pattern(w), w, kind) for w, kind in words],
                True: [(program_word_pattern(w), w, kind) for w, kind in words]}
    leaks: list[Leak] = []
    seen: set[tuple[str, str]] = set()

    def check(where: str, key: int | str, value: Any, name: bool = False) -> None:
        for text in strings_in(value):
            if (text, name) in seen_text:
                continue
            seen_text.add((text, name))
            for path in find_paths(text):
                if is_leaky_path(path) and (where, path) not in seen:
                    seen.add((where, path))
                    shown = redact_path(path)
                    for rx, word, _ in patterns[False]:
                        shown = rx.sub(word[:1] + "…", shown)
                    leaks.append(Leak(where, "string", key, "abs_path", shown))
            for rx, word, kind in patterns[name]:
                if rx.search(text):
                    leaks.append(Leak(where, "string", key, kind, word[:1] + "…"))
            for kind, excerpt in redact_secrets(text)[1]:
                leaks.append(Leak(where, "string", key, kind, excerpt))

    seen_text: set[tuple[str, bool]] = set()
    index = {"n": 0}

    def on_field(key: str, value: Any) -> None:
        if key == "trace_id" and isinstance(value, str) and value.strip("0-"):
            leaks.append(Leak("metadata", "string", key, "session_id", value[:2] + "…"))
        elif value is not None:
            check("metadata", key, value)

    def on_event(e: Any) -> None:
        if type(e) is dict and isinstance(e.get("name"), str):
            check("traceEvents", index["n"], e["name"], name=True)
            e = {k: v for k, v in e.items() if k != "name"}
        check("traceEvents", index["n"], e)
        index["n"] += 1

    stream_events(src, on_field, on_event)
    return leaks
