"""Exactly-once sinks: where a topology's final outputs leave Millrace.

A sink receives a sink stream over the same ``Delivery`` protocol nodes use,
and must deduplicate by record id itself: senders resend whatever they have
not seen acknowledged.
"""

from millrace.sink_lines import SinkLine, parse_line, sink_line
from millrace.sinks._indexed_sink import SinkLockedError, SinkUnavailableError
from millrace.sinks.file_sink import FileSink, read_sink_file, read_sink_records
from millrace.sinks.parquet_sink import SCHEMA as PARQUET_SCHEMA
from millrace.sinks.parquet_sink import ParquetSink, read_parquet_sink

__all__ = [
    "PARQUET_SCHEMA",
    "FileSink",
    "ParquetSink",
    "SinkLine",
    "SinkLockedError",
    "SinkUnavailableError",
    "parse_line",
    "read_parquet_sink",
    "read_sink_file",
    "read_sink_records",
    "sink_line",
]
