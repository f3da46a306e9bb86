"""The native data plane (``native/``: Rust, PyO3): what every layer calls per batch.

The per-record work of the ingest path runs in the ``millrace._native`` extension,
built from ``native/python`` (over the pure crate ``native/core``) by ``make setup``.
This module is its public face, the bottom layer beside :mod:`millrace.wire`: the
injector, the log and ``millrace inject`` import it, never ``millrace._native``.

- :class:`RecordBatch`: records ``(key, value, event_time_ms)`` held natively; built
  from tuples, or decoded from a request without a Python object per record.
- :func:`decode_ingest_request`, :func:`ingest_response`, :func:`ingest_request`: the
  ``Ingest`` wire messages (``proto/millrace/wire/v1/ingest.proto``).
- :func:`encode_log_request`: a request's RECORD and COMMIT entries of the durable log
  (``docs/log-format.md``).
- :func:`json_field_keys`: the ``json:FIELD`` keys of a batch's values whose reading
  is plain; the rest goes to the reference reader in ``computations/_keys.py``.
- :func:`parse_json_lines`: JSON lines whose reading is plain; the rest goes to the
  reference reader in ``injector/json_lines.py``.
- :func:`scan_requests`: the durable log's whole requests (records and COMMIT),
  checked, for recovery, the COMMIT markers and the segment scanners
  (:func:`scan_columns`: their records as int64 columns, for Spark);
  :func:`scan_log` and :class:`LogBatch`: its RECORD entries read and checked a
  stretch at a time, and :meth:`LogBatch.frames`, the forwarder's
  ``DeliveryBatch`` frames per destination interval.
- :class:`AckBook`: what one consumer of a stream was sent and has not acknowledged,
  by log offset: the first such offset and the oldest event time in flight
  (``injector/forwarder.py``).
- :func:`decode_deliveries`: the records of delivered ``DeliveryBatch`` messages as
  columns, and the shape admission takes whole (``engine/_received.py``);
  :func:`columns_shape`, that shape of records already held as columns.
- :class:`BloomHasher`, :class:`BloomPositions`, :class:`BloomBits`: the dedup's
  Bloom filters, hashed and probed a batch of ids at a time (``statestore/_bloom.py``).
- :class:`TimerIndex`: a store's committed timers in time order, and the timer
  column's operations of a commit (``statestore/_timer_index.py``).
- :class:`StateCache`: a store's write-through cache of committed state values,
  looked up, filled and written through a batch at a time (``statestore/store.py``).
- :class:`ProductionPlan`: a computation's productions of one commit (ids, routes,
  ``DeliveryBatch`` frames per destination, each within a byte budget, with the
  outbox keys), from what user
  code emitted per cause (``engine/_routing.py``); :func:`timer_fire_causes`, the
  causes of a round's timer fires (``engine/_production_ids.py``).
- :func:`state_key`, :func:`state_keys`: where a user key's state lives in the state
  column family, one key or a batch (``engine/_scope.py``).
- :func:`fold_groups`: a windowed aggregation's batch grouped by (key, window) with
  each group's count and integer columns, and :func:`fold_window_states`, those
  groups folded into their windows' stored states, and :func:`on_time_panes`, the
  on-time panes of windows whose timers fire; :func:`window_tags`, how the groups'
  windows tag their states and timers (``dataflow/_vectorized.py``).

Each call takes a whole batch and releases the GIL while it works on owned data.
Importing starts nothing (no thread, no runtime): Spark forks its Python workers.
"""

from millrace._native import (
    AckBook,
    BloomBits,
    BloomHasher,
    BloomPositions,
    LogBatch,
    LogEntryError,
    ProductionPlan,
    RecordBatch,
    StateCache,
    TimerIndex,
    UndecodableRequestError,
    columns_shape,
    decode_commit,
    decode_deliveries,
    decode_ingest_request,
    encode_log_request,
    fold_groups,
    fold_window_states,
    ingest_request,
    ingest_response,
    json_field_keys,
    on_time_panes,
    parse_json_lines,
    scan_columns,
    scan_log,
    scan_requests,
    state_key,
    state_keys,
    timer_fire_causes,
    window_tags,
)

__all__ = [
    "AckBook",
    "BloomBits",
    "BloomHasher",
    "BloomPositions",
    "LogBatch",
    "LogEntryError",
    "ProductionPlan",
    "RecordBatch",
    "StateCache",
    "TimerIndex",
    "UndecodableRequestError",
    "columns_shape",
    "decode_commit",
    "decode_deliveries",
    "decode_ingest_request",
    "encode_log_request",
    "fold_groups",
    "fold_window_states",
    "window_tags",
    "ingest_request",
    "ingest_response",
    "json_field_keys",
    "on_time_panes",
    "parse_json_lines",
    "scan_columns",
    "scan_log",
    "scan_requests",
    "state_key",
    "state_keys",
    "timer_fire_causes",
]
