"""Measuring helpers the benchmarks share: a process's CPU time, its children, percentiles."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far, from ``/proc``
    (nan once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def descendants(pid: int) -> list[int]:
    """Every live descendant of process ``pid`` (Linux ``/proc``)."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def millrace_role(pid: int) -> str:
    """``injector``, ``node`` or ``sink`` from a millrace process's command line (else
    ``other``)."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    for role in (b"injector", b"node", b"sink"):
        if role in argv:
            return role.decode()
    return "other"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (inclusive method), nan for no values."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
