"""SQL expressions compiled to Python functions over a row (a dict of JSON values).

An expression is turned into Python source once (at plan time, to check it; on the
node, when the computation is set up) from sqlglot's tree, node by node from a fixed
set of operators and functions (anything else is a :class:`SqlError` naming it), and
compiled with ``compile``: one Python call per row, not a tree walked per row. Column
names and literals enter the source only through ``repr``; nothing of the SQL text is
evaluated as Python.

A column reads ``r.get(name)`` (a missing field is NULL); the table's time column reads
the record's event time ``t``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from millrace.streamsql import _functions
from millrace.streamsql._dialect import Flink
from millrace.streamsql._errors import SqlError

INTERVAL_MS = {
    "MILLISECOND": 1,
    "SECOND": 1_000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
}

Row = dict[str, Any]
RowFunction = Callable[[Row, int], Row | None]

_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "add",
    exp.Sub: "sub",
    exp.Mul: "mul",
    exp.Div: "div",
    exp.Mod: "mod",
    exp.EQ: "eq",
    exp.NEQ: "ne",
    exp.LT: "lt",
    exp.LTE: "le",
    exp.GT: "gt",
    exp.GTE: "ge",
    exp.Pow: "power",
}
_UNARY_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Upper: "upper",
    exp.Lower: "lower",
    exp.Length: "char_length",
    exp.Abs: "abs_",
    exp.Floor: "floor",
    exp.Ceil: "ceil",
}
_ANONYMOUS = {"CHAR_LENGTH": "char_length", "CHARACTER_LENGTH": "char_length", "NULLIF": "nullif"}

FUNCTIONS = (
    "ABS, CASE, CAST, CEIL, CHAR_LENGTH, COALESCE, CONCAT (||), FLOOR, IF, LOWER, MOD, "
    "NULLIF, POWER, ROUND, SUBSTRING, TRIM, UPPER"
)
"""The functions expressions may call (and the operators: arithmetic, comparisons, AND,
OR, NOT, BETWEEN, IN (...), LIKE, IS [NOT] NULL)."""

TYPE_KINDS = {
    **dict.fromkeys(("BIGINT", "INT", "SMALLINT", "TINYINT", "UBIGINT", "UINT"), "int"),
    **dict.fromkeys(("DOUBLE", "FLOAT", "DECIMAL", "BIGDECIMAL"), "float"),
    **dict.fromkeys(("VARCHAR", "TEXT", "CHAR", "NCHAR", "NVARCHAR"), "string"),
    "BOOLEAN": "bool",
    **dict.fromkeys(("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMPLTZ", "DATETIME"), "int"),
}
"""SQL types and the JSON kind a value of them is: timestamps are epoch milliseconds."""


def type_kind(data_type: exp.DataType) -> str:
    """The kind (``int``, ``float``, ``string``, ``bool``) of a SQL type."""
    name = data_type.this.name if hasattr(data_type.this, "name") else str(data_type.this)
    if name not in TYPE_KINDS:
        raise SqlError(f"type {data_type.sql(dialect=Flink)} is not supported: use one of "
                       "BIGINT, INT, DOUBLE, DECIMAL, VARCHAR, BOOLEAN, TIMESTAMP(3)")  # fmt: skip
    return TYPE_KINDS[name]


def interval_ms(node: exp.Expr) -> int:
    """``INTERVAL '10' SECOND`` in milliseconds."""
    if not isinstance(node, exp.Interval):
        raise SqlError(
            f"expected an interval (INTERVAL '10' SECOND), got {node.sql(dialect=Flink)}"
        )
    unit = (node.unit.name if node.unit is not None else "").upper().rstrip("S")
    if unit not in INTERVAL_MS:
        raise SqlError(f"{node.sql(dialect=Flink)}: interval units are {', '.join(INTERVAL_MS)}")
    try:
        amount = float(node.this.name)
    except ValueError:
        raise SqlError(f"{node.sql(dialect=Flink)}: not a number of {unit.lower()}s") from None
    ms = amount * INTERVAL_MS[unit]
    if ms != int(ms):
        raise SqlError(f"{node.sql(dialect=Flink)} is not a whole number of milliseconds")
    return int(ms)


_DURATION_UNITS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}


def flink_duration_ms(text: str) -> int:
    """A duration as Flink's options write it (``'1 d'``, ``'90 s'``, ``'500ms'``,
    ``'3600000'``: milliseconds) in milliseconds."""
    found = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = found.group(2).lower() if found else ""
    if found is None or (unit and unit not in _DURATION_UNITS):
        raise SqlError(f"duration {text!r}: a number and a unit (ms, s, min, h, d)")
    ms = int(found.group(1)) * _DURATION_UNITS.get(unit, 1)
    if ms <= 0:
        raise SqlError(f"duration {text!r} must be positive")
    return ms


def parse_expression(text: str) -> exp.Expr:
    """One SQL expression (as a computation's ``params`` hold it)."""
    try:
        return sqlglot.parse_one(text, read=Flink, into=exp.Condition)
    except sqlglot.errors.ParseError as exc:
        raise SqlError(f"cannot parse expression {text!r}: {exc}") from None
    except RecursionError:
        raise SqlError(TOO_DEEP) from None


TOO_DEEP = "the SQL nests too deeply (an expression of hundreds of levels): split it"


def sql_text(node: exp.Expr) -> str:
    """The expression written back as SQL (how plans and params show it)."""
    return str(node.sql(dialect=Flink))


class _Codegen:
    """Python source for expressions over ``r`` (the row) and ``t`` (event time)."""

    def __init__(
        self, time_column: str | None, sides: Mapping[str, str | None] | None = None
    ) -> None:
        """``sides``: for a join's pair, each side's qualifier (``$l``, ``$r``) and its
        time column: its columns read ``A.get`` / ``B.get``, its time ``ta`` / ``tb``."""
        self.time_column = time_column
        self.sides = sides or {}
        self._temps = 0

    def temp(self) -> str:
        self._temps += 1
        return f"_v{self._temps}"

    def of(self, node: exp.Expr) -> str:
        if isinstance(node, exp.Paren):
            return self.of(node.this)
        if isinstance(node, exp.Column):
            if node.table:
                if node.table not in self.sides:
                    raise SqlError(f"column {sql_text(node)} is qualified: unexpected here")
                side = "AB"[list(self.sides).index(node.table)]
                if node.name == self.sides[node.table]:
                    return f"t{side.lower()}"
                return f"{side}.get({node.name!r})"
            if node.name == self.time_column:
                return "t"
            return f"r.get({node.name!r})"
        if isinstance(node, exp.Literal):
            if node.is_string:
                return repr(node.name)
            return repr(_number_literal(node.name))
        if isinstance(node, exp.Null):
            return "None"
        if isinstance(node, exp.Boolean):
            return repr(bool(node.this))
        if isinstance(node, exp.Interval):
            return repr(interval_ms(node))
        if isinstance(node, exp.Neg):
            return f"F.neg({self.of(node.this)})"
        if type(node) in _BINARY:
            return f"F.{_BINARY[type(node)]}({self.of(node.this)}, {self.of(node.expression)})"
        if isinstance(node, exp.IntDiv):
            left, right = self.of(node.this), self.of(node.expression)
            return f"F.div(F.cast({left}, 'int'), F.cast({right}, 'int'))"
        if isinstance(node, exp.And):
            a = self.temp()
            return (f"(False if ({a} := F.truth({self.of(node.this)})) is False "
                    f"else F.and_rest({a}, F.truth({self.of(node.expression)})))")  # fmt: skip
        if isinstance(node, exp.Or):
            a = self.temp()
            return (f"(True if ({a} := F.truth({self.of(node.this)})) is True "
                    f"else F.or_rest({a}, F.truth({self.of(node.expression)})))")  # fmt: skip
        if isinstance(node, exp.Not):
            if isinstance(node.this, exp.Is):
                return f"({self.of(node.this.this)} is not None)"
            return f"F.not_({self.of(node.this)})"
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise SqlError(f"{sql_text(node)}: only IS [NOT] NULL is supported")
            return f"({self.of(node.this)} is None)"
        if isinstance(node, exp.Between):
            return (f"F.between({self.of(node.this)}, {self.of(node.args['low'])}, "
                    f"{self.of(node.args['high'])})")  # fmt: skip
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise SqlError(f"{sql_text(node)}: IN (SELECT ...) is not supported")
            values = ", ".join(self.of(v) for v in node.expressions)
            return f"F.in_({self.of(node.this)}, [{values}])"
        if isinstance(node, exp.Like):
            return f"F.like({self.of(node.this)}, {self.of(node.expression)})"
        if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
            like = node.this
            return (f"F.like({self.of(like.this)}, {self.of(like.expression)}, "
                    f"{self.of(node.expression)})")  # fmt: skip
        return self._call(node)

    def _call(self, node: exp.Expr) -> str:
        """A function call (and CASE, CAST, ||)."""
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            return (f"({self.of(node.args['true'])} if F.truth({self.of(node.this)}) "
                    f"else {self.of(node.args.get('false') or exp.Null())})")  # fmt: skip
        if isinstance(node, exp.Cast | exp.TryCast):
            return f"F.cast({self.of(node.this)}, {type_kind(node.to)!r})"
        if isinstance(node, exp.DPipe | exp.Concat):
            parts = (
                [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
            )
            return f"F.concat({', '.join(self.of(p) for p in parts)})"
        if isinstance(node, exp.Coalesce):
            parts = [node.this, *node.expressions]
            return f"F.coalesce({', '.join(self.of(p) for p in parts)})"
        if type(node) in _UNARY_FUNCTIONS:
            return f"F.{_UNARY_FUNCTIONS[type(node)]}({self.of(node.this)})"
        if isinstance(node, exp.Trim):
            if node.args.get("position") or node.expression is not None:
                raise SqlError(f"{sql_text(node)}: only TRIM(s) is supported")
            return f"F.trim({self.of(node.this)})"
        if isinstance(node, exp.Round):
            digits = node.args.get("decimals")
            return f"F.round_({self.of(node.this)}, {self.of(digits) if digits else '0'})"
        if isinstance(node, exp.Substring):
            length = node.args.get("length")
            return (f"F.substring({self.of(node.this)}, {self.of(node.args['start'])}, "
                    f"{self.of(length) if length is not None else '-1'})")  # fmt: skip
        if isinstance(node, exp.Anonymous) and node.name.upper() in _ANONYMOUS:
            args = ", ".join(self.of(a) for a in node.expressions)
            return f"F.{_ANONYMOUS[node.name.upper()]}({args})"
        if isinstance(node, exp.AggFunc):
            raise SqlError(f"{sql_text(node)}: an aggregate is not allowed here")
        raise SqlError(f"{sql_text(node)}: {_what(node)} is not supported in expressions "
                       f"(functions: {FUNCTIONS})")  # fmt: skip

    def _case(self, node: exp.Case) -> str:
        subject = node.this
        source = self.of(node.args.get("default") or exp.Null())
        for branch in reversed(node.args.get("ifs") or []):
            condition = (
                f"F.truth({self.of(branch.this)})"
                if subject is None
                else f"F.eq({self.of(subject)}, {self.of(branch.this)})"
            )
            source = f"({self.of(branch.args['true'])} if {condition} else {source})"
        return source


def _what(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return f"function {node.name.upper()}"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name()}"
    return type(node).__name__


def _number_literal(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def compile_row_function(
    columns: Sequence[tuple[str, str]],
    *,
    where: str | None = None,
    time_column: str | None = None,
) -> RowFunction:
    """``f(r, t)``: the row ``{name: value}`` of ``columns`` (SQL text each) for input
    row ``r`` with event time ``t``, or None when ``where`` is not TRUE."""
    codegen = _Codegen(time_column)
    body = ["def row_function(r, t):", *_row_body(codegen, columns, where)]
    return _compiled("\n".join(body), "row_function")  # type: ignore[no-any-return]


def _row_body(
    codegen: _Codegen, columns: Sequence[tuple[str, str]], where: str | None
) -> list[str]:
    """A row function's body: None unless ``where`` is TRUE, else the row of ``columns``."""
    body = []
    if where is not None:
        body.append(f"    if F.truth({codegen.of(parse_expression(where))}) is not True:")
        body.append("        return None")
    items = ", ".join(f"{name!r}: {codegen.of(parse_expression(text))}" for name, text in columns)
    body.append(f"    return {{{items}}}")
    return body


SIDES = ("$l", "$r")
"""The qualifiers of a join pair's columns: the left and the right record's."""


def compile_pair_function(
    columns: Sequence[tuple[str, str]],
    *,
    where: str | None = None,
    left_time: str | None = None,
    right_time: str | None = None,
) -> Callable[[Row | None, Row | None, int | None, int | None], Row | None]:
    """``f(a, b, ta, tb)``: the row of ``columns`` for a join's pair (rows ``a`` and
    ``b``, either None when unmatched, and their event times), or None when ``where``
    is not TRUE; columns are qualified ``$l`` (of ``a``) or ``$r`` (of ``b``)."""
    codegen = _Codegen(None, dict(zip(SIDES, (left_time, right_time), strict=True)))
    body = [
        "def pair_function(a, b, ta, tb):",
        "    A = a if a is not None else EMPTY",
        "    B = b if b is not None else EMPTY",
        *_row_body(codegen, columns, where),
    ]
    return _compiled("\n".join(body), "pair_function")  # type: ignore[no-any-return]


def compile_values(
    expressions: Sequence[str], *, time_column: str | None = None
) -> Callable[[Row, int], list[Any]]:
    """``f(r, t)``: the list of the expressions' values."""
    codegen = _Codegen(time_column)
    items = ", ".join(codegen.of(parse_expression(text)) for text in expressions)
    return _compiled(f"def values(r, t):\n    return [{items}]", "values")  # type: ignore[no-any-return]


def _compiled(source: str, name: str) -> Any:
    namespace: dict[str, Any] = {"F": _functions, "EMPTY": {}}
    try:
        code = compile(source, f"<sql {name}>", "exec")
    except (RecursionError, MemoryError, SyntaxError):  # nesting beyond Python's parser
        raise SqlError(TOO_DEEP) from None
    exec(code, namespace)
    return namespace[name]


def kind_of(node: exp.Expr, kinds: Mapping[str, str | None]) -> str | None:
    """The kind of an expression's values (``int``, ``float``, ``string``, ``bool``),
    or None when it cannot be told (``kinds``: of the columns)."""
    if isinstance(node, exp.Paren):
        return kind_of(node.this, kinds)
    if isinstance(node, exp.Column):
        return kinds.get(f"{node.table}.{node.name}" if node.table else node.name)
    if isinstance(node, exp.Literal):
        return "string" if node.is_string else type(_number_literal(node.name)).__name__
    if isinstance(node, exp.Interval):
        return "int"
    if isinstance(node, exp.Cast | exp.TryCast):
        return type_kind(node.to)
    if isinstance(node, exp.Predicate | exp.And | exp.Or | exp.Not | exp.Is | exp.Between):
        return "bool"
    if isinstance(node, exp.DPipe | exp.Concat | exp.Upper | exp.Lower | exp.Trim | exp.Substring):
        return "string"
    if isinstance(node, exp.Length):
        return "int"
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.Div):
        left, right = kind_of(node.this, kinds), kind_of(node.expression, kinds)
        if left == right == "int":
            return "int"
        return "float" if {left, right} <= {"int", "float"} else None
    if isinstance(node, exp.Neg | exp.Abs):
        return kind_of(node.this, kinds)
    return None
