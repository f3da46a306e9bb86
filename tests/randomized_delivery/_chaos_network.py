"""The chaotic network of the randomized delivery test, and the two stages it connects."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from millrace.computations import MIN_TIME, IntervalId
from millrace.engine import (
    SINK_PREFIX,
    ComputationWatermark,
    IntervalDriver,
    IntervalProcessor,
    LocalNetwork,
    Production,
    compute_watermarks,
    frames_of,
    receive,
    routes_of,
    source_productions,
)
from millrace.statestore import StateStore
from millrace.wire.v1 import delivery_pb2, record_pb2
from tests.randomized_delivery._setup import (
    ACK_LOSS_P,
    DUPLICATE_P,
    GROUP_P,
    PARTIAL_P,
    SINK,
    SOURCE,
    SOURCE_STREAM,
    STAGES,
    STORE_CONFIG,
    TOPOLOGY,
    WEIGHTS,
    Event,
)

# -- the network's messages ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Batch:
    """Productions in flight from one sender incarnation to one destination."""

    sender: str  # "source", "counts" or "totals"
    epoch: int  # the sender's epoch when it sent the batch (0: the source)
    target: str  # "counts", "totals" or "sink"
    productions: tuple[Production, ...]


@dataclass(frozen=True, slots=True)
class Ack:
    """A receiver's acknowledgement of productions, on its way back to their sender."""

    sender: str
    epoch: int
    outbox_keys: tuple[bytes, ...]


Message = Batch | Ack


class Stage:
    """One key interval: its RocksDB store and the driver of its current incarnation
    (the node worker's own :class:`IntervalDriver`)."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self.processor = self._open()
        self.driver = IntervalDriver(self.processor)

    def _open(self) -> IntervalProcessor:
        store = StateStore.open_rocksdb(self.path, config=STORE_CONFIG)
        return IntervalProcessor(
            topology=TOPOLOGY,
            computation=self.name,
            interval=0,
            store=store,
            epoch=store.owner_epoch + 1,  # what a restarting node claims
        )

    @property
    def epoch(self) -> int:
        """The current incarnation's epoch."""
        return self.processor.epoch

    def crash(self) -> None:
        """Lose the processor and everything in memory; reopen from the committed store."""
        self.processor.store.close()
        self.processor = self._open()
        self.driver = IntervalDriver(self.processor)

    def close(self) -> None:
        """Release the store."""
        self.processor.store.close()


class ChaosRun:
    """Two stages, a source and a sink, connected by a network that misbehaves."""

    def __init__(self, seed: int, events: Sequence[Event], root: Path) -> None:
        self.rng = random.Random(seed)
        self.stages = {name: Stage(name, root / name) for name in STAGES}
        self.unfed = [
            record_pb2.Record(
                record_id=rid, key=key, value=b"", event_time_ms=ts, stream=SOURCE_STREAM,
                producer=SOURCE,
            )
            for rid, key, ts in events
        ]  # fmt: skip
        self.fed: list[record_pb2.Record] = []
        self.source_unacked: dict[bytes, Production] = {}
        self.network: list[Message] = []
        self.sink: dict[bytes, bytes] = {}
        self.cap = MIN_TIME
        self.stats: Counter[str] = Counter()
        self.trace: list[str] = []
        self.wire = LocalNetwork()  # encodes the chaotic network's batches as the wire does

    def close(self) -> None:
        """Close both stores."""
        for stage in self.stages.values():
            stage.close()

    def processors(self) -> dict[str, IntervalProcessor]:
        """The current processor of each stage."""
        return {name: stage.processor for name, stage in self.stages.items()}

    # -- phases ---------------------------------------------------------------------

    def chaos(self, cap_ms: int, steps: int) -> None:
        """``steps`` random actions with the source watermark capped at ``cap_ms``; each stage
        crashes at least once."""
        self.cap = max(self.cap, cap_ms)
        forced = {name: self.rng.randrange(steps) for name in STAGES}
        actions: dict[str, Callable[[], bool]] = {
            "feed": self._feed,
            "deliver": self._deliver_random,
            "lose": self._lose,
            "resend": self._resend_random,
            "replay": self._replay,
            "crash": lambda: self._crash(self.rng.choice(STAGES)),
            "watermark": self._watermark_random,
        }
        names, weights = list(WEIGHTS), list(WEIGHTS.values())
        for step in range(steps):
            for name, at in forced.items():
                if at == step:
                    self._crash(name)
            action = self.rng.choices(names, weights)[0]
            if actions[action]():
                self.trace.append(action)

    def settle(self, cap_ms: int, max_rounds: int = 100) -> None:
        """Fault-free rounds at source watermark cap ``cap_ms``: feed the rest, resend what is
        unacked, deliver everything in order, fire due timers; until nothing moves."""
        self.cap = max(self.cap, cap_ms)
        rest = [self._fed_production(r) for r in self.unfed]
        self.fed.extend(self.unfed)
        self.unfed = []
        self.source_unacked.update({p.outbox_key: p for p in rest})
        self._send(SOURCE, 0, rest)
        for _ in range(max_rounds):
            self._send(SOURCE, 0, list(self.source_unacked.values()))
            for stage in self.stages.values():
                self._send(stage.name, stage.epoch, stage.processor.pending_productions())
            while self.network:
                self._deliver(self.network.pop(0), faults=False)
            fired = self._advance(STAGES, limit=None)
            quiet = not self.network and not self.source_unacked and not fired
            if quiet and not any(s.processor.pending_productions() for s in self.stages.values()):
                self.trace.append(f"settled at {cap_ms}")
                return
        raise AssertionError(f"did not settle within {max_rounds} rounds")

    # -- actions (each returns whether it did something) ----------------------------------

    def _feed(self) -> bool:
        if not self.unfed:
            return False
        count = self.rng.randint(1, 6)
        records, self.unfed = self.unfed[:count], self.unfed[count:]
        self.fed.extend(records)
        productions = [self._fed_production(r) for r in records]
        self.source_unacked.update({p.outbox_key: p for p in productions})
        self._send(SOURCE, 0, productions)
        return True

    def _replay(self) -> bool:
        """The source sends already-fed records again, acked or not."""
        if not self.fed:
            return False
        records = self.rng.sample(self.fed, min(len(self.fed), self.rng.randint(1, 5)))
        self._send(SOURCE, 0, [self._fed_production(r) for r in records])
        self.stats["replayed"] += len(records)
        return True

    def _lose(self) -> bool:
        if not self.network:
            return False
        lost = self.network.pop(self.rng.randrange(len(self.network)))
        self.stats["lost_acks" if isinstance(lost, Ack) else "lost_batches"] += 1
        return True

    def _resend_random(self) -> bool:
        """A sender resends everything it has not seen acked (a redelivery)."""
        sender = self.rng.choice((SOURCE, *STAGES))
        if sender == SOURCE:
            productions = list(self.source_unacked.values())
            epoch = 0
        else:
            stage = self.stages[sender]
            productions, epoch = stage.processor.pending_productions(), stage.epoch
        self.rng.shuffle(productions)
        self._send(sender, epoch, productions)
        self.stats["resent"] += len(productions)
        return bool(productions)

    def _crash(self, name: str) -> bool:
        """Crash and restart a stage; the new incarnation resends its outbox (like a node)."""
        stage = self.stages[name]
        stage.crash()
        self.stats[f"crashes_{name}"] += 1
        self.trace.append(f"crash {name} -> epoch {stage.epoch}")
        self._send(name, stage.epoch, stage.processor.pending_productions())
        return True

    def _watermark_random(self) -> bool:
        stages = self.rng.choice([STAGES, ("counts",), ("totals",)])
        limit = self.rng.choice([None, 1, 2, 3])
        self._advance(stages, limit)
        return True

    def _deliver_random(self) -> bool:
        if not self.network:
            return False
        index = self.rng.randrange(len(self.network))
        if index:
            self.stats["reordered"] += 1
        message = self.network[index]
        if self.rng.random() < DUPLICATE_P:
            self.stats["duplicated"] += 1  # it stays in flight and arrives again later
        else:
            del self.network[index]
        self._deliver(message, faults=True)
        return True

    # -- delivery ----------------------------------------------------------------------

    def _deliver(self, message: Message, *, faults: bool) -> None:
        if isinstance(message, Ack):
            self._apply_ack(message)
            return
        batches = [message]
        if faults and len(message.productions) > 1 and self.rng.random() < PARTIAL_P:
            kept = self.rng.sample(
                message.productions, self.rng.randint(1, len(message.productions) - 1)
            )
            rest = tuple(p for p in message.productions if p not in kept)
            batches = [Batch(message.sender, message.epoch, message.target, tuple(kept))]
            self.stats["partial"] += 1
            if self.rng.random() < 0.5:
                self.network.append(Batch(message.sender, message.epoch, message.target, rest))
        if faults and message.target != SINK and self.rng.random() < GROUP_P:
            others = [
                m for m in self.network if isinstance(m, Batch) and m.target == message.target
            ]
            for extra in self.rng.sample(others, min(len(others), 2)):
                self.network.remove(extra)
                batches.append(extra)
                self.stats["group_commits"] += 1
        if message.target == SINK:
            self._sink_receive(batches[0], faults=faults)
        else:
            self._stage_receive(self.stages[message.target], batches, faults=faults)

    def _sink_receive(self, batch: Batch, *, faults: bool) -> None:
        for production in batch.productions:
            record = production.record
            if record.record_id in self.sink:
                self.stats["sink_duplicates"] += 1
            self.sink.setdefault(record.record_id, record.value)
        self._ack(batch, [p.outbox_key for p in batch.productions], faults=faults)

    def _stage_receive(self, stage: Stage, batches: list[Batch], *, faults: bool) -> None:
        """One turn of the stage's real :class:`IntervalDriver` over the batches (in their
        wire encoding), as a node's worker runs it."""
        messages = [
            self.wire.batch_of(
                None if batch.sender == SOURCE else IntervalId(batch.sender, 0),
                batch.epoch,
                frames_of(batch.productions),
            )
            for batch in batches
        ]
        answered, outcome = receive(stage.driver, messages)
        for batch, (message, ack) in zip(batches, answered, strict=True):
            reasons = {rejection.reason for rejection in ack.rejected}
            if delivery_pb2.STALE_SENDER_EPOCH in reasons:
                # Only a dead incarnation may ever be told so.
                live = self.stages[batch.sender].epoch
                assert batch.epoch < live, f"live {batch.sender} (epoch {live}) was fenced"
                self.stats["zombie_batches_rejected"] += 1
                continue
            assert not reasons, ack
            done, _ = message.settle(ack)
            self._ack(batch, done, faults=faults)
        if outcome is None:
            return
        assert not (outcome.rejected or outcome.retry or outcome.dead_lettered), outcome
        self.stats["duplicates_dropped"] += len(outcome.duplicates)
        self._send(stage.name, stage.epoch, outcome.productions)

    def _ack(self, batch: Batch, outbox_keys: list[bytes], *, faults: bool) -> None:
        if faults and self.rng.random() < ACK_LOSS_P:
            self.stats["lost_acks"] += 1
            return
        self.network.append(Ack(batch.sender, batch.epoch, tuple(outbox_keys)))

    def _apply_ack(self, ack: Ack) -> None:
        if ack.sender == SOURCE:
            for key in ack.outbox_keys:
                self.source_unacked.pop(key, None)
            return
        stage = self.stages[ack.sender]
        if ack.epoch != stage.epoch:
            # The stream it was sent on died with that incarnation.
            self.stats["acks_for_dead_incarnation"] += 1
            return
        stage.processor.acknowledge(ack.outbox_keys)

    def _send(self, sender: str, epoch: int, productions: Sequence[Production]) -> None:
        """Put productions on the wire in batches of 1-4 per destination."""
        by_target: dict[str, list[Production]] = {}
        for production in productions:
            consumer = production.consumer
            target = SINK if consumer.startswith(SINK_PREFIX) else consumer
            by_target.setdefault(target, []).append(production)
        for target, items in by_target.items():
            start = 0
            while start < len(items):
                size = self.rng.randint(1, 4)
                chunk = tuple(items[start : start + size])
                self.network.append(Batch(sender, epoch, target, chunk))
                start += size

    def _fed_production(self, record: record_pb2.Record) -> Production:
        [production] = source_productions(routes_of(TOPOLOGY, SOURCE_STREAM), record)
        return production

    # -- watermarks and timers -----------------------------------------------------------

    def _watermarks(self) -> dict[str, ComputationWatermark]:
        """As the authority computes them: the source is held at its oldest record not yet
        acked (fed or not), capped by the phase; each stage holds its oldest work."""
        pending = [r.event_time_ms for r in self.unfed]
        pending += [p.record.event_time_ms for p in self.source_unacked.values()]
        source = min([self.cap, *pending])
        oldest = {name: stage.processor.oldest_work() for name, stage in self.stages.items()}
        return compute_watermarks(TOPOLOGY, {SOURCE_STREAM: source}, oldest)

    def _advance(self, stages: Sequence[str], limit: int | None) -> int:
        """Advance ``stages``' input watermarks and fire what is due (``limit`` timers per
        commit, and then maybe stop early); returns how many timers fired."""
        marks = self._watermarks()
        fired = 0
        for name in stages:
            stage = self.stages[name]
            if marks[name].input_ms > MIN_TIME:
                stage.processor.advance_watermark(marks[name].input_ms)
            while True:
                outcome = stage.processor.fire_timers(limit or 1000)
                assert not outcome.dead_lettered, outcome
                fired += outcome.timers_fired
                self._send(name, stage.epoch, outcome.productions)
                if not outcome.timers_fired:
                    break
                if limit is not None and self.rng.random() < 0.5:
                    self.stats["timer_fires_cut_short"] += 1
                    break
        self.stats["timers_fired"] += fired
        return fired
