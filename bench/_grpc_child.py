"""A bare gRPC server in a child process, for the benches that measure gRPC's own cost."""

from __future__ import annotations

from concurrent import futures

import grpc


def serve_methods(
    port: int, service: str, methods: dict[str, grpc.RpcMethodHandler], *, workers: int
) -> None:
    """Serve ``methods`` of ``service`` on loopback ``port`` with a ``workers``-thread
    pool (as Millrace's servers do); print ``ready`` once listening, then serve until
    killed."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, methods)])
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()
