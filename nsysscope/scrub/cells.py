"""How the scrub reads a text cell and writes one back: text that is not UTF-8 and text
stored as a blob are searched like any other, and what is not a leak stays byte for byte."""

from __future__ import annotations


def decode_text(raw: bytes) -> str:
    """A text cell as Python reads it here: UTF-8, with any bytes that are not UTF-8 kept as
    lone surrogates (``surrogateescape``), so that a range named with arbitrary bytes is
    searched like any other text and written back byte for byte (:func:`stored_text`)."""
    return raw.decode("utf-8", "surrogateescape")


def stored_text(text: str) -> bytes:
    """The bytes :func:`decode_text` read ``text`` from (to be bound as ``CAST(? AS TEXT)``:
    SQLite's ``sqlite3`` refuses a str that is not valid Unicode)."""
    return text.encode("utf-8", "surrogateescape")


def is_valid_unicode(text: str) -> bool:
    """Whether ``text`` came from valid UTF-8 (it holds no lone surrogate from
    :func:`decode_text`)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_text(value: object) -> str | None:
    """A cell as the text it holds: a str as it is, text stored as a blob decoded (UTF-8, bad
    bytes replaced), anything else None."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
