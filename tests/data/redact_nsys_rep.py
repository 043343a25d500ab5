"""Redact a small ``.nsys-rep`` in place of its bytes, keeping every length and offset.

How ``nsys2025.3_tiny_redacted.nsys-rep`` was made from a real nsys 2025.3.1 report (of
``python3 -c "import time; [time.sleep(0.01) for _ in range(20)]"`` on the GPU machine):

    python tests/data/redact_nsys_rep.py RAW.nsys-rep tests/data/nsys2025.3_tiny_redacted.nsys-rep

A report is protobuf messages, some of them in LZ4 blocks. Every change here replaces bytes
with ``x``, one for one, so the container, the protobuf lengths and the LZ4 sequences are
untouched:

* plain protobuf: every environment variable's value (``NAME``/``VALUE`` pairs and the
  ``NAME=VALUE\\0`` block), then any other copy of a value of 8 bytes or more; UUIDs (GPU,
  session) become ``00000000-0000-0000-0000-000000000000``;
* LZ4 blocks (each preceded by its compressed and decompressed sizes as varints, which the
  decode must match exactly): the literal bytes that decode to protobuf string payloads of
  the machine's process list
  (command lines, paths, process names) and to environment values. Bytes that LZ4 copies
  from earlier output follow their source.

The environment's names are blanked as well as its values, and the kernel's version strings
(nsys's own launch settings keep ``LD_PRELOAD={}``: its placeholder, nothing of the machine).
The script then decodes the blocks again and fails if their structure changed or a marker of
the capture machine is still readable: generic ones (:data:`MARKERS`) and those given with
``--marker`` (the machine's own host, container and process names: never committed here).
"""

from __future__ import annotations

import argparse
import re
import sys

#: generic signs of a machine's environment left readable; the names of the capture machine's
#: own processes and hosts are given on the command line (``--marker``), never written here
MARKERS = [b"/root", b"/home/", b"HOME=/", b"PWD=/", b"USER=", b"HOSTNAME="]
#: kernel version strings (uname -r, uname -v), as nsys records the system
KERNEL = [rb"\d+\.\d+\.\d+-[A-Za-z0-9._+-]+", rb"#\d+ SMP[\x20-\x7e]*"]


def lz4_decode(d: bytes, start: int, stop: int | None = None):
    """Decode an LZ4 block from ``start``: (end, output, literal spans (in_start, in_end,
    out_start)). Stops at the first impossible sequence, or at input offset ``stop``."""
    out, i, spans, n = bytearray(), start, [], len(d) if stop is None else stop
    while i < n:
        tok = d[i]
        i += 1
        ll = tok >> 4
        if ll == 15:
            while i < n:
                ll += d[i]
                i += 1
                if d[i - 1] != 255:
                    break
        if i + ll > n:
            break
        spans.append((i, i + ll, len(out)))
        out += d[i:i + ll]
        i += ll
        if i + 2 > n:
            break
        off = d[i] | d[i + 1] << 8
        if off == 0 or off > len(out):
            i -= 2
            break
        i += 2
        ml = tok & 15
        if ml == 15:
            while i < n:
                ml += d[i]
                i += 1
                if d[i - 1] != 255:
                    break
        for _ in range(ml + 4):
            out.append(out[-off])
    return i, out, spans


def _varint(d: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while i < len(d) and shift < 35:
        value |= (d[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not d[i - 1] & 0x80:
            return value, i
    return -1, i


def find_blocks(d: bytes, min_size: int = 256) -> list[tuple[int, int]]:
    """LZ4 blocks: each is preceded by two varints, its compressed and decompressed sizes,
    and decodes to exactly that many bytes ending exactly at its end. (Found by scanning:
    a random offset passes this check with negligible probability.)"""
    blocks = []
    i = 0
    while i < len(d) - 4:
        csize, j = _varint(d, i)
        usize, k = _varint(d, j)
        if min_size <= csize <= len(d) - k and csize <= usize <= 64 * csize:
            end, out, _ = lz4_decode(d, k, k + csize)
            if end == k + csize and len(out) == usize:
                blocks.append((k, k + csize))
                i = k + csize
                continue
        i += 1
    return blocks


def proto_strings(out: bytes, min_len: int = 2):
    """Spans of protobuf string payloads: a tag of wire type 2, a varint length, that many
    printable bytes."""
    i, n = 0, len(out)
    while i < n - 2:
        tag = out[i]
        if tag & 7 == 2 and 1 <= tag >> 3 <= 31:
            j, length, shift = i + 1, 0, 0
            while j < n and shift < 21:
                length |= (out[j] & 0x7F) << shift
                shift += 7
                j += 1
                if not out[j - 1] & 0x80:
                    break
            if min_len <= length <= 4000 and j + length <= n and \
                    all(32 <= c < 127 for c in out[j:j + length]):
                yield j, j + length
                i = j + length
                continue
        i += 1


def env_pairs(d: bytes) -> dict[bytes, bytes]:
    """The environment's ``NAME=VALUE`` pairs: a run of NUL-terminated ones, the last of
    which may end with a newline instead (it kept ``_=/path/of/nsys`` readable)."""
    pairs: dict[bytes, bytes] = {}
    for m in re.finditer(rb"(?:[A-Za-z_][A-Za-z0-9_]*=[\x20-\x7e]*\x00){20,}"
                         rb"(?:[A-Za-z_][A-Za-z0-9_]*=[\x20-\x7e]*\n)?", d):
        for name, value in re.findall(rb"([A-Za-z_][A-Za-z0-9_]*)=([\x20-\x7e]*)[\x00\n]",
                                      m.group()):
            pairs.setdefault(name, value)
    return pairs


def redact(raw: bytes) -> bytes:
    d = bytearray(raw)
    blocks = find_blocks(raw)
    inside = lambda i: any(s <= i < e for s, e in blocks)  # noqa: E731

    def blank(a: int, b: int) -> None:
        for i in range(a, b):
            d[i] = ord("x")

    pairs = env_pairs(raw)
    for name, value in pairs.items():  # NAME=VALUE\0, and protobuf (NAME, VALUE) pairs: the
        # names too (they say what the machine runs), keeping the '=' and every length
        for m in re.finditer(re.escape(name + b"=" + value) + rb"[\x00\n]", raw):
            if not inside(m.start()):
                blank(m.start(), m.start() + len(name))
                blank(m.start() + len(name) + 1, m.end() - 1)
        for m in re.finditer(rb"\x0a" + re.escape(bytes([len(name)]) + name) + rb"\x12", raw):
            j, length, shift = m.end(), 0, 0
            while True:
                length |= (raw[j] & 0x7F) << shift
                shift += 7
                j += 1
                if not raw[j - 1] & 0x80:
                    break
            if raw[j:j + length] == value and not inside(j):
                blank(m.start() + 2, m.end() - 1)
                blank(j, j + length)
    for value in pairs.values():  # other plain copies of long values
        if len(value) >= 8:
            for m in re.finditer(re.escape(value), bytes(d)):
                if not inside(m.start()):
                    blank(m.start(), m.end())
    for pattern in KERNEL:  # the kernel's version strings
        for m in re.finditer(pattern, bytes(d)):
            if not inside(m.start()):
                blank(m.start(), m.end())
    uuid = rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    for m in re.finditer(uuid, raw):  # GPU and session UUIDs -> 00000000-0000-...
        if not inside(m.start()):
            for i in range(m.start(), m.end()):
                if d[i] != ord("-"):
                    d[i] = ord("0")
    for s, e in blocks:  # literal bytes of the LZ4 blocks
        _, out, spans = lz4_decode(raw, s, e)
        ranges = list(proto_strings(bytes(out)))
        text = bytes(out)
        for name in pairs:
            for m in re.finditer(re.escape(name + b"=") + rb"[\x20-\x7e]*", text):
                ranges.append((m.start(), m.start() + len(name)))
                ranges.append((m.start() + len(name) + 1, m.end()))
        for pattern in KERNEL:
            ranges += [m.span() for m in re.finditer(pattern, text)]
        hit = bytearray(len(out))
        for a, b in ranges:
            hit[a:b] = b"\x01" * (b - a)
        for a, b, o in spans:
            for k in range(b - a):
                if hit[o + k] and 32 <= raw[a + k] < 127:
                    d[a + k] = ord("x")
    return bytes(d)


def check(raw: bytes, red: bytes, markers: list[bytes]) -> list[bytes]:
    """What is still readable: markers in the plain bytes or in the decoded blocks."""
    assert len(raw) == len(red)
    left = [m for m in markers if m in red]
    left += [m.group() for p in KERNEL for m in re.finditer(p, red)]
    for s, e in find_blocks(raw):
        _, a, sa = lz4_decode(raw, s, e)
        _, b, sb = lz4_decode(red, s, e)
        assert [x[:2] for x in sa] == [x[:2] for x in sb] and len(a) == len(b), \
            "LZ4 structure changed"
        left += [m for m in markers if m in bytes(b)]
    return left


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--marker", action="append", default=[], metavar="TEXT",
                    help="text of the capture machine that must not be left readable (its "
                         "host, container or process names); repeat")
    a = ap.parse_args()
    src, dst = a.src, a.dst
    with open(src, "rb") as f:
        raw = f.read()
    red = redact(raw)
    left = check(raw, red, MARKERS + [m.encode() for m in a.marker])
    if left:
        sys.exit(f"still readable: {left}")
    with open(dst, "wb") as f:
        f.write(red)
    changed = sum(a != b for a, b in zip(raw, red, strict=True))
    print(f"{dst}: {changed} of {len(raw)} bytes redacted, LZ4 blocks {find_blocks(raw)}",
          file=sys.stderr)
