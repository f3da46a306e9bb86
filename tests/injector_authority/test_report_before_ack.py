"""A node's acks wait until the authority has its report (issue 14, defect 1).

``WatermarkLink.wait_reported`` is what a worker's acks wait on after its oldest
work moved earlier: it must hold while the authority is unreachable (down,
restarting) and release once a report including the hold was accepted, over
real gRPC.
"""

from __future__ import annotations

import time

from millrace.computations import IntervalId
from millrace.injector.authority_service import create_authority_server
from millrace.injector.watermark_authority import WatermarkAuthority
from millrace.node._watermark_link import WatermarkLink
from tests.support import free_port
from tests.workloads import two_stage_topology


def test_acks_wait_for_the_report_through_an_authority_outage() -> None:
    topology = two_stage_topology()
    port = free_port()
    link = WatermarkLink(
        f"127.0.0.1:{port}",
        node_id="n",
        topology=topology,
        computation="counts",
        on_watermark=lambda mark: None,
        interval_s=0.05,
    )
    link.start()
    server = None
    try:
        ticket = link.report("counts", 0, 1, 1_100, urgent=True)  # nobody listens yet
        assert not link.wait_reported(ticket, 0.5), "the report has not reached an authority"
        authority = WatermarkAuthority(topology)
        server, _ = create_authority_server(authority, f"127.0.0.1:{port}")
        assert link.wait_reported(ticket, 15.0), "the report loop delivers it once it is up"
        assert authority.oldest_work()["counts"] is not None
        deadline = time.monotonic() + 5
        while ("counts", 0) not in authority.reported_epochs() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert authority.reported_epochs()[IntervalId("counts", 0)] == 1
    finally:
        link.stop()
        if server is not None:
            server.stop(0.5).wait()


def test_a_stopping_link_releases_waiters_without_confirming() -> None:
    link = WatermarkLink(
        f"127.0.0.1:{free_port()}",
        node_id="n",
        topology=two_stage_topology(),
        computation="counts",
        on_watermark=lambda mark: None,
    )
    ticket = link.report("counts", 0, 1, 5, urgent=False)
    link.stop()
    assert not link.wait_reported(ticket, 5.0)
