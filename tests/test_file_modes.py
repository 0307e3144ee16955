"""Issue 31 item 11: what the bot keeps on disk is its owner's alone: every file 0600, every folder 0700.

Each test runs under the usual umask 022 (the one that made the store, its WAL and the log 0644 and the data folder
0755), so only the bot's own care makes them private; ``companion doctor`` names what is not, with the fix."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from conftest import remember

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.private import exposed
from tests.cli_support import Cli, _alice
from tests.fakes import FakeOpenAI


@pytest.fixture(autouse=True)
def usual_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_its_wal_and_shm_and_the_folders_made_for_it_are_owner_only(tmp_path, embedder):
    store = tmp_path / "new" / "data" / "bot.db"
    engine = MemoryEngine(store, embedder, FakeClock())
    try:
        remember(engine, "Alice keeps a tortoise called Quintrell")
        files = [store, store.with_name("bot.db-wal"), store.with_name("bot.db-shm")]
        assert {p.name: oct(mode(p)) for p in files} == {p.name: "0o600" for p in files}
        assert (oct(mode(store.parent)), oct(mode(store.parent.parent))) == ("0o700", "0o700")
    finally:
        engine.close()


def test_a_store_left_0644_by_an_older_version_is_made_0600_when_opened(tmp_path, embedder):
    store = tmp_path / "bot.db"
    MemoryEngine(store, embedder, FakeClock()).close()
    for path in (store, *store.parent.glob("bot.db-*")):
        path.chmod(0o644)
    engine = MemoryEngine(store, embedder, FakeClock())
    try:
        remember(engine, "Alice keeps a tortoise called Quintrell")
        assert exposed([store, *store.parent.glob("bot.db-*")]) == []
    finally:
        engine.close()


def test_journals_and_a_backup_are_owner_only(tmp_path, embedder):
    store = tmp_path / "bot.db"
    engine = MemoryEngine(store, embedder, FakeClock(), journal_dir=tmp_path / "memory")
    try:
        remember(engine, "Alice keeps a tortoise called Quintrell")
        engine.journals.flush()
        engine.backup_to(tmp_path / "backup.db")
    finally:
        engine.close()
    journals = [p for p in (tmp_path / "memory").rglob("*")]
    assert journals and exposed([tmp_path / "memory", tmp_path / "backup.db"]) == []
    assert mode(tmp_path / "backup.db") == 0o600


def test_a_command_makes_the_data_folder_and_the_config_file_owner_only(
    tmp_path, cli: Cli, monkeypatch
):
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data").chmod(0o755)
    (home / ".env").write_text("COMPANION_OPENAI_API_KEY=sk-local\n")
    (home / ".env").chmod(0o644)
    monkeypatch.setenv("COMPANION_HOME", str(home))
    _alice(cli)
    assert (oct(mode(home / "data")), oct(mode(home / ".env"))) == ("0o700", "0o600")
    assert os.umask(0o022) == 0o022  # the command's umask (0077) ended with it


def test_the_log_file_and_the_folder_made_for_it_are_owner_only(tmp_path):
    from bot.cli.main import _file_handler

    handler = _file_handler(tmp_path / "logs" / "bot.log")
    assert handler is not None
    handler.close()
    assert (oct(mode(tmp_path / "logs")), oct(mode(tmp_path / "logs" / "bot.log"))) == (
        "0o700",
        "0o600",
    )


async def test_doctor_names_files_others_may_read_with_the_fix_on_the_line(
    cli: Cli, monkeypatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        await asyncio.to_thread(_alice, cli)
        assert (await asyncio.to_thread(cli, "doctor")).out.count("OK    files") == 1
        cli.db.chmod(0o644)
        cli.db.parent.chmod(0o755)
        result = await asyncio.to_thread(cli, "doctor")
    lines = result.out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL  files"))
    assert str(cli.db) in lines[at] and str(cli.db.parent) in lines[at] and result.code == 1
    assert lines[at + 1].strip().startswith(f"fix: chmod -R go-rwx {cli.db.parent}")
