"""TLS/mTLS and the shared token (``[security]``), with a CA generated here by ``openssl``.

An in-process injector serves mTLS with a token: calls without the token
(or with a wrong one) are refused ``UNAUTHENTICATED`` on every service but
health; with it they work; plaintext clients and TLS clients without a
client certificate cannot even connect. Then (slow) a real pipeline of
``millrace injector``, ``millrace node`` and ``millrace sink`` processes
sharing one secured deployment carries records pushed by ``millrace inject``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from millrace.deployment import Deployment
from millrace.deployment.security import UNAUTHENTICATED_MESSAGE, Security
from millrace.injector.client import IngestClient
from millrace.injector.server import Injector
from millrace.sinks import read_sink_records
from millrace.wire.v1 import control_pb2, control_pb2_grpc, ingest_pb2, ingest_pb2_grpc
from tests.support import ROOT, free_port
from tests.support.certs import make_certs

TOKEN = "correct-horse-battery-staple"

TOPOLOGY = """
[streams.events]
[streams.ok]
[computations.count]
handler = "tests.workloads:Poison"
inputs = { events = "key" }
outputs = ["ok"]
"""


# -- certificates -------------------------------------------------------------------


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    """``ca.pem``; ``server.pem``/``.key`` (localhost, 127.0.0.1; server and client use);
    ``client.pem``/``.key`` (client use only), all under ``tmp_path/certs``."""
    return make_certs(tmp_path / "certs")


def write_deployment(tmp_path: Path, *, token: str = TOKEN) -> Path:
    """A one-node deployment whose ``[security]`` names the certificates relatively."""
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    path = tmp_path / "deployment.toml"
    path.write_text(
        f"""
topology = "topology.toml"
[injector]
address = "127.0.0.1:{free_port()}"
idle_timeout_ms = 500

[nodes.count]
computation = "count"
intervals = [0]
address = "127.0.0.1:{free_port()}"

[sinks.ok]
address = "127.0.0.1:{free_port()}"
path = "out/ok.jsonl"

[security]
token = "{token}"
tls_cert = "certs/server.pem"
tls_key = "certs/server.key"
tls_ca = "certs/ca.pem"
require_client_cert = true
"""
    )
    return path


def client(certs: Path, *, token: str | None = None, cert: bool = True) -> Security:
    """A client's settings: the CA, the client certificate (unless not ``cert``), a token."""
    return Security(
        token=token,
        tls_cert=certs / "client.pem" if cert else None,
        tls_key=certs / "client.key" if cert else None,
        tls_ca=certs / "ca.pem",
    )


def health_check(channel: grpc.Channel) -> int:
    response = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=5
    )
    status: int = response.status
    return status


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    code: grpc.StatusCode = caught.value.code()
    return code


# -- settings -----------------------------------------------------------------------


def test_settings_resolve_paths_against_the_deployment_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MILLRACE_TOKEN", raising=False)
    monkeypatch.delenv("MILLRACE_TLS_REQUIRE_CLIENT_CERT", raising=False)
    (tmp_path / "certs").mkdir()
    deployment = Deployment.load(write_deployment(tmp_path))
    assert deployment.security == Security(
        token=TOKEN,
        tls_cert=tmp_path / "certs/server.pem",
        tls_key=tmp_path / "certs/server.key",
        tls_ca=tmp_path / "certs/ca.pem",
        require_client_cert=True,
    )
    environ = {
        "MILLRACE_TOKEN": "other",
        "MILLRACE_TLS_CA": "/etc/ca.pem",
        "MILLRACE_TLS_REQUIRE_CLIENT_CERT": "no",
    }
    section = {"token": "file", "tls_cert": "a.pem", "tls_key": "a.key", "tls_ca": "ca.pem"}
    overridden = Security.from_settings(section, tmp_path, environ=environ)
    assert overridden.token == "other"
    assert overridden.tls_ca == Path("/etc/ca.pem")
    assert overridden.tls_cert == tmp_path / "a.pem"
    assert overridden.require_client_cert is False
    assert Security.from_settings({}, tmp_path, environ={}) == Security()


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"tls_cert": "a.pem"}, "tls_cert and tls_key"),
        ({"require_client_cert": True}, "require_client_cert needs"),
        ({"token": ""}, "must not be empty"),
        ({"tokens": "x"}, "unknown settings: tokens"),
        ({"require_client_cert": "yes"}, "true or false"),
    ],
)
def test_bad_settings_say_what_is_wrong(
    tmp_path: Path, section: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        Security.from_settings(section, tmp_path, environ={})


# -- an in-process injector with mTLS and a token -------------------------------------------


@pytest.fixture
def secured_injector(
    tmp_path: Path, certs: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Injector]:
    for variable in ("MILLRACE_TOKEN", "MILLRACE_TLS_CERT", "MILLRACE_TLS_KEY", "MILLRACE_TLS_CA"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("MILLRACE_TLS_REQUIRE_CLIENT_CERT", raising=False)
    deployment = Deployment.load(write_deployment(tmp_path))
    assert deployment.injector is not None
    injector = Injector(deployment, tmp_path / "log", address=deployment.injector.address)
    injector.start()
    try:
        yield injector
    finally:
        injector.stop(grace_s=0.5)


def test_mutating_calls_without_the_token_are_unauthenticated(
    secured_injector: Injector, certs: Path
) -> None:
    address = secured_injector.address
    request = ingest_pb2.IngestRequest(
        stream="events",
        idempotency_key="k1",
        records=[ingest_pb2.IngestRecord(key=b"a", value=b"1", event_time_ms=1)],
    )
    register = control_pb2.RegisterNodeRequest(
        node_id="intruder", computation="count", address="127.0.0.1:1", interval_indexes=[0]
    )
    unauthenticated = grpc.StatusCode.UNAUTHENTICATED
    for security in (client(certs), client(certs, token="wrong")):
        with security.open_channel(address) as channel:
            ingest = ingest_pb2_grpc.IngestStub(channel)
            control = control_pb2_grpc.ControlStub(channel)
            with pytest.raises(grpc.RpcError) as caught:
                ingest.Ingest(request, timeout=5)
            assert caught.value.code() == unauthenticated
            with pytest.raises(grpc.RpcError) as caught:
                control.RegisterNode(register, timeout=5)
            assert caught.value.code() == unauthenticated
            watch = control.WatchAssignment(control_pb2.GetAssignmentRequest(), timeout=5)
            with pytest.raises(grpc.RpcError) as caught:
                next(iter(watch))
            assert caught.value.code() == unauthenticated
            # Health needs no token (liveness probes, `millrace inject`'s first check).
            assert health_check(channel) == health_pb2.HealthCheckResponse.SERVING
    # The client library does not retry a refusal, and says why.
    ingest_client = IngestClient(address, security=client(certs), timeout_s=5)
    try:
        with pytest.raises(grpc.RpcError) as caught:
            ingest_client.ingest("events", [(b"a", b"1", 1)], idempotency_key="k2")
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert caught.value.details() == UNAUTHENTICATED_MESSAGE
    finally:
        ingest_client.close()
    assert secured_injector.streams["events"].log.next_offset == 0, "nothing was appended"


def test_calls_with_the_token_work(secured_injector: Injector, certs: Path) -> None:
    address = secured_injector.address
    ingest_client = IngestClient(address, security=client(certs, token=TOKEN), timeout_s=5)
    try:
        response = ingest_client.ingest(
            "events", [(b"a", b"1", 1), (b"b", b"2", 2)], idempotency_key="k1"
        )
    finally:
        ingest_client.close()
    assert len(response.record_ids) == 2
    with client(certs, token=TOKEN).open_channel(address) as channel:
        control = control_pb2_grpc.ControlStub(channel)
        leases = control.RegisterNode(
            control_pb2.RegisterNodeRequest(
                node_id="count", computation="count", address="127.0.0.1:1", interval_indexes=[0]
            ),
            timeout=5,
        ).leases
        assert [lease.interval.index for lease in leases] == [0]
        watch = control.WatchAssignment(control_pb2.GetAssignmentRequest(), timeout=5)
        assert next(iter(watch)).leases
        watch.cancel()


def test_plaintext_and_certificate_less_clients_cannot_connect(
    secured_injector: Injector, certs: Path
) -> None:
    address = secured_injector.address
    with grpc.insecure_channel(address) as channel:
        assert code_of(lambda: health_check(channel)) == grpc.StatusCode.UNAVAILABLE
    with Security(token=TOKEN).open_channel(address) as channel:
        assert code_of(lambda: health_check(channel)) == grpc.StatusCode.UNAVAILABLE
    # TLS, the right CA and token, but no client certificate: the handshake fails.
    with client(certs, token=TOKEN, cert=False).open_channel(address) as channel:
        assert code_of(lambda: health_check(channel)) == grpc.StatusCode.UNAVAILABLE
    # A client that does not trust the server's CA refuses it.
    with Security(tls_ca=certs / "client.pem", token=TOKEN).open_channel(address) as channel:
        assert code_of(lambda: health_check(channel)) == grpc.StatusCode.UNAVAILABLE


# -- a real secured pipeline ----------------------------------------------------------


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "MILLRACE_LOG_LEVEL": "WARNING"}
    for variable in (
        "MILLRACE_TOKEN",
        "MILLRACE_TLS_CERT",
        "MILLRACE_TLS_KEY",
        "MILLRACE_TLS_CA",
        "MILLRACE_TLS_REQUIRE_CLIENT_CERT",
    ):
        env.pop(variable, None)
    return env


def _start(command: list[str], ready: str, log_path: Path) -> subprocess.Popen[str]:
    log = open(log_path, "w")  # noqa: SIM115 - owned by the child
    process = subprocess.Popen(
        [sys.executable, "-m", "millrace", *command],
        stdout=subprocess.PIPE, stderr=log, text=True, env=_env(), cwd=ROOT,
    )  # fmt: skip
    log.close()
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(ready):
        process.kill()
        process.wait()
        raise AssertionError(f"{command[0]} did not start: {line!r}\n{log_path.read_text()}")
    return process


@pytest.mark.slow
def test_a_secured_pipeline_carries_injected_records_to_the_sink(
    tmp_path: Path, certs: Path
) -> None:
    deployment = write_deployment(tmp_path)
    d = str(deployment)
    processes: list[subprocess.Popen[str]] = []
    try:
        processes.append(
            _start(
                ["injector", "--deployment", d, "--log-dir", str(tmp_path / "log")],
                "injector serving",
                tmp_path / "injector.log",
            )
        )
        processes.append(
            _start(
                ["sink", "--deployment", d, "--stream", "ok"],
                "sink ok serving",
                tmp_path / "sink.log",
            )
        )
        processes.append(
            _start(
                ["node", "--deployment", d, "--name", "count", "--data-dir", str(tmp_path / "d")],
                "node count serving",
                tmp_path / "node.log",
            )
        )
        lines = [json.dumps({"key": f"k{i % 3}", "value": f"v{i}", "ts": i}) for i in range(20)]
        (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n")
        inject = [sys.executable, "-m", "millrace", "inject", "--deployment", d,
                  "--stream", "events", str(tmp_path / "events.jsonl")]  # fmt: skip

        # A wrong token (the environment overrides the file) is refused, and says so.
        refused = subprocess.run(
            inject, check=False, env={**_env(), "MILLRACE_TOKEN": "wrong"}, cwd=ROOT,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert "UNAUTHENTICATED" in refused.stderr and "MILLRACE_TOKEN" in refused.stderr

        accepted = subprocess.run(
            inject, check=False, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert accepted.returncode == 0, accepted.stderr

        out = tmp_path / "out" / "ok.jsonl"
        deadline = time.monotonic() + 30
        values: list[str] = []
        while time.monotonic() < deadline:
            if out.exists():
                values = [r.value.decode() for r in read_sink_records(out)]
                if len(values) >= len(lines):
                    break
            time.sleep(0.1)
        assert sorted(values) == sorted(f"v{i}" for i in range(20))
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
