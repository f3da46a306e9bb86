"""The log archive: sealed segments copied to a URI a whole cluster can read.

Spark executors on other machines cannot read the injector's disk. With
``archive_uri`` in ``[injector]``, the injector copies every sealed segment
(``.log``, then ``.idx``, then a manifest entry) to that URI -- ``file://``,
``s3://``, ``hdfs://`` or anything else ``pyarrow.fs`` resolves -- and deletes
a local segment (``retention_ms``) only once the archive holds it. The
archive keeps segments forever unless ``archive_retention_ms`` says otherwise.
Readers (the Spark data source, a rebuild) list :meth:`ArchiveLocation.entries`
and read :meth:`ArchiveLocation.read_segment`, checked against the entry's crc.
"""

from millrace.injector.archive._archiver import LogArchiver
from millrace.injector.archive._location import ArchiveError, ArchiveLocation, is_uri
from millrace.injector.archive._manifest import (
    MANIFEST_VERSION,
    ManifestEntry,
    ManifestError,
    segment_name,
)

__all__ = [
    "MANIFEST_VERSION",
    "ArchiveError",
    "ArchiveLocation",
    "LogArchiver",
    "ManifestEntry",
    "ManifestError",
    "is_uri",
    "segment_name",
]
