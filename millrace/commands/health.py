"""``millrace health``: is the server at an address SERVING? (for probes and operators).

Calls the standard ``grpc.health.v1.Health/Check`` once, with a deadline,
over the same transport security as the other client commands (the
deployment's ``[security]`` with ``--config``, else the environment:
``MILLRACE_TLS_CA`` and friends). Health needs no token, so a probe works
without one. Prints ``SERVING`` and exits 0; otherwise prints one line
saying why (unreachable, NOT_SERVING, unknown service) and exits 1. Bad
arguments or security settings exit 2.

The address defaults to ``$MILLRACE_HEALTH_ADDRESS``, so the image's
``HEALTHCHECK`` probes whichever server its container runs.
"""

from __future__ import annotations

import argparse
import os

import grpc

from millrace.commands._grpc_errors import (
    EXIT_USAGE,
    CommandError,
    add_timeout_argument,
    load_placement,
    run_command,
    security_of,
    status_of,
)
from millrace.commands._options import add_config_argument

ADDRESS_ENV = "MILLRACE_HEALTH_ADDRESS"
DEFAULT_ADDRESS = "127.0.0.1:7000"
EXIT_SERVING = 0
EXIT_UNHEALTHY = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``health`` sub-command."""
    parser = subparsers.add_parser(
        "health",
        help="check that a server answers the gRPC health check with SERVING",
        description=(
            "Call grpc.health.v1.Health/Check on one server. Print SERVING and exit 0, "
            "or print why not and exit 1 (2 for bad arguments)."
        ),
    )
    parser.add_argument(
        "--address",
        metavar="HOST:PORT",
        help=f"the server (default: ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})",
    )
    parser.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="a gRPC service, e.g. millrace.wire.v1.Ingest (default: the whole server)",
    )
    add_config_argument(parser, required=False, purpose="only its [security] settings are used")
    add_timeout_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print ``SERVING`` and return 0, or print the reason and return 1."""
    return run_command("health", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    address, source = _address(args.address)
    deployment = load_placement(args.deployment) if args.deployment is not None else None
    security = security_of(deployment)
    what = f"{args.service} at {address}" if args.service else address
    try:
        channel = security.open_channel(address)
    except OSError as exc:
        raise CommandError(f"cannot read a TLS file: {exc}") from None
    with channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
        except grpc.RpcError as error:
            raise CommandError(
                _explain(error, what, source, args.timeout), EXIT_UNHEALTHY
            ) from None
    state: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        raise CommandError(
            f"{what} is {state}: starting up or shutting down? its log says why",
            EXIT_UNHEALTHY,
        )
    print(state, flush=True)
    return EXIT_SERVING


def _address(flag: str | None) -> tuple[str, str]:
    """The address to probe and where it came from (for the message when it fails)."""
    if flag:
        address, source = flag, "--address"
    elif os.environ.get(ADDRESS_ENV):
        address, source = os.environ[ADDRESS_ENV], ADDRESS_ENV
    else:
        address, source = DEFAULT_ADDRESS, f"the default; set --address or {ADDRESS_ENV}"
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise CommandError(f"{address!r} (from {source}) is not HOST:PORT", EXIT_USAGE)
    return address, source


def _explain(error: grpc.RpcError, what: str, source: str, timeout_s: float) -> str:
    """One line: what failed, the gRPC status, and what to check."""
    code, details = status_of(error)
    status = f"{code}: {' '.join(details.split())}"
    if code == "NOT_FOUND":
        return f"unknown service {what} ({status}); check --service"
    if code == "UNAVAILABLE":
        return (
            f"cannot reach {what} ({status}); check: is the server running there, and is the "
            f"address right (from {source})? a TLS server needs MILLRACE_TLS_CA"
        )
    if code == "DEADLINE_EXCEEDED":
        return (
            f"{what} did not answer within {timeout_s:g} s ({status}); "
            f"check: is it overloaded or stuck? is the address right (from {source})?"
        )
    if code == "UNIMPLEMENTED":
        return (
            f"{what} does not serve grpc.health.v1.Health ({status}); "
            f"check: does another program listen there? (address from {source})"
        )
    return f"{what} refused the health check ({status})"
