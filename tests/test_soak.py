"""The soak's short version (``bench/soak.py``; the 30-minute figures are in BENCHMARKS.md).

Ninety seconds of the demo topology and an interval join under steady load with
three SIGKILLs: the sinks must equal the oracle (windows, top pages, joined pairs)
with no record twice, and no process may gain open files or threads with the
records. Memory, disk and store rows are printed but
judged only by the long run: ninety seconds is mostly warm-up for them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow


def _kill_mentioning(text: str) -> None:
    """SIGKILL every process whose command line mentions ``text``."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text in (proc / "cmdline").read_bytes().decode(
                errors="replace"
            ):
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


def test_a_short_soak_is_exact_and_leaks_no_files_or_threads(tmp_path: Path) -> None:
    minutes, kill_every = ("1", "20") if os.environ.get("CI") else ("1.5", "25")  # CI: bounded
    command = [
        sys.executable, str(ROOT / "bench" / "soak.py"), "--minutes", minutes,
        "--kill-every", kill_every, "--sample-every", "3", "--rate", "300",
        "--judge", "fds,threads", "--work", str(tmp_path / "soak"),
    ]  # fmt: skip
    # Its own session: a soak past the deadline is killed with every service it started.
    run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = run.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        _kill_mentioning(str(tmp_path))  # millrace up's services run in sessions of their own
        out, err = run.communicate()
        pytest.fail("the short soak did not end within 10 minutes:\n" + out + err[-3000:])
    assert "exact=1" in out, out + err[-3000:]
    kills = int(out.split(" kills=", 1)[1].split()[0])
    assert kills >= 2, out  # one due while its service was restarting is skipped
    assert run.returncode == 0, out
