"""PySpark over the durable log: the ``millrace`` data source, jobs run with ``spark-submit``.

:func:`register` makes ``spark.read.format("millrace")`` available in a
session and :func:`read_log` reads the log through it
(:mod:`spark_jobs.logsource`, ``docs/spark.md``); ``log_stats.py`` is a
job built on it. Importing this package imports neither PySpark nor the
data source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

FILTER_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
"""Spark's switch for filter pushdown into Python data sources (off by default)."""


def register(spark: Any) -> None:
    """Register the ``millrace`` data source with the SparkSession ``spark``.

    Also turns on :data:`FILTER_PUSHDOWN` for the session: the source
    implements ``pushFilters``, which Spark refuses to call (the read fails)
    while it is off.
    """
    from millrace.spark_jobs.logsource import MillraceLogSource

    spark.conf.set(FILTER_PUSHDOWN, "true")
    spark.dataSource.register(MillraceLogSource)


def read_log(
    spark: Any,
    location: str,
    *,
    streams: Sequence[str] | None = None,
    include_active: bool = False,
    corrupt: str = "report",
    min_partitions: int = 1,
) -> Any:
    """The log at ``location`` (a log directory or an archive URI) as a DataFrame.

    ``spark.read.format("millrace")`` with these options, registered first,
    and with ``stream IS NOT NULL`` (always true) applied. That filter works
    around a Spark 4.3 bug: Spark keeps the plan of the last query that
    pushed filters down on the DataFrame, and a later query on the same
    DataFrame that pushes none reuses it, reading only the earlier query's
    segments and rows. With this filter every query pushes one and is
    planned afresh (``docs/spark.md``). ``min_partitions``: fewer segments
    than this are read in pieces, so that every core reads (option
    ``minPartitions``).
    """
    from pyspark.sql import functions

    register(spark)
    reader = spark.read.format("millrace").option("includeActive", str(include_active).lower())
    reader = reader.option("corrupt", corrupt).option("minPartitions", str(min_partitions))
    if streams is not None:
        reader = reader.option("stream", ",".join(streams))
    return reader.load(location).where(functions.col("stream").isNotNull())


__all__ = ["FILTER_PUSHDOWN", "read_log", "register"]
