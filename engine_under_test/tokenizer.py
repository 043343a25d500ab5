"""A byte-level tokenizer with a small built-in vocabulary, and an incremental detokenizer.

Ids 0-255 are raw bytes, then the special tokens, then letter pieces (" a", "th", " the"...)
up to the model's vocabulary size. Encoding is greedy longest match; decoding is incremental
and UTF-8 safe, as a serving engine streams text back to clients.
"""

from __future__ import annotations

import codecs
import itertools
import string

BOS, EOS = 256, 257
_N_SPECIAL = 2
_MAX_PIECE = 4


def _pieces() -> "itertools.chain[str]":
    letters = string.ascii_lowercase
    for n in (1, 2, 3):
        for combo in itertools.product(letters, repeat=n):
            word = "".join(combo)
            yield " " + word
            if n > 1:
                yield word


class Tokenizer:
    """Greedy longest-match over bytes and letter pieces, for a vocabulary of ``vocab`` ids."""

    def __init__(self, vocab: int) -> None:
        if vocab < 256 + _N_SPECIAL:
            raise ValueError(f"vocab must hold the 256 bytes and specials, got {vocab}")
        self.vocab = vocab
        self.id_to_bytes: list[bytes] = [bytes([i]) for i in range(256)] + [b"", b""]
        for piece in itertools.islice(_pieces(), vocab - len(self.id_to_bytes)):
            self.id_to_bytes.append(piece.encode())
        self.id_to_bytes += [b""] * (vocab - len(self.id_to_bytes))
        self._lookup = {b: i for i, b in enumerate(self.id_to_bytes) if len(b) > 1}

    def encode(self, text: str) -> list[int]:
        data, ids, i = text.encode(), [BOS], 0
        while i < len(data):
            for n in range(min(_MAX_PIECE, len(data) - i), 1, -1):
                tok = self._lookup.get(data[i:i + n])
                if tok is not None:
                    ids.append(tok)
                    i += n
                    break
            else:
                ids.append(data[i])
                i += 1
        return ids


class Detokenizer:
    """Turns a request's tokens into text one token at a time, holding back split UTF-8."""

    def __init__(self, tokenizer: Tokenizer, stop_strings: tuple[str, ...] = ()) -> None:
        self._bytes = tokenizer.id_to_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = stop_strings
        self._tail = max((len(s) for s in stop_strings), default=0)
        self.text = ""

    def add(self, token: int) -> bool:
        """Append ``token``; True when the text now contains one of the stop strings."""
        new = self._decoder.decode(self._bytes[token])
        if not new:
            return False
        window = self.text[-self._tail:] + new if self._tail else ""
        self.text += new
        return any(s in window for s in self._stops)
