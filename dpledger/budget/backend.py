"""One connection to a budget store: SQLite (a file, the embedded default) or PostgreSQL (a
``postgresql://`` URL, through psycopg 3), with the same SQL and one kind of transaction.

A booking is one transaction that holds the store's write lock from its first read to its
commit: SQLite's ``BEGIN IMMEDIATE`` takes the database's reserved lock, PostgreSQL's
``SELECT ... FOR UPDATE`` on the one chain-head row serialises every writer. So two bookings
that each fit but not together cannot both be granted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpledger.core.errors import InvalidParameterError

__all__ = ["Connection", "connect", "is_url"]

#: seconds a writer waits for another's lock before the booking fails (never runs unbooked)
LOCK_TIMEOUT = 120.0


def is_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL server rather than a SQLite file."""
    return location.startswith(("postgresql://", "postgres://"))


class Connection:
    """SQL with ``?`` placeholders on either database; ``transaction()`` takes the write lock."""

    def __init__(self, raw: Any, kind: str, location: str) -> None:
        self.raw, self.kind, self.location = raw, kind, location

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgres" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self.raw.execute(self._sql(sql), tuple(params))
        if cursor.description is None:
            return []
        return [tuple(row) for row in cursor.fetchall()]

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[None]:
        """One transaction: committed when the block ends, rolled back on any error."""
        if self.kind == "sqlite":
            self.raw.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        else:  # a reader sees one snapshot for the whole transaction
            self.raw.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:
            yield
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")

    def lock_head(self) -> tuple[int, str] | None:
        """The chain head (last sequence number and hash), locked for this transaction."""
        suffix = " FOR UPDATE" if self.kind == "postgres" else ""
        rows = self.execute("SELECT seq, hash FROM chain_head WHERE id = 1" + suffix)
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def tables(self) -> set[str]:
        if self.kind == "sqlite":
            rows = self.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = self.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                "current_schema()"
            )
        return {str(r[0]) for r in rows}

    def close(self) -> None:
        self.raw.close()


def connect(location: str, *, create: bool = False) -> Connection:
    """A connection to the store at ``location``; a SQLite file must exist unless ``create``.
    A store that cannot be reached is an error naming it, never an empty store."""
    if is_url(location):
        return _connect_postgres(location)
    path = Path(location)
    if not create and not path.is_file():
        raise InvalidParameterError(
            "STORE",
            f"no budget store at {location}",
            f"create it with dpledger budget init {location} --source NAME --epsilon E "
            "--delta D, or name an existing store",
        )
    if create and path.exists():
        raise InvalidParameterError(
            "STORE", f"{location} already exists", "name a new file, or omit --create"
        )
    raw = sqlite3.connect(str(path), timeout=LOCK_TIMEOUT, isolation_level=None)
    raw.execute("PRAGMA synchronous = FULL")
    return Connection(raw, "sqlite", location)


def _connect_postgres(url: str) -> Connection:
    try:
        import psycopg
    except ImportError:
        raise InvalidParameterError(
            "STORE",
            "a PostgreSQL store needs psycopg 3, which is not installed",
            'pip install "dpledger[postgres]"',
        ) from None
    try:
        raw = psycopg.connect(url, autocommit=True, connect_timeout=30)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else "no reply"
        raise InvalidParameterError(
            "STORE",
            f"cannot reach the PostgreSQL store ({first})",
            "check the URL and that the server runs; nothing was booked",
        ) from None
    raw.execute(f"SET lock_timeout = '{int(LOCK_TIMEOUT)}s'")
    return Connection(raw, "postgres", url)


def is_locked_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a lock wait that timed out (the booking is refused, not retried)."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
