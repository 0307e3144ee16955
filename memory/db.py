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
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw
import sqlite_vec

from .errors import SchemaError
from .migrations import MIGRATIONS

log = logging.getLogger(__name__)
T = TypeVar("T")


class Database:
    """A migrated SQLite file with sqlite-vec loaded, WAL on."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.con = apsw.Connection(self.path)
        self.con.enable_load_extension(True)
        sqlite_vec.load(self.con)
        self.con.enable_load_extension(False)
        self.con.setbusytimeout(5000)
        # 64 MB page cache and memory-mapped reads: indexes of a 100k+ store do not fit the 2 MB default.
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "temp_store=MEMORY",
                       "cache_size=-65536", "mmap_size=268435456"):
            self.con.execute(f"PRAGMA {pragma}")
        self._migrate()
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
        return [dict(zip(names, row)) for row in cur]

    def one(self, sql: str, params: Any = ()) -> dict[str, Any] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def scalar(self, sql: str, params: Any = ()) -> Any:
        for row in self.con.execute(sql, params):
            return row[0]
        return None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """A savepoint: nested use is fine, and any exception rolls the whole block back."""
        with self.con:
            yield

    def optimize(self) -> None:
        """Refresh the planner's statistics (bounded work): without them it may scan a whole partition."""
        self.execute("PRAGMA analysis_limit=1000")
        self.execute("PRAGMA optimize=0x10002")

    def data_version(self) -> int:
        """Changes whenever another connection commits; used to invalidate in-process caches."""
        return int(self.scalar("PRAGMA data_version"))

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

    # -- migrations ----------------------------------------------------------------------------
    def _migrate(self) -> None:
        self.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
        current = self.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version")
        if current > len(MIGRATIONS):
            raise SchemaError(
                f"{self.path} has schema version {current}, newer than this program knows ({len(MIGRATIONS)}): upgrade companion"
            )
        for version, migration in enumerate(MIGRATIONS, start=1):
            if version <= current:
                continue
            with self.transaction():
                self.execute(migration.sql)
                self.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES(?, ?, datetime('now'))",
                    (version, migration.name),
                )
            log.info("applied migration %s", migration.name)

    def backup_to(self, target: str | Path) -> None:
        """SQLite online backup: consistent even while the bot writes."""
        dest = apsw.Connection(str(target))
        try:
            with dest.backup("main", self.con, "main") as job:
                while not job.done:
                    job.step(1024)
        finally:
            dest.close()


class AsyncRunner:
    """Runs blocking store calls on one worker thread so the asyncio loop stays responsive."""

    def __init__(self) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-db")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
