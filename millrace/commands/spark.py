"""``millrace backfill`` and ``millrace replay``: build the ``spark-submit`` command of
``spark_jobs/backfill.py`` or ``spark_jobs/replay.py``, print it, and run it.

Both run the job with the ``spark-submit`` and the Python of this installation
(``--master local[2]`` unless ``--master`` says otherwise); every option but
``--master`` and ``--print-only`` goes to the job as given (``docs/spark.md``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import millrace.spark_jobs.backfill as backfill_job
import millrace.spark_jobs.bootstrap as bootstrap_job
import millrace.spark_jobs.replay as replay_job
from millrace.deployment import Placement

_SHARED = ("log", "from_", "to", "intervals", "partitions")


SPARK_LOG_CONFIG = Path(backfill_job.__file__).resolve().with_name("log4j2.properties")
"""Spark's log for the jobs: warnings and errors (its default logs ~40 INFO lines)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``backfill`` and ``replay`` sub-commands."""
    backfill = subparsers.add_parser(
        "backfill",
        help="run the topology over the durable log on Spark (spark-submit)",
        description=(
            "Run the deployment's topology over the log (or its archive) with spark-submit: "
            "the same computations, a perfect watermark, sink streams written as Parquet."
        ),
    )
    _common(backfill)
    backfill.add_argument("--out", required=True, help="output directory or URI (overwritten)")
    backfill.add_argument("--jsonl", action="store_true", help="also write JSON lines")
    backfill.add_argument("--summary", help="also write the summary as JSON here")
    backfill.add_argument("--allow-empty", action="store_true",
                          help="exit 0 when no record is read (else 3, saying why)")  # fmt: skip
    backfill.set_defaults(handler=run, job=backfill_job, flags=("out", "summary"),
                          switches=("jsonl", "include_active", "allow_empty"))  # fmt: skip

    replay = subparsers.add_parser(
        "replay",
        help="recompute a time range from the log and correct the online sinks (spark-submit)",
        description=(
            "Backfill a time range over everything the log holds, compare with what the "
            "online sinks hold, and publish the differences into them as corrections."
        ),
    )
    _common(replay)
    replay.add_argument("--work", help="where the backfill writes (default: a scratch dir)")
    replay.add_argument("--sink-path", action="append", metavar="STREAM=PATH",
                        help="the online sink's file or Parquet directory of STREAM")  # fmt: skip
    replay.add_argument("--report", help="also write the report as JSON here")
    replay.add_argument("--by-content", action="append", metavar="STREAM",
                        help="compare STREAM record by record by content (a join's matches), "
                             "not one current result per key or window")  # fmt: skip
    replay.add_argument("--dry-run", action="store_true", help="compare only, publish nothing")
    replay.set_defaults(handler=run, job=replay_job,
                        flags=("work", "sink_path", "report", "by_content"),
                        switches=("dry_run", "include_active"))  # fmt: skip
    _register_bootstrap(subparsers)


def _register_bootstrap(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bootstrap = subparsers.add_parser(
        "bootstrap",
        help="build a computation's interval stores from the log (spark-submit)",
        description=(
            "Backfill a computation over the log below offset N into the stores its nodes "
            "open, and set the injector to forward it from N (stop both first)."
        ),
    )
    bootstrap.add_argument("--config", required=True, help="the deployment file")
    bootstrap.add_argument("--computation", required=True, help="the computation")
    bootstrap.add_argument("--log", required=True, help="the injector's log directory")
    bootstrap.add_argument("--nodes-dir", required=True, help="the nodes' --data-dir")
    bootstrap.add_argument("--until-offset", type=int, help="first offset left to the nodes")
    bootstrap.add_argument("--until", action="append", metavar="STREAM=N",
                           help="first offset of STREAM left to the nodes")  # fmt: skip
    bootstrap.add_argument("--until-forwarded", action="store_true",
                           help="up to what the injector forwarded (a lost disk)")  # fmt: skip
    bootstrap.add_argument("--master", default="local[2]", help="Spark master")
    bootstrap.add_argument("--print-only", action="store_true", help="print the command only")
    bootstrap.set_defaults(
        handler=run, job=bootstrap_job, shared=(),
        flags=("computation", "log", "nodes_dir", "until_offset", "until"),
        switches=("until_forwarded",),
    )  # fmt: skip


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the deployment file")
    parser.add_argument("--log", help="log directory or archive URI (default: archive_uri)")
    parser.add_argument("--from", dest="from_", help="event time from (ms or ISO-8601 with zone)")
    parser.add_argument("--to", help="event time to, exclusive (ms or ISO-8601 with zone)")
    parser.add_argument("--intervals", type=int, help="key intervals per computation")
    parser.add_argument("--partitions", type=int, help="Spark partitions per stage")
    parser.add_argument("--include-active", action="store_true",
                        help="read each stream's active segment even while an injector "
                             "writes it (a snapshot; without: only when none does)")  # fmt: skip
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--print-only", action="store_true", help="print the command only")


def command(args: argparse.Namespace) -> list[str]:
    """The ``spark-submit`` command line for ``args``."""
    submit = Path(sys.executable).parent / "spark-submit"
    argv = [str(submit if submit.exists() else "spark-submit"), "--master", args.master]
    argv += ["--driver-java-options", f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG.as_uri()}"]
    argv += ["--conf", "spark.ui.showConsoleProgress=false"]
    argv += [str(Path(args.job.__file__).resolve()), "--config", args.config]
    for name in (*getattr(args, "shared", _SHARED), *args.flags):
        value = getattr(args, name)
        flag = "--" + name.rstrip("_").replace("_", "-")
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                argv += [flag, str(item)]
    argv += ["--" + name.replace("_", "-") for name in args.switches if getattr(args, name)]
    return argv


def run(args: argparse.Namespace) -> int:
    """Print the command, check that Java is there, run it; its exit status."""
    argv = command(args)
    print(shlex.join(argv), flush=True)
    if args.print_only:
        return 0
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and Path(java_home, "bin", "java").exists()) and not shutil.which("java"):
        print(
            f"millrace {args.job.APP_NAME.removeprefix('millrace-')}: Spark needs a Java 17+ "
            "runtime and none was found (set JAVA_HOME or put java on PATH, e.g. "
            "apt-get install openjdk-17-jre-headless)",
            file=sys.stderr,
        )
        return 2
    return subprocess.run(argv, env=submit_environment(args.config), check=False).returncode


def submit_environment(config: str) -> dict[str, str]:
    """The environment of ``spark-submit``: this Python for the workers, and on
    ``PYTHONPATH`` the working directory and the topology file's directory, where the
    nodes find the handler modules too (``Topology.load``)."""
    env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    # Local mode binds the loopback: Spark warns about a hostname resolving to it otherwise.
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [os.getcwd()]
    try:
        named = Placement.load(config).topology_file
    except (OSError, ValueError):  # the job itself reports a bad file
        named = None
    if named is not None:
        paths.append(str(named.resolve().parent))
    paths += [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env
