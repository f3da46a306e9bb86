"""Millrace services as child processes of one script: what the demo and the
benchmarks share (start one and wait until it says it is ready; stop them all)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def millrace(*args: str) -> list[str]:
    """The command line of ``millrace ARGS`` with this interpreter."""
    return [sys.executable, "-m", "millrace", *args]


def start(
    args: Sequence[str], ready: str, what: str, *, log: Path, cwd: Path, timeout: float = 60
) -> subprocess.Popen[str]:
    """Start ``millrace ARGS`` (stderr to ``log``) and return once a line of its stdout
    contains ``ready``; RuntimeError if it exits first or takes ``timeout`` s."""
    with log.open("w") as stderr:
        process = subprocess.Popen(
            millrace(*args), stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=cwd
        )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"{what} exited before it was ready (see {log})")
        if ready in line:
            return process
    process.kill()
    raise RuntimeError(f"{what} was not ready within {timeout:.0f} s (see {log})")


def stop(processes: Sequence[subprocess.Popen[str]], timeout: float = 30) -> None:
    """SIGTERM every process, the last started first; kill what is still running after
    ``timeout`` s."""
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()


def start_services(
    deployment: Path, work: Path, *, nodes: Sequence[str], sinks: Sequence[str]
) -> list[subprocess.Popen[str]]:
    """The injector (its log under ``work/log``), then each node of ``nodes`` (its data
    under ``work/NAME``), then a ``millrace sink`` per stream of ``sinks``, each started
    in ``work`` with its stderr in ``work/WHAT.log``; the processes, in that order. If
    one fails to start, those started are stopped and the error raised."""
    config = str(deployment)
    processes: list[subprocess.Popen[str]] = []
    try:
        injector = ["injector", "--config", config, "--log-dir", str(work / "log")]
        processes.append(
            start(injector, "injector serving", "injector", log=work / "injector.log", cwd=work)
        )
        for name in nodes:
            args = ["node", "--config", config, "--name", name, "--data-dir", str(work / name)]
            processes.append(
                start(args, f"node {name} serving", name, log=work / f"{name}.log", cwd=work)
            )
        for stream in sinks:
            args = ["sink", "--config", config, "--stream", stream]
            log = work / f"sink-{stream}.log"
            processes.append(start(args, "sink ", f"sink {stream}", log=log, cwd=work))
    except BaseException:
        stop(processes)
        raise
    return processes


def pid_of(deployment: Path, service: str) -> int | None:
    """The pid of a service ``millrace up`` runs for ``deployment`` (``"injector"``, a
    node's name or ``"sink-STREAM"``); None while there is none (between a kill and its
    restart)."""
    if service == "injector":
        pattern = f"millrace injector --config {deployment}"
    elif service.startswith("sink-"):
        pattern = f"millrace sink --config {deployment} --stream {service[len('sink-') :]} "
    else:
        pattern = f"millrace node --config {deployment} --name {service}"
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    pids = [int(p) for p in found.stdout.split()]
    return pids[0] if pids else None
