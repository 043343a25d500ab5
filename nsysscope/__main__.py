"""``python -m nsysscope`` is the ``nsysscope`` command."""

from .cli import run

run()
