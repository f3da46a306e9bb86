"""The operator commands when nothing (or something silent) listens: one helpful message,
exit code 2, never a traceback."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.client_cli import cli, write_deployment
from tests.support import ROOT, free_port

pytestmark = pytest.mark.slow


def test_unreachable_services_get_one_helpful_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    injector, node = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    deployment = str(write_deployment(tmp_path, injector, node, f"127.0.0.1:{free_port()}"))
    data = tmp_path / "in.jsonl"
    data.write_text('{"key": "a", "value": "b", "ts": 1}\n')

    for argv, address in [
        (("inject", "--deployment", deployment, "--stream", "events", str(data)), injector),
        (("inject", "--injector", injector, "--stream", "events", str(data)), injector),
        (("watermarks", "--deployment", deployment), injector),
        (("state", "get", "--deployment", deployment, "--computation", "count", "--key", "a"),
         node),
        (("deadletters", "--deployment", deployment), node),
    ]:  # fmt: skip
        code, out, err = cli(capsys, *argv)
        assert code == 2, (argv, out, err)
        assert f"at {address}" in err and "UNAVAILABLE" in err, err
        assert "is `millrace up`" in err and "is the address right?" in err, err
        assert "Traceback" not in err

    code, out, err = cli(capsys, "status", "--deployment", deployment)
    assert code == 1
    assert re.search(rf"injector\s+{injector}\s+UNREACHABLE \(UNAVAILABLE\)", out), out
    assert re.search(rf"p\s+{node}\s+UNREACHABLE \(UNAVAILABLE\)\s+count\s+0,1", out), out
    assert f"cannot reach the injector at {injector}" in err
    assert f"cannot reach node p at {node}" in err
    assert "--name p`) running?" in err and "[nodes.p] address in" in err

    code, _, err = cli(capsys, "status", "--deployment", str(tmp_path / "missing.toml"))
    assert code == 2 and "no such file (check --config)" in err
    code, _, err = cli(capsys, "inject", "--injector", injector, "--stream", "events", "nofile")
    assert code == 2 and "cannot read 'nofile': No such file or directory" in err
    code, _, err = cli(capsys, "inject", "--stream", "events", str(data))
    assert code == 2 and "pass --config FILE (or --injector HOST:PORT)" in err


def test_a_silent_listener_fails_at_the_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as listener:  # accepts TCP, never speaks HTTP/2
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        code, _, err = cli(capsys, "watermarks", "--injector", address, "--timeout", "0.5")
        assert time.monotonic() - started < 5
    assert code == 2
    assert f"the watermark authority at {address} did not answer within 0.5 s" in err, err
    assert "DEADLINE_EXCEEDED" in err and "Traceback" not in err


def test_no_traceback_from_a_real_process(tmp_path: Path) -> None:
    script = (
        "import argparse, sys\n"
        "from millrace.commands import inject\n"
        "parser = argparse.ArgumentParser()\n"
        "inject.register(parser.add_subparsers())\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "sys.exit(args.handler(args))\n"
    )
    address = f"127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, "-c", script, "inject", "--injector", address, "--stream", "s", "-"],
        input="", capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith(f"millrace inject: cannot reach the injector at {address}")
    assert "Traceback" not in result.stderr
