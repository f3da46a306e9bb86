"""Batch = streaming on Spark: a topology's computations run over the durable log.

:func:`run_backfill` runs every computation of a topology over the log (or
its archive) in Spark stages, through the same ``IntervalDriver`` the nodes
run, with a perfect watermark (:func:`run_interval`), and writes the sink
streams as Parquet (and JSON lines). ``spark_jobs/backfill.py`` is the
``spark-submit`` job; ``docs/spark.md`` the user's guide.
"""

from millrace.spark_jobs.batch._bootstrap import (
    BootstrapError,
    BootstrapOptions,
    BootstrapSummary,
    check_bootstrap,
    resume_forwarding,
    run_bootstrap,
)
from millrace.spark_jobs.batch._corrections import (
    REPLAY,
    Output,
    StreamReport,
    compare,
    compare_content,
    correction_id,
    identify,
    publish,
)
from millrace.spark_jobs.batch._interval_run import (
    END_OF_TIME,
    BackfillError,
    IntervalStats,
    OutputColumns,
    OutputRow,
    run_interval,
)
from millrace.spark_jobs.batch._pipeline import (
    PRODUCTIONS,
    SINK_COLUMNS,
    BackfillOptions,
    BackfillSummary,
    interval_ordered,
    run_backfill,
)
from millrace.spark_jobs.batch._stages import (
    PRODUCTIONS_ARROW,
    SourceRouter,
    largest_first,
    sink_stream,
    stage_order,
    with_intervals,
)
from millrace.spark_jobs.batch._upcoming import InputColumns, InputRow

__all__ = [
    "BootstrapError",
    "BootstrapOptions",
    "BootstrapSummary",
    "check_bootstrap",
    "resume_forwarding",
    "run_bootstrap",
    "REPLAY",
    "Output",
    "StreamReport",
    "compare",
    "compare_content",
    "correction_id",
    "identify",
    "publish",
    "END_OF_TIME",
    "PRODUCTIONS",
    "PRODUCTIONS_ARROW",
    "SINK_COLUMNS",
    "BackfillError",
    "BackfillOptions",
    "BackfillSummary",
    "InputColumns",
    "InputRow",
    "IntervalStats",
    "OutputColumns",
    "OutputRow",
    "interval_ordered",
    "run_backfill",
    "run_interval",
    "SourceRouter",
    "largest_first",
    "sink_stream",
    "stage_order",
    "with_intervals",
]
