"""``TableTableJoin``: two changelog tables joined by key, as a changelog of joined rows.

Kafka Streams' KTable-KTable join (primary key only, no foreign keys): each
key keeps its latest ``left`` and ``right`` row as state (``{"t": event
time, "row": row}``). A change on either side updates that side and, in
arrival order per key, emits the key's new joined row:

- **inner**: when both sides have a row;
- **left** (**right**): when the left (right) side has one, the other side's
  row or null;
- **full**: when either side has one.

When a change leaves the key with no joined row where it had one (a delete
on a side the join needs), a tombstone is emitted; a delete of a row that
does not exist emits nothing. The output is itself an upsert changelog
(``Changelog.UPSERT``), keyed like the inputs, that another ``TableJoin``,
``TableTableJoin`` or ``TableChanges`` can consume::

    {"left": {...}, "right": null}      a joined row (JSON)
    null                                a tombstone: the key has no joined row

Its event time is the later of the change's and the other side's row's.
Which rows a change meets is the state of the other side when the change is
processed: arrival order, as in Kafka Streams. After any arrival order, the
last output of each key is the join of the two tables' last rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millrace.computations import JSON, Computation, Context, Record
from millrace.dataflow._joins import JoinType
from millrace.dataflow._outputs import json_output
from millrace.dataflow._settings import check_settings
from millrace.dataflow._tables import Changelog, parse_change

LEFT = "left"
"""State tag of a key's left row (``{"t": event time, "row": row}``)."""
RIGHT = "right"
"""State tag of a key's right row."""
TOMBSTONE = b"null"
"""The output value of a key that no longer has a joined row."""


def has_joined_row(how: JoinType, left: bool, right: bool) -> bool:
    """Whether a key has a joined row, given whether each side has a row."""
    if how is JoinType.INNER:
        return left and right
    if how is JoinType.LEFT:
        return left
    if how is JoinType.RIGHT:
        return right
    return left or right


class TableTableJoin(Computation):
    """Joins the ``left`` and ``right`` changelogs by key into the ``output`` changelog."""

    setup_at_load = True

    left: str = ""
    right: str = ""
    left_changelog: Changelog = Changelog.UPSERT
    right_changelog: Changelog = Changelog.UPSERT
    how: JoinType = JoinType.INNER
    output: str = ""

    SETTINGS = frozenset(
        {"left", "right", "left_changelog", "right_changelog", "changelog", "how", "output"}
    )
    """What ``params`` (and a subclass's attributes) may set."""

    def setup(self, params: Mapping[str, Any]) -> None:
        """Settings from the topology's ``params`` override the class's: ``left``,
        ``right``, ``output``, ``how`` (inner, left, right, full), ``changelog`` (both
        sides), ``left_changelog``, ``right_changelog``."""
        check_settings(self, params, self.SETTINGS)
        for name in ("left", "right", "output"):
            if name in params:
                setattr(self, name, str(params[name]))
        if "how" in params:
            self.how = JoinType(params["how"])
        if "changelog" in params:
            self.left_changelog = self.right_changelog = Changelog(params["changelog"])
        for name in ("left_changelog", "right_changelog"):
            if name in params:
                setattr(self, name, Changelog(params[name]))
        if not (self.left and self.right and self.output):
            raise ValueError(f"{type(self).__name__} needs left, right and output streams")
        if self.left == self.right:
            raise ValueError(f"{type(self).__name__}: left and right are both {self.left!r}")

    def process_record(self, ctx: Context, record: Record) -> None:
        if record.stream == self.left:
            side, other, changelog = LEFT, RIGHT, self.left_changelog
        elif record.stream == self.right:
            side, other, changelog = RIGHT, LEFT, self.right_changelog
        else:
            raise ValueError(f"{record.stream!r} is neither {self.left!r} nor {self.right!r}")
        deleted, row = parse_change(record.value, changelog)
        mine = ctx.get_state(side, JSON)
        if deleted and mine is None:
            return  # nothing to delete: the join is unchanged
        theirs = ctx.get_state(other, JSON)
        had = has_joined_row(self.how, *self._present(side, mine, theirs))
        if deleted:
            ctx.delete_state(side)
            mine = None
        else:
            mine = {"t": record.event_time_ms, "row": row}
            ctx.put_state(side, mine, JSON)
        t = max(record.event_time_ms, theirs["t"] if theirs else record.event_time_ms)
        if has_joined_row(self.how, *self._present(side, mine, theirs)):
            left, right = (mine, theirs) if side == LEFT else (theirs, mine)
            body = {"left": self._row(left), "right": self._row(right)}
            ctx.produce(self.output, ctx.key, json_output(body), t)
        elif had:
            ctx.produce(self.output, ctx.key, TOMBSTONE, t)

    @staticmethod
    def _present(side: str, mine: Any, theirs: Any) -> tuple[bool, bool]:
        """Whether the left and the right side have a row."""
        pair = (mine is not None, theirs is not None)
        return pair if side == LEFT else (pair[1], pair[0])

    @staticmethod
    def _row(entry: dict[str, Any] | None) -> Any:
        return None if entry is None else entry["row"]
