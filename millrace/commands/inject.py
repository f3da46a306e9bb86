"""``millrace inject``: push JSON-lines records from a file (or stdin) into a source stream.

``millrace inject --config d.toml --stream events events.jsonl`` reads
lines ``{"key": ..., "value": ..., "ts": <event time ms>}`` (the file
source's rules, :mod:`injector.json_lines`), and sends them in batches
through :class:`~injector.client.IngestClient`, which retries each batch
with the same idempotency key until the injector acknowledges it (after the
fsync). Batches go in input order: the next one is sent once the previous
one is acknowledged, and is parsed meanwhile.

Idempotency keys are derived from the input alone:
``<source name>:<sha256 of the batch's records>:<first line number>``, the
source name being the file's base name (``stdin`` for ``-``) unless
``--source-name`` says otherwise. Re-running the same command on the same
input after an interruption therefore resends the same batches under the
same keys: the injector acknowledges those it already has as replays and
appends nothing, so nothing is duplicated. Batch boundaries depend on
``--batch``: keep it the same when re-running. (The injector remembers the
keys of the last million requests whose log segments are retained.)

Malformed lines are skipped and reported with their line numbers. Exit
code: 0 if any record was accepted (or the input was empty), 1 if the input
held only malformed lines (with ``--strict``: any malformed line), 2 for usage
errors or an unreachable injector, 130 when interrupted (re-run the same command
to finish).

A bounded input: ``--finish`` finishes the stream once every batch is
acknowledged (``millrace finish --stream S`` alone does the same): it takes no
new records, and once they are all processed its watermark is the end of time, so
every window and timer downstream fires and the pipeline completes by itself.
Re-running the same command after a finish is answered with replays.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from typing import BinaryIO, TextIO

import grpc

from millrace.commands._grpc_errors import (
    EXIT_INTERRUPTED,
    CommandError,
    Service,
    add_timeout_argument,
    check_serving,
    explain,
    injector_service,
    positive_float,
    positive_int,
    run_command,
    security_of,
)
from millrace.commands._inject_batches import Batch, Malformed, read_batches
from millrace.commands._inject_progress import CountedLines, Progress, input_size
from millrace.commands._options import add_config_argument
from millrace.deployment import HANDOFF_SWITCH_INTERVAL_S, tune_threads
from millrace.deployment.security import Security
from millrace.injector.client import IngestClient, PendingIngest

DEFAULT_BATCH = 1000
SHOWN_MALFORMED = 20
"""The summary lists this many malformed lines; the count covers all of them."""
INGEST_SERVICE = "millrace.wire.v1.Ingest"

EXIT_OK = 0
EXIT_MALFORMED = 1
"""Every line was malformed (or, with ``--strict``, any)."""

# The batching lives in _inject_batches; its public names are this command's too.
__all__ = ["Batch", "Malformed", "read_batches", "register", "run", "run_finish"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``inject`` sub-command."""
    parser = subparsers.add_parser(
        "inject",
        help="push JSON-lines records from a file or stdin into a source stream, exactly once",
        description=(
            'Read lines {"key": ..., "value": ..., "ts": MS} from FILE (or stdin) and ingest '
            "them into STREAM through the injector, in batches whose idempotency keys derive "
            "from the input: re-running the same command after an interruption duplicates "
            "nothing. Malformed lines are skipped and reported. Exit 0 if anything was "
            "accepted, 1 if every line was malformed, 2 on usage or connection errors."
        ),
    )
    add_config_argument(parser, required=False, purpose="finds the injector")
    parser.add_argument(
        "--injector", metavar="HOST:PORT", help="the injector's address (overrides --config)"
    )
    parser.add_argument("--stream", required=True, help="the source stream to append to")
    parser.add_argument(
        "input", nargs="?", default="-", metavar="FILE|-", help="JSON-lines file (default: stdin)"
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=(
            f"records per request (default: {DEFAULT_BATCH}); keep it when re-running, "
            "batch boundaries are part of the idempotency keys"
        ),
    )
    parser.add_argument(
        "--source-name",
        metavar="NAME",
        help=(
            "first part of the idempotency keys (default: the file's base name, 'stdin' for -); "
            "use a new name to ingest the same lines again on purpose"
        ),
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if any line was malformed (the valid lines are still ingested)",
    )
    parser.add_argument(
        "--finish",
        action="store_true",
        help=(
            "then finish the stream (a bounded input): it takes no more records and its "
            "watermark goes to the end of time once they are processed"
        ),
    )
    add_timeout_argument(parser)
    parser.add_argument(
        "--give-up-after",
        type=positive_float,
        default=60.0,
        metavar="SECONDS",
        help="stop retrying one batch after this long (default: 60)",
    )
    parser.set_defaults(handler=run)
    finish = subparsers.add_parser(
        "finish",
        help="finish a source stream: a bounded input is complete",
        description=(
            "Finish STREAM: the injector takes no new records for it (retries of requests "
            "it took are answered), and once every record is processed the stream's "
            "watermark is the end of time, so every window and timer fed by it fires. "
            "Idempotent. Exit 0 when finished, 2 on usage or connection errors."
        ),
    )
    add_config_argument(finish, required=False, purpose="finds the injector")
    finish.add_argument(
        "--injector", metavar="HOST:PORT", help="the injector's address (overrides --config)"
    )
    finish.add_argument("--stream", required=True, help="the source stream to finish")
    add_timeout_argument(finish)
    finish.set_defaults(handler=run_finish, give_up_after=60.0)


def run_finish(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Finish the stream; print where its records end; return the exit code."""

    def finish() -> int:
        service, deployment = injector_service(args.deployment, args.injector)
        _finish(args, service, security_of(deployment), sys.stdout if out is None else out)
        return EXIT_OK

    return run_command("finish", finish)


def _finish(args: argparse.Namespace, service: Service, security: Security, out: TextIO) -> None:
    client = IngestClient(service.address, security=security, timeout_s=args.timeout)
    try:
        response = client.finish(args.stream, give_up_after_s=args.give_up_after)
    except grpc.RpcError as error:
        raise CommandError(explain(error, service, "Ingest.FinishStream", args.timeout)) from None
    finally:
        client.close()
    already = " (it was already)" if response.already_finished else ""
    print(
        f"stream {args.stream} finished{already}: its records end before offset "
        f"{response.end_offset}; its watermark goes to the end of time once they are processed",
        file=out,
    )


@dataclass(slots=True)
class Totals:
    """What an inject run did so far."""

    accepted: int = 0
    new: int = 0
    batches: int = 0
    replayed_batches: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def add(self, count: int, replayed: bool) -> None:
        self.accepted += count
        self.batches += 1
        if replayed:
            self.replayed_batches += 1
        else:
            self.new += count

    def seconds(self) -> float:
        return time.monotonic() - self.started


def run(
    args: argparse.Namespace,
    *,
    stdin: BinaryIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Ingest the input; print a summary; return the exit code."""
    return run_command(
        "inject",
        lambda: _inject(
            args,
            sys.stdin.buffer if stdin is None else stdin,
            sys.stdout if out is None else out,
            sys.stderr if err is None else err,
        ),
    )


def _inject(args: argparse.Namespace, stdin: BinaryIO, out: TextIO, err: TextIO) -> int:
    # The injector refuses a stream that is not a source, naming the sources: the
    # topology is not read here (a client imports no user code).
    service, deployment = injector_service(args.deployment, args.injector)
    from_stdin = args.input == "-"
    source_name = args.source_name or ("stdin" if from_stdin else os.path.basename(args.input))
    label = "stdin" if from_stdin else args.input
    if from_stdin:
        handle = stdin
    else:
        try:
            handle = open(args.input, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise CommandError(f"cannot read {args.input!r}: {exc.strerror or exc}") from None
    try:
        with security_of(deployment).open_channel(service.address) as channel:
            check_serving(channel, service, INGEST_SERVICE, args.timeout)
        if from_stdin and getattr(stdin, "isatty", lambda: False)():
            print("reading JSON lines from stdin (end with Ctrl-D)", file=err)
        totals = _send_all(
            args,
            handle,
            service=service,
            security=security_of(deployment),
            source_name=source_name,
            label=label,
            out=out,
            err=err,
        )
    finally:
        if handle is not stdin:
            handle.close()
    if totals is None:
        return EXIT_INTERRUPTED
    if args.finish:
        _finish(args, service, security_of(deployment), out)
    if totals.malformed and (totals.accepted == 0 or args.strict):
        return EXIT_MALFORMED
    return EXIT_OK


def _send_all(
    args: argparse.Namespace,
    handle: BinaryIO,
    *,
    service: Service,
    security: Security,
    source_name: str,
    label: str,
    out: TextIO,
    err: TextIO,
) -> Totals | None:
    """Send every batch; print the summary; the totals, or None if interrupted."""
    # The sending thread needs the GIL briefly to start each request while this one
    # parses the next batch: it must not wait CPython's default 5 ms switch interval.
    tune_threads(HANDOFF_SWITCH_INTERVAL_S)
    totals = Totals()
    progress = Progress(err, input_size(handle))
    lines = CountedLines(handle)
    client = IngestClient(service.address, security=security, timeout_s=args.timeout)
    in_flight: tuple[Batch, PendingIngest] | None = None
    try:
        for batch in read_batches(lines, args.batch, totals.malformed):
            if in_flight is not None:
                _acknowledged(in_flight, service, args, totals)
                progress.update(totals, lines.bytes_read)
            in_flight = (batch, _send(client, args, batch, source_name))
        if in_flight is not None:
            _acknowledged(in_flight, service, args, totals)
    except KeyboardInterrupt:
        progress.clear()
        _summary(out, label, args.stream, service, totals, interrupted=True)
        return None
    except CommandError:
        progress.clear()
        _summary(out, label, args.stream, service, totals, interrupted=True)
        raise
    finally:
        client.close()
    progress.clear()
    _summary(out, label, args.stream, service, totals)
    return totals


def _send(
    client: IngestClient, args: argparse.Namespace, batch: Batch, source_name: str
) -> PendingIngest:
    """Send a batch (failures come from :func:`_acknowledged`)."""
    return client.start_ingest(
        args.stream,
        batch.records,
        idempotency_key=batch.idempotency_key(source_name),
        give_up_after_s=args.give_up_after,
    )


def _acknowledged(
    in_flight: tuple[Batch, PendingIngest],
    service: Service,
    args: argparse.Namespace,
    totals: Totals,
) -> None:
    """Wait for a sent batch's acknowledgement and count it."""
    batch, pending = in_flight
    try:
        response = pending.result()
    except grpc.RpcError as error:
        raise _not_acknowledged(error, service, args, batch) from None
    totals.add(len(response.record_ids), response.replayed)


def _not_acknowledged(
    error: grpc.RpcError, service: Service, args: argparse.Namespace, batch: Batch
) -> CommandError:
    message = explain(error, service, "Ingest.Ingest", args.timeout)
    return CommandError(
        f"{message}\n  the batch starting at line {batch.first_line} was not acknowledged; "
        f"re-run the same command to resume: batches already ingested are replayed, "
        f"not duplicated"
    )


def _summary(
    out: TextIO,
    label: str,
    stream: str,
    service: Service,
    totals: Totals,
    *,
    interrupted: bool = False,
) -> None:
    seconds = totals.seconds()
    rate = totals.accepted / seconds if seconds > 0 else 0.0
    state = " (stopped early: re-run the same command to finish)" if interrupted else ""
    lines = [
        f"inject {label} -> stream {stream} at {service.address}{state}",
        f"  records accepted: {totals.accepted} "
        f"({totals.new} new, {totals.accepted - totals.new} already in the log)",
        f"  batches:          {totals.batches} ({totals.replayed_batches} replayed)",
        f"  malformed lines:  {len(totals.malformed)}" + (" (skipped)" if totals.malformed else ""),
    ]
    for item in totals.malformed[:SHOWN_MALFORMED]:
        lines.append(f"    line {item.line}: {item.reason}")
    if len(totals.malformed) > SHOWN_MALFORMED:
        lines.append(f"    ... and {len(totals.malformed) - SHOWN_MALFORMED} more")
    lines.append(f"  seconds:          {seconds:.2f} ({rate:,.0f} records/s)")
    if not totals.accepted and not totals.malformed and not interrupted:
        lines.append("  (the input held no records)")
    out.write("\n".join(lines) + "\n")
    out.flush()
