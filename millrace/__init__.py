"""Millrace: MillWheel-style exactly-once stateful stream processing.

The service is split into top-level packages, one job each:

- ``statestore``: the RocksDB-backed exactly-once store of one key interval.
- ``computations``: the user API and the computation node runtime.
- ``injector``: ingestion, the durable log and the low-watermark authority.
- ``spark_jobs``: PySpark backfills over the durable log.
- ``millrace.wire.v1``: generated gRPC/protobuf code for the v1 contract in ``proto/``.
"""

from millrace._version import __version__

__all__ = ["__version__"]
