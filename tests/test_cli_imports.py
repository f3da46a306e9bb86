"""A client command starts without loading the servers (issue 30: `millrace inject` took
~0.55 s to start for one line because every sub-command's module was imported), nor the
user API, the engine or the user's code (it reads the deployment file's addresses, not
its topology: ``deployment.Placement``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT

SERVER_MODULES = [
    "millrace.node", "millrace.injector.server", "millrace.injector.log", "millrace.sinks",
    "pyspark", "prometheus_client",
]  # fmt: skip


HEAVY_MODULES = [
    "millrace.engine", "millrace.computations", "millrace.statestore", "millrace.dataflow",
    "rocksdict", "numpy", "pyarrow",
]  # fmt: skip


def loaded_by(command: str, modules: list[str]) -> list[str]:
    """Which of ``modules`` building ``command``'s parser imports, in a fresh process."""
    probe = (
        "import json, sys\n"
        "from millrace import cli\n"
        f"cli.build_parser({command!r})\n"
        f"print(json.dumps([m for m in {modules!r} if m in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded


@pytest.mark.parametrize("command", ["inject", "watermarks", "status", "health"])
def test_a_client_command_imports_no_server(command: str) -> None:
    assert loaded_by(command, SERVER_MODULES) == []


def test_the_help_still_lists_every_command() -> None:
    from millrace import cli

    help_text = cli.build_parser().format_help()
    assert all(name in help_text for name in cli.COMMANDS)


@pytest.mark.parametrize("command", ["inject", "health"])
def test_a_client_of_one_service_imports_no_engine_and_no_user_code(command: str) -> None:
    assert loaded_by(command, HEAVY_MODULES) == []
