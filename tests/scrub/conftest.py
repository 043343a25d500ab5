"""The scrub tests' shared fixtures: the sample trace and a raw-like export made from it."""

from test_scrub import raw_like, sample  # noqa: F401 - fixtures for test_private.py
