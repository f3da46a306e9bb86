"""``EXPLAIN``: a plan's computations, what they read and write, their keys, state and
timers, in the order records flow through them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.streamsql._stages import (
    JOIN_HANDLER,
    OVER_HANDLER,
    RANKING_HANDLER,
    SELECT_HANDLER,
    TEMPORAL_HANDLER,
    WINDOW_HANDLER,
)


def explain(topology: Mapping[str, Any], sinks: list[str]) -> str:
    """The plan of ``topology`` as text (``sinks``: the streams the queries write)."""
    lines: list[str] = []
    computations = topology["computations"]
    written = {o for spec in computations.values() for o in spec["outputs"]}
    sources = [s for s in topology["streams"] if s not in written]
    lines.append(f"sources: {', '.join(sources) or '-'}")
    lines.append(f"sinks:   {', '.join(dict.fromkeys(sinks)) or '-'}")
    for name, spec in computations.items():
        lines.append("")
        lines.extend(_computation(name, spec))
    return "\n".join(lines) + "\n"


def _computation(name: str, spec: Mapping[str, Any]) -> list[str]:
    params = spec["params"]
    handler = spec["handler"]
    short = handler.rpartition(":")[2]
    reads = ", ".join(f"{s} keyed by {_extractor(e)}" for s, e in spec["inputs"].items())
    lines = [f"{name}: {short} ({spec['intervals']} interval(s))", f"  reads:   {reads}"]
    if handler == SELECT_HANDLER:
        if "where" in params:
            lines.append(f"  where:   {params['where']}")
        lines.append(f"  {'values' if params.get('shape') == 'values' else 'columns'}: "
                     + ", ".join(f"{n} = {e}" for n, e in params["columns"]))  # fmt: skip
        key = ", ".join(params.get("key", [])) or "the input's key"
        lines.append(f"  writes:  {params['output']}, keyed by {key}")
        lines.append("  state:   none; timers: none")
    elif handler == WINDOW_HANDLER:
        if params.get("updating"):
            lines.append("  window:  none (a GROUP BY without one): a row per input row, "
                         "updating the group's ($op: +I, -U, +U)")  # fmt: skip
        else:
            lines.append(f"  window:  {params['window']} (event time)")
        if params.get("changelog_input"):
            lines.append("  input:   an updating stream: its -U rows are taken back")
        if "aggregates" in params:
            arguments = params.get("arguments") or ["(the input's values)"] * len(
                params["aggregates"]
            )
            aggregates = ", ".join(
                f"{k}({a})" for k, a in zip(params["aggregates"], arguments, strict=False)
            )
            lines.append(f"  aggregates: {aggregates} (SQL's, per record)")
        else:
            field = params.get("field")
            of = "" if field is None else f" of {field}"
            lines.append(f"  aggregates: {params['aggregate']}{of} (built-in, folded per batch)")
        lines.append("  rows:    " + ", ".join(f"{n} = {e}" for n, e in params["columns"]))
        if "having" in params:
            lines.append(f"  having:  {params['having']}")
        key = ", ".join(params.get("output_key", [])) or "the group"
        lines.append(f"  writes:  {params['output']}, keyed by {key}")
        merging = params["window"].startswith("session")
        lines.append("  state:   one accumulator per key and window (w:START/END)"
                     + ("; the key's live sessions" if merging else ""))  # fmt: skip
        if not params.get("updating"):
            lines.append("  timers:  one per key and window at its end - 1 (event time), "
                         "firing its row once the watermark passes it")  # fmt: skip
    elif handler == JOIN_HANDLER:
        lines.extend(_join(params))
    elif handler == OVER_HANDLER:
        lines.extend(_over(params))
    elif handler == RANKING_HANDLER:
        lines.extend(_ranking(params))
    elif handler == TEMPORAL_HANDLER:
        lines.append(f"  join:    {params['how']} temporal join of {params['stream']} ($l) with "
                     f"the changelog table {params['table']} ($r, {params['changelog']}) as of "
                     "each record's event time")  # fmt: skip
        if "condition" in params:
            lines.append(f"  where:   {params['condition']}")
        lines.append("  rows:    " + ", ".join(f"{n} = {e}" for n, e in params["columns"]))
        lines.append(f"  writes:  {params['output']}, keyed by the join's key")
        lines.append("  state:   per key, the table's versions back to the watermark, and the "
                     "records waiting for it")  # fmt: skip
        lines.append("  timers:  one per waiting record's time (event time)")
    return lines


def _join(params: Mapping[str, Any]) -> list[str]:
    lower, upper = params["lower_ms"], params["upper_ms"]
    kind = "window join" if lower == upper == 0 else "interval join"
    lines = [
        f"  join:    {params['how']} {kind} of {params['left']} ($l) and {params['right']} "
        f"($r) on their keys, {lower} ms <= $r.t - $l.t <= {upper} ms"
    ]
    if "condition" in params:
        lines.append(f"  where:   {params['condition']}")
    lines.append("  rows:    " + ", ".join(f"{n} = {e}" for n, e in params["columns"]))
    key = ", ".join(params.get("output_key", [])) or "the join's key"
    lines.append(f"  writes:  {params['output']}, keyed by {key}")
    lines.append("  state:   each record, per key and event time, until no partner can "
                 f"come (the watermark {upper} ms past a left one, {-lower} ms past a "
                 "right one)")  # fmt: skip
    lines.append("  timers:  one per kept record's expiry (event time)")
    return lines


def _ranking(params: Mapping[str, Any]) -> list[str]:
    [order] = params["order"]
    direction = "DESC" if params.get("descending") else "ASC"
    n = params["top_n"]
    return [
        f"  ranks:   the {n} best rows of each partition (the record's key) by {order} "
        f"{direction}, in $rownum",
        f"  writes:  {params['output']}, keyed by the partition: an updating result (-D a "
        "row's old rank taken back, +I its new one)",
        f"  state:   per partition, its {n} best rows; timers: none",
    ]


def _over(params: Mapping[str, Any]) -> list[str]:
    [(unit, extent)] = params["frame"].items()
    frame = (
        f"{'ROWS' if unit == 'rows' else 'RANGE'} "
        + ("UNBOUNDED" if extent is None else f"{extent}{' ms' if unit == 'range_ms' else ''}")
        + " PRECEDING AND CURRENT ROW"
    )
    [order] = params["order"]
    aggregates = ", ".join(
        f"{k}({a})" for k, a in zip(params["aggregates"], params["arguments"], strict=True)
    )
    lines = [f"  over:    {aggregates} over each row's frame: {frame}, ORDER BY {order}, "
             "partitioned by the record's key"]  # fmt: skip
    if "where" in params:
        lines.append(f"  where:   {params['where']}")
    lines.append("  rows:    " + ", ".join(f"{n} = {e}" for n, e in params["columns"]))
    key = ", ".join(params.get("output_key", [])) or "the partition"
    lines.append(f"  writes:  {params['output']}, keyed by {key}")
    if params.get("changelog_input"):
        lines.append("  input:   an updating stream: each change takes back the rows whose "
                     "frames it changes (-D) and writes them anew (+I)")  # fmt: skip
        lines.append("  state:   per partition, its rows in order (one value); timers: none")
    else:
        lines.append("  state:   per partition, the rows waiting for the watermark (one per "
                     "time and row) and what later frames can reach")  # fmt: skip
        lines.append("  timers:  one per partition and row time (event time), writing its "
                     "rows once the watermark passes it")  # fmt: skip
    return lines


def _extractor(spec: str) -> str:
    if spec == "key":
        return "the record's key"
    if spec.startswith("json:"):
        return spec[5:]
    if spec.endswith(":no_key"):
        return "nothing (one group)"
    return spec
