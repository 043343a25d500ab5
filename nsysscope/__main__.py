"""``python -m nsysscope`` is the ``nsysscope`` command."""

from .program import run

run()
