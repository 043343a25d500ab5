"""A node-traced nsys export as ``--cuda-graph-trace=graph`` would have recorded it, made at
test time: for captures that need what was not lent to record in graph mode (two GPUs for the
tensor-parallel ones), and to compare both modes on the very same launches.

Each replay's node rows (kernels, copies and memsets with a ``graphNodeId``) become one row
of ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``, created with the ``CREATE TABLE`` text of a real
graph-traced export (``sample_traces/graph/``): its first start and last end, the device,
context and stream of its first node, its process and correlation id. The node rows are
deleted. Synthetic as a whole (node tracing slowed those replays), real in every value; never
a sample.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

NODE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET")
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"


def as_graph_traced(node_db: Path, graph_db: Path, dst: Path) -> Path:
    """``node_db`` with its replays as graph-trace rows, at ``dst``; ``graph_db``: a real
    graph-traced export, whose table definition is used."""
    with sqlite3.connect(f"file:{graph_db}?mode=ro", uri=True) as g:
        ddl = g.execute("SELECT sql FROM sqlite_master WHERE name = ?", (GRAPH_TRACE,)
                        ).fetchone()[0]
    shutil.copyfile(node_db, dst)
    nodes = " UNION ALL ".join(
        f'SELECT start, "end", deviceId, contextId, streamId, correlationId, globalPid '
        f"FROM {t} WHERE graphNodeId IS NOT NULL" for t in NODE_TABLES)
    with sqlite3.connect(dst) as c:
        c.execute(f"DROP TABLE IF EXISTS {GRAPH_TRACE}")
        c.execute(ddl)
        # SQLite's bare columns of a min() aggregate come from the row holding the minimum:
        # the first node's device, context and stream
        c.execute(f'INSERT INTO {GRAPH_TRACE} (start, "end", deviceId, contextId, streamId, '
                  "correlationId, globalPid, graphId, graphExecId) "
                  'SELECT min(start), max_end, deviceId, contextId, streamId, correlationId, '
                  "globalPid, 0, 0 FROM (SELECT *, max(\"end\") OVER (PARTITION BY globalPid, "
                  f"correlationId) AS max_end FROM ({nodes})) GROUP BY globalPid, correlationId")
        for t in NODE_TABLES:
            c.execute(f"DELETE FROM {t} WHERE graphNodeId IS NOT NULL")
    c.close()
    return dst
