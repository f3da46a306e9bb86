"""A hot auction: the library against hand-written computations, in the same run.

The workload of Nexmark q4's first step with bids clustered on one hot auction
(``--hot`` of them, the hot auction open for the whole run; the others open 2-20 s):
the highest bid of each auction among the bids made before it expires. Three
topologies compute it, every stage through the node's engine over RocksDB (each
interval run as a backfill runs it: ``spark_jobs.batch.run_interval``, batches of
2,000, a perfect watermark), and their results are checked equal:

- *library*: ``IntervalJoin`` (auctions with their bids, the bound read from the
  auction's ``expires``, ``left_unique``: an auction's id is its key, so a bid that
  meets its auction is not kept; ``select`` makes the offer from the two values,
  parsed by the library: ``select_values``) and
  ``WindowedAggregation`` (a window read from the record, ``max_by:price``);
- *library, general*: the same without ``left_unique`` and with a ``Map`` stage
  making the offer from the joined pair (every bid kept until its expiry);
- *hand-written*: a join keeping the auction in state and passing on each bid in its
  lifetime, then a maximum per auction emitted by a timer at ``expires``.

Prints us of CPU per bid for each (median of ``--runs``, interleaved) and the ratio:
the process's CPU, and its main thread's alone (the computations' own work, without
RocksDB's background flushes, which follow the bytes each writes).

    python bench/hot_auction_bench.py [--bids 100000] [--hot 0.5] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from millrace.computations import (  # noqa: E402
    JSON,
    MAX_TIME,
    Computation,
    Context,
    FiredTimer,
    Record,
    Topology,
)
from millrace.engine import IntervalProcessor, Production, routes_of, source_productions  # noqa: E402
from millrace.spark_jobs.batch import stage_order  # noqa: E402
from millrace.statestore import StateStore, StoreConfig  # noqa: E402
from millrace.wire.v1 import record_pb2  # noqa: E402

T0 = 1_700_000_000_000
HOUR_MS = 3_600_000
M = "bench.hot_auction_bench"


class HandJoin(Computation):
    """Keyed by auction: the auction in state; each bid in its lifetime goes on as an
    offer (bids that come before their auction wait in state)."""

    def process_record(self, ctx: Context, record: Record) -> None:
        body = json.loads(record.value)
        if record.stream == "auctions":
            ctx.put_state("a", body, JSON)
            for tag, bid in ctx.scan_state("b/", JSON):
                self._offer(ctx, body, bid, bid["dateTime"])
                ctx.delete_state(tag)
            return
        auction = ctx.get_state("a", JSON)
        if auction is None:
            ctx.put_state(f"b/{record.event_time_ms:016x}/{record.record_id.hex()}", body, JSON)
        else:
            self._offer(ctx, auction, body, record.event_time_ms)

    def _offer(self, ctx: Context, auction: dict[str, Any], bid: dict[str, Any], t: int) -> None:
        if auction["dateTime"] <= t <= auction["expires"]:
            offer = {"price": bid["price"], "expires": auction["expires"]}
            ctx.produce("offers", ctx.key, json.dumps(offer).encode(), t)


class HandMax(Computation):
    """Keyed by auction: the highest price so far; a timer at ``expires`` emits it."""

    def process_record(self, ctx: Context, record: Record) -> None:
        offer = json.loads(record.value)
        best = ctx.get_state("max", JSON)
        if best is None:
            ctx.set_timer("close", offer["expires"])
        if best is None or offer["price"] > best:
            ctx.put_state("max", offer["price"], JSON)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        ctx.produce("winners", ctx.key, json.dumps(ctx.get_state("max", JSON)).encode(),
                    timer.time_ms)  # fmt: skip
        ctx.delete_state("max")


def offer(record: Record) -> dict[str, Any]:
    """The library's ``Map``: the joined pair as an offer with its auction's window."""
    pair = json.loads(record.value)
    auction, bid = pair["left"]["value"], pair["right"]["value"]
    return {"price": bid["price"], "opened": auction["dateTime"], "closes": auction["expires"] + 1}


def offer_of(auction: dict[str, Any] | None, bid: dict[str, Any] | None) -> dict[str, Any]:
    """The library's join ``select`` of the two values (``select_values``; an inner
    join: both sides are there): the offer with its auction's window, the ``Map``
    folded into the join."""
    assert auction is not None and bid is not None
    return {"price": bid["price"], "opened": auction["dateTime"], "closes": auction["expires"] + 1}


def topologies() -> dict[str, Topology]:
    streams: dict[str, Any] = {
        "streams": {s: {} for s in ("auctions", "bids", "pairs", "offers", "winners")}
    }
    inputs = {"auctions": "json:id", "bids": "json:auction"}
    library = {
        "join": {"handler": "millrace.dataflow:IntervalJoin", "inputs": inputs,
                 "outputs": ["pairs"],
                 "params": {"left": "auctions", "right": "bids", "lower_ms": 0,
                            "upper_ms": 2 * HOUR_MS, "left_until": "expires",
                            "output": "pairs"}},
        "offers": {"handler": "millrace.dataflow:Map", "inputs": {"pairs": "key"},
                   "outputs": ["offers"],
                   "params": {"fn": f"{M}:offer", "output": "offers"}},
        "winner": {"handler": "millrace.dataflow:WindowedAggregation", "inputs": {"offers": "key"},
                   "outputs": ["winners"],
                   "params": {"window": "field:opened:closes", "aggregate": "max_by:price",
                              "output": "winners"}},
    }  # fmt: skip
    keyed = {
        "join": {"handler": "millrace.dataflow:IntervalJoin", "inputs": inputs,
                 "outputs": ["offers"],
                 "params": {"left": "auctions", "right": "bids", "lower_ms": 0,
                            "upper_ms": 2 * HOUR_MS, "left_until": "expires",
                            "left_unique": True, "select": f"{M}:offer_of",
                            "select_values": True, "output": "offers"}},
        "winner": library["winner"],
    }  # fmt: skip
    hand = {
        "join": {"handler": f"{M}:HandJoin", "inputs": inputs, "outputs": ["offers"]},
        "winner": {"handler": f"{M}:HandMax", "inputs": {"offers": "key"},
                   "outputs": ["winners"]},
    }  # fmt: skip
    return {
        "library": Topology.from_dict({**streams, "computations": keyed}),
        "library, general": Topology.from_dict({**streams, "computations": library}),
        "hand-written": Topology.from_dict({**streams, "computations": hand}),
    }


def workload(bids: int, hot: float, seed: int = 3) -> list[tuple[str, bytes, int]]:
    """``(stream, value, event time)`` in time order: an auction every 50 bids, the hot
    one (id 0) open for the whole run."""
    rng = random.Random(seed)
    events: list[tuple[str, bytes, int]] = []
    t = T0
    opened = [0]
    events.append(
        ("auctions", json.dumps({"id": 0, "dateTime": t, "expires": t + HOUR_MS}).encode(), t)
    )
    for n in range(bids):
        t += rng.randrange(0, 20)
        if n % 50 == 0:
            aid = len(opened)
            opened.append(aid)
            body = {"id": aid, "dateTime": t, "expires": t + rng.randrange(2_000, 20_000)}
            events.append(("auctions", json.dumps(body).encode(), t))
        auction = 0 if rng.random() < hot else rng.choice(opened[-20:])
        bid = {"auction": auction, "price": rng.randrange(100, 10_000), "dateTime": t}
        events.append(("bids", json.dumps(bid).encode(), t))
    return events


Events = list[tuple[str, bytes, int]]


def run(topology: Topology, events: Events, work: Path) -> tuple[float, float, dict[bytes, int]]:
    """CPU seconds of every stage (the process's, and its main thread's alone: the
    computations without RocksDB's background threads), and each auction's winning
    price. Each stage is one
    interval over RocksDB fed as a node is: batches of ``BATCH`` in time order, the
    watermark at each batch's first time, due timers fired between batches."""
    stage_input: list[Production] = []
    for stream, value, t in events:
        record = record_pb2.Record(record_id=len(stage_input).to_bytes(16, "big"), key=b"",
                                   value=value, event_time_ms=t, stream=stream)  # fmt: skip
        stage_input += source_productions(routes_of(topology, stream), record)
    started, started_thread = time.process_time(), time.thread_time()
    made: list[Production] = []
    for computation in stage_order(topology):
        mine = [p.record for p in [*stage_input, *made] if p.consumer == computation]
        mine.sort(key=lambda r: r.event_time_ms)
        made += _stage(topology, computation, mine, work)
    seconds = time.process_time() - started
    thread_seconds = time.thread_time() - started_thread
    winners = {}
    for production in made:
        if production.consumer == "sink:winners":
            value = json.loads(production.record.value)
            price = value["value"][0]["price"] if isinstance(value, dict) else value
            winners[production.record.key] = price
    return seconds, thread_seconds, winners


BATCH = 2_000


def _stage(
    topology: Topology, computation: str, records: list[record_pb2.Record], work: Path
) -> list[Production]:
    store = StateStore.open_rocksdb(work / f"{computation}-{time.monotonic_ns()}",
                                    config=StoreConfig(sync=False))  # fmt: skip
    processor = IntervalProcessor(topology=topology, computation=computation, interval=0,
                                  store=store, epoch=1)  # fmt: skip
    made: list[Production] = []

    def fire(watermark: int) -> None:
        processor.advance_watermark(watermark)
        while (outcome := processor.fire_timers(10_000, durable=False)).timers_fired:
            made.extend(outcome.productions)
            processor.acknowledge(outcome.outbox_keys, flush=False)

    try:
        for at in range(0, len(records), BATCH):
            batch = records[at : at + BATCH]
            fire(batch[0].event_time_ms)
            outcome = processor.process_records(batch, durable=False)
            assert len(outcome.committed) == len(batch), "every record commits"
            made.extend(outcome.productions)
            processor.acknowledge(outcome.outbox_keys, flush=False)
        fire(MAX_TIME)
    finally:
        store.close()
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bids", type=int, default=100_000)
    parser.add_argument("--hot", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    events = workload(args.bids, args.hot)
    work = Path(tempfile.mkdtemp(prefix="hot-auction-"))
    seconds: dict[str, list[float]] = {name: [] for name in topologies()}
    thread: dict[str, list[float]] = {name: [] for name in topologies()}
    results = {}
    for _ in range(args.runs):
        for name, topology in topologies().items():
            spent, spent_thread, results[name] = run(topology, events, work)
            seconds[name].append(spent)
            thread[name].append(spent_thread)
    for name, winners in results.items():
        assert winners == results["hand-written"], f"{name} gives other winners"
    us = {name: statistics.median(s) * 1e6 / args.bids for name, s in seconds.items()}
    us_thread = {name: statistics.median(s) * 1e6 / args.bids for name, s in thread.items()}
    print(f"{args.bids:,} bids, {args.hot:.0%} on one auction open for the whole run; "
          f"{len(results['library']):,} auctions won (equal in all)")  # fmt: skip
    print(f"  {'':<18}{'us/bid':>8}{'main thread':>13}   runs (process CPU)")
    for name, figure in us.items():
        runs = ", ".join(f"{s:.2f} s" for s in seconds[name])
        print(f"  {name:<18}{figure:>8.1f}{us_thread[name]:>13.1f}   {runs}")
    ratio = us["library"] / us["hand-written"]
    ratio_thread = us_thread["library"] / us_thread["hand-written"]
    print(f"RESULT bench=hot_auction bids={args.bids} hot={args.hot} "
          f"library_us_per_bid={us['library']:.1f} hand_us_per_bid={us['hand-written']:.1f} "
          f"library_over_hand={ratio:.2f} "
          f"library_thread_us_per_bid={us_thread['library']:.1f} "
          f"hand_thread_us_per_bid={us_thread['hand-written']:.1f} "
          f"library_over_hand_thread={ratio_thread:.2f} "
          f"general_us_per_bid={us['library, general']:.1f} "
          f"general_over_hand={us['library, general'] / us['hand-written']:.2f} "
          f"runs={args.runs}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
