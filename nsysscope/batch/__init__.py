"""Many traces at once (say, one per GPU rank): ``nsysscope report DIR_OR_GLOB...``.

:mod:`.expand` turns folders and globs into trace files, :mod:`.run` analyses them in worker
processes (``--jobs``) or on a Dask cluster (``--scheduler``), :mod:`.aggregate` compares
them. The result is a :class:`~nsysscope.model.BatchResult`; renderers format it.
"""

from .aggregate import aggregate, worst_line
from .expand import expand, names_many, rank_of
from .run import analyze_one, run_batch, run_dask, run_local

__all__ = ["aggregate", "analyze_one", "expand", "names_many", "rank_of", "run_batch",
           "run_dask", "run_local", "worst_line"]
