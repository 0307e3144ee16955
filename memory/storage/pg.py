"""The PostgreSQL engine behind the same ``Database`` seam (SCALE-1): one store shared by several processes.

``open_database(url)`` picks the engine: ``postgresql://...`` opens a ``PgDatabase``, anything else (a path or
``sqlite:///...``) the SQLite ``Database``. The repositories keep their one SQL text: ``to_pg`` rewrites the
few SQLite-only forms they use (``?`` and ``:name`` parameters, ``INSERT OR IGNORE``, scalar ``MIN``/``MAX``,
``instr``, ``json_each``, ``json_extract``, ``rowid``, the ``+column`` planner hint) as it passes. What cannot be rewritten has its
own PostgreSQL form beside the SQLite one: full-text search (``memory.storage.pgsearch``: a tsvector column, GIN,
``ts_rank_cd``), vectors (pgvector tables) and the schema (``memory.storage.pg_migrations``, the same numbers).

Caches of other processes learn of every commit here through LISTEN/NOTIFY: a trigger on each table that
feeds a cache notifies at commit, and ``data_version`` (what the vector mirror and the other caches already
watch on SQLite) counts the notifications sent by other connections.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import InvalidInput, SchemaError, StoreUnavailable
from .db import Database, Rewritten
from .pg_migrations import CHANNEL, FORGOT, PG_MIGRATIONS

log = logging.getLogger(__name__)
MIGRATION_LOCK = (
    7_325_001  # advisory lock id: two processes starting at once migrate one after the other
)


def is_postgres(url: str | Path) -> bool:
    return str(url).startswith(("postgresql://", "postgres://"))


def open_database(url: str | Path) -> Database:
    """The store at ``url``: PostgreSQL for a ``postgresql://`` URL, else the SQLite file (``sqlite:///`` or a path)."""
    if is_postgres(url):
        return PgDatabase(str(url))
    text = str(url)
    if (problem := unreadable_location(text)) is not None:
        raise InvalidInput(problem)
    return Database(text.removeprefix("sqlite://") if text.startswith("sqlite:///") else text)


# two letters or more: "C:\\store.db" is a Windows path
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


def unreadable_location(where: str) -> str | None:
    """Why ``where`` names no store this program reads, or None. "sqlite://relative" (two slashes) would be read
    as a file "relative" in a new folder named "sqlite:" (issue 31); other schemes as odd file names."""
    found = _SCHEME.match(where)
    if found is None or is_postgres(where) or where.startswith(("sqlite:///", "file:")):
        return None
    if found.group(1).lower() == "sqlite":
        return f"{where!r} is not a SQLite URL this program reads: write sqlite:///absolute/path, or a plain path"
    return f"{where!r}: a {found.group(1)}: URL is not a store this program reads (a path, sqlite:///path or postgresql://...)"


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return _password_as(url, ":***@")


def without_password(url: str) -> str:
    """The URL with its password left out, for a command an operator copies (libpq then reads PGPASSWORD or
    ~/.pgpass, or asks): a password never reaches a terminal, a log or a shell history from us."""
    return _password_as(url, "@")


def _password_as(url: str, replacement: str) -> str:
    """``url`` with its ":password@" replaced by ``replacement``; a URL without a password as it is."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(
        parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", replacement))
    )


def dump_commands(url: str, dest: str) -> tuple[str, str]:
    """(the pg_dump command that backs the store up to ``dest``, the pg_restore command that brings it back)."""
    import shlex

    target, file = shlex.quote(without_password(url)), shlex.quote(dest)
    return (
        f"pg_dump --format=custom --file={file} --dbname={target}",
        f"pg_restore --clean --if-exists --no-owner --dbname={target} {file}",
    )


# -- the SQL rewrite ------------------------------------------------------------------------------------
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (
            r"\b(rid|rowid) IN \(SELECT value FROM json_each\(\?\)\)",
            r"\1 IN (SELECT value::bigint FROM json_array_elements_text(?::json) AS je(value))",
        ),
        (
            r"json_each\(([\w.]+), '\$\.(\w+)'\)",
            r"json_array_elements_text((\1)::json -> '\2') AS je(value)",
        ),
        (r"json_each\(([\w.?]+)\)", r"json_array_elements_text((\1)::json) AS je(value)"),
        # JSON fields of a context (text holding a JSON object): a flag as a boolean, any other field as text
        (r"json_extract\(([\w.]+), '\$\.(is_\w+)'\)", r"((\1)::jsonb -> '\2')::boolean"),
        (r"json_extract\(([\w.]+), '\$\.(\w+)'\)", r"((\1)::jsonb ->> '\2')"),
        (
            r"json_set\(([\w.]+), '\$\.(\w+)', \?\)",
            r"jsonb_set((\1)::jsonb, '{\2}', to_jsonb(?::text))::text",
        ),
        (r"\bINSERT OR IGNORE INTO\b", "INSERT INTO"),
        (r"\bUPDATE OR REPLACE\b", "UPDATE"),
        (r"\bMAX\(([\w.?]+), ", r"GREATEST(\1, "),
        (r"\bMIN\(([\w.?]+), ", r"LEAST(\1, "),
        (r"\binstr\(", "strpos("),
        (r"(?<=[\s(])\+(?=[a-z_])", ""),  # SQLite's "do not use an index for this term" hint
        (r"\browid\b", "ctid"),
    )
)


_NUMBERED = re.compile(r"\?\d")


def to_pg(sql: str) -> str:
    """``sql`` as psycopg takes it on PostgreSQL: the rewrites above, then parameters outside string literals."""
    ignore = re.search(r"\bINSERT OR IGNORE INTO\b", sql, re.IGNORECASE) is not None
    for pattern, replacement in _REWRITES:
        sql = pattern.sub(replacement, sql)
    out = _parameters(sql)
    return f"{out.rstrip().rstrip(';')} ON CONFLICT DO NOTHING" if ignore else out


def _parameters(sql: str) -> str:
    out: list[str] = []
    i, n, quoted = 0, len(sql), False
    while i < n:
        ch = sql[i]
        if ch == "'":
            quoted = not quoted
        if ch == "%":
            out.append("%%")
        elif (
            not quoted and ch == "?" and sql[i + 1 : i + 2].isdigit()
        ):  # ?1: numbered, passed as p1
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            out.append(f"%(p{sql[i + 1 : j]})s")
            i = j
            continue
        elif not quoted and ch == "?":
            out.append("%s")
        elif (
            not quoted
            and ch == ":"
            and i + 1 < n
            and (sql[i + 1].isalpha() or sql[i + 1] == "_")
            and sql[i - 1 : i] != ":"
        ):
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append(f"%({sql[i + 1 : j]})s")
            i = j
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


# -- the connection -------------------------------------------------------------------------------------
class PgConnection:
    """The few ``apsw.Connection`` calls the repositories make, on one psycopg connection (autocommit: a
    statement outside ``transaction()`` commits on its own, as on SQLite)."""

    def __init__(self, url: str) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        try:
            self.raw = psycopg.connect(url, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot connect to {redact(url)}: {exc}") from exc
        _numbers_as_python(self.raw)
        # IF NOT EXISTS is no guard against a second process creating it at the same moment (a unique violation):
        # processes starting together take turns, as they do for the migrations
        with self.raw.transaction():
            self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            self.raw.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(self.raw)
        self.depth = 0
        self._rowcount = 0

    @property
    def in_transaction(self) -> bool:
        return self.depth > 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        if _NUMBERED.search(sql):
            params = {f"p{i}": v for i, v in enumerate(params, start=1)}
        cur = self.raw.execute(to_pg(sql), _params(params))  # our SQL, rewritten
        self._rowcount = max(cur.rowcount, 0)
        return cur if cur.description is not None else iter(())

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(to_pg(sql), [_params(r) for r in rows])
            self._rowcount = max(cur.rowcount, 0)

    def changes(self) -> int:
        return self._rowcount

    def last_insert_rowid(self) -> int:
        row: Any = self.raw.execute("SELECT lastval()").fetchone()  # always one row after an insert
        return int(row[0])

    def close(self) -> None:
        self.raw.close()


def _params(params: Any) -> Any:
    if isinstance(params, dict):
        return params
    # "\x00" is the registry's impossible value (keeps "IN ()" valid); PostgreSQL text cannot hold NUL, "\x01" is as impossible
    return tuple("\x01" if isinstance(p, str) and p == "\x00" else p for p in params)


def _numbers_as_python(conn: Any) -> None:
    """SUM and AVG give NUMERIC: as int when whole, else float, as SQLite gives them (Decimal breaks json)."""
    from psycopg.adapt import Loader

    class NumericLoader(Loader):
        def load(self, data: Any) -> Any:
            value = Decimal(bytes(data).decode())
            return int(value) if value == value.to_integral_value() else float(value)

    conn.adapters.register_loader("numeric", NumericLoader)


class PgDatabase(Database):
    """A migrated PostgreSQL database with pgvector, behind the ``Database`` API the repositories use."""

    engine = "postgresql"

    def __init__(self, url: str) -> None:  # not super().__init__: that opens an SQLite file
        self.path, self.readonly, self.behind, self.url = redact(url), False, 0, url
        self.pg = PgConnection(url)
        self.con = self.pg  # type: ignore[assignment]  # the calls the repositories make, see PgConnection
        self._notices = self._forgets = 0
        self._listener = _Listener(url, self.pg.raw.info.backend_pid, self._heard)
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    def _heard(self, payload: str) -> None:
        self._notices += 1
        if payload.endswith(FORGOT):
            self._forgets += 1

    # -- queries -------------------------------------------------------------------------------
    def rows(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        cur: Any = self.pg.execute(sql, params)
        if not hasattr(cur, "description") or cur.description is None:
            return []
        names = [d.name for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def chunks(self, sql: str, params: Any, size: int) -> Iterator[list[Any]]:
        """The rows of ``sql``, ``size`` at a time, through a server-side cursor: a plain cursor makes psycopg hold the
        whole result in the client (the vector mirror's load of a 100k partition took the bench's peak RSS from 363 to
        709 MB). Read in a transaction (a named cursor lives in one); consume it before the next statement."""
        with self.transaction(), self.pg.raw.cursor(name=f"chunks_{self.pg.depth}") as cur:
            cur.execute(to_pg(sql), _params(params))  # our SQL, rewritten
            while rows := cur.fetchmany(size):
                yield rows

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[None]:
        """A transaction; nested use is a savepoint, and any exception rolls that block back. ``durable=False`` (an
        outermost one) commits without waiting for the WAL flush: 0.4 ms instead of 5 ms a commit on this machine's
        disk; a server crash may lose it whole, never half (for bookkeeping such as the rate limit's windows)."""
        con = self.pg
        name = f"s{con.depth}"
        con.raw.execute("BEGIN" if con.depth == 0 else f"SAVEPOINT {name}")
        if con.depth == 0 and not durable:
            con.raw.execute("SET LOCAL synchronous_commit = off")
        con.depth += 1
        try:
            yield
        except BaseException:
            con.depth -= 1
            con.raw.execute("ROLLBACK" if con.depth == 0 else f"ROLLBACK TO SAVEPOINT {name}")
            raise
        con.depth -= 1
        con.raw.execute("COMMIT" if con.depth == 0 else f"RELEASE SAVEPOINT {name}")

    def quick_check(self) -> str:
        return "ok" if self.scalar("SELECT 1") == 1 else "no answer"

    def optimize(self) -> None:
        """PostgreSQL's autovacuum keeps statistics; an explicit ANALYZE after a bulk load helps the planner."""
        self.execute("ANALYZE")

    def scrub(self) -> None:
        """After a forget: VACUUM the store's tables, so the deleted rows and their index entries are removed.

        ``INDEX_CLEANUP ON``: a forget deletes a few rows of a big table, and VACUUM on its own skips the indexes
        when under 2% of the pages have dead rows (PostgreSQL 14+), leaving a forgotten memory's subject in its
        btree. What VACUUM cannot do (measured in tests/memory/test_pg_forget_bytes.py): freed space is reused, not
        zeroed; a GIN index keeps a forgotten word's lexeme as a key; the WAL keeps it all until its segments are
        overwritten. ``rewrite`` (``companion store scrub``) does the rest. See docs/postgresql.md.
        """
        for table in self._tables():
            self.execute(f"VACUUM (INDEX_CLEANUP ON) {table}")

    def _tables(self) -> list[str]:
        # every table of the store, not only the forget registry's: derived tables (vectors, caches) hold words too,
        # and reading the registry here would make the storage layer import the layer above it
        return sorted(
            name
            for (name,) in self.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        )

    def rewrite(self) -> Rewritten:
        """The operator's full scrub: VACUUM FULL of every table (new files, old ones unlinked; indexes rebuilt, so
        GIN keys of forgotten words go too), then the WAL switched and checkpointed twice so the segments that held
        the words can be retired. Each table is locked while it is rewritten (the bot waits; 9.7 s in all at 100k)."""
        before = self._size()
        for table in self._tables():
            self.execute(f"VACUUM FULL {table}")
        left = self._retire_wal()
        return Rewritten(before, self._size(), (*left, *self._beyond_the_server()))

    def _size(self) -> int:
        return int(self.scalar("SELECT pg_database_size(current_database())"))

    def _retire_wal(self) -> tuple[str, ...]:
        """Two WAL switches, each followed by a checkpoint: no segment older than now is needed after that."""
        import psycopg

        try:
            for _ in range(2):
                self.execute("SELECT pg_switch_wal()")
                self.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            return (
                "the WAL: this role may not run pg_switch_wal() and CHECKPOINT; a superuser must run both, twice",
            )
        if self.scalar("SELECT current_setting('wal_recycle')") == "on":
            return (
                "the WAL: with wal_recycle on, old segments are renamed for reuse and keep the words until overwritten; "
                "run `ALTER SYSTEM SET wal_recycle = off; SELECT pg_reload_conf();` as a superuser, then this command again",
            )
        return ()

    def _beyond_the_server(self) -> tuple[str, ...]:
        archives = "WAL archives (archive_mode is on): delete the segments archived before now, or let retention expire them"
        return (
            *(
                (archives,)
                if self.scalar("SELECT current_setting('archive_mode')") != "off"
                else ()
            ),
            "base backups and pg_dump files made before now: delete or replace them",
            "replicas replay the rewrite; run CHECKPOINT on each so its old WAL is retired too",
        )

    def data_version(self) -> int:
        """How many commits of other connections this process has heard of (LISTEN/NOTIFY)."""
        return self._notices

    def forget_signal(self) -> int:
        """How many commits of other connections deleted or edited memories or messages: voice caches drop what
        they hold then, not at every message another process stores (``pg_migrations``, m014)."""
        return self._forgets

    def close(self) -> None:
        if getattr(self, "_listener", None) is not None:
            self._listener.stop()
        self.con.close()

    def backup_to(self, target: str | Path) -> None:
        raise StoreUnavailable(
            "on PostgreSQL, back up with pg_dump or your server's backups (or `companion store copy` to SQLite)"
        )

    # -- migrations ----------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self.transaction():
            self.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            self.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)"
            )
            current = self._version()
            for version, migration in enumerate(PG_MIGRATIONS, start=1):
                if version > current:
                    self.pg.raw.execute(migration.sql)  # DDL, no parameters
                    self.execute(
                        "INSERT INTO schema_version(version, name, applied_at) VALUES(?, ?, now()::text)",
                        (version, migration.name),
                    )

    def _version(self) -> int:
        current = int(self.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        if current > len(PG_MIGRATIONS):
            raise SchemaError(
                f"{self.path} has schema version {current}, newer than this program knows ({len(PG_MIGRATIONS)})"
            )
        return current


class _Listener:
    """A second connection that LISTENs on the store's channel and calls ``heard`` for each other process's commit."""

    def __init__(self, url: str, own_pid: int, heard: Any) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute(f"LISTEN {CHANNEL}")
        self._own, self._heard, self._stop = own_pid, heard, threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for note in self._conn.notifies(timeout=0.2):
                    if note.pid != self._own:
                        self._heard(note.payload)
            except Exception:  # the connection closed under us at shutdown, or the server went away
                if not self._stop.is_set():
                    log.warning(
                        "lost the PostgreSQL notification connection: caches may serve stale rows"
                    )
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._conn.close()
