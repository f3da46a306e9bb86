"""The tables and views that ``CREATE TABLE`` and ``CREATE VIEW`` declare.

A table is a Millrace stream whose records' values are JSON objects (the rows, one
field per column). ``WITH ('stream' = 'bids')`` names the stream (default: the table's
name); ``'connector' = 'millrace'`` may be said, no other connector exists.
``WATERMARK FOR col AS col - INTERVAL ...`` makes ``col`` the table's event time: the
records' event time (``ts`` of ``millrace inject``), which windows and joins use, and
the source watermark's delay (the injector's ``out_of_orderness_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from millrace.streamsql._dialect import Flink
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import interval_ms, type_kind

TABLE_OPTIONS = ("connector", "stream", "format")
FORMATS = {"json": "upsert", "debezium-json": "debezium"}
"""A table's formats: JSON rows (with a primary key: upserts, ``null`` deleting), or
Debezium's change envelopes (a primary key needed)."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a table: its name, its kind of JSON value, whether NULL may be in it."""

    name: str
    kind: str
    nullable: bool = True
    scale: int | None = None
    """The digits after the point of a ``DECIMAL(p, s)`` (its values are rounded so)."""


@dataclass(frozen=True, slots=True)
class Table:
    """A stream declared by ``CREATE TABLE``."""

    name: str
    stream: str
    columns: tuple[Column, ...]
    time_column: str | None = None
    """The ``WATERMARK FOR`` column: the records' event time."""
    watermark_delay_ms: int | None = None
    primary_key: str | None = None
    """A changelog table's key (``PRIMARY KEY (id) NOT ENFORCED``): its records are keyed
    by it and carry its rows' changes."""
    changelog: str = "upsert"
    """How its records carry changes: ``upsert`` (the row; ``null`` deletes it) or
    ``debezium`` (envelopes)."""

    def column(self, name: str) -> Column | None:
        """The column called ``name``, if any."""
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, slots=True)
class View:
    """A query named by ``CREATE VIEW``: planned where it is used."""

    name: str
    query: exp.Query


def table_of(create: exp.Create) -> Table:
    """The table a ``CREATE TABLE`` statement declares."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        raise SqlError(f"CREATE TABLE {create.this.sql(dialect=Flink)}: the columns are missing")
    name = schema.this.name
    columns: list[Column] = []
    time_column, delay = None, None
    primary_key: str | None = None
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(_column(name, item))
        elif isinstance(item, exp.WatermarkColumnConstraint):
            time_column, delay = _watermark(name, item)
        elif isinstance(item, exp.PrimaryKey):
            keys = [k.name for k in item.expressions]
            if len(keys) != 1 or primary_key is not None:
                raise SqlError(f"CREATE TABLE {name}: a primary key of one column is supported")
            primary_key = keys[0]
        else:
            raise SqlError(
                f"CREATE TABLE {name}: {item.sql(dialect=Flink)} is not supported "
                "(columns and one WATERMARK clause are)"
            )
    if len({c.name for c in columns}) != len(columns):
        raise SqlError(f"CREATE TABLE {name}: a column is declared twice")
    if time_column is not None and not any(c.name == time_column for c in columns):
        raise SqlError(f"CREATE TABLE {name}: WATERMARK FOR {time_column}: no such column")
    if primary_key is not None and not any(c.name == primary_key for c in columns):
        raise SqlError(f"CREATE TABLE {name}: PRIMARY KEY ({primary_key}): no such column")
    options = _options(name, create)
    changelog = FORMATS[options.get("format", "json")]
    if changelog == "debezium" and primary_key is None:
        raise SqlError(f"CREATE TABLE {name}: 'format' = 'debezium-json' needs a PRIMARY KEY")
    return Table(
        name=name,
        stream=options.get("stream", name),
        columns=tuple(columns),
        time_column=time_column,
        watermark_delay_ms=delay,
        primary_key=primary_key,
        changelog=changelog,
    )


def _column(table: str, item: exp.ColumnDef) -> Column:
    kind = item.args.get("kind")
    if kind is None:
        raise SqlError(f"CREATE TABLE {table}: column {item.name} has no type")
    if item.args.get("computed") or any(
        isinstance(c.kind, exp.ComputedColumnConstraint) for c in item.constraints
    ):
        raise SqlError(f"CREATE TABLE {table}: computed column {item.name} is not supported")
    nullable = not any(isinstance(c.kind, exp.NotNullColumnConstraint) for c in item.constraints)
    scale = None
    if kind.this == exp.DataType.Type.DECIMAL and len(kind.expressions) == 2:
        scale = int(kind.expressions[1].name)
    return Column(item.name, type_kind(kind), nullable, scale)


def _watermark(table: str, clause: exp.WatermarkColumnConstraint) -> tuple[str, int]:
    column = clause.this
    delay = clause.expression
    if not isinstance(column, exp.Column):
        raise SqlError(f"CREATE TABLE {table}: WATERMARK FOR needs a column")
    if isinstance(delay, exp.Column) and delay.name == column.name:
        return column.name, 0
    if (
        isinstance(delay, exp.Sub)
        and isinstance(delay.this, exp.Column)
        and delay.this.name == column.name
    ):
        return column.name, interval_ms(delay.expression)
    raise SqlError(
        f"CREATE TABLE {table}: {clause.sql(dialect=Flink)}: the watermark must be "
        f"{column.name} - INTERVAL '...' <unit> (a bounded delay) or {column.name}"
    )


def _options(table: str, create: exp.Create) -> dict[str, str]:
    found: dict[str, str] = {}
    properties = create.args.get("properties")
    for prop in properties.expressions if properties is not None else ():
        if not isinstance(prop, exp.Property) or not isinstance(prop.this, exp.Literal):
            raise SqlError(
                f"CREATE TABLE {table}: option {prop.sql(dialect=Flink)} is not supported"
            )
        key, value = prop.this.name, prop.args["value"].name
        if key not in TABLE_OPTIONS:
            raise SqlError(
                f"CREATE TABLE {table}: option {key!r} is not supported "
                f"(supported: {', '.join(TABLE_OPTIONS)})"
            )
        found[key] = value
    if found.get("connector", "millrace") != "millrace":
        raise SqlError(
            f"CREATE TABLE {table}: connector {found['connector']!r}: a table is a Millrace "
            "stream ('connector' = 'millrace', or none; 'stream' names it)"
        )
    if found.get("format", "json") not in FORMATS:
        raise SqlError(f"CREATE TABLE {table}: format {found['format']!r}: one of "
                       f"{', '.join(FORMATS)}")  # fmt: skip
    return found
