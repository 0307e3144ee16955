"""What a store's schema holds, read from the engine's own catalog, and whether a PostgreSQL server can hold one.

``companion store copy`` (``memory.upkeep.copy``) walks every table of a store without knowing them by name; the
questions it asks differ per engine only in how they are asked:

    question          SQLite                                  PostgreSQL
    tables            sqlite_master, virtual tables and       information_schema.tables (base tables)
                      their shadow tables left out (derived)
    columns           pragma_table_info                       information_schema.columns, generated ones left out
    key               pragma_table_info(pk)                   information_schema key_column_usage of the PRIMARY KEY
    ids to advance    none (INTEGER PRIMARY KEY is max+1)     identity columns, set past the largest id

``server_facts`` reads, before anything is written, what a PostgreSQL server offers (its version, pgvector's) and
``refusal`` says in one line why a store cannot live there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import StoreUnavailable
from .db import Database
from .pg import is_postgres, redact

MIN_SERVER = (
    130_000  # PostgreSQL 13: the oldest pgvector 0.8 builds for; stored generated columns need 12
)
MIN_VECTOR = (0, 5, 0)  # HNSW indexes (``PgVectorIndex.build_hnsw``) came with pgvector 0.5.0
BOOKKEEPING = frozenset({"schema_version"})  # each engine's migration runner writes its own


def tables(db: Database) -> list[str]:
    """The store's own tables, derived index tables left out (FTS5 and vec0 on SQLite, with their shadows)."""
    if db.engine == "postgresql":
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        return sorted(name for (name,) in db.execute(sql) if name not in BOOKKEEPING)
    found = {
        name: sql or ""
        for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    }
    virtual = [
        name for name, sql in found.items() if sql.upper().startswith("CREATE VIRTUAL TABLE")
    ]
    derived = set(virtual) | {n for n in found for v in virtual if n.startswith(f"{v}_")}
    return sorted(
        n
        for n in found
        if n not in derived and n not in BOOKKEEPING and not n.startswith("sqlite_")
    )


def columns(db: Database, table: str) -> list[str]:
    """The columns a row is written with, in order (PostgreSQL's generated ``words`` columns fill themselves)."""
    if db.engine == "postgresql":
        sql = (
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? "
            "AND is_generated = 'NEVER' ORDER BY ordinal_position"
        )
        return [name for (name,) in db.execute(sql, (table,))]
    return [
        name
        for (name,) in db.execute("SELECT name FROM pragma_table_info(?) ORDER BY cid", (table,))
    ]


def key(db: Database, table: str) -> list[str]:
    """The primary key's columns in order ([] for a table without one)."""
    if db.engine == "postgresql":
        sql = (
            "SELECT k.column_name FROM information_schema.table_constraints AS c "
            "JOIN information_schema.key_column_usage AS k ON k.constraint_name = c.constraint_name "
            "AND k.table_schema = c.table_schema AND k.table_name = c.table_name "
            "WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() AND c.table_name = ? "
            "ORDER BY k.ordinal_position"
        )
        return [name for (name,) in db.execute(sql, (table,))]
    return [
        name
        for (name,) in db.execute(
            "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", (table,)
        )
    ]


@dataclass(frozen=True, slots=True)
class ColumnType:
    table: str
    column: str
    type: str  # as declared: SQLite's free text ("TEXT", "" for none), PostgreSQL's data_type


def column_types(db: Database) -> list[ColumnType]:
    """Every column of every table with its declared type, table by table in column order; SQLite's virtual
    tables left out (their shadow tables are listed), PostgreSQL's tables of the current schema."""
    if db.engine == "postgresql":
        sql = (
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
        )
    else:
        sql = (
            "SELECT m.name, p.name, p.type FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
            "WHERE m.type = 'table' AND m.sql NOT LIKE 'CREATE VIRTUAL TABLE%' "
            "ORDER BY m.name, p.cid"
        )
    return [ColumnType(str(t), str(c), str(d or "")) for t, c, d in db.execute(sql)]


def advance_ids(db: Database) -> int:
    """Each identity column's next value set past the largest id in its table (rows copied in kept their ids, and the
    sequence never saw them). SQLite needs nothing: an INTEGER PRIMARY KEY takes the largest rowid plus one."""
    if db.engine != "postgresql":
        return 0
    sql = "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'"
    found = list(db.execute(sql))
    for table, column in found:
        db.execute(
            f'SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT max("{column}") FROM "{table}"), 0) + 1, false)',
            (table, column),
        )
    return len(found)


def count(db: Database, table: str) -> int:
    return int(db.scalar(f'SELECT COUNT(*) FROM "{table}"'))


def identity(location: str) -> str:
    """Where a store is, spelt one way: the resolved file for SQLite, server and database for PostgreSQL (no user or
    password), so that two spellings of one store compare equal."""
    if is_postgres(location):
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(location)
        host = info.get("host") or urlsplit(location).hostname or "localhost"
        return f"postgresql://{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
    from pathlib import Path

    text = location.removeprefix("sqlite://") if location.startswith("sqlite:///") else location
    return f"sqlite:{Path(text).expanduser().resolve()}"


# -- can this PostgreSQL server hold a store? ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What a PostgreSQL database offers, read without writing anything."""

    where: str  # the URL without its password
    server_version: int  # server_version_num: 180003 for 18.3
    # the pgvector version the server could install (None: not on the server)
    vector_available: str | None
    vector_installed: str | None  # the version installed in this database (None: not installed)
    superuser: bool  # may install an untrusted extension such as pgvector
    has_store: bool  # a schema_version table: a companion store lives here
    tables: int = 0  # base tables in the schema the store would use
    database_bytes: int = 0
    schema: int = 0  # migrations applied (0: a database no command has written to yet)
    known: int = 0  # migrations this program has

    @property
    def server(self) -> str:
        """ "18.3" for 180003."""
        return f"{self.server_version // 10_000}.{self.server_version % 10_000}"

    @property
    def ready(self) -> bool:
        """Migrated and with pgvector: opening the store (``PgDatabase``) would change nothing."""
        return self.vector_installed is not None and self.schema == self.known


def server_facts(url: str) -> ServerFacts:
    """Through a connection of its own: no migration, no CREATE EXTENSION (``store copy``'s checks, ``doctor``)."""
    import psycopg

    from .pg_migrations import PG_MIGRATIONS

    try:
        con = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"cannot connect to {redact(url)}: {str(exc).strip()}") from exc
    with con:
        row: Any = con.execute(
            "SELECT current_setting('server_version_num')::int, "
            "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user), "
            "to_regclass('schema_version') IS NOT NULL, "
            "(SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'), "
            "pg_database_size(current_database())"
        ).fetchone()
        kept = (
            con.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
            if row[4]
            else None
        )
        schema = kept[0] if kept else 0
    version, available, installed, superuser, has_store, tables, size = row
    return ServerFacts(
        redact(url),
        version,
        available,
        installed,
        superuser,
        has_store,
        tables,
        size,
        int(schema),
        len(PG_MIGRATIONS),
    )


def refusal(facts: ServerFacts) -> str | None:
    """Why a store cannot live in this database, in one line; None when it can."""
    major = facts.server_version // 10_000
    if facts.tables and not facts.has_store:
        return f"{facts.where} holds {facts.tables} tables of another program (no schema_version): use an empty database"
    if facts.server_version < MIN_SERVER:
        return f"{facts.where}: PostgreSQL {major} is too old, a store needs PostgreSQL {MIN_SERVER // 10_000} or newer"
    installed, available = facts.vector_installed, facts.vector_available
    if installed is None and available is None:
        return f"{facts.where}: the server has no pgvector extension ('vector'); install pgvector {_dotted(MIN_VECTOR)} or newer on it"
    if _version(installed or available or "") < MIN_VECTOR:
        return f"{facts.where}: pgvector {installed or available} is too old, a store needs {_dotted(MIN_VECTOR)} or newer"
    if installed is None and not facts.superuser:
        return (
            f"{facts.where}: pgvector is on the server but not installed in this database, and this role may not install it: "
            "ask a superuser to run CREATE EXTENSION vector in it"
        )
    return None


def too_old_vector(version: str | None) -> bool:
    """No pgvector, or one older than the store needs."""
    return version is None or _version(version) < MIN_VECTOR


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".") if p.isdigit()]
    return tuple(parts + [0] * (3 - len(parts)))


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)
