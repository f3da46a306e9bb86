"""The one error of the SQL front end."""

from __future__ import annotations


class SqlError(ValueError):
    """A statement Millrace cannot run: the message names the clause and what is
    supported instead. Raised when the SQL is compiled, before anything starts."""
