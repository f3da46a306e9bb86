"""``millrace view get``: the latest record of a key in a sink stream's materialized view."""

from __future__ import annotations

import argparse
import json
import sys

import grpc

from millrace.commands._options import add_config_argument
from millrace.deployment import Deployment
from millrace.sink_lines import sink_line
from millrace.wire.v1 import sink_pb2, sink_pb2_grpc


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``view`` sub-command."""
    parser = subparsers.add_parser("view", help="query a sink stream's materialized view")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    get = actions.add_parser("get", help="the latest record of a key")
    add_config_argument(get)
    get.add_argument("--stream", required=True, help="the sink stream ([sinks.STREAM])")
    get.add_argument("--key", required=True, help="the record key (UTF-8)")
    get.set_defaults(handler=run_get)


def run_get(args: argparse.Namespace) -> int:
    """Print the latest record as JSON; exit 1 when the key has none, 2 on errors."""
    deployment = Deployment.load(args.deployment)
    address = deployment.sinks.get(args.stream)
    if address is None:
        print(f"millrace view: no [sinks.{args.stream}] in {args.deployment}", file=sys.stderr)
        return 2
    with deployment.security.open_channel(address) as channel:
        try:
            response = sink_pb2_grpc.ViewStub(channel).Get(
                sink_pb2.ViewGetRequest(stream=args.stream, key=args.key.encode()), timeout=10
            )
        except grpc.RpcError as error:
            print(
                f"millrace view: the sink of {args.stream!r} at {address} did not answer "
                f"({error.code().name}: {error.details()}); is `millrace sink` running?",
                file=sys.stderr,
            )
            return 2
    if not response.found:
        print(f"no record with key {args.key!r} in {args.stream}", file=sys.stderr)
        return 1
    line = json.loads(sink_line(response.latest.record))
    print(json.dumps({"position": response.latest.position, **line}))
    return 0
