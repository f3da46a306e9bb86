"""The computations the node benchmark runs (imported by node processes as ``bench.workload``).

Stage 1 ``Enrich``: per user, counts records and forwards each one, keyed by page.
Stage 2 ``PageTotals``: per page, sums and forwards each record to the sink.
Every record passes through both stages (two exactly-once hops plus the sink).
"""

from __future__ import annotations

from millrace.computations import Computation, Context, Record


class Enrich(Computation):
    """Stage 1: per-user running count; forwards the record re-keyed by page."""

    def process_record(self, ctx: Context, record: Record) -> None:
        count = int(ctx.get_state("n") or b"0") + 1
        ctx.put_state("n", str(count).encode())
        ctx.produce("by_page", record.value[:8], record.value)


class PageTotals(Computation):
    """Stage 2: per-page running count; forwards the record to the sink."""

    def process_record(self, ctx: Context, record: Record) -> None:
        count = int(ctx.get_state("n") or b"0") + 1
        ctx.put_state("n", str(count).encode())
        ctx.produce("out", ctx.key, record.value)
