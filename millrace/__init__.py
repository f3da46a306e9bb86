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
- ``millrace``: the ``millrace`` command line, and in ``millrace.wire.v1`` the
  generated gRPC/protobuf code for the v1 contract in ``proto/``.
"""

from millrace._version import __version__

__all__ = ["__version__"]
