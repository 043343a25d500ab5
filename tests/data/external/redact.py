"""Redact the few private fields of a public torch.profiler trace, byte for byte elsewhere.

``nsysscope scrub`` rewrites a trace's JSON through Python floats, which turns an epoch time
written to the nanosecond (``1712195495519689.047``) into ``1712195495519689.0``: the corpus
keeps those digits, so its Kineto traces are redacted here instead. Only the string values of
the top-level keys below are replaced (user, host and job names, a trace id, a temporary
path); every other byte, every event included, is the original's.

    python redact.py SRC.json.gz DST.json.gz
"""

from __future__ import annotations

import gzip
import re
import sys

#: top-level key -> its replacement
REDACTED = {
    "trace_id": "00000000000000000000000000000000", "tw_job": "job", "tw_user": "user",
    "tw_cluster": "cluster", "mast_job_name": "job", "username": "user", "host_name": "host",
    "traceName": "<path>/trace.json",
}
_FIELD = re.compile(r'^(\s*"(' + "|".join(REDACTED) + r')"\s*:\s*)"[^"\n]*"', re.M)


def redact(text: str) -> tuple[str, int]:
    """``text`` with the values of :data:`REDACTED` replaced, and how many were."""
    return _FIELD.subn(lambda m: f'{m.group(1)}"{REDACTED[m.group(2)]}"', text)


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    with gzip.open(src, "rt", encoding="utf-8", newline="") as f:
        out, n = redact(f.read())
    with gzip.open(dst, "wt", encoding="utf-8", newline="", compresslevel=9) as f:
        f.write(out)
    print(f"{dst}: {n} fields redacted")
