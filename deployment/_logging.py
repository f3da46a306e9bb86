"""Process-wide logging for Millrace services: plain text or one JSON object per line.

``MILLRACE_LOG_FORMAT=json`` selects JSON (for log shippers); ``MILLRACE_LOG_LEVEL``
the level (default INFO). Services log one line per significant event
(start, recovery with counts, fencing, dead letters), never per record.
"""

from __future__ import annotations

import json
import logging
import os
import time

_STANDARD = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...extra fields}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                body[key] = value
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


def configure_logging() -> None:
    """Configure the root logger from the environment (call once, at process start)."""
    handler = logging.StreamHandler()
    if os.environ.get("MILLRACE_LOG_FORMAT", "text").lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("MILLRACE_LOG_LEVEL", "INFO").upper())
