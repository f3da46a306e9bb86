"""Helpful errors for the client commands (``inject``, ``watermarks``, ``status``, ...).

When a call fails, an operator needs one message naming the service, its
address, the gRPC status, and what to check, never a Python traceback. A
command raises :class:`CommandError` (or lets :func:`talking_to` turn a
``grpc.RpcError`` into one) and :func:`run_command` prints it and returns
its exit code.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc

from millrace.commands._options import add_config_argument
from millrace.deployment import Deployment, DeploymentError, Placement
from millrace.deployment.security import Security

_Read = TypeVar("_Read", Deployment, Placement)
T = TypeVar("T")

EXIT_USAGE = 2
"""Usage errors, bad deployment files and unreachable services."""
EXIT_INTERRUPTED = 130

DEFAULT_TIMEOUT_S = 5.0


class CommandError(Exception):
    """A failure to report as one message (no traceback) with an exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True, kw_only=True)
class Service:
    """A service a command talks to, and where an operator would look when it fails."""

    label: str
    """Who it is, for humans: ``the injector``, ``node counts-a``."""
    address: str
    start_hint: str
    """How it is started, e.g. ``millrace node --config d.toml --name counts-a``."""
    address_source: str
    """Where the address came from, e.g. ``[nodes.counts-a] address in d.toml``."""

    @classmethod
    def injector(
        cls,
        address: str,
        deployment_path: str | None,
        *,
        overridden: bool,
        label: str = "the injector",
        setting: str = "[injector] address",
    ) -> Service:
        """The injector (Ingest, Control and, by default, the watermark authority)."""
        deployment = deployment_path or "deployment.toml"
        return cls(
            label=label,
            address=address,
            start_hint=(
                f"is `millrace up` (or `millrace injector --config {deployment}`) running?"
            ),
            address_source=(
                "--injector"
                if overridden or deployment_path is None
                else f"{setting} in {deployment}"
            ),
        )

    @classmethod
    def node(cls, name: str, address: str, deployment_path: str) -> Service:
        """Node ``name`` of the deployment (Admin)."""
        return cls(
            label=f"node {name}",
            address=address,
            start_hint=(
                f"is `millrace up` (or `millrace node --config {deployment_path} "
                f"--name {name}`) running?"
            ),
            address_source=f"[nodes.{name}] address in {deployment_path}",
        )

    @classmethod
    def sink(cls, stream: str, address: str, deployment_path: str, *, external: bool) -> Service:
        """Sink stream ``stream``'s receiver (``millrace sink``, or the user's own)."""
        started = (
            "is your own sink service running?"
            if external
            else f"is `millrace up` (or `millrace sink --config {deployment_path} "
            f"--stream {stream}`) running?"
        )
        return cls(
            label=f"sink {stream}",
            address=address,
            start_hint=started,
            address_source=f"[sinks.{stream}] address in {deployment_path}",
        )


def status_of(error: grpc.RpcError) -> tuple[str, str]:
    """The status code's name and the details of a failed call."""
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = error.details() if callable(getattr(error, "details", None)) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    return name, str(details or error)


def explain(error: grpc.RpcError, service: Service, rpc: str, timeout_s: float) -> str:
    """One message: what failed where, the gRPC status, and what to check."""
    code, details = status_of(error)
    status = f"{rpc}: {code}: {details}"
    where = f"{service.label} at {service.address}"
    address_check = f"is the address right? (it comes from {service.address_source})"
    if code == "UNAVAILABLE" and "SETTINGS frame" in details:
        return (
            f"cannot reach {where} ({status})\n"
            f"  check: something listens there but does not speak gRPC: another program?\n"
            f"         {address_check}"
        )
    if code == "UNAVAILABLE":
        return (
            f"cannot reach {where} ({status})\n"
            f"  check: {service.start_hint}\n"
            f"         {address_check}"
        )
    if code == "DEADLINE_EXCEEDED":
        return (
            f"{where} did not answer within {timeout_s:g} s ({status})\n"
            f"  check: is it overloaded or stuck (its log, `millrace status`)? "
            f"a longer --timeout may help\n"
            f"         {address_check}"
        )
    if code == "UNAUTHENTICATED":
        return (
            f"{where} refused {rpc}: not authenticated ({status})\n"
            f"  check: set MILLRACE_TOKEN or [security] token to the deployment's token"
        )
    if code == "UNIMPLEMENTED":
        return (
            f"{where} does not serve {rpc} ({status})\n"
            f"  check: another program, or another millrace version, may listen there\n"
            f"         {address_check}"
        )
    return f"{where} refused {rpc} ({status})"


@contextmanager
def talking_to(service: Service, rpc: str, timeout_s: float) -> Iterator[None]:
    """Turn a ``grpc.RpcError`` raised inside into a :class:`CommandError` that explains it."""
    try:
        yield
    except grpc.RpcError as error:
        raise CommandError(explain(error, service, rpc, timeout_s)) from None


def refusals_as_usage(service: Service, rpc: str, timeout_s: float, call: Callable[[], T]) -> T:
    """``call()``; a refusal (INVALID_ARGUMENT, FAILED_PRECONDITION) becomes a usage
    error that says why, any other error one that explains it (:func:`talking_to`)."""
    try:
        return call()
    except grpc.RpcError as error:
        if error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
            raise CommandError(f"refused: {error.details()}", exit_code=EXIT_USAGE) from None
        raise CommandError(explain(error, service, rpc, timeout_s)) from None


def load_deployment(path: str) -> Deployment:
    """Read a deployment file and its topology; a :class:`CommandError` says what is wrong."""
    return _read_deployment_file(path, Deployment.load)


def load_placement(path: str) -> Placement:
    """Read a deployment file without its topology (addresses and security: what a
    client needs); a :class:`CommandError` says what is wrong with it."""
    return _read_deployment_file(path, Placement.load)


def _read_deployment_file(path: str, load: Callable[[str], _Read]) -> _Read:
    try:
        return load(path)
    except FileNotFoundError as exc:
        missing = exc.filename or path
        raise CommandError(f"cannot read {missing!r}: no such file (check --config)") from None
    except DeploymentError as exc:
        problems = "\n  - ".join(exc.problems)
        raise CommandError(f"{path} is not a valid deployment:\n  - {problems}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CommandError(f"{path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise CommandError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise CommandError(f"{path} is not a valid deployment: {exc!r}") from None


def security_of(deployment: Placement | None) -> Security:
    """The deployment's ``[security]``; without a deployment, the environment's only."""
    if deployment is not None:
        return deployment.security
    try:
        return Security.from_settings({}, Path.cwd())
    except ValueError as exc:
        raise CommandError(f"bad security settings in the environment: {exc}") from None


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    """``--timeout SECONDS``: the deadline of every gRPC call a command makes."""
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"deadline of each gRPC call (default: {DEFAULT_TIMEOUT_S:g})",
    )


def add_injector_client_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` (it finds the injector), ``--injector HOST:PORT`` and ``--timeout``:
    what a command that only calls the injector's ``Control`` service takes."""
    add_config_argument(parser, required=False, purpose="finds the injector")
    parser.add_argument("--injector", metavar="HOST:PORT", help="the injector's address")
    add_timeout_argument(parser)


def add_wait_argument(parser: argparse.ArgumentParser, *, default_s: float, what: str) -> None:
    """``--no-wait`` and ``--wait-s SECONDS`` (how long to wait for ``what``)."""
    parser.add_argument("--no-wait", action="store_true", help="return once it is recorded")
    parser.add_argument(
        "--wait-s",
        type=positive_float,
        default=default_s,
        metavar="SECONDS",
        help=f"how long to wait for {what} (default: {default_s:g})",
    )


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def run_command(prog: str, body: Callable[[], int]) -> int:
    """Run a command's body; print a :class:`CommandError` as ``millrace PROG: message``.

    A ``grpc.RpcError`` that escaped :func:`talking_to` is still reported
    without a traceback; Ctrl-C exits 130 quietly.
    """
    try:
        return body()
    except CommandError as exc:
        print(f"millrace {prog}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except grpc.RpcError as error:
        code, details = status_of(error)
        print(f"millrace {prog}: gRPC call failed: {code}: {details}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"millrace {prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def injector_service(
    deployment_path: str | None, override: str | None, *, authority: bool = False
) -> tuple[Service, Placement | None]:
    """The injector (or, with ``authority``, the watermark authority) a command should call.

    ``--injector ADDR`` wins; otherwise the deployment's ``[injector] address``
    (``authority``, which defaults to it). The deployment's placement is returned
    when read (its topology is not: a client needs addresses only).
    """
    if deployment_path is None and override is None:
        raise CommandError("pass --config FILE (or --injector HOST:PORT)")
    deployment = load_placement(deployment_path) if deployment_path is not None else None
    label = "the watermark authority" if authority else "the injector"
    if override is not None:
        return Service.injector(override, deployment_path, overridden=True, label=label), deployment
    assert deployment is not None and deployment_path is not None
    address = deployment.authority if authority else None
    if address is None and deployment.injector is not None:
        address = deployment.injector.address
    if address is None:
        raise CommandError(f"{deployment_path} has no [injector] section (or pass --injector)")
    setting = "authority (or [injector] address)" if authority else "[injector] address"
    service = Service.injector(
        address, deployment_path, overridden=False, label=label, setting=setting
    )
    return service, deployment


def check_serving(
    channel: grpc.Channel, service: Service, grpc_service: str, timeout_s: float
) -> None:
    """Ask the standard gRPC health service whether ``grpc_service`` is served; fail helpfully.

    A quick check before long calls (an ingest that retries, a watch stream)
    so that a wrong address fails within ``timeout_s`` with what to check.
    """
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stub = health_pb2_grpc.HealthStub(channel)
    try:
        response = stub.Check(
            health_pb2.HealthCheckRequest(service=grpc_service), timeout=timeout_s
        )
    except grpc.RpcError as error:
        code = error.code() if callable(getattr(error, "code", None)) else None
        if code == grpc.StatusCode.NOT_FOUND:
            raise CommandError(
                f"{service.label} at {service.address} does not serve {grpc_service}\n"
                f"  check: is the address right? (it comes from {service.address_source})"
            ) from None
        raise CommandError(
            explain(error, service, "grpc.health.v1.Health.Check", timeout_s)
        ) from None
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        state = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        raise CommandError(
            f"{service.label} at {service.address} is not serving {grpc_service} ({state})\n"
            f"  check: is it starting up or shutting down? its log says why"
        )
