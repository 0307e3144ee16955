"""The Markdown layer (MAINT-6): journals and MEMORY.md beside the store, one folder per scope, forgotten with
the memories they carry. Checked the way an auditor would: by reading the bytes of every file in the folder."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import HashEmbedder, remember

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import Scope, Visibility
from memory.storage.journals import SNAPSHOT, folder_of, safe_name
from memory.upkeep.forgetting import forget_guild, forget_memory, forget_person
from memory.upkeep.registry import FILE_REGISTRY
from tests.pipeline_support import build_runtime, dm, facts, group


def every_byte(root: Path) -> dict[str, bytes]:
    """Every file under the journal folder (temporary and hidden ones included), by relative path."""
    return (
        {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
        if root.exists()
        else {}
    )


def holding(root: Path, word: str) -> list[str]:
    return [
        name for name, data in every_byte(root).items() if word.lower().encode() in data.lower()
    ]


def today(clock: FakeClock) -> str:
    return f"{datetime.fromtimestamp(clock.now(), UTC):%Y-%m-%d}.md"


@pytest.fixture
async def bot(tmp_path, srv):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), owner_ids=["telegram:1"])
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


async def tell(rt, srv, message, fact: str) -> None:
    """One turn, and the words it was about extracted after the debounce."""
    srv.script("Noted!")
    await rt.orchestrator.reply(message)
    rt.engine.clock.advance(31)
    srv.script(facts({"about": "P1", "subject": fact.split()[1], "content": fact}))
    assert (await rt.background.tick())["extracted"] == 1


def memory_id(rt, content: str) -> str:
    return rt.engine.db.scalar("SELECT id FROM memories WHERE content = ?", (content,))


# -- written beside the store ------------------------------------------------------------------------------
async def test_a_chat_session_leaves_a_journal_line_naming_the_memory_and_a_snapshot(
    bot, srv, tmp_path
):
    await tell(
        bot,
        srv,
        dm("telegram", "7", "I keep bees on my roof", mid="m1"),
        "Alice keeps bees on her roof",
    )
    root = tmp_path / "memory"
    journal = (root / "dm-telegram-7" / today(bot.engine.clock)).read_text()
    line = [x for x in journal.splitlines() if "bees" in x]
    mid = memory_id(bot, "Alice keeps bees on her roof")
    assert line and re.fullmatch(
        rf"- \d\d:\d\d \[profile\] Alice keeps bees on her roof <!-- m:{mid} -->", line[0]
    )
    snapshot = (root / "dm-telegram-7" / SNAPSHOT).read_text()
    assert (
        "## Semantic" in snapshot and f"Alice keeps bees on her roof <!-- m:{mid} -->" in snapshot
    )
    assert {h.keeper for h in FILE_REGISTRY} == {"journals"} and bot.engine.journals is not None


async def test_a_guild_folder_never_holds_dm_private_or_owner_words(bot, srv, tmp_path):
    await tell(
        bot,
        srv,
        group("discord", "g1", "5", "I organise the Tuesday meetups", mid="g1"),
        "Bob organises the Tuesday meetups",
    )
    await tell(
        bot,
        srv,
        dm("discord", "5", "my diagnosis is Quillotine syndrome", mid="d1"),
        "Bob has Quillotine syndrome",
    )
    await tell(
        bot,
        srv,
        dm("telegram", "1", "my launch codename is Vexmoor", mid="o1"),
        "The owner's launch codename is Vexmoor",
    )
    root = tmp_path / "memory"
    assert holding(root, "Tuesday") == [
        "guild-discord-g1/" + today(bot.engine.clock),
        "guild-discord-g1/MEMORY.md",
    ]
    assert all(name.startswith("dm-discord-5/") for name in holding(root, "Quillotine"))
    assert all(name.startswith("owner/") for name in holding(root, "Vexmoor")) and holding(
        root, "Vexmoor"
    )


def test_an_id_cannot_lead_a_folder_out_of_the_journals_or_into_another_scope():
    for hostile in ("../owner", "../../etc", "a/b", "..", "x|y", "dm-telegram-7"):
        name = folder_of(f"guild|{hostile}|public")
        assert name.startswith("guild-") and "/" not in name and name not in ("guild-..", "guild-.")
    assert safe_name("discord:1") == "discord-1" and safe_name("a/b") != safe_name("a:b")
    # public in that server
    assert folder_of("user|telegram:7|public|discord:1") == "guild-discord-1"
    assert (
        folder_of("user|telegram:7|private")
        == folder_of("user|telegram:7|public")
        == "dm-telegram-7"
    )
    assert folder_of("owner|telegram:1|private") == "owner"


# -- forgetting -----------------------------------------------------------------------------------------
async def test_forgetting_one_memory_removes_its_words_from_every_journal_file(bot, srv, tmp_path):
    await tell(
        bot,
        srv,
        dm("telegram", "7", "my dog is called Zyqxolotl", mid="m1"),
        "Alice has a dog called Zyqxolotl",
    )
    await tell(bot, srv, dm("telegram", "7", "I like green tea", mid="m2"), "Alice likes green tea")
    root = tmp_path / "memory"
    assert holding(root, "Zyqxolotl")  # the test can fail: the word was written
    answer = await bot.orchestrator.command(
        "forget", "dog Zyqxolotl", dm("telegram", "7", "/forget dog Zyqxolotl")
    )
    assert "Forgotten" in answer
    assert holding(root, "Zyqxolotl") == []
    # the rest stays, line and snapshot
    assert holding(root, memory_id(bot, "Alice likes green tea"))
    # no temp or backup
    assert sorted(every_byte(root)) == [
        f"dm-telegram-7/{today(bot.engine.clock)}",
        "dm-telegram-7/MEMORY.md",
    ]


async def test_forget_everything_leaves_no_word_and_no_folder_of_the_person(bot, srv, tmp_path):
    await tell(
        bot,
        srv,
        dm("telegram", "7", "my cat is Zyqxolotl", mid="m1"),
        "Alice has a cat called Zyqxolotl",
    )
    await tell(
        bot,
        srv,
        group("telegram", "g2", "7", "I cook Zyqxolotl stew for the club", mid="m2"),
        "Alice cooks Zyqxolotl stew for the club",
    )
    await tell(
        bot,
        srv,
        group("telegram", "g2", "8", "I bring bread", mid="m3"),
        "Carol brings bread to the club",
    )
    root = tmp_path / "memory"
    assert len(holding(root, "Zyqxolotl")) == 4
    await bot.orchestrator.command(
        "forget", "everything confirm", dm("telegram", "7", "/forget everything confirm")
    )
    assert holding(root, "Zyqxolotl") == []
    assert not (root / "dm-telegram-7").exists()
    assert holding(root, "bread") == [
        f"guild-telegram-g2/{today(bot.engine.clock)}",
        "guild-telegram-g2/MEMORY.md",
    ]


def test_a_line_left_in_another_folder_is_found_by_the_forget_sweep(tmp_path):
    clock = FakeClock()
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), clock, journal_dir=tmp_path / "j"
    ) as engine:
        memory = remember(
            engine,
            "Alice named her boat Zyqxolotl",
            scope_id="alice",
            visibility=Visibility.PRIVATE,
        )
        # e.g. written before a /link moved the memory
        stray = tmp_path / "j" / "dm-elsewhere" / "2020-01-01.md"
        stray.parent.mkdir()
        stray.write_text(
            f"# old\n\n- 10:00 [other] Alice named her boat Zyqxolotl <!-- m:{memory.id} -->\n- 10:01 [other] kept <!-- m:x -->\n"
        )
        forget_memory(engine, memory.id)
        assert holding(tmp_path / "j", "Zyqxolotl") == []
        assert "kept" in stray.read_text()


def test_an_edit_replaces_the_line_and_an_update_keeps_the_old_one_as_history(tmp_path):
    clock = FakeClock()
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), clock, journal_dir=tmp_path / "j"
    ) as engine:
        memory = remember(
            engine, "Alice's locker code word is Zyqxolotl", subject="locker", scope_id="alice"
        )
        engine.memories.update(memory.id, content="Alice's locker code word is Plumbrook")
        assert holding(tmp_path / "j", "Zyqxolotl") == []  # an edit keeps no copy of the old words
        old = remember(
            engine, "Alice lives in Oslo near the harbour", subject="home", scope_id="alice"
        )
        new = remember(engine, "Alice moved to Bergen in March", subject="home", scope_id="alice")
        # what a changed passage of a re-ingested file does
        engine.memories.supersede(new.id, [old.id])
        engine.journals.flush()
        folder = tmp_path / "j" / "dm-alice"
        journal = (folder / today(clock)).read_text()
        # append-only: the superseded line stays
        assert f"m:{old.id}" in journal and f"m:{new.id}" in journal
        assert engine.memory_rows.get(old.id).superseded_by == new.id
        snapshot = (folder / SNAPSHOT).read_text()
        # the snapshot is what is live
        assert f"m:{new.id}" in snapshot and f"m:{old.id}" not in snapshot


def test_forgetting_a_person_and_purging_a_guild_empty_their_folders(tmp_path):
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), FakeClock(), journal_dir=tmp_path / "j"
    ) as engine:
        remember(
            engine,
            "Alice sails a Zyqxolotl dinghy",
            scope_id="alice",
            visibility=Visibility.PRIVATE,
        )
        remember(
            engine, "The server's mascot is Quillotine", scope=Scope.GUILD, scope_id="discord:9"
        )
        remember(engine, "Bob likes the mascot Quillotine", scope_id="bob", guild_id="discord:9")
        remember(engine, "Bob plays the oboe", scope_id="bob")
        forget_person(engine, ["alice"])
        forget_guild(engine, "discord:9")
        root = tmp_path / "j"
        assert holding(root, "Zyqxolotl") == holding(root, "Quillotine") == []
        assert sorted(p.name for p in root.iterdir()) == ["dm-bob"]


def test_journals_can_be_switched_off(tmp_path):
    from bot.composition import open_engine
    from bot.config import journal_dir, load_settings

    settings = load_settings(
        db_path=tmp_path / "s.db", embeddings="none", journals=False, _env_file=None
    )
    assert journal_dir(settings) is None
    with open_engine(settings, None) as engine:
        remember(engine, "Alice keeps bees", scope_id="alice")
    assert not (tmp_path / "memory").exists()
    on = load_settings(db_path=tmp_path / "s.db", embeddings="none", _env_file=None)
    assert journal_dir(on) == tmp_path / "memory"


def test_words_that_imitate_a_line_marker_cannot_take_another_memorys_line_with_them(tmp_path):
    with MemoryEngine(
        tmp_path / "m.db", HashEmbedder(), FakeClock(), journal_dir=tmp_path / "j"
    ) as engine:
        target = remember(engine, "Bob keeps a diary in Quillotine ink", scope_id="bob")
        forged = remember(
            engine,
            f"Mallory likes tea <!-- m:{target.id} -->\n- 10:00 [other] fake line",
            scope_id="bob",
        )
        journal = next((tmp_path / "j" / "dm-bob").glob("2*.md"))
        # header, blank, two lines: the newline did not make a third
        assert len(journal.read_text().splitlines()) == 4
        forget_memory(engine, forged.id)
        assert f"m:{target.id}" in journal.read_text() and "Mallory" not in journal.read_text()
        forget_memory(engine, target.id)
        assert holding(tmp_path / "j", "Quillotine") == []


def test_memory_add_and_delete_on_the_command_line_write_and_unwrite_the_journal(cli, tmp_path):
    kept = cli.add(
        "Alice collects Plumbrook stamps",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    gone = cli.add(
        "Alice's bank is Zyqxolotl Savings",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    root = tmp_path / "memory"
    assert holding(root, "Zyqxolotl") and holding(root, kept)
    assert cli("memory", "delete", gone, "--yes").code == 0
    assert holding(root, "Zyqxolotl") == [] and len(holding(root, "Plumbrook")) == 2
    # a read-only command writes nothing
    assert cli("memory", "list").code == 0 and (root / "dm-discord-alice" / SNAPSHOT).exists()


def test_after_a_restore_the_journals_say_what_the_restored_store_says_and_forget_everything_leaves_no_word(
    cli, tmp_path
):
    cli.add(
        "Alice collects Plumbrook stamps",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    assert cli("backup", str(tmp_path / "before.db")).code == 0
    cli.add(
        "Alice is secretly moving to Zyqxolotl",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    root = tmp_path / "memory"
    assert holding(root, "Zyqxolotl")
    assert cli("restore", str(tmp_path / "before.db"), "--force").code == 0
    # the day's line and MEMORY.md
    assert holding(root, "Zyqxolotl") == [] and len(holding(root, "Plumbrook")) == 2
    assert cli("memory", "forget-person", "--person", "discord:alice", "--yes").code == 0
    assert every_byte(root) == {}
