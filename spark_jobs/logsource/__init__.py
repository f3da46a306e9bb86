"""The durable log as a Spark DataFrame: the ``millrace`` Python data source.

::

    from millrace import spark_jobs
    spark_jobs.register(spark)
    df = (spark.read.format("millrace")
          .option("stream", "clicks")       # optional, comma-separated; default every stream
          .load("data/log"))                # a log directory, or an archive URI (s3://...)

One input partition (one task) per segment file. Filters on ``stream``,
``segment``, ``offset`` and ``event_time_ms`` skip whole segments by their
index or manifest and the rows outside them. Corrupt entries come out as
rows with ``corrupt_reason`` set. Everything a user needs is in
``docs/spark.md``; the pieces that do not need a running Spark
(:func:`plan_segments`, :func:`read_partition`, the stream reader's
:func:`read_range`) can be called on their own.
"""

from millrace.spark_jobs._log_reader import LogDirError
from millrace.spark_jobs.logsource._archive import is_uri
from millrace.spark_jobs.logsource._plan import (
    SegmentPartition,
    check_location,
    pieces,
    plan_segments,
    segment_exists,
)
from millrace.spark_jobs.logsource._pushdown import Bounds, Pushdown, push_filters
from millrace.spark_jobs.logsource._read import BATCH_ROWS, CorruptSegmentError, read_partition
from millrace.spark_jobs.logsource._schema import ARROW_SCHEMA, COLUMNS, SCHEMA, VANISHED
from millrace.spark_jobs.logsource._source import LogReader, MillraceLogSource, ReadOptions
from millrace.spark_jobs.logsource._stream import (
    MillraceStreamReader,
    StreamOptions,
    StreamPartition,
    read_range,
)
from millrace.spark_jobs.logsource._summary import SegmentSummary

__all__ = [
    "ARROW_SCHEMA",
    "BATCH_ROWS",
    "COLUMNS",
    "SCHEMA",
    "VANISHED",
    "Bounds",
    "CorruptSegmentError",
    "LogDirError",
    "LogReader",
    "MillraceLogSource",
    "MillraceStreamReader",
    "Pushdown",
    "ReadOptions",
    "SegmentPartition",
    "SegmentSummary",
    "StreamOptions",
    "StreamPartition",
    "check_location",
    "is_uri",
    "pieces",
    "plan_segments",
    "push_filters",
    "read_partition",
    "read_range",
    "segment_exists",
]
