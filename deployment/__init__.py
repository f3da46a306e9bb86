"""What every Millrace process shares: its deployment file, its security, its serving.

:class:`Deployment` reads the deployment file (where each node, the injector
and the sinks listen; the topology it runs), :class:`Placement` the same file
without its topology (what clients need; no user code imported);
:mod:`deployment.security` the
``[security]`` table (TLS, token); the rest are the helpers every gRPC server
uses (health and reflection, request guard, stream limits, stop signals),
durable file writes and reading files of lines a block at a time.
"""

from millrace.deployment._deployment import Deployment
from millrace.deployment._durable_files import AppendOnlyFile, fsync_directory, write_json_durably
from millrace.deployment._keepalive import KEEPALIVE_OPTIONS, keepalive_options
from millrace.deployment._line_blocks import line_blocks
from millrace.deployment._logging import configure_logging
from millrace.deployment._placement import (
    DeploymentError,
    InjectorPlacement,
    NodePlacement,
    Placement,
    RebalanceSettings,
    apply_environment,
)
from millrace.deployment._request_guard import RequestGuard
from millrace.deployment._runtime_tuning import (
    HANDOFF_SWITCH_INTERVAL_S,
    WORKER_SWITCH_INTERVAL_S,
    settle_garbage_collector,
    tune_threads,
)
from millrace.deployment._service_support import (
    EXCLUSIVE_PORT,
    SUPERVISOR_PID_ENV,
    StopSignals,
    abort,
    brief,
    enable_stack_dumps,
    metrics_host,
    serve_health_and_reflection,
)
from millrace.deployment._stream_limits import STREAM_SERVER_OPTIONS, StreamLimiter
from millrace.deployment.security import Security

__all__ = [
    "EXCLUSIVE_PORT",
    "HANDOFF_SWITCH_INTERVAL_S",
    "KEEPALIVE_OPTIONS",
    "STREAM_SERVER_OPTIONS",
    "WORKER_SWITCH_INTERVAL_S",
    "AppendOnlyFile",
    "Deployment",
    "DeploymentError",
    "InjectorPlacement",
    "NodePlacement",
    "Placement",
    "RebalanceSettings",
    "RequestGuard",
    "Security",
    "SUPERVISOR_PID_ENV",
    "StopSignals",
    "StreamLimiter",
    "abort",
    "apply_environment",
    "brief",
    "configure_logging",
    "enable_stack_dumps",
    "fsync_directory",
    "keepalive_options",
    "line_blocks",
    "metrics_host",
    "serve_health_and_reflection",
    "settle_garbage_collector",
    "tune_threads",
    "write_json_durably",
]
