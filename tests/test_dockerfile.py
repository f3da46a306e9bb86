"""The Dockerfile's two stages work, replayed outside Docker (no engine runs here).

The test reads the Dockerfile itself and splits it at its ``FROM`` lines. Each stage
gets a directory standing for its filesystem and a fresh virtualenv standing for its
Python. The ``build`` stage's ``COPY`` lines are repeated (honouring ``.dockerignore``)
and its ``pip wheel`` builds the wheel, native core included, with this machine's cargo
standing in for the toolchain the stage copies from the Rust image. The runtime stage's
``COPY`` lines (the wheel from ``build``, the demo's examples) and its ``pip install``
follow; then every package must import from the installed wheel (not from sources on
the image's ``PYTHONPATH``), the image's entrypoint must run, and its health check
command must say SERVING for an injector started from that install. A Dockerfile that
forgets a package directory or the native sources, or installs something that no longer
resolves, fails here.
"""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from examples.clickstream.demo import TOPOLOGY, deployment_text
from millrace.computations import Topology
from millrace.computations._keys import FORMER_TOP_LEVEL
from millrace.deployment import Deployment
from tests.support import free_port, stop_gracefully
from tests.test_prometheus import PORT_NAMES

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@dataclass
class Stage:
    """One ``FROM`` ... of the Dockerfile: its name and its instructions, in order."""

    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def lines(self, keyword: str) -> list[str]:
        return [rest for key, rest in self.instructions if key == keyword]


def dockerfile_stages() -> list[Stage]:
    """The Dockerfile's stages; continued lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            base, *alias = rest.split()
            assert len(alias) in (0, 2), line
            stages.append(Stage(alias[1] if alias else str(len(stages)), base))
        else:
            assert stages, f"{line!r} before the first FROM"
            stages[-1].instructions.append((keyword, rest))
    return stages


def dockerignore() -> Callable[[str], bool]:
    """Whether a path of the build context (relative, with /) is left out of it."""
    patterns: list[re.Pattern[str]] = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("!"), "exceptions are not replayed; keep .dockerignore plain"
        pattern = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?|\[[^]]*\])", line.strip("/")):
            if token == "**/":
                pattern += "(?:.*/)?"
            elif token == "**":
                pattern += ".*"
            elif token == "*":
                pattern += "[^/]*"
            elif token == "?":
                pattern += "[^/]"
            elif token.startswith("["):
                pattern += token
            else:
                pattern += re.escape(token)
        patterns.append(re.compile(pattern))

    def ignored(relative: str) -> bool:
        # A pattern that matches a directory leaves out everything under it.
        parts = relative.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(p.fullmatch(prefix) for p in patterns for prefix in prefixes)

    return ignored


def context_ignore(ignored: Callable[[str], bool]) -> Callable[[str, list[str]], list[str]]:
    """``.dockerignore`` as a ``shutil.copytree`` ignore, for copies from the context."""

    def ignore(directory: str, names: list[str]) -> list[str]:
        relative = Path(directory).relative_to(ROOT).as_posix()
        return [name for name in names if ignored(f"{relative}/{name}")]

    return ignore


class StageFiles:
    """A stage's filesystem as a directory: container paths map under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.workdir = "/"
        root.mkdir()

    def path(self, container_path: str) -> Path:
        return self.root / posixpath.join(self.workdir, container_path).lstrip("/")


def replay_copy(
    rest: str, files: StageFiles, done: dict[str, StageFiles], ignored: Callable[[str], bool]
) -> None:
    """One ``COPY [--from=X] SRC... DEST``: from the build context or an earlier stage."""
    *options, dest = rest.split()
    sources = [option for option in options if not option.startswith("--")]
    from_stage = None
    for option in (option for option in options if option.startswith("--")):
        key, _, value = option.partition("=")
        assert key == "--from", f"COPY option {option} is not replayed"
        if value not in done:
            # An image, not a stage: the build stage's Rust toolchain, which this machine's
            # cargo stands in for.
            return
        from_stage = done[value]
    target = files.path(dest)
    into_dir = dest.endswith("/") or len(sources) > 1
    for source in sources:
        if from_stage is not None:
            origin = from_stage.path(source)
        else:
            assert not ignored(source.strip("/")), f"COPY {source}: left out by .dockerignore"
            origin = ROOT / source
        assert origin.exists(), f"COPY {source}: no such file"
        if origin.is_dir():
            # Docker copies a directory's contents into the target.
            shutil.copytree(
                origin,
                target,
                ignore=None if from_stage is not None else context_ignore(ignored),
                dirs_exist_ok=True,
            )
        else:
            destination = target / origin.name if into_dir else target
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(origin, destination)


def replay_pip(rest: str, files: StageFiles, venv: Path, env: dict[str, str]) -> None:
    """One ``RUN pip ...``, with the stage's absolute paths and shell globs mapped."""
    command = shlex.split(rest)
    assert command[0] == "pip" and command[1] in ("install", "wheel"), rest
    arguments: list[str] = []
    for argument in command[2:]:
        # The image builds without a cache; here the machine's pip cache may serve wheels.
        if argument == "--no-cache-dir":
            continue
        mapped = str(files.path(argument)) if argument.startswith("/") else argument
        if "*" in mapped:
            matches = sorted(glob.glob(mapped, root_dir=files.path(".")))
            assert matches, f"{argument} matches nothing"
            arguments.extend(matches)
        else:
            arguments.append(mapped)
    # No bytecode is compiled (half the install's time, with pyspark's many files).
    quiet = ["--quiet", "--no-compile"] if command[1] == "install" else ["--quiet"]
    subprocess.run(
        [str(venv / "bin" / "pip"), command[1], *quiet, *arguments],
        cwd=files.path("."), env=env, check=True,
    )  # fmt: skip


def replay_stage(
    stage: Stage,
    files: StageFiles,
    venv: Path,
    done: dict[str, StageFiles],
    env: dict[str, str],
) -> dict[str, str]:
    """A stage's WORKDIR, COPY and ``RUN pip`` steps (other RUNs are the OS's); its ENV."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    ignored = dockerignore()
    environment: dict[str, str] = {}
    for keyword, rest in stage.instructions:
        if keyword == "WORKDIR":
            files.workdir = posixpath.join(files.workdir, rest)
            files.path(".").mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            replay_copy(rest, files, done, ignored)
        elif keyword == "RUN" and rest.startswith("pip "):
            replay_pip(rest, files, venv, env)
        elif keyword == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                environment[key] = value
    done[stage.name] = files
    return environment


def packages() -> list[str]:
    """The top-level packages the distribution ships (pyproject.toml's find include)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(name.rstrip("*") for name in include)


def test_image_stages_work_in_fresh_venvs(tmp_path: Path) -> None:
    stages = dockerfile_stages()
    assert [stage.name for stage in stages] == ["build", "runtime"]
    build, runtime = stages
    assert any(line.startswith("pip wheel") for line in build.lines("RUN"))
    assert any(line.startswith("pip install") for line in runtime.lines("RUN"))
    # The runtime stage keeps no toolchain: it takes only the wheels from `build`.
    assert runtime.base == build.base
    assert [line.split()[0] for line in runtime.lines("COPY") if line.startswith("--")] == [
        "--from=build"
    ]
    for line in runtime.lines("RUN"):
        assert not re.search(r"\b(cargo|rustc|rustup|gcc)\b", line), line
    entrypoint = json.loads(runtime.lines("ENTRYPOINT")[0])
    health = json.loads(re.sub(r"^.*CMD ", "", runtime.lines("HEALTHCHECK")[0]))
    assert entrypoint == ["millrace"] and health[:2] == ["millrace", "health"]

    # The machine's environment, less what would point the build or the imports elsewhere
    # (`make` exports PYO3_PYTHON); cargo's output in a directory of this test's own.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYO3_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")
    }
    env["CARGO_TARGET_DIR"] = str(tmp_path / "cargo-target")
    done: dict[str, StageFiles] = {}
    replay_stage(build, StageFiles(tmp_path / "build"), tmp_path / "build-venv", done, env)
    wheels = list((done["build"].root / "wheels").glob("*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
    assert any(re.fullmatch(r"millrace/_native\..*\.so", name) for name in names), names

    venv = tmp_path / "venv"
    files = StageFiles(tmp_path / "runtime")
    environment = replay_stage(runtime, files, venv, done, env)
    assert environment["PYTHONPATH"] == files.workdir
    workdir = files.path(".")
    assert (workdir / "examples" / "clickstream").is_dir()

    check_imports_come_from_the_wheel(venv, workdir, tmp_path)
    binary = venv / "bin" / entrypoint[0]
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("millrace ")
    run_health_check_against_an_injector(venv, workdir, tmp_path, health)
    commands = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=True)
    for name in ("injector", "node", "sink", "up", "inject"):
        assert name in commands.stdout


def check_imports_come_from_the_wheel(venv: Path, workdir: Path, tmp_path: Path) -> None:
    """Every package, the native module and the demo import under the image's PYTHONPATH;
    the packages from site-packages, the demo from the work dir; ``millrace`` is the one
    top-level name the wheel installs (the design's folders are ``millrace.engine``, ...)."""
    assert packages() == ["millrace"]
    modules = [
        *packages(), *(f"millrace.{name}" for name in sorted(FORMER_TOP_LEVEL)),
        "millrace._native", "millrace.dataplane", "millrace.wire.v1",
    ]  # fmt: skip
    top_level = (
        "import importlib.util, sys\n"
        "print(sorted(n for n in sys.argv[1:] if importlib.util.find_spec(n)))\n"
    )
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", top_level, *sorted(FORMER_TOP_LEVEL)],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert found.stdout.strip() == "[]", f"installed at the top level: {found.stdout}"
    script = (
        "import importlib, json, sys\n"
        "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))\n"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, *modules, "examples.clickstream.demo"],
        capture_output=True, text=True, cwd=tmp_path, check=False,
        env={**os.environ, "PYTHONPATH": str(workdir)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    files = json.loads(result.stdout)
    site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    for module in modules:
        assert Path(files[module]).is_relative_to(site_packages / "site-packages"), files
    assert Path(files["examples.clickstream.demo"]).is_relative_to(workdir), files


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
