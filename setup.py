"""The package's one C module: the loader's SQLite column reader
(``nsysscope/trace/stepper.c``). It is optional: where no C compiler or SQLite
library is found the build goes on without it, and nsysscope reads exports through DuckDB
(``nsysscope/trace/columnar.py``). Everything else is declared in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("nsysscope.trace.stepper",
                             sources=["nsysscope/trace/stepper.c"],
                             libraries=["sqlite3"], optional=True)])
