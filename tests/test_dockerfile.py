"""The Dockerfile's install steps work, replayed outside Docker (no engine runs here).

The test reads the Dockerfile itself: every ``COPY`` into the work dir and
every ``pip install`` of the project are repeated in a fresh virtualenv, then
the image's entrypoint and health check command must run. A Dockerfile that
forgets a package directory, or installs something that no longer resolves,
fails here.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from computations import Topology
from computations._deployment import Deployment

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def dockerfile_steps() -> tuple[list[tuple[str, str]], list[list[str]], list[str], list[str]]:
    """(copies, pip installs, entrypoint, health check command) from the Dockerfile."""
    text = (ROOT / "Dockerfile").read_text()
    copies: list[tuple[str, str]] = []
    installs: list[list[str]] = []
    entrypoint: list[str] = []
    health: list[str] = []
    for line in text.splitlines():
        if line.startswith("COPY "):
            *sources, target = line.split()[1:]
            copies.extend((source, target) for source in sources)
        elif line.startswith("RUN pip install"):
            installs.append(shlex.split(line[len("RUN ") :]))
        elif line.startswith("ENTRYPOINT"):
            entrypoint = json.loads(line[len("ENTRYPOINT") :])
        elif line.startswith("HEALTHCHECK"):
            health = json.loads(re.sub(r"^.*CMD ", "", line))
    return copies, installs, entrypoint, health


def test_image_install_steps_work_in_a_fresh_venv(tmp_path: Path) -> None:
    copies, installs, entrypoint, health = dockerfile_steps()
    assert installs and entrypoint == ["millrace"] and health
    workdir = tmp_path / "opt-millrace"
    workdir.mkdir()
    for source, target in copies:
        destination = workdir / target
        if (ROOT / source).is_dir():
            shutil.copytree(
                ROOT / source, destination, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(ROOT / source, destination)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = venv / "bin" / "pip"
    for command in installs:
        assert command[:2] == ["pip", "install"]
        # The image installs without a cache; here the machine's pip cache may serve wheels.
        arguments = [a for a in command[2:] if a != "--no-cache-dir"]
        subprocess.run([str(pip), "install", "--quiet", *arguments], cwd=workdir, check=True)
    binary = venv / "bin" / entrypoint[0]
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("millrace ")
    subprocess.run([str(venv / "bin" / health[0]), *health[1:]], check=True, capture_output=True)
    commands = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True)
    for name in ("injector", "node", "sink", "up", "inject"):
        assert name in commands.stdout
    imports = "import computations, injector, sinks, spark_jobs, statestore, millrace.wire.v1"
    subprocess.run([str(venv / "bin" / "python"), "-c", imports], check=True, cwd=tmp_path)


def test_compose_deployment_is_valid() -> None:
    """deploy/compose.yaml's deployment file loads against the demo topology."""
    work = ROOT / "deploy" / "compose-deployment.toml"
    text = work.read_text().replace('topology = "topology.toml"', "")
    topology = ROOT / "examples" / "clickstream" / "topology.toml"
    deployment = Deployment.from_dict(Topology.load(topology), tomllib.loads(text))
    assert set(deployment.nodes) == {"page-counts-0", "page-counts-1", "user-pages"}
    assert deployment.authority == "injector:7000"
