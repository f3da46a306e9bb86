"""The PySpark data source: ``spark.read.format("millrace")`` (``pyspark.sql.datasource``).

Spark calls, in its own Python workers: ``schema()`` when the DataFrame is
made; on the driver, per query, ``reader()``, ``pushFilters()`` (filter
pushdown must be enabled: ``spark.sql.python.filterPushdown.enabled``,
which :func:`spark_jobs.register` sets) and ``partitions()``; then, on the
executors, ``read()`` once per partition, with the reader as it was after
``pushFilters``. ``spark.readStream`` gets ``streamReader()`` instead
(:mod:`spark_jobs.logsource._stream`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition

from millrace.spark_jobs._log_reader import LogDirError
from millrace.spark_jobs.logsource._plan import SegmentPartition, check_location, plan_segments
from millrace.spark_jobs.logsource._pushdown import Pushdown, push_filters
from millrace.spark_jobs.logsource._read import read_partition
from millrace.spark_jobs.logsource._schema import COLUMNS, SCHEMA
from millrace.spark_jobs.logsource._stream import MillraceStreamReader, StreamOptions

_BOOLEANS = {"true": True, "false": False}
_CORRUPT_MODES = ("report", "fail")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """The options of one read, checked.

    ``location`` is ``load()``'s path: a local log directory or an archive
    URI. ``streams`` None means every stream.
    """

    location: str
    streams: tuple[str, ...] | None = None
    include_active: bool = False
    fail_on_corrupt: bool = False
    min_partitions: int = 1

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """From the (case-insensitive) options Spark passes; ``ValueError`` for a bad one."""
        location = options.get("path")
        if not location:
            raise LogDirError(
                'spark.read.format("millrace").load(path): path must be a log directory '
                "or a log archive URI"
            )
        streams = None
        if options.get("stream") is not None:
            streams = tuple(s.strip() for s in str(options["stream"]).split(","))
            if not all(streams):
                raise ValueError(f"option stream={options['stream']!r} names an empty stream")
        include_active = _BOOLEANS.get(str(options.get("includeActive", "false")).lower())
        if include_active is None:
            raise ValueError(
                f"option includeActive={options['includeActive']!r}: use true or false"
            )
        corrupt = str(options.get("corrupt", "report")).lower()
        if corrupt not in _CORRUPT_MODES:
            raise ValueError(f"option corrupt={options['corrupt']!r}: use report or fail")
        given = str(options.get("minPartitions", "1"))
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"option minPartitions={given!r}: use a positive integer")
        return cls(str(location), streams, include_active, corrupt == "fail", int(given))


class MillraceLogSource(DataSource):
    """The durable log as a DataFrame, one input partition per segment file.

    ``spark.read.format("millrace").load(path)`` after
    :func:`spark_jobs.register`; see ``docs/spark.md`` for the schema,
    options, pushdown, corrupt entries and archive URIs.
    """

    @classmethod
    def name(cls) -> str:
        """The format name: ``millrace``."""
        return "millrace"

    def schema(self) -> str:
        """:data:`SCHEMA`; checks the options and that the log exists, so ``load()`` fails early."""
        options = ReadOptions.parse(self.options)
        check_location(options.location)
        return SCHEMA

    def reader(self, schema: Any) -> LogReader:
        """A reader of the log; ``ValueError`` if ``schema`` is not :data:`SCHEMA`."""
        _check_schema(schema)
        return LogReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: Any) -> MillraceStreamReader:  # noqa: N802 (Spark's name)
        """A stream reader following the log (``spark.readStream``): see :mod:`._stream`.

        ``ValueError`` if ``schema`` is not :data:`SCHEMA` or an option is bad.
        """
        _check_schema(schema)
        options = ReadOptions.parse(self.options)
        return MillraceStreamReader(
            options.location,
            options.streams,
            fail_on_corrupt=options.fail_on_corrupt,
            starting=StreamOptions.parse(self.options).starting,
        )


def _check_schema(schema: Any) -> None:
    given = [(field.name, field.dataType.simpleString()) for field in schema.fields]
    if given != list(COLUMNS):
        raise ValueError(f"the millrace data source has the schema {SCHEMA!r}, not {given}")


class LogReader(DataSourceReader):
    """Plans one partition per segment file that can give rows, and reads one."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.pushdown = Pushdown()

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 (Spark's name)
        """Keep the filters :func:`push_filters` applies exactly; give Spark back the others."""
        self.pushdown, rest = push_filters(self.pushdown, filters)
        return rest

    def partitions(self) -> Sequence[InputPartition]:
        """One :class:`SegmentPartition` per segment file that can give rows (or per
        piece of one, for ``minPartitions``)."""
        streams = self.options.streams
        _, parts = plan_segments(
            self.options.location,
            streams,
            include_active=self.options.include_active,
            pushdown=self.pushdown,
            min_partitions=self.options.min_partitions,
        )
        return list(parts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one segment file (none for Spark's placeholder of an empty plan)."""
        if not isinstance(partition, SegmentPartition):
            return iter(())
        return read_partition(
            partition, self.pushdown, fail_on_corrupt=self.options.fail_on_corrupt
        )
