"""``log_stats.py`` reading a log archive through its ``file://`` URI with the ``millrace``
data source (slow): the job's ``main`` in the Spark session the tests share. Its runs
under the real ``spark-submit``: ``tests/spark_log_stats/test_spark_submit.py`` (the
exit status) and, for ``spark-submit`` reading an archive URI, the backfill's
``tests/spark_backfill/test_backfill_submit.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millrace.spark_jobs import log_stats
from tests.spark_logsource._logs import archive, flip_byte_mid_file, segments, write_logs
from tests.spark_logsource._session import shared_spark


@pytest.mark.slow
def test_log_stats_reads_an_archive_uri(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = tmp_path / "log"
    write_logs(log_dir)
    uri = archive(log_dir, tmp_path / "archive")
    infos = {
        stream: [i for i in segments(log_dir, stream) if i.sealed] for stream in ("clicks", "views")
    }
    victim = tmp_path / "archive" / "views" / Path(infos["views"][1].path).name
    corrupt = flip_byte_mid_file(victim)

    out = tmp_path / "stats.json"
    assert log_stats.main(["--log-dir", uri, "--json", str(out)], spark=shared_spark()) == 0
    assert (
        f"CORRUPT stream=views segment={victim.name} position={corrupt.position} "
        f"reason={corrupt.reason}"
    ) in capsys.readouterr().out.splitlines()

    report = json.loads(out.read_text())
    assert report["log_dir"] == uri
    assert report["spark_tasks"] == len(report["segments"]) == sum(map(len, infos.values()))
    for stream, sealed in infos.items():
        per_segment = [s for s in report["segments"] if s["stream"] == stream]
        assert [s["path"] for s in per_segment] == [
            f"{uri}/{stream}/{Path(i.path).name}" for i in sealed
        ]
        for got, info in zip(per_segment, sealed, strict=True):
            if got["segment"] == victim.name:
                assert got["corrupt"] == {"position": corrupt.position, "reason": corrupt.reason}
                assert 0 < got["records"] < info.records
                continue
            assert got["corrupt"] is None
            assert (got["records"], got["first_offset"], got["last_offset"]) == (
                info.records,
                info.base_offset,
                info.end_offset - 1,
            )
            assert (got["min_event_ms"], got["max_event_ms"]) == (
                info.min_event_ms,
                info.max_event_ms,
            )
    clicks = report["streams"]["clicks"]
    assert clicks["records"] == sum(i.records for i in infos["clicks"])
    assert (clicks["segments"], clicks["corrupt"]) == (len(infos["clicks"]), 0)
    assert report["streams"]["views"]["corrupt"] == 1
