"""The SQL dialect Millrace reads: Flink SQL's streaming syntax on sqlglot's Spark dialect.

sqlglot has no Flink dialect. Spark's is the nearest (backquoted identifiers,
``INTERVAL '10' SECOND``, ``WITH ('key' = 'value')`` table options); this adds what
streaming SQL needs on top of it:

- ``WATERMARK FOR col AS col - INTERVAL ...`` in ``CREATE TABLE`` (as RisingWave's
  dialect reads it: an ``exp.WatermarkColumnConstraint``);
- the window table-valued functions ``TUMBLE``, ``HOP``, ``SESSION`` and ``CUMULATE``
  with a ``TABLE t`` argument and ``DESCRIPTOR(col)``, and ``SESSION``'s ``PARTITION BY``
  (parsed into a :class:`WindowFunction`, not an anonymous call);
- the group-window functions of ``GROUP BY ..., SESSION(col, INTERVAL ...)`` (the same
  names with plain arguments: an anonymous call, as any other function).
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokenizer_core import TokenType

WINDOW_FUNCTIONS = ("TUMBLE", "HOP", "SESSION", "CUMULATE")


class WindowFunction(exp.Expression):
    """``TUMBLE(TABLE t, DESCRIPTOR(ts), size)`` and its kin: ``this`` the kind,
    ``table`` the windowed table, ``descriptor`` the time column, ``partition`` the
    ``PARTITION BY`` columns of a session, ``expressions`` the durations."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "table": True,
        "descriptor": False,
        "partition": False,
        "expressions": False,
    }


class _Parser(SparkParser):
    CONSTRAINT_PARSERS: ClassVar[dict[str, Any]] = {
        **SparkParser.CONSTRAINT_PARSERS,
        "WATERMARK": lambda self: self.expression(
            exp.WatermarkColumnConstraint(
                this=self._match(TokenType.FOR) and self._parse_column(),
                expression=self._match(TokenType.ALIAS) and self._parse_disjunction(),
            )
        ),
    }
    SCHEMA_UNNAMED_CONSTRAINTS: ClassVar[set[str]] = {
        *SparkParser.SCHEMA_UNNAMED_CONSTRAINTS,
        "WATERMARK",
    }
    FUNCTION_PARSERS: ClassVar[dict[str, Any]] = {
        **SparkParser.FUNCTION_PARSERS,
        **{
            kind: (lambda self, kind=kind: self._parse_window_call(kind))
            for kind in WINDOW_FUNCTIONS
        },
    }

    def _parse_window_call(self, kind: str) -> exp.Expr:
        """A window TVF when its first argument is ``TABLE t``; else a group window
        (``SESSION(ts, INTERVAL ...)``), kept as an anonymous call."""
        if not self._match(TokenType.TABLE):
            args = self._parse_csv(self._parse_assignment)
            return exp.Anonymous(this=kind, expressions=args)
        table = self._parse_table_parts()
        partition = None
        if self._match(TokenType.PARTITION_BY) or self._match_text_seq("PARTITION", "BY"):
            if self._match(TokenType.L_PAREN):
                partition = self._parse_csv(self._parse_column)
                self._match_r_paren()
            else:
                partition = [c for c in [self._parse_column()] if c is not None]
        descriptor = None
        durations = []
        while self._match(TokenType.COMMA):
            if self._match_text_seq("DESCRIPTOR"):
                self._match_l_paren()
                descriptor = self._parse_column()
                self._match_r_paren()
            else:
                durations.append(self._parse_assignment())
        return WindowFunction(
            this=kind,
            table=table,
            descriptor=descriptor,
            partition=partition,
            expressions=durations,
        )


class _Tokenizer(Spark.Tokenizer):
    # SESSION is a window function here, not the keyword of SET SESSION.
    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        word: token for word, token in Spark.Tokenizer.KEYWORDS.items() if word != "SESSION"
    }


class Flink(Spark):
    """Flink SQL's streaming statements, as far as Millrace plans them."""

    Tokenizer = _Tokenizer
    Parser = _Parser
