"""Open to the network only by choice (issue 15, defect 7).

Without a token (or client certificates) a service refuses to listen on anything
but loopback, saying why and how to fix it; ``insecure = true`` serves it open on
purpose; ``millrace security init`` writes an owner-only token that, set as
``token_file``, lets the same node start, and makes calls without it
UNAUTHENTICATED.
"""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from millrace.wire.v1 import admin_pb2, admin_pb2_grpc
from tests.support import ROOT, NodeProcess, forwarding_deployment, free_port

pytestmark = pytest.mark.slow


def test_a_node_on_every_interface_needs_a_token_or_an_explicit_choice(tmp_path: Path) -> None:
    port = free_port()
    deployment = forwarding_deployment(tmp_path, port, f"127.0.0.1:{free_port()}")
    base = deployment.read_text()
    node = NodeProcess(deployment, "fwd", tmp_path / "data", tmp_path, address=f"0.0.0.0:{port}")
    with pytest.raises(RuntimeError, match="did not start"):
        node.start()
    assert node.process is not None and node.process.wait(10) == 2
    log = node.log_path.read_text()
    assert f"refusing to serve 0.0.0.0:{port} without authentication" in log
    assert "millrace security init" in log and "insecure = true" in log

    deployment.write_text(base + "\n[security]\ninsecure = true\n")
    node.start()  # open on purpose
    node.terminate()

    made = subprocess.run(
        [sys.executable, "-m", "millrace", "security", "init", "--config", str(deployment)],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    assert 'token_file = "secrets/token"' in made.stdout
    token = tmp_path / "secrets" / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    deployment.write_text(base + '\n[security]\ntoken_file = "secrets/token"\n')
    node.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as raised:
                admin_pb2_grpc.AdminStub(channel).Status(admin_pb2.StatusRequest(), timeout=5)
            assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
            metadata = [("authorization", f"Bearer {token.read_text().strip()}")]
            admin_pb2_grpc.AdminStub(channel).Status(
                admin_pb2.StatusRequest(), timeout=5, metadata=metadata
            )
    finally:
        node.terminate()
