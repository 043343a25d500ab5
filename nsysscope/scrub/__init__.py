"""Remove what identifies a machine or a person from an nsys SQLite export, keep the analysis.

:func:`find_leaks` lists what would leak, :func:`scrub` writes a cleaned copy. What counts as
a leak and what it becomes is the policy in :mod:`.policy` (absolute paths in :mod:`.paths`,
user and host names in :mod:`.names`); :mod:`.context` reads what the
export says about itself, :mod:`.scan` finds every leak in one pass, :mod:`.write` writes the
copy.
"""

from .paths import rewrite_path
from .policy import Leak, ScrubError, ScrubResult
from .scan import find_leaks
from .write import scrub

__all__ = ["Leak", "ScrubError", "ScrubResult", "find_leaks", "rewrite_path", "scrub"]
