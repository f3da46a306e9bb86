"""Test hosts: network namespaces on one bridge, each with an address of its own.

Every host is a namespace (``ip netns``) with one veth link to a bridge in the test's
own namespace, which holds the bridge's first address: the test reaches every host,
and the hosts reach each other, over that bridge; nothing leaves the machine. The
faults a nemesis needs act on the hosts' own routing and queueing:

- :meth:`TestHosts.cut` drops what ``a`` sends to ``b`` (a blackhole route in ``a``),
  both ways unless ``one_way``; :meth:`TestHosts.heal` removes every cut;
- :meth:`TestHosts.slow` throttles what a host sends (a token bucket);
- :meth:`TestHosts.lose` drops a share of what a host sends, at random (nftables);
- a process is put on a host by running it under :meth:`TestHosts.prefix`.

Created by the tests themselves and removed on exit (processes on a host must be
stopped first). Needs root (CAP_NET_ADMIN) and Debian's iproute2 and nftables.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field


class HostsUnavailableError(RuntimeError):
    """This machine cannot make test hosts (not root, no iproute2): the reason."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass
class TestHosts:
    """Hosts named ``names`` (see the module docstring); a context manager."""

    names: list[str]
    tag: str = field(default_factory=lambda: f"mr{os.getpid() % 1000}{random.randrange(1000)}")
    subnet: str = field(
        default_factory=lambda: f"10.{random.randrange(64, 250)}.{random.randrange(1, 250)}"
    )
    cuts: set[tuple[str, str]] = field(default_factory=set)

    __test__ = False  # not a pytest class

    def __post_init__(self) -> None:
        self._made: list[str] = []

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    @property
    def gateway(self) -> str:
        """The test's own address on the bridge."""
        return f"{self.subnet}.1"

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        """The host's IPv4 address."""
        return f"{self.subnet}.{10 + self.names.index(name)}"

    def prefix(self, name: str) -> list[str]:
        """The command prefix that runs a program on the host."""
        return ["ip", "netns", "exec", self.namespace(name)]

    def __enter__(self) -> TestHosts:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
        except FileNotFoundError as exc:
            raise HostsUnavailableError("iproute2's ip is not installed") from exc
        except subprocess.CalledProcessError as exc:
            raise HostsUnavailableError(f"cannot make a bridge: {exc.stderr.strip()}") from exc
        try:
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for number, name in enumerate(self.names):
                self._add_host(number, name)
        except subprocess.CalledProcessError as exc:
            self.__exit__()
            raise HostsUnavailableError(f"{' '.join(exc.cmd)}: {exc.stderr.strip()}") from exc
        except BaseException:
            self.__exit__()
            raise
        return self

    def _add_host(self, number: int, name: str) -> None:
        namespace, outside, inside = (
            self.namespace(name),
            f"{self.tag}v{number}",
            f"{self.tag}p{number}",
        )
        _ip("netns", "add", namespace)
        self._made.append(namespace)
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", outside, "master", self.bridge)
        _ip("link", "set", outside, "up")
        _ip("link", "set", inside, "netns", namespace)
        _ip("-n", namespace, "link", "set", inside, "name", "eth0")
        _ip("-n", namespace, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")

    def __exit__(self, *exc: object) -> None:
        for namespace in self._made:
            _ip("netns", "del", namespace, check=False)  # its veth end goes with it
        self._made.clear()
        _ip("link", "del", self.bridge, check=False)

    # -- faults --------------------------------------------------------------------------

    def cut(self, a: str, b: str, *, one_way: bool = False) -> None:
        """Drop what ``a`` sends to ``b`` (and, unless ``one_way``, what ``b`` sends to
        ``a``)."""
        for source, target in [(a, b)] if one_way else [(a, b), (b, a)]:
            if (source, target) not in self.cuts:
                route = ("route", "add", "blackhole", f"{self.address(target)}/32")
                _ip("-n", self.namespace(source), *route)
                self.cuts.add((source, target))

    def split(self, side: Iterable[str]) -> None:
        """A partition in two: ``side`` and the other hosts no longer reach each other."""
        one = set(side)
        for a, b in itertools.product(sorted(one), sorted(set(self.names) - one)):
            self.cut(a, b)

    def heal(self) -> None:
        """Remove every cut."""
        for source, target in sorted(self.cuts):
            route = ("route", "del", "blackhole", f"{self.address(target)}/32")
            _ip("-n", self.namespace(source), *route, check=False)
        self.cuts.clear()

    def slow(self, name: str, *, rate_kbit: int) -> None:
        """Throttle what ``name`` sends to ``rate_kbit`` (a token bucket: Linux's netem,
        for delay and loss, is not in every kernel; this one is)."""
        bucket = ["tbf", "rate", f"{rate_kbit}kbit", "burst", "16kbit", "latency", "200ms"]
        subprocess.run(
            ["tc", "-n", self.namespace(name), "qdisc", "replace", "dev", "eth0", "root", *bucket],
            capture_output=True, text=True, check=True,
        )  # fmt: skip

    def unslow(self, name: str) -> None:
        """Undo :meth:`slow`."""
        subprocess.run(
            ["tc", "-n", self.namespace(name), "qdisc", "del", "dev", "eth0", "root"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    def lose(self, name: str, *, percent: int) -> None:
        """Drop ``percent`` % of the packets ``name`` sends, each at random: a lossy link
        (nftables' random numbers; Linux's netem, which also loses packets, is not in
        every kernel, and is not in this one)."""
        rules = (
            f"table inet {_LOSS} {{\n  chain out {{\n"
            "    type filter hook output priority 0;\n"
            f"    numgen random mod 100 < {percent} drop\n  }}\n}}\n"
        )
        subprocess.run(
            [*self.prefix(name), "nft", "-f", "-"], input=rules, capture_output=True,
            text=True, check=True,
        )  # fmt: skip

    def unlose(self, name: str) -> None:
        """Undo :meth:`lose`."""
        subprocess.run(
            [*self.prefix(name), "nft", "delete", "table", "inet", _LOSS],
            capture_output=True, text=True, check=False,
        )  # fmt: skip


_LOSS = "millrace_loss"
"""The nftables table of a host's lossy link."""
