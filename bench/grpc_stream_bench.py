"""gRPC's own cost per message on this machine: the floor under every Millrace hop.

One bidirectional stream over loopback, shaped like ``Delivery.Deliver``: the
client sends a batch-sized message, the server answers each with a small ack
(a reader thread hands requests to the response generator, as the node's
delivery service does). The server runs in a child process. For each message
rate it prints the CPU time each side spends per request + ack, and the round
trip. No Millrace code is involved: this is what gRPC's Python binding costs.

    python bench/grpc_stream_bench.py [--rates 400,0] [--messages 4000] [--bytes 12000]

Rate 0 sends as fast as the stream allows (its round trip is then mostly queueing, so
only its CPU figures are printed).
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

SERVICE = "millrace.bench.Echo"
METHOD = f"/{SERVICE}/Deliver"
_END = b""


def serve(port: int) -> None:
    """The child process: a server answering each request with its first 8 bytes."""

    def deliver(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        replies: queue.SimpleQueue[bytes] = queue.SimpleQueue()

        def read() -> None:
            for request in requests:
                replies.put(request[:8])
            replies.put(_END)

        threading.Thread(target=read, daemon=True).start()
        while (reply := replies.get()) != _END:
            yield reply

    from bench._grpc_child import serve_methods

    handler = grpc.stream_stream_rpc_method_handler(deliver)
    serve_methods(port, SERVICE, {"Deliver": handler}, workers=4)


def stream(port: int, rate: float, messages: int, size: int) -> list[float]:
    """Send ``messages`` requests at ``rate`` per second; round trips in seconds."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    outgoing: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    sent_at: dict[int, float] = {}
    padding = os.urandom(size)

    def requests() -> Iterator[bytes]:
        while (request := outgoing.get()) != _END:
            yield request

    def feed() -> None:
        started = time.perf_counter()
        for i in range(messages):
            if rate:
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            sent_at[i] = time.perf_counter()
            outgoing.put(i.to_bytes(8, "big") + padding)
        outgoing.put(_END)

    threading.Thread(target=feed, daemon=True).start()
    trips = [
        time.perf_counter() - sent_at[int.from_bytes(ack, "big")]
        for ack in channel.stream_stream(METHOD)(requests())
    ]
    channel.close()
    return trips


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="400,0", help="messages/s, comma-separated; 0 = flood")
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--bytes", type=int, default=12_000, help="request size")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    from bench._measure import process_cpu_s
    from tests.support import free_port

    print(
        f"gRPC bidirectional stream, {args.bytes:,}-byte requests, ack each (cpus={os.cpu_count()})"
    )
    print(f"  {'rate/s':>8}  {'client us/msg':>13}  {'server us/msg':>13}  {'rtt p50 ms':>10}")
    for rate in (float(r) for r in args.rates.split(",")):
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            server_before, client_before = process_cpu_s(server.pid), time.process_time()
            trips = stream(port, rate, args.messages, args.bytes)
            client_us = (time.process_time() - client_before) / args.messages * 1e6
            server_us = (process_cpu_s(server.pid) - server_before) / args.messages * 1e6
        finally:
            server.kill()
            server.wait()
        p50_ms = statistics.median(trips) * 1e3
        label, rtt = (f"{rate:,.0f}", f"{p50_ms:10.2f}") if rate else ("flood", f"{'-':>10}")
        print(f"  {label:>8}  {client_us:13.0f}  {server_us:13.0f}  {rtt}")
        line = (
            f"RESULT bench=grpc_stream rate={rate:.0f} client_cpu_us_per_msg={client_us:.1f} "
            f"server_cpu_us_per_msg={server_us:.1f}"
        )
        print(line + (f" rtt_p50_ms={p50_ms:.3f}" if rate else ""))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
