"""The Dockerfile's install steps work, replayed outside Docker (no engine runs here).

The test reads the Dockerfile itself: every ``COPY`` into the work dir and
every ``pip install`` of the project are repeated in a fresh virtualenv, then
the image's entrypoint must run, and its health check command must say
SERVING for an injector started from that install. A Dockerfile that
forgets a package directory, or installs something that no longer resolves,
fails here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from computations import Topology
from deployment._deployment import Deployment
from examples.clickstream.demo import TOPOLOGY, deployment_text
from tests.support import free_port, stop_gracefully
from tests.test_prometheus import PORT_NAMES

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
        # The image installs without a cache; here the machine's pip cache may serve wheels,
        # and no bytecode is compiled (half the install's time, with pyspark's many files).
        arguments = [a for a in command[2:] if a != "--no-cache-dir"]
        subprocess.run(
            [str(pip), "install", "--quiet", "--no-compile", *arguments], cwd=workdir, check=True
        )
    binary = venv / "bin" / entrypoint[0]
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("millrace ")
    assert health[:2] == ["millrace", "health"]
    run_health_check_against_an_injector(venv, workdir, tmp_path, health)
    commands = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True)
    for name in ("injector", "node", "sink", "up", "inject"):
        assert name in commands.stdout
    imports = "import computations, injector, sinks, spark_jobs, statestore, millrace.wire.v1"
    subprocess.run([str(venv / "bin" / "python"), "-c", imports], check=True, cwd=tmp_path)


def run_health_check_against_an_injector(
    venv: Path, workdir: Path, tmp_path: Path, health: list[str]
) -> None:
    """The HEALTHCHECK command, as the image runs it, says SERVING for a running injector."""
    ports = {name: free_port() for name in PORT_NAMES}
    (tmp_path / "topology.toml").write_text(TOPOLOGY)
    deployment = tmp_path / "deployment.toml"
    deployment.write_text(deployment_text(ports))
    # The image's ENV PYTHONPATH (the work dir: the demo's computations), not this checkout.
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    log_path = tmp_path / "injector.log"
    with open(log_path, "w") as log:
        injector = subprocess.Popen(
            [str(venv / "bin" / "millrace"), "injector", "--deployment", str(deployment),
             "--log-dir", str(tmp_path / "log")],
            stdout=subprocess.PIPE, stderr=log, text=True, cwd=tmp_path, env=env,
        )  # fmt: skip
    try:
        assert injector.stdout is not None
        line = injector.stdout.readline()
        assert line.startswith("injector serving"), f"{line!r}; see {log_path}"
        env["MILLRACE_HEALTH_ADDRESS"] = f"127.0.0.1:{ports['injector']}"
        result = subprocess.run(
            [str(venv / "bin" / health[0]), *health[1:]],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert (result.returncode, result.stdout) == (0, "SERVING\n"), result.stderr
    finally:
        stop_gracefully(injector, log_path)


def test_compose_deployment_is_valid() -> None:
    """deploy/compose.yaml's deployment file loads against the demo topology."""
    work = ROOT / "deploy" / "compose-deployment.toml"
    text = work.read_text().replace('topology = "topology.toml"', "")
    topology = ROOT / "examples" / "clickstream" / "topology.toml"
    deployment = Deployment.from_dict(Topology.load(topology), tomllib.loads(text))
    assert set(deployment.nodes) == {"page-counts-0", "page-counts-1", "user-pages"}
    assert deployment.authority == "injector:7000"
