"""Fixtures that run every contract test against both backends.

``store_factory`` opens a store; calling ``reopen`` on the factory closes the
current store and opens a new one over the same data (a RocksDB directory or
the same :class:`MemoryEngine`), like a process restart after a clean stop.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from millrace.statestore import StateStore, StoreConfig
from millrace.statestore._memory import MemoryEngine
from tests.support import ManualClock


class StoreFactory:
    """Opens and reopens one store of one backend."""

    def __init__(self, backend: str, path: Path) -> None:
        self.backend = backend
        self.path = path
        self.clock = ManualClock(1_700_000_000_000)
        self.engine = MemoryEngine()
        self.config = StoreConfig(sync=True)
        self.current: StateStore | None = None

    def open(self, config: StoreConfig | None = None) -> StateStore:
        if config is not None:
            self.config = config
        if self.backend == "rocksdb":
            self.current = StateStore.open_rocksdb(self.path, config=self.config, clock=self.clock)
        else:
            self.current = StateStore.open_memory(self.engine, config=self.config, clock=self.clock)
        return self.current

    def reopen(self) -> StateStore:
        if self.current is not None:
            self.current.close()
        return self.open()

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


@pytest.fixture(params=["rocksdb", "memory"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    made = StoreFactory(str(request.param), tmp_path / "store")
    yield made
    made.close()


@pytest.fixture
def store(factory: StoreFactory) -> StateStore:
    return factory.open()
