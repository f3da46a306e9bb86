"""``millrace watermarks``: each computation's low watermark, as a time and as lag behind now.

``millrace watermarks --config d.toml`` asks the watermark authority
(the injector, or the deployment's ``authority``) for its current snapshot
and prints, per computation and per source stream (``source:<stream>``),
the low watermark as an ISO UTC time and in ms, the lag (now minus the
watermark) in seconds, and what holds each computation back: the input with
the lowest watermark, followed upstream to the source stream at its root
(read from the topology file, whose code is not imported). ``--watch`` keeps
printing changes until Ctrl-C; it survives an authority restart by reconnecting.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import tomllib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

import grpc

from millrace.commands._grpc_errors import (
    CommandError,
    Service,
    add_timeout_argument,
    check_serving,
    explain,
    injector_service,
    positive_float,
    run_command,
    security_of,
    status_of,
    talking_to,
)
from millrace.commands._options import add_config_argument
from millrace.computations import MAX_TIME, MIN_TIME
from millrace.deployment import Placement
from millrace.statestore import wall_clock_ms
from millrace.wire.v1 import watermark_pb2, watermark_pb2_grpc

AUTHORITY_SERVICE = "millrace.wire.v1.WatermarkAuthority"
WATCH_RPC = "WatermarkAuthority.WatchWatermarks"
WATCH_RENEW_S = 300.0
"""A watch stream's deadline; it is re-opened (silently) when the deadline passes."""
SOURCE_PREFIX = "source:"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``watermarks`` sub-command."""
    parser = subparsers.add_parser(
        "watermarks",
        help="show each computation's low watermark and lag (--watch to follow)",
        description=(
            "Print the low watermark of every computation and source stream (source:NAME) "
            "as an ISO UTC time and in ms, with its lag behind the clock; --watch keeps "
            "printing changes until Ctrl-C."
        ),
    )
    add_config_argument(parser, required=False, purpose="finds the authority")
    parser.add_argument(
        "--injector",
        metavar="HOST:PORT",
        help="the watermark authority's (injector's) address (overrides --config)",
    )
    parser.add_argument("--watch", action="store_true", help="keep printing updates until Ctrl-C")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print JSON (one object per snapshot or change) instead of a table",
    )
    parser.add_argument(
        "--interval",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="with --watch: print changes at most this often (default: 1)",
    )
    add_timeout_argument(parser)
    parser.set_defaults(handler=run)


def iso_utc(ms: int) -> str:
    """``ms`` since the epoch as ``2024-06-01T12:00:00.000Z`` (the number if out of range)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def describe(ms: int, now_ms: int) -> tuple[str, str, str]:
    """A watermark as (time, ms, lag) cells."""
    if ms <= MIN_TIME:
        return "none yet", "-", "-"
    if ms >= MAX_TIME:
        return "end of time", "-", "-"
    return iso_utc(ms), str(ms), f"{(now_ms - ms) / 1000:,.1f} s"


def display_order(names: Iterable[str], deployment: Placement | None) -> list[str]:
    """Source streams first, then computations in the order the deployment places
    them (else by name)."""
    order: dict[str, int] = {}
    for node in deployment.nodes.values() if deployment else ():
        order.setdefault(node.computation, len(order))
    return sorted(
        names,
        key=lambda n: (not n.startswith(SOURCE_PREFIX), order.get(n, len(order)), n),
    )


Inputs = Mapping[str, list[str]]
"""Computation -> what it reads: ``source:<stream>`` or the computations producing a stream."""


def inputs_of(deployment: Placement | None) -> Inputs:
    """Each computation's inputs, from the deployment's topology file read as plain TOML
    (no handler imported); empty when there is no readable file."""
    path = deployment.topology_file if deployment is not None else None
    try:
        with open(path, "rb") as handle:  # type: ignore[arg-type]
            raw = tomllib.load(handle)
    except (TypeError, OSError, tomllib.TOMLDecodeError):
        return {}
    bodies = raw.get("computations", {})
    if not isinstance(bodies, Mapping):
        return {}
    producers: dict[str, list[str]] = {}
    for name, body in bodies.items():
        for stream in body.get("outputs", ()) if isinstance(body, Mapping) else ():
            producers.setdefault(str(stream), []).append(name)
    inputs: dict[str, list[str]] = {}
    for name, body in bodies.items():
        streams = body.get("inputs", {}) if isinstance(body, Mapping) else {}
        inputs[name] = [
            upstream
            for stream in (streams if isinstance(streams, Mapping) else ())
            for upstream in producers.get(stream, [SOURCE_PREFIX + stream])
        ]
    return inputs


def held_by(name: str, marks: Mapping[str, int], inputs: Inputs) -> str:
    """What holds computation ``name``'s watermark back: the source stream at the root of
    its lowest input (``source:clicks``, with the computations between: ``source:clicks
    via sessions``), ``its own pending work`` when it is below every input, or ``-``."""
    chain: list[str] = []
    current = name
    while current in inputs and current not in chain:
        own = marks.get(current)
        known = [(marks[i], i) for i in inputs[current] if i in marks]
        if own is None or not known or own >= MAX_TIME:
            break
        lowest, holder = min(known)
        if own < lowest:
            return "its own pending work" if not chain else f"{current}'s pending work"
        chain.append(current)
        current = holder
    if current == name or current in chain:
        return "-"
    via = chain[1:]
    return current + (f" via {', '.join(reversed(via))}" if via else "")


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    """Print the snapshot (and, with ``--watch``, every change); return the exit code."""
    return run_command("watermarks", lambda: _run(args, out or sys.stdout))


def _run(args: argparse.Namespace, out: TextIO) -> int:
    service, deployment = injector_service(args.deployment, args.injector, authority=True)
    security = security_of(deployment)
    with security.open_channel(service.address) as channel:
        check_serving(channel, service, AUTHORITY_SERVICE, args.timeout)
        stub = watermark_pb2_grpc.WatermarkAuthorityStub(channel)
        with talking_to(service, WATCH_RPC, args.timeout):
            marks = _snapshot(stub, args.timeout)
        if args.json:
            out.write(as_json(marks, deployment) + "\n")
            out.flush()
        else:
            _print_table(out, marks, deployment)
        if not args.watch:
            return 0
        try:
            _watch(stub, service, args=args, marks=marks, deployment=deployment, out=out)
        except KeyboardInterrupt:
            return 0
    return 0


def _snapshot(stub: watermark_pb2_grpc.WatermarkAuthorityStub, timeout_s: float) -> dict[str, int]:
    """The first message of a watch (the full snapshot), within the deadline."""
    call = stub.WatchWatermarks(watermark_pb2.WatchWatermarksRequest(), timeout=timeout_s)
    try:
        first = next(call, None)
    finally:
        call.cancel()
    if first is None:
        raise CommandError("the watermark authority ended the watch without a snapshot")
    return {update.computation: update.low_watermark_ms for update in first.updates}


def as_json(
    marks: Mapping[str, int], deployment: Placement | None, names: Iterable[str] | None = None
) -> str:
    """The watermarks (of ``names``, default all) as one JSON object: per computation (and
    ``source:<stream>``) its low watermark in ms (null: none yet), whether it is the end
    of time, its lag, and for a computation what holds it back (:func:`held_by`)."""
    now_ms = wall_clock_ms()
    inputs = inputs_of(deployment)
    body: dict[str, dict[str, Any]] = {}
    for name in display_order(marks if names is None else names, deployment):
        ms = marks[name]
        known = MIN_TIME < ms < MAX_TIME
        body[name] = {
            "low_watermark_ms": ms if known else None,
            "end_of_time": ms >= MAX_TIME,
            "lag_ms": now_ms - ms if known else None,
        }
        if not name.startswith(SOURCE_PREFIX):
            body[name]["held_by"] = held_by(name, marks, inputs)
    return json.dumps({"at_ms": now_ms, "watermarks": body})


def _print_table(out: TextIO, marks: Mapping[str, int], deployment: Placement | None) -> None:
    if not marks:
        out.write("no watermarks published (the topology has no computations?)\n")
        return
    now_ms = wall_clock_ms()
    inputs = inputs_of(deployment)
    header = ("computation", "low watermark (UTC)", "ms", "lag", "held back by")
    rows = [
        (name, *describe(marks[name], now_ms),
         "" if name.startswith(SOURCE_PREFIX) else held_by(name, marks, inputs))
        for name in display_order(marks, deployment)
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")
    out.flush()


class _Follower:
    """Keeps the latest published watermarks from a watch stream, in a thread.

    Re-opens the stream when its deadline passes; after an authority restart
    it waits for it (``wait_for_ready``) and says so on stderr.
    """

    def __init__(
        self,
        stub: watermark_pb2_grpc.WatermarkAuthorityStub,
        service: Service,
        timeout_s: float,
        marks: Mapping[str, int],
    ) -> None:
        self._stub = stub
        self._service = service
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._latest = dict(marks)
        self._call: Any = None
        self._stopping = threading.Event()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="watermark-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._call is not None:
                self._call.cancel()
        self._thread.join(5)

    def latest(self) -> dict[str, int]:
        with self._lock:
            return dict(self._latest)

    def _run(self) -> None:
        lost = False
        while not self._stopping.is_set():
            call = self._stub.WatchWatermarks(
                watermark_pb2.WatchWatermarksRequest(),
                timeout=WATCH_RENEW_S,
                wait_for_ready=lost,
            )
            with self._lock:
                self._call = call
            if self._stopping.is_set():
                call.cancel()
                return
            try:
                for message in call:
                    if lost:
                        _note(f"reconnected to {self._service.address}")
                        lost = False
                    with self._lock:
                        for update in message.updates:
                            self._latest[update.computation] = update.low_watermark_ms
            except grpc.RpcError as error:
                if self._stopping.is_set():
                    return
                code = error.code() if callable(getattr(error, "code", None)) else None
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    continue  # the stream's own deadline: open a new one
                if code != grpc.StatusCode.UNAVAILABLE:
                    self.error = explain(error, self._service, WATCH_RPC, self._timeout_s)
                    return
                if not lost:
                    name, details = status_of(error)
                    _note(
                        f"lost the watermark authority at {self._service.address} "
                        f"({name}: {details}); waiting for it (Ctrl-C to stop)"
                    )
                    lost = True
                self._stopping.wait(0.2)


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _watch(
    stub: watermark_pb2_grpc.WatermarkAuthorityStub,
    service: Service,
    *,
    args: argparse.Namespace,
    marks: dict[str, int],
    deployment: Placement | None,
    out: TextIO,
) -> None:
    """Every ``--interval`` seconds, print the watermarks that changed; until Ctrl-C."""
    _note("watching for changes (Ctrl-C to stop)")
    follower = _Follower(stub, service, args.timeout, marks)
    follower.start()
    printed = dict(marks)
    width = max((len(name) for name in marks), default=0)
    # A handler that only sets an event: a KeyboardInterrupt raised while the main
    # thread is inside gRPC's C code can be swallowed there, this cannot.
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(args.interval):
            if follower.error is not None:
                raise CommandError(follower.error)
            latest = follower.latest()
            now_ms = wall_clock_ms()
            if args.json:
                changed = {n: ms for n, ms in latest.items() if printed.get(n) != ms}
                if changed:
                    printed.update(changed)
                    out.write(as_json(latest, deployment, changed) + "\n")
                    out.flush()
                continue
            for name in display_order(latest, deployment):
                before = printed.get(name)
                if before == latest[name]:
                    continue
                printed[name] = latest[name]
                width = max(width, len(name))
                when, ms, lag = describe(latest[name], now_ms)
                line = f"[{iso_utc(now_ms)}] {name.ljust(width)}  {when}  {ms}  lag {lag}"
                if before is not None and latest[name] < before:
                    line += f"  (DECREASED from {before}: watermarks must never go back)"
                out.write(line + "\n")
            out.flush()
    finally:
        signal.signal(signal.SIGINT, previous)
        follower.stop()
