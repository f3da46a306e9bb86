"""Structured logs: MILLRACE_LOG_FORMAT=json gives one JSON object per line."""

from __future__ import annotations

import json
import logging

import pytest

from millrace._logging import configure_logging


def test_json_lines(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MILLRACE_LOG_FORMAT", "json")
    configure_logging()
    logging.getLogger("millrace.test").warning(
        "interval %s fenced", "counts/0", extra={"event": "fenced", "epoch": 4}
    )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    body = json.loads(line)
    assert body["level"] == "WARNING" and body["message"] == "interval counts/0 fenced"
    assert body["event"] == "fenced" and body["epoch"] == 4 and body["ts"].endswith("Z")
    logging.getLogger().handlers.clear()
