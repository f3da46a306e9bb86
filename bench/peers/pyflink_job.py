# mypy: disable-error-code="import-not-found"
"""The standard workload's 1-minute tumbling count + sum on PyFlink SQL (run by
``bench/peers_bench.py`` in its own virtualenv, requirements-pyflink.txt).

A bounded filesystem/JSON source over the JSON-lines file, event time
``TO_TIMESTAMP_LTZ(ts, 3)`` with ``WATERMARK ... - INTERVAL '5' SECOND``, a
``TUMBLE`` window TVF grouped by key with ``COUNT(*)`` and ``SUM(value)``;
EmbeddedRocksDB state, exactly-once checkpoints every 5 s, streaming mode,
parallelism 2; a filesystem/CSV sink (exactly-once: files are committed by
checkpoints, the last by the final checkpoint at the end of the bounded input,
whose watermark goes to +inf and so closes the last windows).

    python pyflink_job.py EVENTS_FILE OUT_DIR WORK_DIR [--parallelism 2]

Prints one JSON line: ``net_s`` (Flink's net runtime of the job: start to end,
without JVM start-up or planning), ``job_s`` (submission to end, seen from here),
``setup_s`` (this process's start to the submission), and from Flink's log (in
``WORK_DIR/log``) ``checkpoints`` (completed) and ``rocksdb`` (the state backend
loaded was EmbeddedRocksDB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

STARTED = time.monotonic()

SOURCE = """
CREATE TABLE events (
    `key` STRING,
    `value` BIGINT,
    `ts` BIGINT,
    ts_ltz AS TO_TIMESTAMP_LTZ(`ts`, 3),
    WATERMARK FOR ts_ltz AS ts_ltz - INTERVAL '5' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '{path}',
    'format' = 'json'
)
"""

SINK = """
CREATE TABLE panes (
    `key` STRING,
    window_start TIMESTAMP(3),
    window_end TIMESTAMP(3),
    cnt BIGINT,
    total BIGINT
) WITH (
    'connector' = 'filesystem',
    'path' = '{path}',
    'format' = 'csv'
)
"""

QUERY = """
INSERT INTO panes
SELECT `key`, window_start, window_end, COUNT(*), SUM(`value`)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts_ltz), INTERVAL '1' MINUTE))
GROUP BY `key`, window_start, window_end
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-interval", default="5s")
    args = parser.parse_args()

    log_dir = (args.work / "log").resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["FLINK_LOG_DIR"] = str(log_dir)  # read by the gateway's launcher
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import EnvironmentSettings, StreamTableEnvironment

    config = Configuration()
    for key, value in {
        "execution.runtime-mode": "STREAMING",
        "parallelism.default": str(args.parallelism),
        "state.backend.type": "rocksdb",
        "execution.checkpointing.interval": args.checkpoint_interval,
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.dir": (args.work / "checkpoints").resolve().as_uri(),
        "execution.checkpointing.num-retained": "1",
        "io.tmp.dirs": str((args.work / "tmp").resolve()),
        "table.local-time-zone": "UTC",
    }.items():
        config.set_string(key, value)
    (args.work / "tmp").mkdir(parents=True, exist_ok=True)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    settings = (
        EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(config).build()
    )
    t_env = StreamTableEnvironment.create(env, environment_settings=settings)
    t_env.execute_sql(SOURCE.format(path=args.events.resolve()))
    t_env.execute_sql(SINK.format(path=args.out.resolve()))
    submitted = time.monotonic()
    result = t_env.execute_sql(QUERY)
    client = result.get_job_client()
    assert client is not None
    execution = client.get_job_execution_result().result()
    ended = time.monotonic()
    log = "".join(path.read_text(errors="replace") for path in log_dir.glob("*.log"))
    print(
        json.dumps(
            {
                "net_s": execution.get_net_runtime() / 1000,
                "job_s": ended - submitted,
                "setup_s": submitted - STARTED,
                "checkpoints": len(re.findall(r"Completed checkpoint \d+ for job", log)),
                "rocksdb": "loads the state backend as EmbeddedRocksDBStateBackend" in log,
                "flink": _flink_version(),
            }
        ),
        flush=True,
    )
    return 0


def _flink_version() -> str:
    from importlib.metadata import version

    return version("apache-flink")


if __name__ == "__main__":
    raise SystemExit(main())
