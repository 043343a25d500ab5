"""Many traces at once (say, one per GPU rank): ``nsysscope report DIR_OR_GLOB...``.

:mod:`.expand` turns folders and globs into trace files, :mod:`.run` analyses them in worker
processes (``--jobs``) or on a Dask cluster (``--scheduler``), :mod:`.aggregate` compares
them. The result is a :class:`~nsysscope.model.BatchResult`; renderers format it.
"""

from .aggregate import aggregate, worst_line
from .dask import run_dask
from .expand import expand, names_many, rank_of
from .one import analyze_one
from .run import run_batch, run_local, run_traces

__all__ = ["aggregate", "analyze_one", "expand", "names_many", "rank_of", "run_batch",
           "run_dask", "run_local", "run_traces", "worst_line"]
