"""Millrace: MillWheel-style exactly-once stateful stream processing.

The service is split into packages, one layer each (ARCHITECTURE.md), all imported
through this one namespace (``millrace.engine``: the folders stay at the repository's
top, linked from here):

- ``statestore``: the RocksDB-backed exactly-once store of one key interval.
- ``computations``: the user API (computations, records, serdes, topology, harness).
- ``engine``: the exactly-once engine of one key interval (``IntervalProcessor``).
- ``deployment``: the deployment file, security, what every gRPC server shares.
- ``delivery``: the delivery protocol (senders, acks, the receiving servicer).
- ``node``: the process hosting key intervals.
- ``injector``: ingestion, the durable log and the low-watermark authority.
- ``sinks``: exactly-once sinks, ``Subscribe`` and ``View``.
- ``spark_jobs``: PySpark jobs over the durable log.
- ``streamsql``: streaming SQL planned onto ``dataflow`` computations (``millrace.sql``).
- ``millrace``: the ``millrace`` command line, and in ``millrace.wire.v1`` the
  generated gRPC/protobuf code for the v1 contract in ``proto/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from millrace._version import __version__

if TYPE_CHECKING:
    from millrace.streamsql import SqlPipeline

__all__ = ["__version__", "sql"]


def sql(text: str, *, intervals: int = 1) -> SqlPipeline:
    """Plan SQL statements onto library computations: ``millrace.streamsql.compile_sql``
    (``docs/sql.md``). Imported when first called, so ``import millrace`` stays light."""
    from millrace.streamsql import compile_sql

    return compile_sql(text, intervals=intervals)
