"""Versioned serialisation shared by every result type.

A result's JSON carries ``"schema": "nsysscope.<kind>/<major>[.<minor>]"``. Readers accept
their own major version (any minor) and refuse a newer major with :class:`NewerSchema`; a
minor version only adds keys. Keys a reader does not know are kept in the object's ``extra``
mapping and written back by ``to_dict``, so reading and writing a file from a newer minor
version loses nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from ..errors import NewerSchema


def major_of(schema: str) -> int | None:
    """The major version of ``nsysscope.kind/3.1`` (3), or None when it has none."""
    version = schema.split("/", 1)[1] if "/" in schema else ""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def minor_of(schema: str) -> int:
    """The minor version of ``nsysscope.kind/3.1`` (1); 0 when it has none."""
    version = schema.split("/", 1)[1] if "/" in schema else ""
    tail = version.split(".", 1)[1] if "." in version else ""
    return int(tail) if tail.isdigit() else 0


class WrongKind(ValueError):
    """JSON that is not the kind of result asked for (its message says what it is)."""


def check_schema(d: Mapping[str, Any], current: str, what: str) -> str:
    """The schema string of ``d``, checked against ``current`` (``nsysscope.summary/1``).

    Raises :class:`WrongKind` when ``d`` is not this kind of result, :class:`NewerSchema` when
    its major version is newer than ``current``'s."""
    kind = current.split("/", 1)[0] + "/"
    if not isinstance(d, Mapping):
        raise WrongKind(f"not an nsysscope {what} (a JSON object is expected, not "
                        f"{type(d).__name__})")
    schema = d.get("schema")
    if isinstance(schema, str) and schema.startswith("nsysscope.") and \
            not schema.startswith(kind):
        raise WrongKind(f"not an nsysscope {what}, but another result of nsysscope's "
                        f"(schema {schema})")
    if not isinstance(schema, str) or not schema.startswith(kind):
        raise WrongKind(f"not an nsysscope {what} (no 'schema': \"{current}\")")
    mine, theirs = major_of(current), major_of(schema)
    if theirs is not None and mine is not None and theirs > mine:
        raise NewerSchema(f"{what} schema {schema} is newer than this nsysscope reads "
                          f"({current}); upgrade nsysscope")
    return schema


def split_known(cls: type, d: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``d``'s keys that are fields of the dataclass ``cls``, and the others (kept as
    ``extra``)."""
    names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    known = {k: v for k, v in d.items() if k in names}
    extra = {k: v for k, v in d.items() if k not in names}
    return known, extra


def _missing(cls: type, known: Mapping[str, Any]) -> list[str]:
    """The fields of the dataclass ``cls`` without a default that ``known`` lacks."""
    return [f.name for f in dataclasses.fields(cls) if f.name not in known and
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def to_plain(obj: Any) -> Any:
    """``obj`` as JSON-ready values: dataclasses become dicts in field order (each sentence of
    a :attr:`Record.said` just before its field), followed by their ``extra`` keys; tuples
    become lists, enum members their values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        before = {field: key for key, field in getattr(obj, "said", {}).items()}
        out = {}
        for f in dataclasses.fields(obj):
            if f.name in before:  # a sentence, where it has always been written
                out[before[f.name]] = to_plain(getattr(obj, before[f.name]))
            if f.name != "extra":
                out[f.name] = to_plain(getattr(obj, f.name))
        for k, v in getattr(obj, "extra", {}).items():
            out.setdefault(k, v)
        return out
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {to_plain(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj


def json_text(d: dict[str, Any], indent: int | None, lists_key: str) -> str:
    """``d`` as JSON text (UTF-8, not ``\\u`` escapes), ``indent``-ed, with the lists under
    ``d[lists_key]`` (moved to the end) one on a line each: a 300-launch summary's per-launch
    values take ~15 KB so, the 4000-launch cap ~150 KB. ``indent=None``: one line."""
    if indent is None:
        return json.dumps(d, ensure_ascii=False)
    d = dict(d)
    lists = d.pop(lists_key, None)
    text = json.dumps(d, indent=indent, ensure_ascii=False)
    if lists is None:
        return text + "\n"
    pad = " " * indent
    inner = ",\n".join(f"{pad * 2}{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                       for k, v in lists.items())
    return f'{text[:-2]},\n{pad}{json.dumps(lists_key)}: {{\n{inner}\n{pad}}}\n}}\n'


class Record:
    """Base of the result dataclasses: ``to_dict`` writes each as JSON-ready values,
    ``from_dict`` reads the fields this version knows (the ``nested`` readers turn the ones
    that hold records or tuples back into them) and keeps the others in ``extra``."""

    nested: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    #: the sentences the record says, made from its values by the registered words
    #: (:mod:`.registry`; properties of the record), each written just before a field, where
    #: the key was written before it said the values it is made of: ``{"notes": "config"}``.
    #: A file's sentence is read back only where it holds no such values (a result from
    #: before they were kept: the record's ``from_dict`` makes them of the sentences)
    said: ClassVar[dict[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (:func:`to_plain`), as :meth:`from_dict` reads
        them back (the README promised this of every result type; only the top-level ones
        had it)."""
        d: dict[str, Any] = to_plain(self)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Raises ValueError when a field's value is not of its type (a file edited by hand
        or damaged: caught here, not as a crash deep in a comparison)."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a JSON object is expected, not {type(d).__name__}")
        known, extra = split_known(cls, d)
        missing = _missing(cls, known)
        if missing:  # (the constructor's TypeError named its own arguments)
            more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
            raise ValueError(f"no {', '.join(repr(m) for m in missing[:4])}{more}")
        hints = _hints(cls)
        for name, value in known.items():
            if not _conforms(value, hints[name]):  # a record's own fields: by its reader
                raise ValueError(f"'{name}' is {shown(value)}, not {_describe(hints[name])}")
        for name, read in cls.nested.items():
            if name in known:
                known[name] = read(known[name])
        written = {key: extra.pop(key) for key in cls.said if key in extra}
        record = cls(**known, extra=extra)  # type: ignore[call-arg]
        object.__setattr__(record, "_written", written)  # (frozen; not a field)
        record.check_values()
        return record

    def written(self, key: str) -> Any:
        """The sentence ``key`` (:attr:`said`) as the file this record was read from wrote
        it (None: not read from a file, or the file had none): what is shown where this
        version cannot make it (a newer version's note)."""
        return getattr(self, "_written", {}).get(key)

    def check_values(self) -> None:
        """Raise ValueError for values of the right type that no analysis writes (a count
        below zero, a fraction above one), so that a file edited by hand is refused when read,
        not met as a crash in a comparison. Nothing to check by default."""


def shown(value: Any) -> str:
    """``value`` for an error message, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _hints(cls: type) -> dict[str, Any]:
    """``cls``'s field types, resolved once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


_HINTS: dict[type, dict[str, Any]] = {}


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's type: numbers, text, flags, lists and mappings of
    them, and None where the type allows it (a record is checked by its own reader)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return isinstance(value, (list, tuple)) and \
            (len(args) != 1 or all(_conforms(v, args[0]) for v in value))
    if origin is dict:
        key, item = typing.get_args(hint) or (Any, Any)
        return isinstance(value, dict) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items())
    return True


def _describe(hint: Any) -> str:
    """A field's type in words, for the error: ``a number or null``, ``a list (each item
    text)``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return f"a list (each item {_describe(args[0])})" if len(args) == 1 else "a list"
    if origin is dict:
        item = typing.get_args(hint)[1] if typing.get_args(hint) else Any
        return "an object" if item is Any else f"an object (each value {_describe(item)})"
    return {type(None): "null", bool: "true or false", int: "an integer", float: "a number",
            str: "text"}.get(hint, getattr(hint, "__name__", str(hint)))


def optional(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A nested reader for a field that may be empty (None stays None)."""
    return lambda v: read(v) if v else None


def extra_field() -> Any:
    """The ``extra`` field of a result type: unknown keys from a newer minor version."""
    return dataclasses.field(default_factory=dict, compare=False, hash=False, repr=False)
