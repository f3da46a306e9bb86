"""SQL statements planned onto library computations.

``CREATE TABLE`` and ``CREATE VIEW`` fill the catalog; each ``INSERT INTO sink
SELECT ...`` becomes the computations that write the query's rows to the sink table's
stream. A query is planned bottom-up into a :class:`Relation` (``FROM`` a table, a
view, a subquery or a window function; ``WHERE``; ``GROUP BY`` a window; ``SELECT``;
``UNION ALL``), and computations are written only where rows must cross a stream: a
filter and projection over a table is one :class:`SqlSelect`, a windowed ``GROUP BY``
one :class:`SqlWindowAggregate` that writes the query's rows itself.
"""

from __future__ import annotations

from dataclasses import replace

import sqlglot
from sqlglot import exp

from millrace.streamsql._aggregates import (
    WindowSpec,
    grouped_relation,
    window_of,
)
from millrace.streamsql._catalog import Table, View, table_of
from millrace.streamsql._clauses import (
    MIXED_UNION,
    SUPPORTED_CLAUSES,
    as_sink_types,
    grouped_select,
    head,
    is_window_function,
    no_aggregates,
    no_nested_queries,
    ranked_subquery,
    supported,
    union_branches,
)
from millrace.streamsql._dialect import Flink, WindowFunction
from millrace.streamsql._errors import SqlError
from millrace.streamsql._expressions import flink_duration_ms, sql_text
from millrace.streamsql._joins import HOW, plan_join
from millrace.streamsql._over import over_windows, plan_over, with_named_windows
from millrace.streamsql._relations import Relation, output_name, unaliased
from millrace.streamsql._stages import Stages
from millrace.streamsql._temporal import plan_temporal_join
from millrace.streamsql._top_n import plan_top_n, top_n_item_name


def parse_statements(text: str) -> list[exp.Expr]:
    """The statements of a SQL text (``;``-separated), parsed."""
    try:
        statements = sqlglot.parse(text, read=Flink)
    except sqlglot.errors.ParseError as exc:
        raise SqlError(f"cannot parse the SQL: {exc}") from None
    return [s for s in statements if s is not None]


class Planner:
    """The catalog and the stages of one SQL text's statements."""

    def __init__(self, *, intervals: int = 1) -> None:
        self.tables: dict[str, Table] = {}
        self.views: dict[str, View] = {}
        self.stages = Stages(intervals=intervals)
        self.sinks: list[str] = []
        self.explained: list[str] = []
        """The sinks of ``EXPLAIN INSERT`` statements."""
        self.state_ttl_ms: int | None = None
        """``SET 'table.exec.state.ttl'``: how long a regular join keeps a row."""

    def statement(self, statement: exp.Expr) -> None:
        """Plan one statement."""
        if isinstance(statement, exp.Create):
            self._create(statement)
        elif isinstance(statement, exp.Insert):
            self._insert(statement)
        elif isinstance(statement, exp.Command) and statement.name.upper() == "EXPLAIN":
            self._explain(statement)
        elif isinstance(statement, exp.Set):
            self._set(statement)
        elif isinstance(statement, exp.Query):
            raise SqlError(
                f"{head(statement)}: a query needs INSERT INTO <table> to say where its "
                "rows go (or EXPLAIN INSERT INTO ... to see its plan)"
            )
        else:
            raise SqlError(
                f"{head(statement)}: the statements supported are CREATE TABLE, CREATE "
                "VIEW, INSERT INTO ... SELECT and EXPLAIN"
            )

    # -- the catalog --------------------------------------------------------------

    def _create(self, create: exp.Create) -> None:
        kind = str(create.args.get("kind") or "").upper()
        if kind == "TABLE":
            table = table_of(create)
            self._declare(table.name, create)
            self.tables[table.name] = table
        elif kind == "VIEW":
            name = create.this.name
            query = create.expression
            if not isinstance(query, exp.Query):
                raise SqlError(f"CREATE VIEW {name}: AS SELECT ... expected")
            self._declare(name, create)
            self.views[name] = View(name, query)
        else:
            raise SqlError(f"CREATE {kind}: only CREATE TABLE and CREATE VIEW are supported")

    def _declare(self, name: str, create: exp.Create) -> None:
        if name in self.tables or name in self.views:
            raise SqlError(f"{head(create)}: {name!r} is already declared")

    def _set(self, statement: exp.Set) -> None:
        for item in statement.expressions:
            assignment = item.this
            if not isinstance(assignment, exp.EQ):
                raise SqlError(f"{sql_text(statement)}: SET 'option' = 'value' expected")
            option, value = assignment.this.name, assignment.expression.name
            if option != "table.exec.state.ttl":
                raise SqlError(f"SET {option!r}: the option supported is 'table.exec.state.ttl'")
            self.state_ttl_ms = flink_duration_ms(value)

    # -- INSERT -------------------------------------------------------------------

    def _insert(self, insert: exp.Insert) -> None:
        target = insert.this
        if isinstance(target, exp.Schema):
            raise SqlError("INSERT INTO t (columns): a column list is not supported; "
                           "SELECT the sink's columns in order")  # fmt: skip
        name = target.name
        if name not in self.tables:
            raise SqlError(f"INSERT INTO {name}: no such table (CREATE TABLE it first)")
        sink = self.tables[name]
        query = insert.expression
        if not isinstance(query, exp.Query):
            raise SqlError(f"INSERT INTO {name}: SELECT ... expected")
        base = self.stages.name(sink.name)
        updating: set[bool] = set()
        for n, branch in enumerate(union_branches(query)):
            relation = self.query(branch, f"{base}_u{n}" if n else base)
            updating.add(relation.updating)
            if len(updating) > 1:
                raise SqlError(MIXED_UNION)
            if len(relation.columns) != len(sink.columns):
                raise SqlError(
                    f"INSERT INTO {name}: the query gives {len(relation.columns)} columns, "
                    f"the table has {len(sink.columns)}"
                )
            names = [c.name for c in sink.columns]
            relation = as_sink_types(relation, sink)
            self.stages.write(relation, sink.stream, self.stages.name(base), names=names)
        self.sinks.append(sink.stream)

    def _explain(self, command: exp.Command) -> None:
        inner = parse_statements(str(command.expression.name if command.expression else ""))
        if len(inner) != 1 or not isinstance(inner[0], exp.Insert):
            raise SqlError("EXPLAIN: EXPLAIN INSERT INTO ... SELECT ... expected")
        self._insert(inner[0])
        self.explained.append(self.sinks[-1])

    # -- queries ------------------------------------------------------------------

    def query(self, query: exp.Expr, base: str) -> Relation:
        """A query (SELECT, UNION ALL, or a parenthesized one) as a relation."""
        if isinstance(query, exp.Subquery):
            return self.query(query.this, base)
        if isinstance(query, exp.Union):
            return self._union(query, base)
        if isinstance(query, exp.SetOperation):
            raise SqlError(f"{type(query).__name__.upper()}: only UNION ALL is supported")
        if not isinstance(query, exp.Select):
            raise SqlError(f"{head(query)}: SELECT expected")
        return self._select(query, base)

    def _union(self, union: exp.Union, base: str) -> Relation:
        if union.args.get("distinct"):
            raise SqlError("UNION: only UNION ALL is supported (UNION removes duplicates)")
        stream = self.stages.name(f"{base}_union")
        first: Relation | None = None
        for n, branch in enumerate(union_branches(union)):
            relation = self.query(branch, f"{base}_u{n}")
            if first is not None and len(relation.columns) != len(first.columns):
                raise SqlError("UNION ALL: the branches give different numbers of columns")
            if first is not None and relation.updating != first.updating:
                raise SqlError(MIXED_UNION)
            names = list((first or relation).columns)
            written = self.stages.write(relation, stream, self.stages.name(f"{stream}_{n}"),
                                        names=names)  # fmt: skip
            first = first or written
        assert first is not None
        return first

    def _select(self, select: exp.Select, base: str) -> Relation:
        select = with_named_windows(select)
        for clause, name in SUPPORTED_CLAUSES.items():
            if select.args.get(clause):
                raise SqlError(f"{name}: not supported yet ({supported()})")
        no_nested_queries(select)
        source = select.args.get("from_")
        if source is None:
            raise SqlError("SELECT without FROM is not supported")
        where = select.args.get("where")
        top_n = ranked_subquery(source.this)
        if top_n is not None and not select.args.get("joins"):
            relation, rest = self._top_n(source.this, top_n, where, base)
            window = None
            where = exp.Where(this=rest) if rest is not None else None
        else:
            relation, window = self._from(source.this, base)
        if select.args.get("joins"):
            relation, where = self._join(relation, window, select, base)
        if where is not None:
            no_aggregates(where.this, "WHERE")
            relation = relation.filtered(where.this)
        items = self._items(select, relation, window)
        group = select.args.get("group")
        having = select.args.get("having")
        grouped = group is not None or any(
            agg.find_ancestor(exp.Window) is None
            for _, item in items
            for agg in item.find_all(exp.AggFunc)
        )
        over = over_windows(items)
        if over and (grouped or window is not None):
            raise SqlError(f"{sql_text(over[0])}: an OVER aggregate in a grouped SELECT is not "
                           "supported (aggregate in a subquery first)")  # fmt: skip
        if over:
            return plan_over(self.stages, relation, items, base)
        if not grouped:
            if window is not None:
                raise SqlError(f"{window.kind}(TABLE ...): a window table function needs "
                               "GROUP BY window_start, window_end")  # fmt: skip
            if having is not None:
                raise SqlError("HAVING without GROUP BY is not supported")
            return relation.projected(items)
        if relation.pending is not None:  # an aggregation of an aggregation's rows
            relation = self.stages.materialized(relation, f"{base}_rows")
        aggregation = grouped_select(relation, window, group)
        return grouped_relation(
            aggregation,
            items,
            having.this if having is not None else None,
            self.stages,
            base,
        )

    def _items(
        self, select: exp.Select, relation: Relation, window: WindowSpec | None
    ) -> list[tuple[str, exp.Expr]]:
        items: list[tuple[str, exp.Expr]] = []
        for position, item in enumerate(select.expressions):
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                items.extend((name, exp.column(name, quoted=True)) for name in relation.columns)
                continue
            items.append((output_name(item, position), unaliased(item)))
        return items

    def _join(
        self, left: Relation, window: WindowSpec | None, select: exp.Select, base: str
    ) -> tuple[Relation, exp.Where | None]:
        """The FROM's join, and the WHERE left to apply after it (an inner join takes
        the WHERE's conditions as its own)."""
        joins = select.args["joins"]
        if len(joins) > 1:
            raise SqlError("JOIN: a join of more than two tables is not supported yet "
                           "(join two in a view, then that with the third)")  # fmt: skip
        join = joins[0]
        if join.this.args.get("version") is not None:
            return self._temporal(left, window, join, select, base)
        right, right_window = self._from(join.this, base)
        if window is not None or right_window is not None:
            raise SqlError("JOIN: a window table function as a side of a join is not "
                           "supported yet (aggregate it in a subquery first)")  # fmt: skip
        if join.args.get("using"):
            raise SqlError("JOIN ... USING: not supported (write ON a.x = b.x)")
        side = str(join.args.get("side") or "").upper()
        kind = str(join.args.get("kind") or "").upper()
        if kind not in ("", "INNER", "OUTER", "CROSS") or (kind == "CROSS" and join.args.get("on")):
            raise SqlError(f"{kind} JOIN: not supported (INNER, LEFT, RIGHT, FULL OUTER are)")
        how = HOW[side]
        where = select.args.get("where")
        on = join.args.get("on")
        condition = on
        if how == "inner" and where is not None:
            no_aggregates(where.this, "WHERE")
            condition = where.this if on is None else exp.and_(on, where.this)
            where = None
        joined = plan_join(self.stages, (left, right), how=how, condition=condition,
                           ttl_ms=self.state_ttl_ms, base=base)  # fmt: skip
        return joined, where

    def _top_n(
        self,
        subquery: exp.Subquery,
        found: tuple[int, exp.Window],
        where: exp.Where | None,
        base: str,
    ) -> tuple[Relation, exp.Expr | None]:
        """A Top-N subquery (its ROW_NUMBER item) and the outer WHERE left after it."""
        inner = subquery.this
        position, over = found
        rownum = top_n_item_name(inner, position)
        rest = inner.copy()
        rest.set("expressions", [e for i, e in enumerate(inner.expressions) if i != position])
        outer_where = where.this if where is not None else None
        source = inner.args["from_"].this
        if is_window_function(source) and rest.args.get("group") is None:
            # Ranked straight over a window table function's rows: the window's own
            # aggregation ranks them, its bounds are the pane's.
            ranked, window = self._from(source, base)
            if rest.args.get("where") is not None:
                ranked = ranked.filtered(rest.args["where"].this)
            if rest.args.get("joins"):
                raise SqlError("ROW_NUMBER() over a join of a window function: not supported")
            relation, remaining = plan_top_n(
                self.stages, ranked, over, rownum=rownum, where=outer_where, base=base,
                window=window, items=self._items(rest, ranked, window),
            )  # fmt: skip
        else:
            ranked = self.query(rest, f"{base}_top")
            relation, remaining = plan_top_n(
                self.stages, ranked, over, rownum=rownum, where=outer_where, base=base
            )
        return relation.named(subquery.alias or None), remaining

    def _temporal(
        self,
        left: Relation,
        window: WindowSpec | None,
        join: exp.Join,
        select: exp.Select,
        base: str,
    ) -> tuple[Relation, exp.Where | None]:
        """``JOIN t FOR SYSTEM_TIME AS OF s.ts``, and the WHERE left after it."""
        versioned = join.this
        version = versioned.args["version"]
        name = versioned.name
        table = self.tables.get(name)
        if table is None or table.primary_key is None:
            raise SqlError(f"JOIN {name} FOR SYSTEM_TIME AS OF: a table with a PRIMARY KEY "
                           "(a changelog table) expected")  # fmt: skip
        if window is not None or str(version.args.get("kind", "")).upper() != "AS OF":
            raise SqlError("FOR SYSTEM_TIME AS OF s.ts, of a stream, expected")
        how = HOW[str(join.args.get("side") or "").upper()]
        where = select.args.get("where")
        condition = join.args.get("on")
        if how == "inner" and where is not None:
            condition = where.this if condition is None else exp.and_(condition, where.this)
            where = None
        joined = plan_temporal_join(
            self.stages, left, table, alias=versioned.alias or name, as_of=version.expression,
            how=how, condition=condition, base=base,
        )  # fmt: skip
        return joined, where

    # -- FROM ---------------------------------------------------------------------

    def _from(self, node: exp.Expr, base: str) -> tuple[Relation, WindowSpec | None]:
        alias = node.alias or None
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous):
            call = node.this
            if call.name.upper() != "TABLE" or len(call.expressions) != 1:
                raise SqlError(f"FROM {sql_text(node)}: a table function is not supported "
                               "(TABLE(TUMBLE|HOP|SESSION(...)) is)")  # fmt: skip
            return self._window_function(call.expressions[0], base, alias)
        if isinstance(node, exp.Table):
            return self._named(node.name, base).named(alias or node.name), None
        if isinstance(node, exp.Subquery):
            return self.query(node.this, base).named(alias), None
        raise SqlError(f"FROM {sql_text(node)}: not supported ({supported()})")

    def _window_function(
        self, node: exp.Expr, base: str, alias: str | None
    ) -> tuple[Relation, WindowSpec]:
        if not isinstance(node, WindowFunction):
            raise SqlError(f"TABLE({sql_text(node)}): the window table functions are TUMBLE, "
                           "HOP and SESSION")  # fmt: skip
        kind = str(node.this)
        table = node.args["table"]
        descriptor = node.args.get("descriptor")
        if descriptor is None:
            raise SqlError(f"{kind}(TABLE {table.name}, ...): DESCRIPTOR(time column) is missing")
        relation = self._named(table.name, base).named(alias or table.name)
        window = window_of(kind, descriptor, list(node.expressions))
        partition = tuple(node.args.get("partition") or ())
        return relation, replace(window, partition=partition)

    def _named(self, name: str, base: str) -> Relation:
        if name in self.tables:
            table = self.tables[name]
            if table.primary_key is not None:
                raise SqlError(
                    f"{name} is a changelog table (PRIMARY KEY): it is read by a temporal "
                    f"join only (JOIN {name} FOR SYSTEM_TIME AS OF s.ts)"
                )
            return Relation(
                stream=table.stream,
                columns={c.name: exp.column(c.name, quoted=True) for c in table.columns},
                kinds={c.name: c.kind for c in table.columns},
                not_null=frozenset(c.name for c in table.columns if not c.nullable),
                time_column=table.time_column,
                time_fields={table.time_column: 0} if table.time_column else {},
            )
        if name in self.views:
            return self.query(self.views[name].query, f"{base}_{name}")
        raise SqlError(f"table or view {name!r} not found (CREATE TABLE or CREATE VIEW it first)")
