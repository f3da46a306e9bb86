"""``millrace backfill``: build the ``spark-submit`` command of ``spark_jobs/backfill.py``,
print it, and run it.

``millrace backfill --config deployment.toml --out DIR [--log DIR|URI] [--from T]
[--to T] [--intervals N] [--partitions N] [--jsonl] [--master local[2]]`` runs the
job with the ``spark-submit`` and the Python of this installation; every option but
``--master`` and ``--dry-run`` goes to the job as given.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import spark_jobs.backfill as job


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``backfill`` sub-command."""
    parser = subparsers.add_parser(
        "backfill",
        help="run the topology over the durable log on Spark (spark-submit)",
        description=(
            "Run the deployment's topology over the log (or its archive) with spark-submit: "
            "the same computations, a perfect watermark, sink streams written as Parquet."
        ),
    )
    parser.add_argument("--config", required=True, help="the deployment file")
    parser.add_argument("--out", required=True, help="output directory or URI (overwritten)")
    parser.add_argument("--log", help="log directory or archive URI (default: archive_uri)")
    parser.add_argument("--from", dest="from_", help="event time from (ms or ISO-8601 with zone)")
    parser.add_argument("--to", help="event time to, exclusive (ms or ISO-8601 with zone)")
    parser.add_argument("--intervals", type=int, help="key intervals per computation")
    parser.add_argument("--partitions", type=int, help="Spark partitions per stage")
    parser.add_argument("--jsonl", action="store_true", help="also write JSON lines")
    parser.add_argument("--summary", help="also write the summary as JSON here")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    parser.set_defaults(handler=run)


def command(args: argparse.Namespace) -> list[str]:
    """The ``spark-submit`` command line for ``args``."""
    submit = Path(sys.executable).parent / "spark-submit"
    argv = [str(submit if submit.exists() else "spark-submit"), "--master", args.master]
    argv += [str(Path(job.__file__).resolve()), "--config", args.config, "--out", args.out]
    for flag, value in (
        ("--log", args.log), ("--from", args.from_), ("--to", args.to),
        ("--intervals", args.intervals), ("--partitions", args.partitions),
        ("--summary", args.summary),
    ):  # fmt: skip
        if value is not None:
            argv += [flag, str(value)]
    if args.jsonl:
        argv.append("--jsonl")
    return argv


def run(args: argparse.Namespace) -> int:
    """Print the command, check that Java is there, run it; its exit status."""
    argv = command(args)
    print(shlex.join(argv), flush=True)
    if args.dry_run:
        return 0
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").exists()) and not shutil.which("java"):
        print(
            "millrace backfill: Spark needs a Java 17+ runtime and none was found "
            "(set JAVA_HOME or put java on PATH, e.g. apt-get install openjdk-17-jre-headless)",
            file=sys.stderr,
        )
        return 2
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH")) if p)
    return subprocess.run(argv, env=env, check=False).returncode
