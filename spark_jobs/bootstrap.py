"""State bootstrap: build a computation's interval stores from the log, then let its
nodes go on from offset N (``spark_jobs.batch.run_bootstrap``).

Usage (``millrace bootstrap`` builds and prints this command; stop the injector and
the computation's nodes first)::

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[2]' \\
        spark_jobs/bootstrap.py --config deployment.toml --computation C \\
        --log data/log --until-offset N --nodes-dir data/nodes

``--until-offset N`` (a computation with one source stream) or ``--until STREAM=N``
(one per source stream) is the first offset left to the nodes; ``--until-forwarded``
takes what the injector has forwarded to the computation (the rebuild of a node
whose disk was lost). The stores are
written to ``<nodes-dir>/<computation>/<interval>`` (where ``millrace node
--data-dir`` looks; they must not exist yet) on the machine that runs the job: run
it on the node's machine (``--master local[*]``), or copy the stores there. Then
the computation's consumer offsets in ``<log>/<stream>/forwarded.json`` are set to
N. Start the injector and the nodes: the nodes send what the bootstrap produced
(receivers drop what they already have) and the injector forwards from N.

Prints ``BOOTSTRAP computation=.. records=.. intervals=.. watermark_ms=..
records_in=.. productions=.. timers_fired=.. dead_letters=..``. Exit status 2 for a
bad argument (a computation that reads another computation's output, a store that
exists, no log), 1 if the Spark job fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from millrace.spark_jobs.backfill import prepare, run_in_spark

APP_NAME = "millrace-bootstrap"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="bootstrap.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the deployment file")
    parser.add_argument("--computation", required=True, help="the computation to bootstrap")
    parser.add_argument("--log", required=True, help="the injector's log directory")
    parser.add_argument("--nodes-dir", required=True, help="the nodes' --data-dir")
    parser.add_argument("--until-offset", type=int, help="first offset left to the nodes")
    parser.add_argument("--until", action="append", default=[], metavar="STREAM=N",
                        help="first offset of STREAM left to the nodes")  # fmt: skip
    parser.add_argument(
        "--until-forwarded", action="store_true",
        help="up to what the injector has forwarded to the computation (a node whose "
        "disk was lost: its forwarded.json offsets)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.intervals = None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; the exit status."""
    args = parse_args(argv)
    prepared = prepare(args, "bootstrap")
    if isinstance(prepared, int):
        return prepared
    deployment, topology, log = prepared
    from millrace.spark_jobs.batch import (
        BootstrapError,
        BootstrapOptions,
        check_bootstrap,
        resume_forwarding,
        run_bootstrap,
    )

    until: dict[str, int] = {}
    try:
        for item in args.until:
            stream, _, offset = item.partition("=")
            until[stream] = int(offset)
        if args.until_forwarded:
            until.update(forwarded_offsets(Path(log), topology, args.computation))
        if args.until_offset is not None:
            spec = topology.computations.get(args.computation)
            inputs = list(spec.input_streams()) if spec else []
            if len(inputs) != 1:
                raise BootstrapError(f"{args.computation!r} reads {inputs}: give --until S=N")
            until[inputs[0]] = args.until_offset
        placement = deployment.injector
        options = BootstrapOptions(
            topology=topology, computation=args.computation, log=log, until=until,
            nodes_dir=args.nodes_dir,
            out_of_orderness_ms=placement.out_of_orderness_ms if placement else 0,
        )  # fmt: skip
        check_bootstrap(options)
    except (BootstrapError, ValueError) as exc:
        print(f"bootstrap: {exc}", file=sys.stderr)
        return 2
    summary = run_in_spark(APP_NAME, "bootstrap", lambda spark: run_bootstrap(spark, options))
    if summary is None:
        return 1
    resume_forwarding(Path(log), args.computation, until)
    figures = " ".join(f"{key}={value}" for key, value in summary.stats.items())
    print(
        f"BOOTSTRAP computation={args.computation} records={summary.records} "
        f"intervals={summary.intervals} watermark_ms={summary.watermark_ms} {figures}",
        flush=True,
    )
    return 0


def forwarded_offsets(log_dir: Path, topology: Any, computation: str) -> dict[str, int]:
    """Per source stream of ``computation``: the offset the injector's forwarder has
    had acknowledged by it (``<log>/<stream>/forwarded.json``)."""
    spec = topology.computations.get(computation)
    offsets = {}
    for stream in spec.input_streams() if spec else ():
        path = log_dir / stream / "forwarded.json"
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from exc
        offsets[stream] = int(state.get("consumers", {}).get(computation, state["acked_offset"]))
    return offsets


if __name__ == "__main__":
    sys.exit(main())
