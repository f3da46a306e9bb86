"""A test host's own wall clock (a fake, named as such: libfaketime, the usual tool,
stalls Python's timed waits on this machine, ``docs/faults.md``).

On ``PYTHONPATH`` ahead of everything else, Python runs this at start-up: with
``MILLRACE_TEST_CLOCK_FILE`` naming a file that holds a number of milliseconds,
``time.time`` and ``time.time_ns`` read the system clock plus that offset, as a host
whose clock is off by that much would. The file is read again at most every
:data:`REREAD_NS`, so writing a new offset into it makes the host's clock jump (forward
or back, as NTP stepping a clock or an operator setting it would). The
monotonic clocks are left alone (they are per host anyway and never compared across
hosts). C code reads the system clock itself, so gRPC's Python modules, which turn
timeouts into deadlines on C's clock with ``time.time``, keep the system clock: on a
real host the two would agree.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import sys
import time
import types
from typing import Any

_CLOCK_FILE = os.environ.get("MILLRACE_TEST_CLOCK_FILE")
REREAD_NS = 50_000_000
"""How often, at most, the clock file is read again (by the monotonic clock)."""


class _SystemTime(types.ModuleType):
    """The ``time`` module with the system's wall clock, for gRPC's modules."""

    def __init__(self, system_time: Any, system_time_ns: Any) -> None:
        super().__init__("time")
        self.time = system_time
        self.time_ns = system_time_ns

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _GrpcOnSystemTime(importlib.abc.MetaPathFinder):
    """Gives each ``grpc`` module, once loaded, the system's wall clock."""

    def __init__(self, system: _SystemTime) -> None:
        self._system = system

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "grpc" and not name.startswith("grpc."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, system = spec.loader, self._system
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            if getattr(module, "time", None) is time:
                module.time = system  # type: ignore[attr-defined]

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _Offset:
    """The clock file's offset in ns, read again once :data:`REREAD_NS` has passed."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._read_at = time.monotonic_ns()
        self.ns = self._read()

    def _read(self) -> int:
        with open(self._path) as file:
            return int(file.read().strip() or 0) * 1_000_000

    def now(self) -> int:
        at = time.monotonic_ns()
        if at - self._read_at >= REREAD_NS:
            self._read_at = at
            with contextlib.suppress(OSError, ValueError):  # keep the last offset
                self.ns = self._read()
        return self.ns


if _CLOCK_FILE:
    _system_time, _system_time_ns = time.time, time.time_ns
    _offset = _Offset(_CLOCK_FILE)

    def _time_ns() -> int:
        return _system_time_ns() + _offset.now()

    def _time() -> float:
        return _time_ns() / 1e9

    sys.meta_path.insert(0, _GrpcOnSystemTime(_SystemTime(_system_time, _system_time_ns)))
    time.time_ns = _time_ns
    time.time = _time
