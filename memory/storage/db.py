"""The one owner of the SQLite connection.

apsw is used because it can always load extensions (the stdlib sqlite3 of many Pythons cannot load
sqlite-vec). The connection lives in one ``Database``; async callers go through ``AsyncRunner``, which
runs every call on a single worker thread, so the bot's event loop never blocks on SQLite and no two
threads ever share a transaction.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import apsw
import sqlite_vec

from ..errors import SchemaError, StoreUnavailable
from . import tokenizer
from .migrations import MIGRATIONS, WORD_INDEXES
from .private import create_private, private_folder, private_store

log = logging.getLogger(__name__)
T = TypeVar("T")
BUSY_TIMEOUT_MS = 5000  # how long a write waits for another process's write to end
BUSY_POLL_S = 0.002  # how often a waiting write looks at the lock again (see ``Patience``)
REINDEX_STEP = (
    5_000  # rows a transaction when a word index is refilled (m024): a kill loses at most one step
)


@dataclass(frozen=True, slots=True)
class Rewritten:
    """What ``Database.rewrite`` did: the store's size before and after, and what only the operator can still do."""

    bytes_before: int
    bytes_after: int
    # copies of deleted words this program cannot reach, each with what to do about it
    left: tuple[str, ...]


class Patience:
    """The busy handler: wait for another process's lock up to ``limit_s``, looking again every 2 ms.

    SQLite's own busy timeout sleeps longer and longer (up to 100 ms a look). Two processes writing at once
    showed what that costs: neither held the lock long (a forget's longest transaction took 0.25 s, a
    checkpoint 0.03 s), but one wrote back to back, letting go of the lock for well under a millisecond
    between transactions, and the other, looking about ten times a second, missed every gap and waited
    4 s, sometimes past 5 s (one BusyError a minute). Looking every 2 ms it takes the next gap instead.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._since = self._last = 0.0

    def __call__(self, tries: int) -> bool:
        now = time.monotonic()
        # A new wait: SQLite counts the calls of one wait from 0, but not every wait starts its count afresh (a
        # checkpoint's does not), so a call long after the last one starts a new wait too.
        if tries == 0 or now - self._last > 20 * BUSY_POLL_S:
            self._since = now
        self._last = now
        if now - self._since >= self.limit_s:
            return False
        time.sleep(BUSY_POLL_S)
        return True


def read_only(path: str | Path) -> str:
    """What to open instead of ``path`` for work that only reads: ``Database(read_only(p))``.

    An SQLite URI with ``mode=ro``: a read-only file still serves, nothing is migrated or written, and
    a path where no store exists is an error instead of a new empty store. A stray rollback
    journal (``stray_journal``) made SQLite refuse every read-only open, as it would roll the
    journal into the store first: the store is then read as it is on disk (``immutable``), the
    journal left alone.
    """
    uri = f"file:{quote(str(Path(path).absolute()))}?mode=ro"
    return uri + "&immutable=1" if stray_journal(Path(path)) else uri


def stray_journal(path: Path) -> bool:
    """Whether a ``-journal`` beside the store is not the store's: the store keeps a WAL (its header
    says so) and has no WAL to read, so no writer of it is open and none ever writes a rollback
    journal (a file copied in, another program's). A store in rollback mode keeps its journal."""
    journal, wal = (path.with_name(path.name + side) for side in ("-journal", "-wal"))
    try:
        if not journal.is_file() or not journal.stat().st_size:
            return False
        if wal.exists() and wal.stat().st_size:
            return False
        with path.open("rb") as store:
            header = store.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


class Database:
    """A migrated SQLite file with sqlite-vec loaded, WAL on; or, opened on ``read_only(path)``, a reader."""

    engine = "sqlite"  # memory.storage.pg.PgDatabase says "postgresql"

    def __init__(self, path: str | Path) -> None:
        self.path, self.readonly = _location(path)
        self.behind = 0  # migrations a read-only open found missing (a writable open applies them)
        self.con = _connect(str(path), self.path, self.readonly)
        try:
            with _naming(self.path, self.readonly):
                self._prepare()
        except BaseException:
            self.con.close()
            raise

    def _prepare(self) -> None:
        self.con.enable_load_extension(True)
        sqlite_vec.load(self.con)
        self.con.enable_load_extension(False)
        self.con.set_busy_handler(Patience(BUSY_TIMEOUT_MS / 1000))
        # 32 MB page cache: the indexes a recall walks do not fit the 2 MB default; 64 MB missed 16 instead of 22
        # pages a recall at 100k rows (89 instead of 103 at 1M), a few microseconds each from the OS's file cache,
        # for 32 MB more RSS. No memory map: every page it touched counted in RSS (280 MB at 100k rows) and
        # recall was no faster with it (see ``companion bench``).
        # secure_delete: freed pages and cells are zeroed, so forgotten words do not linger in the file (SEC-3).
        for pragma in (
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "foreign_keys=ON",
            "temp_store=MEMORY",
            "secure_delete=ON",
            "cache_size=-32768",
            "mmap_size=0",
        ):
            if not (
                self.readonly and pragma.startswith("journal_mode")
            ):  # setting WAL writes the header
                self.con.execute(f"PRAGMA {pragma}")
        # after the pragmas (a file that is no store fails there, named), before the word indexes
        # are touched
        tokenizer.register(self.con)
        if self.readonly:
            self._check_version()
            return
        self._migrate()
        self.reindex_words()
        self.optimize()

    # -- queries -------------------------------------------------------------------------------
    def execute(self, sql: str, params: Any = ()) -> apsw.Cursor:
        return self.con.execute(sql, params)

    def rows(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params)
        try:
            names = [d[0] for d in cur.getdescription()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(names, row, strict=True)) for row in cur]

    def one(self, sql: str, params: Any = ()) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def scalar(self, sql: str, params: Any = ()) -> Any:
        for row in self.con.execute(sql, params):
            return row[0]
        return None

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[None]:
        """A write transaction: nested use is fine (a savepoint), and any exception rolls the whole block back.
        ``durable=False``: bookkeeping a crash may lose whole (never half); SQLite's WAL commits it alike, PostgreSQL
        does not wait for the disk (see ``PgDatabase.transaction``).

        The outermost one begins IMMEDIATE, taking the write lock before its first read. A deferred
        transaction that reads and then writes while another process (the dashboard, a CLI command) has
        committed cannot upgrade its stale snapshot: it failed at once with "database is locked", and the
        busy timeout never got to wait. Taking the lock first makes the timeout wait for the other writer.
        """
        if self.readonly or self.con.in_transaction:
            with self.con:
                yield
            return
        self._begin_immediate()
        try:
            yield
        except BaseException:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def _begin_immediate(self) -> None:
        """BEGIN IMMEDIATE, tried again for up to the busy timeout when SQLite refuses it without waiting.

        SQLite skips the busy handler when this connection still has a read open (a statement not yet
        reset, a vec0 blob): two writing processes saw it about once a minute. Nothing has been done yet,
        so trying again is safe.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.execute("BEGIN IMMEDIATE")
                return
            except apsw.BusyError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(BUSY_POLL_S)

    def quick_check(self) -> str:
        """SQLite's quick integrity check: "ok", or the first problems it found."""
        return str(self.scalar("PRAGMA quick_check"))

    def optimize(self) -> None:
        """Refresh the planner's statistics (bounded work): without them it may scan a whole partition."""
        self.execute("PRAGMA analysis_limit=1000")
        self.execute("PRAGMA optimize=0x10002")

    def scrub(self) -> None:
        """After a forget: no copy of deleted text may stay in the files the store writes.

        sqlite_stat4 keeps sample keys of every index (subjects, author ids), so it is emptied and
        rebuilt; the WAL still holds old page images until a checkpoint, which truncates it.
        """
        if self.scalar("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat4'"):
            self.execute("DELETE FROM sqlite_stat4")
        # The checkpoint blocks every writer while it waits for readers; waiting less than a writer does keeps a
        # second process's write from timing out behind it (two writers saw that about once a minute).
        self.con.set_busy_handler(Patience(BUSY_TIMEOUT_MS / 3000))
        try:
            busy = self.scalar("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self.con.set_busy_handler(Patience(BUSY_TIMEOUT_MS / 1000))
        if busy:
            log.warning(
                "after a forget the WAL was not truncated (another process kept reading); the next checkpoint does it"
            )

    def rewrite(self) -> Rewritten:
        """The operator's full scrub (``companion store scrub``): the file rebuilt from its live rows (VACUUM) and the
        WAL truncated. ``secure_delete`` already zeroes what a forget frees; this also drops the freed pages and
        any word a page kept from before secure_delete was on (a store made by an old version). Needs the store's
        size free on disk, and holds the write lock while it runs (3.2 s at 100k memories, docs/postgresql.md)."""
        before = self._size()
        self.scrub()
        self.execute("VACUUM")
        self.scalar("PRAGMA wal_checkpoint(TRUNCATE)")
        left = (
            "backups made before now (`companion backup` files, copies of the store folder): delete or replace them",
            "the file system's free blocks may still hold old pages until reused (a disk-level wipe is outside this program)",
        )
        return Rewritten(before, self._size(), left)

    def _size(self) -> int:
        """The store's bytes on disk: the file and its WAL."""
        return sum(
            p.stat().st_size for p in (Path(self.path), Path(f"{self.path}-wal")) if p.exists()
        )

    def data_version(self) -> int:
        """Changes whenever another connection commits; used to invalidate in-process caches."""
        return int(self.scalar("PRAGMA data_version"))

    def forget_signal(self) -> int:
        """Changes when another connection may have forgotten or edited words, for caches that hold words (voice).
        SQLite cannot tell a forget from other commits: any commit of another connection (a CLI command, the
        dashboard; rare beside a bot) moves it."""
        return self.data_version()

    def close(self) -> None:
        self.con.close()

    # -- settings ------------------------------------------------------------------------------
    def get_setting(self, key: str, default: str | None = None) -> str | None:
        value = self.scalar("SELECT value FROM settings WHERE key = ?", (key,))
        return default if value is None else value

    def set_setting(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def delete_setting(self, key: str) -> None:
        self.execute("DELETE FROM settings WHERE key = ?", (key,))

    # -- migrations ----------------------------------------------------------------------------
    def _migrate(self) -> None:
        self._refuse_foreign()
        self.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)"
        )
        current = self._version()
        for version, migration in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            with self.transaction():
                self.execute(migration.sql)
                self.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES(?, ?, datetime('now'))",
                    (version, migration.name),
                )
            # A brand-new store is set up quietly (every eval sample and test makes one); upgrading an existing one is news.
            log.log(
                logging.DEBUG if current == 0 else logging.INFO,
                "applied migration %s",
                migration.name,
            )

    def reindex_words(self, step: int | None = None) -> None:
        """Fill a word index made anew by a migration (m024) from its rows, ``step`` rows a
        transaction, the last row done kept in settings: a process killed half-way (or a second
        process opening the store meanwhile) goes on from there, and nothing is lost, since the rows
        themselves were never touched."""
        for key in [
            k for (k,) in self.execute("SELECT key FROM settings WHERE key LIKE 'words.reindex.%'")
        ]:
            table = key.removeprefix("words.reindex.")
            content, columns = WORD_INDEXES[table]
            cols = ", ".join(columns)
            rows = 0
            while found := self._reindex_step(key, table, content, cols, step or REINDEX_STEP):
                rows += found
            if rows:  # a new store's indexes are made empty: nothing to tell
                log.info("the word index %s was rebuilt for every script (%d rows)", table, rows)

    def _reindex_step(self, key: str, table: str, content: str, cols: str, step: int) -> int:
        """One step: the rows indexed (0 when the index is whole)."""
        with self.transaction():
            done = self.get_setting(key)
            if done is None:  # another process finished it
                return 0
            last, count = next(
                self.execute(
                    f"SELECT MAX(rid), COUNT(*) FROM (SELECT rid FROM {content} WHERE rid > ? ORDER BY rid "
                    "LIMIT ?)",
                    (int(done), step),
                )
            )
            if last is None:
                self.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
                self.delete_setting(key)
                return 0
            self.execute(
                f"INSERT INTO {table} (rowid, {cols}) SELECT rid, {cols} FROM {content} WHERE rid > ? AND rid <= ?",
                (int(done), last),
            )
            self.set_setting(key, str(last))
            return int(count)

    def _version(self) -> int:
        """The schema version on disk (0 for a new file); a newer one than this program knows is refused."""
        has_table = self.scalar("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'")
        current = (
            int(self.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
            if has_table
            else 0
        )
        if current > len(MIGRATIONS):
            raise SchemaError(
                f"{self.path} has schema version {current}, newer than this program knows ({len(MIGRATIONS)}): upgrade companion"
            )
        return current

    def _refuse_foreign(self) -> None:
        """Another program's SQLite file (tables, but no schema_version) is never turned into a store by adding ours."""
        tables = self.scalar("SELECT COUNT(*) FROM sqlite_master WHERE name != 'schema_version'")
        if tables and not self.scalar("SELECT 1 FROM sqlite_master WHERE name = 'schema_version'"):
            raise SchemaError(
                f"{self.path} is an SQLite database but not a companion store (it has no schema_version table)"
            )

    def _check_version(self) -> None:
        """A reader changes nothing: ``behind`` tells how many migrations the file lacks, and the caller decides."""
        self._refuse_foreign()
        self.behind = len(MIGRATIONS) - self._version()

    def backup_to(self, target: str | Path) -> None:
        """SQLite online backup: consistent even while the bot writes. The copy is 0600 before a page is in it."""
        create_private(Path(target))
        dest = apsw.Connection(str(target))
        try:
            with dest.backup("main", self.con, "main") as job:
                while not job.done:
                    job.step(1024)
        finally:
            dest.close()


def _location(path: str | Path) -> tuple[str, bool]:
    """(file path, read-only?) of a plain path or of a ``file:`` URI made by ``read_only``."""
    text = str(path)
    if not text.startswith("file:"):
        return text, False
    uri = urlsplit(text)
    return unquote(uri.path), "mode=ro" in uri.query.split("&")


def _connect(target: str, path: str, readonly: bool) -> apsw.Connection:
    """The connection, or an error that names the path: a directory, a missing store to read, a folder we cannot create."""
    if path != ":memory:" and Path(path).is_dir():
        raise IsADirectoryError(
            errno.EISDIR, "the store must be a file, but this is a directory", path
        )
    if readonly and not Path(path).is_file():
        raise FileNotFoundError(errno.ENOENT, "no store exists at this path", path)
    if not readonly and path != ":memory:":
        private_folder(Path(path).parent)
    flags = apsw.SQLITE_OPEN_URI | (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    )
    with _naming(path, readonly):
        con = apsw.Connection(target, flags=flags)
    if not readonly and path != ":memory:":
        # issue 31: 0600, and SQLite makes the -wal and -shm with the store file's own mode
        private_store(path)
    return con


@contextlib.contextmanager
def _naming(path: str, readonly: bool = False) -> Iterator[None]:
    """SQLite's own messages ("file is not a database") do not say which file: these do, and say
    what to check. A read-only open refused as a write is about the store's state, not the
    command."""
    try:
        yield
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise SchemaError(
            f"{path} is not a usable companion store: {exc} (not an SQLite file, or damaged)"
        ) from exc
    except apsw.ReadOnlyError as exc:
        if readonly:
            raise StoreUnavailable(_unreadable(path)) from exc
        raise StoreUnavailable(
            f"{path} is read-only: this command writes, so it needs write access to the file and its directory"
        ) from exc
    except apsw.CantOpenError as exc:
        raise StoreUnavailable(
            f"cannot open {path}: {exc} (check the directory exists and is accessible)"
        ) from exc


def _unreadable(path: str) -> str:
    """Why a read-only command could not read the store: SQLite had to write to it first."""
    journal = Path(f"{path}-journal")
    if journal.exists():
        return (
            f"{path} cannot be read without writing: {journal.name} beside it holds an unfinished "
            "write that SQLite must roll back into the store first, and this command only reads; "
            "if that journal is the store's, open the store once with a command that writes "
            "(memory add, chat, run), else move it away"
        )
    return (
        f"{path} cannot be read without writing: SQLite must first recover it (a writer stopped "
        "mid-write); open it once with a command that writes (memory add, chat, run)"
    )


class AsyncRunner:
    """Runs blocking store calls on one worker thread so the asyncio loop stays responsive."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="memory-db"
        )

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Queues a store call from any thread without waiting for it (a blocking client's bookkeeping)."""
        return self._pool.submit(fn, *args)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
