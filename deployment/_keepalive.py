"""One keepalive policy for every gRPC client and server of Millrace.

Long-lived streams (delivery, the watermark and assignment watches) must notice a peer
that vanished without a FIN (a host that died, a dropped NAT entry): clients and
servers ping every ``time_ms`` and give up after half of it without an answer. Servers
accept pings without data down to half that interval apart. gRPC reads that limit from
``grpc.http2.min_ping_interval_without_data_ms`` (whatever its C macro is called); under
its default of 5 minutes a client pinging every 20 s collected strikes and was sent
GOAWAY ``too_many_pings`` (issue 30).
"""

from __future__ import annotations

KEEPALIVE_TIME_MS = 20_000


def keepalive_options(time_ms: int = KEEPALIVE_TIME_MS) -> list[tuple[str, int]]:
    """The channel and server options of the policy, pinging every ``time_ms``."""
    return [
        ("grpc.keepalive_time_ms", time_ms),
        ("grpc.keepalive_timeout_ms", time_ms // 2),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # Servers: accept pings without data this close together (clients: unused).
        ("grpc.http2.min_ping_interval_without_data_ms", time_ms // 2),
    ]


KEEPALIVE_OPTIONS = keepalive_options()
"""The policy every channel and server of Millrace uses."""
