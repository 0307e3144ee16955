"""The store commands when the store is on PostgreSQL (SCALE-1): ``store scrub`` (and on SQLite), ``doctor``, and
``backup``/``restore``, which say the server's own commands instead of pretending to copy a file."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pgserver
import pytest

from memory.storage.pg_migrations import PG_MIGRATIONS
from tests.cli_support import Cli, _alice

MARK = "zyqxolotlquixwel"
# pg_dump and pg_restore of the test server's own version
PG_BIN = Path(pgserver.__file__).parent / "pginstall" / "bin"


@pytest.fixture
def on_pg(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The CLI's store is a fresh PostgreSQL database, given with a password the operator must never see echoed
    (the test server trusts its socket, so the password is not needed to connect)."""
    url = pg_url.replace("postgres:@", "postgres:s3cret@")
    monkeypatch.setenv("COMPANION_DATABASE_URL", url)
    return url


def forget_alice(cli: Cli) -> None:
    cli.add(
        f"Alice breeds {MARK} finches",
        "--subject",
        f"{MARK} hobby",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    assert cli("memory", "forget-person", "--person", "discord:alice", "--yes").code == 0


def test_store_scrub_on_sqlite_rewrites_the_file_and_leaves_no_byte_of_a_forgotten_word(
    cli: Cli, tmp_path: Path
) -> None:
    forget_alice(cli)
    result = cli("store", "scrub", "--json")
    assert result.code == 0, result.err
    done = result.json()
    assert done["bytes_after"] <= done["bytes_before"] and any(
        "backups" in line for line in done["left"]
    )
    files = [p for p in tmp_path.iterdir() if p.name.startswith("store.db")]
    assert files and not [p.name for p in files if MARK.encode() in p.read_bytes()]


def test_store_scrub_on_postgresql_rewrites_and_says_what_only_the_operator_can_still_remove(
    cli: Cli, on_pg: str
) -> None:
    forget_alice(cli)
    result = cli("store", "scrub")
    assert result.code == 0, result.err
    assert "rewrote postgresql://postgres:***@" in result.out and "s3cret" not in result.out
    assert "still yours to do" in result.out
    for duty in (
        "wal_recycle",
        "base backups and pg_dump files",
        "replicas",
    ):  # the test server recycles WAL (the default)
        assert duty in result.out, duty


def test_doctor_on_postgresql_names_the_server_pgvector_the_size_and_the_schema(
    cli: Cli, on_pg: str
) -> None:
    fresh = cli("doctor", "--json")
    store = {f["check"]: f for f in fresh.json()["checks"]}["store"]
    assert (
        store["status"] == "warn"
        and "schema 0 of" in store["detail"]
        and "none: the next command that writes" in store["fix"]
    )
    _alice(cli)
    store = {f["check"]: f for f in cli("doctor", "--json").json()["checks"]}["store"]
    assert store["status"] == "ok", store
    detail = store["detail"]
    assert detail.startswith("PostgreSQL 18.") and "pgvector 0.8" in detail and " MB" in detail
    assert f"schema {len(PG_MIGRATIONS)} of {len(PG_MIGRATIONS)}" in detail and detail.endswith(
        "1 memory"
    )
    assert "s3cret" not in fresh.out + fresh.err


def test_doctor_names_an_unreachable_postgresql_server_without_its_password(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing listens there
    monkeypatch.setenv(
        "COMPANION_DATABASE_URL", "postgresql://companion:s3cret@127.0.0.1:9/companion"
    )
    result = cli("doctor")
    line = next(line for line in result.out.splitlines() if line.startswith("FAIL  store"))
    assert "cannot connect to postgresql://companion:***@127.0.0.1:9/companion" in line
    assert (
        "COMPANION_DATABASE_URL" in result.out
        and "s3cret" not in result.out + result.err
        and result.code == 1
    )


def test_backup_on_postgresql_says_the_exact_pg_dump_command_and_that_command_makes_a_dump(
    cli: Cli, on_pg: str, tmp_path: Path
) -> None:
    _alice(cli)
    dest = tmp_path / "my backup.dump"  # a space: the command must come quoted, ready to paste
    result = cli("backup", str(dest))
    assert result.code == 2 and not dest.exists() and "s3cret" not in result.out + result.err
    dump = (
        next(line for line in result.err.splitlines() if "pg_dump" in line and "--file" in line)
        .split("back up:", 1)[1]
        .strip()
    )
    assert (
        dump
        == f"pg_dump --format=custom --file={shlex.quote(str(dest))} --dbname={shlex.quote(on_pg.replace(':s3cret@', '@'))}"
    )
    subprocess.run(
        [str(PG_BIN / "pg_dump"), *shlex.split(dump)[1:]], check=True, capture_output=True
    )
    listed = subprocess.run(
        [str(PG_BIN / "pg_restore"), "--list", str(dest)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "TABLE public memories" in listed
    restore = cli("restore", str(dest))
    assert restore.code == 2 and "pg_restore --clean --if-exists --no-owner" in restore.err
