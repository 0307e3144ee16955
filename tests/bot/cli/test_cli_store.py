"""Store paths the way people get them wrong: a directory, a damaged file, someone else's database, a
read-only file, a typo in --db; and ``restore``, the way back from a ``backup``.

Every message names the path; read commands never create a store; a read-only store still serves reads.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest
from conftest import older_store

from tests.cli_support import Cli, _alice

READ_COMMANDS = [
    ["memory", "list"],
    ["stats"],
    ["memory", "search", "tea", "--mode", "bm25"],
    ["memory", "show", "abcd1234"],
    ["memory", "export", "--person", "alice"],
]


@pytest.fixture
def make_read_only() -> Iterator[Callable[[Path], None]]:
    """Make a file read-only for this process; root ignores permission bits, so it also gets the immutable flag."""
    made: list[Path] = []

    def make(path: Path) -> None:
        path.chmod(0o444)
        made.append(path)
        if os.geteuid() == 0:
            try:
                done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            except FileNotFoundError:
                pytest.skip("running as root without chattr: cannot make a file read-only")
            if done.returncode != 0:
                pytest.skip(f"running as root and chattr failed: {done.stderr.decode().strip()}")

    yield make
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        path.chmod(0o644)


def test_a_directory_given_as_the_store_is_named(cli: Cli, tmp_path: Path) -> None:
    folder = Cli(tmp_path, cli.capsys)
    for argv in (
        ["stats"],
        ["memory", "add", "a note", "--subject", "s", "--scope", "user", "--scope-id", "discord:1"],
    ):
        result = folder(*argv)
        assert (
            result.code == 2
            and "is a directory" in result.error_line()
            and str(tmp_path) in result.error_line()
        )


def test_a_damaged_file_is_named_and_left_alone(cli: Cli) -> None:
    cli.db.write_bytes(b"this is not sqlite" * 100)
    for argv in (
        ["stats"],
        ["memory", "add", "a note", "--subject", "s", "--scope", "user", "--scope-id", "discord:1"],
    ):
        result = cli(*argv)
        assert (
            result.code == 1
            and "not a usable companion store" in result.error_line()
            and cli.db.name in result.error_line()
        )
    assert cli.db.read_bytes() == b"this is not sqlite" * 100


def test_another_programs_database_is_not_turned_into_a_store(cli: Cli) -> None:
    other = apsw.Connection(str(cli.db))
    other.execute("CREATE TABLE recipes (name TEXT)")
    other.close()
    result = cli(
        "memory", "add", "a note", "--subject", "s", "--scope", "user", "--scope-id", "discord:1"
    )
    assert result.code == 1 and "not a companion store" in result.error_line()
    check = apsw.Connection(str(cli.db))
    assert [name for (name,) in check.execute("SELECT name FROM sqlite_master")] == ["recipes"]


@pytest.mark.parametrize("argv", READ_COMMANDS + [["backup", "copy.db"]])
def test_read_commands_do_not_create_a_mistyped_store(
    cli: Cli, tmp_path: Path, argv: list[str]
) -> None:
    typo = Cli(tmp_path / "sotre.db", cli.capsys)
    result = typo(*argv)
    assert (
        result.code == 2
        and "no store exists at" in result.error_line()
        and "sotre.db" in result.error_line()
    )
    assert not list(tmp_path.iterdir())


def test_a_read_only_store_serves_reads_and_refuses_writes_by_name(
    cli: Cli, tmp_path: Path, make_read_only
) -> None:
    memory_id = _alice(cli)
    make_read_only(cli.db)

    assert [m["id"] for m in cli("memory", "list", "--json").json()] == [memory_id]
    assert cli("stats", "--json").json()["memories"] == 1
    assert (
        cli("memory", "show", memory_id[:8], "--json").json()["content"]
        == "Alice drinks green tea every morning"
    )
    assert len(cli("memory", "search", "green tea", "--mode", "bm25", "--json").json()) == 1
    assert cli("memory", "export", "--person", "discord:alice").json()["person_ids"] == [
        "discord:alice"
    ]
    assert cli("backup", str(tmp_path / "copy.db")).code == 0
    assert Cli(tmp_path / "copy.db", cli.capsys)("stats", "--json").json()["memories"] == 1

    refused = cli(
        "memory",
        "add",
        "Bob collects vinyl records",
        "--subject",
        "Bob",
        "--scope",
        "user",
        "--scope-id",
        "discord:bob",
    )
    assert (
        refused.code == 1
        and "read-only" in refused.error_line()
        and "store.db" in refused.error_line()
    )
    assert "Traceback" not in refused.err


def test_an_older_store_is_upgraded_before_a_read(cli: Cli) -> None:
    from memory.storage.migrations import MIGRATIONS

    older_store(cli.db)
    assert cli("memory", "list", "--json").json() == []
    check = apsw.Connection(str(cli.db))
    assert check.execute("SELECT MAX(version) FROM schema_version").fetchall() == [
        (len(MIGRATIONS),)
    ]


# -- restore ------------------------------------------------------------------------------------------------
def test_restore_brings_back_a_backup(cli: Cli, tmp_path: Path) -> None:
    memory_id = _alice(cli)
    backup = tmp_path / "monday.db"
    assert cli("backup", str(backup)).code == 0
    cli.add(
        "Bob collects vinyl records",
        "--subject",
        "Bob",
        "--scope",
        "user",
        "--scope-id",
        "discord:bob",
    )

    refused = cli("restore", str(backup))
    assert refused.code == 2 and "--force" in refused.error_line()
    assert len(cli("memory", "list", "--json").json()) == 2

    restored = cli("restore", str(backup), "--force")
    assert restored.code == 0 and "1 memory" in restored.out
    assert [m["id"] for m in cli("memory", "list", "--json").json()] == [memory_id]

    elsewhere = Cli(tmp_path / "new" / "store.db", cli.capsys)
    assert elsewhere("restore", str(backup)).code == 0
    assert [m["id"] for m in elsewhere("memory", "list", "--json").json()] == [memory_id]


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"not a database at all" * 50, "not a usable companion store"),
        (None, "not a companion store"),  # an SQLite file of another program
    ],
)
def test_restore_refuses_what_is_not_a_store(
    cli: Cli, tmp_path: Path, content: bytes | None, fragment: str
) -> None:
    memory_id = _alice(cli)
    source = tmp_path / "suspicious.db"
    if content is None:
        other = apsw.Connection(str(source))
        other.execute("CREATE TABLE recipes (name TEXT)")
        other.close()
    else:
        source.write_bytes(content)
    result = cli("restore", str(source), "--force")
    assert (
        result.code == 2
        and fragment in result.error_line()
        and "nothing was restored" in result.error_line()
    )
    assert [m["id"] for m in cli("memory", "list", "--json").json()] == [memory_id]


def test_restore_refuses_a_missing_file_and_the_store_itself(cli: Cli, tmp_path: Path) -> None:
    _alice(cli)
    missing = cli("restore", str(tmp_path / "nope.db"), "--force")
    assert missing.code == 2 and "no backup file at" in missing.error_line()
    itself = cli("restore", str(cli.db), "--force")
    assert itself.code == 2 and "the store itself" in itself.error_line()


def test_stats_shows_dead_letters_and_retry_failed_queues_them_again(cli) -> None:
    """Trust F13: a batch that kept failing is visible to the operator and can be retried; nothing is dropped."""
    from memory.engine import MemoryEngine
    from memory.scopes import RecallContext

    cli("stats")  # creates the store
    with MemoryEngine(cli.db, None) as engine:
        buffer = engine.buffer
        row = buffer.push(
            "telegram:dm-7",
            RecallContext("telegram", "telegram:7", "dm-7", is_dm=True),
            "I keep bees",
        )
        for _ in range(5):
            buffer.fail([row], "BadAnswer: no JSON array")
    stats = cli("stats", "--json").json()
    assert stats["dead_letters"] == 1 and stats["waiting_for_extraction"] == 0
    assert "retry-failed" in cli("stats").err
    assert cli("retry-failed", "--json").json() == {"requeued": 1}
    assert cli("stats", "--json").json()["waiting_for_extraction"] == 1
