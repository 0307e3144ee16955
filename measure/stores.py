"""Where a measurement keeps its store: a file in a temporary folder (SQLite, the default), or a new database made
for it on the PostgreSQL server of ``--db`` and dropped after (``companion bench --db``, ``companion eval locomo
--db``).

A measurement never writes into the database the URL names: it could be someone's store, and a bench loads 100k
synthetic rows. It makes its own database beside it (``companion_bench_<pid>_<n>``; the URL's role needs
CREATEDB) and drops it when done, even when the run fails.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memory.storage.pg import is_postgres, redact

_numbers = itertools.count(1)


class MeasureStoreError(Exception):
    """``--db`` is not a PostgreSQL URL the measurement can use."""


@contextlib.contextmanager
def scratch_store(db: str | None, folder: Path, name: str) -> Iterator[str | Path]:
    """A store location for one measured store: ``folder/name.db`` without ``db``, else a fresh database on
    ``db``'s server (its URL), dropped on the way out."""
    if db is None:
        yield folder / f"{name}.db"
        return
    check_db(db)
    database = f"companion_{_slug(name)}_{os.getpid()}_{next(_numbers)}"
    _admin(db, f'CREATE DATABASE "{database}"')
    try:
        yield _with_database(db, database)
    finally:
        # FORCE: a listener thread of an engine that failed to close must not keep the database alive
        _admin(db, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def check_db(db: str | None) -> None:
    """Refuses a ``--db`` that is not a PostgreSQL URL (a file path would be a second way to say the default)."""
    if db is not None and not is_postgres(db):
        raise MeasureStoreError(
            f"--db takes a postgresql:// URL (the default is a temporary SQLite file), not {redact(db)!r}"
        )


def _slug(name: str) -> str:
    """A database-name-safe part of ``name`` (a LoCoMo sample id may hold any character)."""
    return re.sub(r"[^a-z0-9_]", "_", name.lower())[:30]


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _admin(url: str, sql: str) -> None:
    import psycopg  # the optional [postgres] extra: only a --db run needs it

    try:
        with psycopg.connect(url, autocommit=True) as con:
            con.execute(sql)
    except psycopg.Error as exc:
        raise MeasureStoreError(
            f"the measurement's own database on that server: {exc}".strip()
        ) from exc
