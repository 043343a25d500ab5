"""Results as files for other tools, every one a row of :data:`.exporters.EXPORTERS`: the
per-launch table (:mod:`.per_launch`, the CSV,
parquet and database rows of ``report --per-launch``), an SQLite database of the per-launch
tables (:mod:`.db`, ``report --per-launch FILE.db``) and a Perfetto/Chrome-trace timeline
(:mod:`.perfetto`, ``nsysscope export --perfetto``).

Between :mod:`nsysscope.analysis` and :mod:`nsysscope.batch` in the import layers: an
exporter writes what an :class:`~nsysscope.analysis.Analysis` holds, and the many-trace
workers (:mod:`nsysscope.batch`) write each trace's rows in parallel.
"""

from .db import DB_SUFFIXES, append_parts, check_ours, is_db_name, write_db
from .exporters import EXPORTERS, ExportContext, Exporter, exporter_for, exporters_of
from .per_launch import per_launch_parts, per_launch_table, write_per_launch_parts

__all__ = ["DB_SUFFIXES", "EXPORTERS", "append_parts", "check_ours", "ExportContext", "Exporter",
           "exporter_for", "exporters_of", "is_db_name", "per_launch_parts", "per_launch_table",
           "write_db", "write_per_launch_parts"]
