"""Unsupported SQL is refused when it is compiled, with the message ``docs/sql.md``
shows: every row of its table of tried statements is run here; and the package's
public names are pinned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import millrace
from millrace import streamsql
from millrace.streamsql import SqlError, compile_sql

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
TABLES = """
CREATE TABLE bid (auction BIGINT, price BIGINT, bidder BIGINT, `dateTime` TIMESTAMP(3),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND) WITH ('stream' = 'bids');
CREATE TABLE auction (id BIGINT, seller BIGINT, `dateTime` TIMESTAMP(3))
    WITH ('stream' = 'auctions');
CREATE TABLE o (a BIGINT, b BIGINT) WITH ('stream' = 'out');
"""


def tried() -> list[tuple[str, str]]:
    text = DOCS.read_text().split("## Unsupported SQL: what it says", 1)[1]
    rows = re.findall(r"^\| `(.+)` \| (.+) \|$", text, flags=re.MULTILINE)
    assert len(rows) >= 20
    return rows


@pytest.mark.parametrize(("statement", "message"), tried())
def test_each_tried_statement_gets_the_documented_message(statement: str, message: str) -> None:
    with pytest.raises(SqlError) as raised:
        compile_sql(TABLES + statement.replace("dateTime", "`dateTime`"))
    assert message in str(raised.value)


def test_the_sql_api_is_pinned() -> None:
    assert sorted(streamsql.__all__) == sorted([
        "SqlError", "SqlJoin", "SqlOverAggregate", "SqlPipeline", "SqlRanking",
        "SqlRuntimeError", "SqlSelect", "SqlTemporalJoin", "SqlWindowAggregate",
        "compile_sql", "no_key",
    ])  # fmt: skip
    pipeline = millrace.sql(TABLES + "INSERT INTO o SELECT auction, price FROM bid;")
    assert pipeline.sources == ("bids",) and pipeline.sinks == ("out",)
    assert pipeline.watermark_delay_ms == 4_000


def test_a_parse_error_says_where() -> None:
    with pytest.raises(SqlError, match="cannot parse the SQL"):
        compile_sql("INSERT INTO o SELEC auction FROM bid")


def test_the_docs_quickstart_explains_as_shown() -> None:
    text = DOCS.read_text()
    sql = re.search(r"```sql\n(.*?)```", text, re.S)
    shown = re.search(r"\$ millrace sql pipeline.sql --explain\n(.*?)```", text, re.S)
    assert sql is not None and shown is not None
    assert compile_sql(sql.group(1)).explain() == shown.group(1)


def test_sql_nested_beyond_hundreds_of_levels_is_refused_clearly() -> None:
    deep = "(" * 3000 + "auction" + ")" * 3000
    with pytest.raises(SqlError, match="nests too deeply"):
        compile_sql(TABLES + f"INSERT INTO o SELECT auction, price FROM bid WHERE {deep} > 0;")
    wide = " + ".join(["auction"] * 100)  # a hundred terms still plan
    compile_sql(TABLES + f"INSERT INTO o SELECT {wide}, price FROM bid;")
