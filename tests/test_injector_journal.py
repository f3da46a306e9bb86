"""A malformed watermark journal stops the injector with a message, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT, forwarding_deployment, free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("content", ["{not json", '{"published": {"fwd": "soon"}}', "[1, 2]"])
def test_a_malformed_journal_is_refused_with_what_to_do(tmp_path: Path, content: str) -> None:
    deployment = forwarding_deployment(tmp_path, free_port(), f"127.0.0.1:{free_port()}")
    with deployment.open("a") as file:
        file.write(f'[injector]\naddress = "127.0.0.1:{free_port()}"\n')
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "watermarks.json").write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "millrace", "injector", "--deployment", str(deployment),
         "--log-dir", str(tmp_path / "log")],
        capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "watermarks.json" in result.stderr and "move the file aside" in result.stderr
    assert "Traceback" not in result.stderr
