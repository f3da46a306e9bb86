"""Transport security and a shared-token check for every Millrace gRPC endpoint.

A deployment file may carry a ``[security]`` table::

    [security]
    token = "s3cret"                    # every call must carry "authorization: Bearer s3cret"
    token_file = "secrets/token"        # ... or the token read from an owner-only file
    tls_cert = "certs/server.pem"       # this process's certificate chain (PEM) ...
    tls_key = "certs/server.key"        # ... and its private key; serve TLS when both are set
    tls_ca = "certs/ca.pem"             # trust these roots; dial TLS when set
    require_client_cert = true          # servers demand a client certificate signed by tls_ca

    insecure = true                     # serve non-loopback addresses without authentication

Paths in the file are relative to the deployment file (in the environment,
to the working directory). The environment overrides each
setting: ``MILLRACE_TOKEN``, ``MILLRACE_TOKEN_FILE``, ``MILLRACE_TLS_CERT``,
``MILLRACE_TLS_KEY``, ``MILLRACE_TLS_CA``, ``MILLRACE_TLS_REQUIRE_CLIENT_CERT``,
``MILLRACE_INSECURE`` (``1``/``true``/``yes``).

Open to the network only by choice: a server that would listen on an address
other than loopback without authenticating its callers (a token, or TLS with
client certificates) refuses to start unless ``insecure = true``.

:class:`Security` with every field unset is plaintext without a token. With a
token, servers refuse every call but ``grpc.health.v1.Health`` and server
reflection with ``UNAUTHENTICATED`` unless it carries the token; clients
opened through :meth:`Security.open_channel` attach it to every call.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import grpc

from millrace.deployment._keepalive import KEEPALIVE_OPTIONS

TOKEN_ENV = "MILLRACE_TOKEN"
TLS_CERT_ENV = "MILLRACE_TLS_CERT"
TLS_KEY_ENV = "MILLRACE_TLS_KEY"
TLS_CA_ENV = "MILLRACE_TLS_CA"
TLS_REQUIRE_CLIENT_CERT_ENV = "MILLRACE_TLS_REQUIRE_CLIENT_CERT"
TOKEN_FILE_ENV = "MILLRACE_TOKEN_FILE"
INSECURE_ENV = "MILLRACE_INSECURE"

UNAUTHENTICATED_MESSAGE = "missing or wrong token (set MILLRACE_TOKEN or [security] token)"
OPEN_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Methods callable without the token: health checks and server reflection (read-only)."""

SETTINGS = frozenset(
    {"token", "token_file", "tls_cert", "tls_key", "tls_ca", "require_client_cert", "insecure"}
)
"""The keys of a ``[security]`` table."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


RECONNECT_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
"""gRPC's defaults back off to 120 s between reconnects: far too long for a service that a
supervisor restarts in a second, and a client stuck in backoff misses it altogether."""


@dataclass(frozen=True, kw_only=True)
class Security:
    """How a process dials and serves gRPC: TLS material and the shared token."""

    token: str | None = None
    tls_cert: Path | None = None
    """PEM certificate chain this process presents (as a server, and as a client for mTLS)."""
    tls_key: Path | None = None
    """PEM private key of ``tls_cert``."""
    tls_ca: Path | None = None
    """PEM roots that sign the peers' certificates; clients dial TLS when set."""
    require_client_cert: bool = False
    """Servers refuse a TLS handshake without a client certificate signed by ``tls_ca``."""
    insecure: bool = False
    """Serve a non-loopback address without authenticating callers (an explicit choice)."""

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("[security] tls_cert and tls_key must be set together")
        if self.require_client_cert and (self.tls_ca is None or self.tls_cert is None):
            raise ValueError("[security] require_client_cert needs tls_ca, tls_cert and tls_key")
        if self.token is not None and not self.token:
            raise ValueError("[security] token must not be empty")

    @classmethod
    def from_settings(
        cls,
        section: Mapping[str, Any],
        base_dir: Path,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Security:
        """Read a ``[security]`` table (paths relative to ``base_dir``), then the environment."""
        env = os.environ if environ is None else environ
        unknown = set(section) - SETTINGS
        if unknown:
            raise ValueError(f"[security] has unknown settings: {', '.join(sorted(unknown))}")

        def path(name: str, variable: str) -> Path | None:
            if env.get(variable):
                return Path(env[variable])  # relative to the working directory
            value = section.get(name)
            if value is None or value == "":
                return None
            return base_dir / str(value)  # an absolute value stays absolute

        token = env.get(TOKEN_ENV) or section.get("token")
        token_file = path("token_file", TOKEN_FILE_ENV)
        if token is None and token_file is not None:
            token = read_token_file(token_file)
        insecure = section.get("insecure", False)
        if INSECURE_ENV in env:
            insecure = _flag(env[INSECURE_ENV], INSECURE_ENV)
        if not isinstance(insecure, bool):
            raise ValueError("[security] insecure must be true or false")
        require = section.get("require_client_cert", False)
        if TLS_REQUIRE_CLIENT_CERT_ENV in env:
            require = _flag(env[TLS_REQUIRE_CLIENT_CERT_ENV], TLS_REQUIRE_CLIENT_CERT_ENV)
        if not isinstance(require, bool):
            raise ValueError("[security] require_client_cert must be true or false")
        return cls(
            token=None if token is None else str(token),
            tls_cert=path("tls_cert", TLS_CERT_ENV),
            tls_key=path("tls_key", TLS_KEY_ENV),
            tls_ca=path("tls_ca", TLS_CA_ENV),
            require_client_cert=require,
            insecure=insecure,
        )

    # -- clients ------------------------------------------------------------------

    def open_channel(
        self, address: str, *, options: Sequence[tuple[str, Any]] | None = None
    ) -> grpc.Channel:
        """A channel to ``address``: TLS when ``tls_ca`` is set, the token on every call.

        Reconnects are retried within ``RECONNECT_OPTIONS``' bounds unless ``options``
        say otherwise: a peer restarted by its supervisor is found again within ~2 s.
        Every channel keeps the one keepalive policy (``KEEPALIVE_OPTIONS``).
        """
        defaults = {**dict(RECONNECT_OPTIONS), **dict(KEEPALIVE_OPTIONS)}
        options = list({**defaults, **dict(options or [])}.items())
        if self.tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=self.tls_ca.read_bytes(),
                private_key=self.tls_key.read_bytes() if self.tls_key else None,
                certificate_chain=self.tls_cert.read_bytes() if self.tls_cert else None,
            )
            channel = grpc.secure_channel(address, credentials, options=options)
        else:
            channel = grpc.insecure_channel(address, options=options)
        if self.token is not None:
            channel = grpc.intercept_channel(channel, _TokenClientInterceptor(self.token))
        return channel

    # -- servers ------------------------------------------------------------------

    def bind(self, server: grpc.Server, address: str) -> int:
        """Listen on ``address`` (TLS when this process has a certificate); the port.

        Raises ``OSError`` naming the address when it cannot be bound (in use by
        another process: servers set ``EXCLUSIVE_PORT``, so nothing shares a port),
        and ``PermissionError`` when it is not a loopback address and this process
        would serve anyone who reaches it (no token, no client certificates) without
        ``insecure = true``.
        """
        if not self.authenticates and not self.insecure and not is_loopback(address):
            raise PermissionError(
                f"refusing to serve {address} without authentication: anyone who can reach "
                "it could register as an interval's owner, deliver records and append to "
                "the log. Set [security] token_file (`millrace security init` writes one) or "
                "token, or TLS with require_client_cert; or, to serve it open on purpose, "
                "[security] insecure = true"
            )
        try:
            if self.tls_cert is not None and self.tls_key is not None:
                credentials = grpc.ssl_server_credentials(
                    [(self.tls_key.read_bytes(), self.tls_cert.read_bytes())],
                    root_certificates=self.tls_ca.read_bytes() if self.tls_ca else None,
                    require_client_auth=self.require_client_cert,
                )
                port: int = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio's "Failed to bind to address"
            port = 0
            cause: Exception | None = exc
        else:
            cause = None
        if port == 0:
            raise OSError(
                f"cannot listen on {address}: the address is in use by another process or "
                "not available here"
            ) from cause
        return port

    @property
    def authenticates(self) -> bool:
        """True when servers know who calls them: a token, or TLS with client certificates."""
        return self.token is not None or (self.tls_cert is not None and self.require_client_cert)

    def server_interceptors(self) -> list[grpc.ServerInterceptor]:
        """Interceptors a server must be built with (the token check, when a token is set)."""
        return [] if self.token is None else [_TokenServerInterceptor(self.token)]

    def describe(self) -> str:
        """``"tls+mtls, token"``, ``"plaintext"``: for start-up lines."""
        parts = []
        if self.tls_cert is not None:
            parts.append("mtls" if self.require_client_cert else "tls")
        elif self.tls_ca is not None:
            parts.append("tls client")
        if self.token is not None:
            parts.append("token")
        return ", ".join(parts) or "plaintext"


def is_loopback(address: str) -> bool:
    """True for ``HOST:PORT`` whose host is a loopback address (or ``localhost``)."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost, or a wildcard: reachable from outside


def read_token_file(path: Path) -> str:
    """The token stored in ``path``, which only its owner may read (like an SSH key)."""
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"[security] token_file {str(path)!r}: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ValueError(
            f"[security] token_file {str(path)!r} is readable by others "
            f"(mode {stat.S_IMODE(mode):o}): chmod 600 it"
        )
    if not text:
        raise ValueError(f"[security] token_file {str(path)!r} is empty")
    return text


def _flag(text: str, variable: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{variable}={text!r}: expected 1/0, true/false or yes/no")


# -- the token on the wire ------------------------------------------------------------


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str | bytes]] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: Any


class _TokenClientInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds ``authorization: Bearer <token>`` to every call."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _details(self, details: Any) -> _CallDetails:
        metadata = [m for m in (details.metadata or ()) if m[0] != "authorization"]
        metadata.append(self._header)
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(
        self, continuation: Any, details: Any, request_iterator: Iterator[Any]
    ) -> Any:
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(
        self, continuation: Any, details: Any, request_iterator: Iterator[Any]
    ) -> Any:
        return continuation(self._details(details), request_iterator)


class _TokenServerInterceptor(grpc.ServerInterceptor):
    """Refuses every call but health and reflection without the exact bearer token."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(
        self, continuation: Callable[[Any], Any], handler_call_details: Any
    ) -> Any:
        method: str = handler_call_details.method
        if method.startswith(OPEN_METHOD_PREFIXES):
            return continuation(handler_call_details)
        presented = b""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                presented = value.encode() if isinstance(value, str) else bytes(value)
                break
        if hmac.compare_digest(presented, self._expected):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        return None if handler is None else _refusal(handler)


def _refusal(handler: Any) -> Any:
    """A handler of the same shape as ``handler`` that aborts with UNAUTHENTICATED."""

    def abort(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)

    def abort_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        yield None  # pragma: no cover - abort raises

    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort_stream, **serializers)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort, **serializers)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort_stream, **serializers)
    return grpc.unary_unary_rpc_method_handler(abort, **serializers)
