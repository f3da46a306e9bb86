"""The test hosts' network faults do what the nemesis says they do: datagrams from one
host to another, counted on arrival, through a cut (none), a lossy link (some, not
all) and after each heal (all)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.hosts import HostsUnavailableError, TestHosts

SENT = 400
RECEIVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9099))
s.settimeout(1.0)
print("ready", flush=True)
got = 0
try:
    while True:
        s.recv(16)
        got += 1
except socket.timeout:
    print(got, flush=True)
"""
SENDER = """
import socket, sys, time
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[2])):
    try:
        c.sendto(b"x", (sys.argv[1], 9099))
    except OSError:  # a blackhole route refuses it at once
        pass
    time.sleep(0.0005)
"""


@pytest.fixture
def hosts() -> Iterator[TestHosts]:
    try:
        with TestHosts(["a", "b"]) as made:
            yield made
    except HostsUnavailableError as exc:
        pytest.fail(f"test hosts: {exc}")


def delivered(hosts: TestHosts) -> int:
    """How many of SENT datagrams from a reach b."""
    target = hosts.address("b")
    receiver = subprocess.Popen(
        [*hosts.prefix("b"), sys.executable, "-c", RECEIVER, target],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert receiver.stdout is not None
    assert receiver.stdout.readline().strip() == "ready"
    subprocess.run([*hosts.prefix("a"), sys.executable, "-c", SENDER, target, str(SENT)],
                   check=True)  # fmt: skip
    out, _ = receiver.communicate(timeout=30)
    return int(out.strip())


def test_a_cut_drops_everything_and_a_lossy_link_some(hosts: TestHosts) -> None:
    assert delivered(hosts) == SENT
    hosts.cut("a", "b", one_way=True)
    assert delivered(hosts) == 0
    hosts.heal()
    hosts.lose("a", percent=50)
    lossy = delivered(hosts)
    assert SENT * 0.25 < lossy < SENT * 0.75, lossy  # binomial(400, 0.5): far outside
    hosts.unlose("a")
    assert delivered(hosts) == SENT
