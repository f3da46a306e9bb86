"""Plain operators: map, filter, flat_map, split, union and dedup, as ready computations.

The simple steps of a pipeline, so it need not mix library parts with hand-written
``Computation`` classes. Each is keyed like any computation (by its inputs' key
extractors: that decides which interval runs a record, and for ``Dedup`` what
"the same record" means); outputs keep the record's key and event time unless the
function returns a :class:`~computations.Record` (then its ``key``, ``value`` and
``event_time_ms``).

Declare one in Python by subclassing and writing its function::

    class Parse(Map):
        output = "parsed"

        def map(self, record: Record) -> object:
            return json.loads(record.value)["amount"]

or in a topology, with ``handler = "millrace.dataflow:Map"`` and ``params = { fn =
"myapp.ops:parse", output = "parsed" }`` (a ``module:function`` of one argument,
the record). What a function returns becomes the output's value: ``bytes`` as
they are, a ``str`` as UTF-8, anything else as compact strict JSON.

``Split`` sends each record to the first stream whose predicate holds (``routes =
{ big = "myapp.ops:is_big" }``), else to ``default`` (or nowhere); ``Union`` sends
every record of all its inputs to one stream; ``Dedup`` passes a key's first record
and drops the key's records within ``within_ms`` of its event time (a timer clears
the key's state once the watermark passes that, so it holds one row per recent
key; a duplicate arriving after that passes again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from millrace.computations import JSON, Computation, Context, FiredTimer, Record, import_object
from millrace.dataflow._durations import duration_ms
from millrace.dataflow._outputs import json_output
from millrace.dataflow._settings import check_settings

Emitted = Any
"""What a function returns for one output: a value (bytes, str or JSON), or a Record."""


def load_function(path: object, what: str) -> Callable[..., Any]:
    """``module:function`` from a topology's params."""
    found = import_object(str(path), what=f"{what} {path!r}")
    if not callable(found):
        raise ValueError(f"{what} {path!r} is not a function")
    return found


def _value_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json_output(value)


def emit_result(ctx: Context, stream: str, key: bytes, t: int, result: Emitted) -> None:
    """Produce what a user function returned: a Record as it says, any other value
    with ``key`` and event time ``t``."""
    if isinstance(result, Record):
        ctx.produce(stream, result.key, _value_bytes(result.value), result.event_time_ms)
    else:
        ctx.produce(stream, key, _value_bytes(result), t)


def _emit(ctx: Context, stream: str, record: Record, result: Emitted) -> None:
    emit_result(ctx, stream, record.key, record.event_time_ms, result)


class _Operator(Computation):
    """What every operator shares: its ``output`` stream, set by class or params."""

    setup_at_load = True

    output: str = ""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Take ``output`` (and the operator's own settings) from ``params``."""
        check_settings(self, params, self._settings())
        if "output" in params:
            self.output = str(params["output"])
        if not self.output and self._needs_output():
            raise ValueError(f"{type(self).__name__} needs an output stream (output = ...)")

    def _settings(self) -> set[str]:
        return {"output"}

    def _needs_output(self) -> bool:
        return True


class _FunctionOperator(_Operator):
    """An operator with one user function: a method of a subclass, or ``fn`` in params."""

    _method = ""

    def setup(self, params: Mapping[str, Any]) -> None:
        super().setup(params)
        if "fn" in params:
            setattr(self, self._method, load_function(params["fn"], "fn"))
        elif self._defined_here():
            raise ValueError(
                f"{type(self).__name__} needs its function: override {self._method}() "
                'or give fn = "module:function"'
            )

    def _settings(self) -> set[str]:
        return {"output", "fn"}

    def _defined_here(self) -> bool:
        """Whether the function is still this module's placeholder (not overridden)."""
        owner = next(c for c in type(self).__mro__ if self._method in c.__dict__)
        return owner.__module__ == __name__


class Map(_FunctionOperator):
    """One output per record: what :meth:`map` returns."""

    _method = "map"

    def map(self, record: Record) -> Emitted:
        """The output's value (or a Record) for ``record``."""
        raise NotImplementedError(f"{type(self).__name__}: override map() or give fn")

    def process_record(self, ctx: Context, record: Record) -> None:
        _emit(ctx, self.output, record, self.map(record))


class Filter(_FunctionOperator):
    """The records :meth:`keep` says yes to, unchanged."""

    _method = "keep"

    def keep(self, record: Record) -> bool:
        """Whether ``record`` goes on."""
        raise NotImplementedError(f"{type(self).__name__}: override keep() or give fn")

    def process_record(self, ctx: Context, record: Record) -> None:
        if self.keep(record):
            ctx.produce(self.output, record.key, record.value, record.event_time_ms)


class FlatMap(_FunctionOperator):
    """Zero or more outputs per record: what :meth:`flat_map` yields, in order."""

    _method = "flat_map"

    def flat_map(self, record: Record) -> Iterable[Emitted]:
        """The outputs' values (or Records) for ``record``."""
        raise NotImplementedError(f"{type(self).__name__}: override flat_map() or give fn")

    def process_record(self, ctx: Context, record: Record) -> None:
        for result in self.flat_map(record):
            _emit(ctx, self.output, record, result)


class Split(_Operator):
    """Each record, unchanged, to the first stream whose predicate holds, else to
    ``default`` (None: dropped). ``routes``: stream -> predicate (in order)."""

    routes: Mapping[str, Callable[[Record], bool]] = {}
    default: str | None = None

    def setup(self, params: Mapping[str, Any]) -> None:
        super().setup(params)
        if "routes" in params:
            raw = params["routes"]
            if not isinstance(raw, Mapping):
                raise ValueError('routes must be a table of stream = "module:function"')
            self.routes = {
                str(stream): load_function(path, f"routes.{stream}") for stream, path in raw.items()
            }
        if "default" in params:
            self.default = str(params["default"]) or None
        if not self.routes:
            raise ValueError("Split needs routes (stream = predicate)")

    def _settings(self) -> set[str]:
        return {"routes", "default"}

    def _needs_output(self) -> bool:
        return False

    def process_record(self, ctx: Context, record: Record) -> None:
        for stream, holds in self.routes.items():
            if holds(record):
                ctx.produce(stream, record.key, record.value, record.event_time_ms)
                return
        if self.default is not None:
            ctx.produce(self.default, record.key, record.value, record.event_time_ms)


class Union(_Operator):
    """Every record of every input, unchanged, to ``output``."""

    def process_record(self, ctx: Context, record: Record) -> None:
        ctx.produce(self.output, record.key, record.value, record.event_time_ms)


class Dedup(_Operator):
    """A key's first record, and none of the key's records within ``within_ms`` of its
    event time (either side: a duplicate may arrive out of order). The key is the
    input's key extractor's (``json:id`` dedups by a field). State: the key's first
    time, cleared by a timer once the watermark passes its bound."""

    within_ms: int = 0

    _FIRST = "dedup:first"
    _EXPIRY = "dedup:expiry"

    def setup(self, params: Mapping[str, Any]) -> None:
        super().setup(params)
        self.within_ms = duration_ms(params.get("within_ms", self.within_ms), "within_ms")
        if self.within_ms <= 0:
            raise ValueError("Dedup needs within_ms > 0 (how long a key's duplicates are dropped)")

    def _settings(self) -> set[str]:
        return {"output", "within_ms"}

    def process_record(self, ctx: Context, record: Record) -> None:
        first = ctx.get_state(self._FIRST, JSON)
        if first is not None and abs(record.event_time_ms - first) < self.within_ms:
            return
        ctx.put_state(self._FIRST, record.event_time_ms, JSON)
        ctx.set_timer(self._EXPIRY, record.event_time_ms + self.within_ms - 1)
        ctx.produce(self.output, record.key, record.value, record.event_time_ms)

    def process_timer(self, ctx: Context, timer: FiredTimer) -> None:
        # The timer moves with the key's first time (one tag), so when it fires the
        # bound of the current first has passed.
        ctx.delete_state(self._FIRST)
