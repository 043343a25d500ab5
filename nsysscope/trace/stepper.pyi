"""Types of the C reader, ``stepper.c`` (its doc says what each argument is)."""

from typing import Any

class ReadError(Exception): ...

def read(uri: str, sql: str, kinds: str, params: tuple[Any, ...], prelude: str | None,
         cancel: bytearray) -> list[Any] | None: ...
