"""The README's examples run as written; the CLI answers --help and --version."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import millrace
from millrace.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


RUNNABLE = ("README.md", "docs/computations.md", "docs/operations.md")
"""Documents whose every Python block runs as written (``docs/windows.md`` and
``docs/spark.md`` have their own tests)."""


def python_blocks(name: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / name).read_text(), re.S)


@pytest.mark.parametrize("name", RUNNABLE)
def test_python_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(name)
    if name != "docs/operations.md":
        assert blocks, f"{name} shows code"
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, name, "exec"), {})


def test_the_readme_is_a_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < 200, "the manual lives in docs/"
    for link in re.findall(r"\]\(([^)#]+)\)", "\n".join(lines)):
        assert (ROOT / link).exists(), link


def test_readme_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    fenced = re.findall(r"```\n(.*?)```", text, re.S)
    assert [block.strip() for block in fenced[:2]] == ["make run", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "millrace", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_cli_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"millrace {millrace.__version__}"


def test_cli_help() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "usage: millrace" in result.stdout
    assert run_cli().returncode == 0


def test_cli_rejects_unknown_command() -> None:
    result = run_cli("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


DOCUMENTS = (
    "README.md",
    "CONTRIBUTING.md",
    *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
)


def subparsers_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # argparse keeps its sub-parsers here only
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def test_every_command_the_docs_name_exists_with_its_options() -> None:
    """Each `millrace ...` the README and docs show names a real sub-command (and
    sub-sub-command), and each option it shows is one that command takes."""
    parser = build_parser()
    shown = sorted({
        span for name in DOCUMENTS
        for span in re.findall(r"`millrace ([^`]*)`", (ROOT / name).read_text())
    })  # fmt: skip
    assert len(shown) > 30
    wrong = []
    for span in shown:
        words = [w.strip("[]") for w in span.split("|")[0].split()]
        command, rest = words[0], words[1:]
        if command.endswith(":"):
            continue  # a message the command prints (``millrace log: ...``), not a command
        choices = subparsers_of(parser)
        if command not in choices:
            wrong.append(f"{span}: no command {command!r}")
            continue
        current = choices[command]
        nested = subparsers_of(current)
        if nested and rest and not rest[0].startswith("-") and rest[0] != "...":
            if rest[0] not in nested:
                wrong.append(f"{span}: no {command} {rest[0]!r}")
                continue
            current, rest = nested[rest[0]], rest[1:]
        options = {s for action in current._actions for s in action.option_strings}
        wrong += [f"{span}: no option {w}" for w in rest if w.startswith("--") and w not in options]
    assert not wrong, "\n".join(wrong)
