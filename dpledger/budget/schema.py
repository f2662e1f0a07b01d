"""The budget store's tables: numbered migrations and the schema-version table.

The same statements run on SQLite and PostgreSQL. A store records the highest migration
applied; a store of another version is refused with the fix (``dpledger budget migrate`` for an
older one, a newer dpledger for a newer one), never read as if it were current.
"""

from __future__ import annotations

import datetime as _dt

from dpledger.budget.backend import Connection
from dpledger.core.errors import InvalidParameterError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "apply_migrations", "check_version", "version_of"]

#: what the database says to an update or a deletion of an entry
APPEND_ONLY = "dpledger budget entries are append-only"
#: (number, statements) in order, a statement the same on both databases or one per database;
#: a migration is never edited once released
MIGRATIONS: tuple[tuple[int, tuple[str | dict[str, str], ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE schema_version (version INTEGER NOT NULL, applied_at TEXT NOT NULL)",
            "CREATE TABLE budgets (source TEXT NOT NULL, unit TEXT NOT NULL, "
            "relation TEXT NOT NULL, rule TEXT NOT NULL, epsilon DOUBLE PRECISION NOT NULL, "
            "delta DOUBLE PRECISION NOT NULL, params TEXT NOT NULL, declared_seq INTEGER NOT "
            "NULL, PRIMARY KEY (source, unit))",
            "CREATE TABLE entries (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
            "source TEXT NOT NULL, unit TEXT NOT NULL, run_id TEXT NOT NULL, "
            "event TEXT NOT NULL, parameters TEXT NOT NULL, provenance TEXT NOT NULL, "
            "charge TEXT NOT NULL, booked_at TEXT NOT NULL, prev_hash TEXT NOT NULL, "
            "hash TEXT NOT NULL UNIQUE)",
            "CREATE TABLE filter_state (source TEXT NOT NULL, unit TEXT NOT NULL, "
            "state TEXT NOT NULL, PRIMARY KEY (source, unit))",
            "CREATE TABLE chain_head (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "seq INTEGER NOT NULL, hash TEXT NOT NULL)",
            "INSERT INTO chain_head (id, seq, hash) VALUES (1, 0, '" + "0" * 64 + "')",
        ),
    ),
    (2, ("CREATE INDEX entries_by_source ON entries (source, unit, seq)",)),
    (
        3,
        (
            {
                "sqlite": "CREATE TRIGGER entries_append_only_update BEFORE UPDATE ON entries "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END",
                "postgres": "CREATE FUNCTION dpledger_append_only() RETURNS trigger "
                f"LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{APPEND_ONLY}'; END $$",
            },
            {
                "sqlite": "CREATE TRIGGER entries_append_only_delete BEFORE DELETE ON entries "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END",
                "postgres": "CREATE TRIGGER entries_append_only BEFORE UPDATE OR DELETE ON "
                "entries FOR EACH ROW EXECUTE FUNCTION dpledger_append_only()",
            },
        ),
    ),
)
#: the version this dpledger reads and writes
SCHEMA_VERSION = MIGRATIONS[-1][0]


def version_of(conn: Connection) -> int | None:
    """The store's schema version; None for a database without dpledger's tables."""
    if "schema_version" not in conn.tables():
        return None
    rows = conn.execute("SELECT MAX(version) FROM schema_version")
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def apply_migrations(conn: Connection) -> int:
    """Apply every migration above the store's version, each in its own transaction (all of
    it or nothing); the version reached."""
    current = version_of(conn) or 0
    for number, statements in MIGRATIONS:
        if number <= current:
            continue
        with conn.transaction():
            for sql in statements:
                conn.execute(sql if isinstance(sql, str) else sql[conn.kind])
            now = _dt.datetime.now(_dt.UTC).isoformat()
            conn.execute("INSERT INTO schema_version VALUES (?, ?)", (number, now))
        current = number
    return current


def check_version(conn: Connection) -> None:
    """Refuse a store whose schema is not this dpledger's."""
    found = version_of(conn)
    where = conn.location
    if found is None:
        raise InvalidParameterError(
            "STORE",
            f"{where} is not a dpledger budget store (no schema_version table)",
            f"create one with dpledger budget init {where} --source NAME --epsilon E --delta D",
        )
    if found < SCHEMA_VERSION:
        raise InvalidParameterError(
            "STORE",
            f"{where} has schema version {found}, this dpledger reads {SCHEMA_VERSION}",
            f"upgrade it with dpledger budget migrate {where}",
        )
    if found > SCHEMA_VERSION:
        raise InvalidParameterError(
            "STORE",
            f"{where} has schema version {found}, newer than this dpledger's {SCHEMA_VERSION}",
            "use the dpledger version that wrote it, or a newer one",
        )
