"""MAINT-5: bulletins, written by the scripted model from what a scope may see, shown in the next prompt within
their budget, rewritten only after enough changes, never holding another scope's words, gone with what they
paraphrase (read back from the store's bytes), and the `companion bulletin` commands."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from cli_support import Cli
from conftest import remember
from pipeline_support import dm, group

from memory.clock import DAY
from memory.models import Scope, Visibility
from memory.upkeep.bulletin import MAX_CHARS, SYSTEM, Bulletins
from memory.upkeep.forgetting import forget_memory, forget_person
from tests.fakes import FakeOpenAI

SECRET = "Zyqxolotl"  # distinctive: no other text in the store shares its letters
G1, G2 = "discord:g1", "discord:g2"
ALICE, BOB = "discord:alice", "discord:bob"


def echo(body):
    """A bulletin writer that repeats every memory line it was given: whatever reaches its prompt reaches the bulletin."""
    if body["messages"][0]["content"] != SYSTEM:
        return "ok"
    return "Identity:\n" + "\n".join(
        line for line in body["messages"][-1]["content"].splitlines() if line.startswith("- (")
    )


def bulletin_requests(srv) -> list[str]:
    return [
        b["messages"][-1]["content"]
        for b in srv.chat_requests
        if b["messages"][0]["content"] == SYSTEM
    ]


def guild_facts(engine, person: str = ALICE, guild: str = G1, n: int = 3) -> None:
    for i, what in enumerate(
        (
            "bakes sourdough",
            "plays the cello",
            "runs a chess club",
            "grows tomatoes",
            "rides a tandem",
        )[:n]
    ):
        remember(engine, f"{person} {what} (guild fact {i})", scope_id=person, guild_id=guild)


async def test_a_bulletin_is_written_cut_to_its_budget_and_shown_in_the_next_prompt_not_rewritten_each_turn(
    rt, srv
):
    guild_facts(rt.engine)
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello all", name="Alice"))
    long_answer = "Identity:\n" + "\n".join(f"- line {i:03d} " + "x" * 80 for i in range(200))
    srv.default = lambda body: long_answer if body["messages"][0]["content"] == SYSTEM else "ok"
    assert await rt.bulletins.run() == 1
    (prompt,) = bulletin_requests(srv)
    # the memories the scope sees
    assert "bakes sourdough" in prompt and "runs a chess club" in prompt
    stored = Bulletins(rt.engine).get("guild", G1)
    assert (
        stored is not None and len(stored.text) <= MAX_CHARS and stored.text.startswith("Identity:")
    )

    srv.script("Hi Alice!")
    await rt.orchestrator.reply(group("discord", "g1", "alice", "what's new?", name="Alice"))
    system = srv.chat_requests[-1]["messages"][0]["content"]
    assert "## Briefing" in system and '"- line 000 ' in system
    shown = re.findall(r'"- line \d+ x+"', system)
    # cut to the budget: 700 tokens of ~100-character lines
    assert 0 < len(shown) < stored.text.count("- line ")
    assert sum(len(s) // 4 + 1 for s in shown) <= 700
    assert len(bulletin_requests(srv)) == 1  # a turn never asks for a bulletin
    assert await rt.bulletins.run() == 0  # nothing changed: not rewritten


async def test_a_bulletin_is_rewritten_after_enough_changes_or_when_a_day_old_and_changed(rt, srv):
    clock = rt.engine.clock
    srv.default = echo
    guild_facts(rt.engine, BOB, G1, 3)
    await rt.orchestrator.observe(group("discord", "g1", "bob", "hello", name="Bob"))
    assert await rt.bulletins.run() == 1
    clock.advance(60)
    for i in range(4):
        remember(
            rt.engine, f"Bob learned new fact number {i} about kites", scope_id=BOB, guild_id=G1
        )
    assert await rt.bulletins.run() == 0  # 4 changes: fewer than the 5 that make it due
    remember(rt.engine, "Bob bought a red kite", scope_id=BOB, guild_id=G1)
    assert await rt.bulletins.run() == 1
    assert "Bob bought a red kite" in Bulletins(rt.engine).get("guild", G1).text
    clock.advance(60)
    remember(rt.engine, "Bob flies kites on the beach", scope_id=BOB, guild_id=G1)
    assert await rt.bulletins.run() == 0  # one change, and a fresh bulletin
    clock.advance(DAY)
    # a day old and changed (the chat is quiet: found by its age)
    assert await rt.bulletins.run() == 1
    clock.advance(DAY)
    assert await rt.bulletins.run() == 0  # a day old but nothing changed


async def test_a_guilds_bulletin_never_holds_dm_private_owner_or_another_guilds_words(rt, srv):
    engine = rt.engine
    srv.default = echo
    guild_facts(engine)
    remember(
        engine,
        f"Alice's diagnosis is {SECRET} syndrome",
        scope_id=ALICE,
        visibility=Visibility.PRIVATE,
    )
    remember(
        engine,
        "The owner banks with Vorpalbank",
        scope=Scope.OWNER,
        scope_id="discord:boss",
        visibility=Visibility.PRIVATE,
    )
    # said in another guild...
    remember(engine, "Alice collects Quuxberry stamps", scope_id=ALICE, guild_id=G2)
    # ...and shared across guilds: still not in guild 1's bulletin
    engine.people.set_sharing(ALICE, True)
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello all", name="Alice"))
    await rt.orchestrator.observe(dm("discord", "alice", "hi there", name="Alice"))
    assert await rt.bulletins.run() == 2
    guild = Bulletins(engine).get("guild", G1).text
    assert "bakes sourdough" in guild
    for word in (SECRET, "Vorpalbank", "Quuxberry"):
        assert word not in guild
    # her own DMs' bulletin has it: the check can fail
    assert SECRET in Bulletins(engine).get("dm", ALICE).text

    srv.script("Hello Bob")
    await rt.orchestrator.reply(group("discord", "g1", "bob", "tell me about Alice", name="Bob"))
    system = srv.chat_requests[-1]["messages"][0]["content"]
    assert "bakes sourdough" in system and SECRET not in system and "Quuxberry" not in system


def occurrences(path: Path, word: str) -> int:
    """The word's count in the store file and its WAL, as bytes (tests/test_registry.py reads them the same way)."""
    files = [p for p in path.parent.iterdir() if p.name.startswith(path.name) and p.is_file()]
    return sum(len(re.findall(word.lower().encode(), p.read_bytes().lower())) for p in files)


async def test_forgetting_a_memory_drops_the_bulletin_that_paraphrased_it_from_the_files_and_a_new_one_omits_it(
    rt, srv, tmp_path
):
    engine, path = rt.engine, tmp_path / "bot.db"
    srv.default = echo
    doomed = remember(
        engine, f"Alice named her cat {SECRET}", scope_id=ALICE, visibility=Visibility.PRIVATE
    )
    for what in ("Alice likes green tea", "Alice lives in Lyon", "Alice plays padel on Sundays"):
        remember(engine, what, scope_id=ALICE, visibility=Visibility.PRIVATE)
    await rt.orchestrator.observe(dm("discord", "alice", "hi there", name="Alice"))
    assert await rt.bulletins.run() == 1
    engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert SECRET in Bulletins(engine).get("dm", ALICE).text and occurrences(path, SECRET) > 0

    await rt.runner.run(forget_memory, engine, doomed.id)
    assert Bulletins(engine).get("dm", ALICE) is None
    assert occurrences(path, SECRET) == 0
    assert await rt.bulletins.run() == 1  # written again later, from what is left
    assert (
        "green tea" in Bulletins(engine).get("dm", ALICE).text
        and SECRET not in Bulletins(engine).get("dm", ALICE).text
    )


async def test_any_deletion_or_rewording_of_a_source_memory_drops_the_bulletin(rt, srv):
    engine = rt.engine
    srv.default = echo
    guild_facts(engine, ALICE, G1, 3)
    guild_facts(engine, BOB, G2, 3)
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello", name="Alice"))
    await rt.orchestrator.observe(group("discord", "g2", "bob", "hello", name="Bob"))
    assert await rt.bulletins.run() == 2
    alice = engine.memory_rows.listing((f"user|{ALICE}|public|{G1}",), limit=1)[0]
    # an edit: the old words are gone
    engine.memories.update(alice.id, content="Alice bakes rye bread now")
    assert (
        Bulletins(engine).get("guild", G1) is None
        and Bulletins(engine).get("guild", G2) is not None
    )
    assert await rt.bulletins.run() == 1
    bob = engine.memory_rows.listing((f"user|{BOB}|public|{G2}",), limit=1)[0]
    engine.memories.delete(bob.id)  # `companion memory delete`
    assert (
        Bulletins(engine).get("guild", G2) is None
        and Bulletins(engine).get("guild", G1) is not None
    )


async def test_forgetting_a_person_drops_every_bulletin_that_could_hold_their_words_and_only_those(
    rt, srv, tmp_path
):
    engine = rt.engine
    srv.default = echo
    guild_facts(engine, ALICE, G1, 3)
    remember(engine, f"Alice's band is called {SECRET}", scope_id=ALICE, guild_id=G1)
    guild_facts(engine, BOB, G2, 3)
    for person in ("alice", "bob"):
        await rt.orchestrator.observe(dm("discord", person, "hi", name=person.title()))
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello", name="Alice"))
    await rt.orchestrator.observe(group("discord", "g2", "bob", "hello", name="Bob"))
    assert await rt.bulletins.run() == 4
    engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert occurrences(tmp_path / "bot.db", SECRET) > 0
    await rt.runner.run(forget_person, engine, [ALICE])
    assert occurrences(tmp_path / "bot.db", SECRET) == 0
    left = {(b.scope, b.scope_id) for b in Bulletins(engine).stored()}
    assert left == {("dm", BOB), ("guild", G2)}
    assert "alice" not in str(engine.db.rows("SELECT * FROM bulletins")).lower()
    assert (
        engine.db.scalar(
            "SELECT COUNT(*) FROM bulletin_partitions WHERE partition_key LIKE '%alice%'"
        )
        == 0
    )


async def test_an_empty_answer_writes_no_bulletin_and_the_next_run_writes_it(rt, srv):
    srv.default = lambda body: "   " if body["messages"][0]["content"] == SYSTEM else "ok"
    guild_facts(rt.engine, ALICE, G1, 3)
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello", name="Alice"))
    assert await rt.bulletins.run() == 0 and Bulletins(rt.engine).stored() == []
    srv.default = echo
    assert await rt.bulletins.run() == 1


def test_a_scope_is_checked_before_it_is_read(engine):
    from memory.errors import InvalidInput

    for scope, scope_id in (("user", ALICE), ("guild", ""), ("everything", "x")):
        with pytest.raises(InvalidInput):
            Bulletins(engine).scope(scope, scope_id)


async def test_the_bulletin_commands_show_and_refresh(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        for text in ("Alice drinks green tea", "Alice lives in Lyon", "Alice plays padel"):
            cli.add(text, "--subject", "Alice", "--scope", "user", "--scope-id", "discord:alice")
        assert "no bulletin yet" in cli("bulletin", "show").out
        nothing = await asyncio.to_thread(cli, "bulletin", "refresh")
        # no chat was active: nothing asked
        assert nothing.code == 0 and "no bulletin is due" in nothing.out
        srv.script("Identity:\n- Alice lives in Lyon and drinks green tea")
        done = await asyncio.to_thread(
            cli, "bulletin", "refresh", "--scope", "dm", "--scope-id", "discord:alice", "--json"
        )
    assert done.code == 0, done.err
    assert [b["scope_id"] for b in done.json()["written"]] == ["discord:alice"]
    assert "Alice lives in Lyon" in bulletin_requests(srv)[0]
    shown = cli("bulletin", "show", "--scope", "dm", "--json").json()
    assert [(b["scope"], b["scope_id"], b["memory_count"]) for b in shown] == [
        ("dm", "discord:alice", 3)
    ]
    assert "drinks green tea" in cli("bulletin", "show").out
    half = cli("bulletin", "refresh", "--scope", "dm")
    assert half.code == 2 and "--scope and --scope-id together" in half.error_line()


async def test_a_memory_forgotten_while_the_model_writes_the_bulletin_keeps_it_out(rt, srv):
    engine = rt.engine
    doomed = remember(
        engine, f"Alice named her cat {SECRET}", scope_id=ALICE, visibility=Visibility.PRIVATE
    )
    for what in ("Alice likes green tea", "Alice lives in Lyon"):
        remember(engine, what, scope_id=ALICE, visibility=Visibility.PRIVATE)
    await rt.orchestrator.observe(dm("discord", "alice", "hi there", name="Alice"))

    async def forget_then_write(body):
        if body["messages"][0]["content"] == SYSTEM:
            await rt.runner.run(forget_memory, engine, doomed.id)
        return echo(body)

    srv.default = forget_then_write
    assert await rt.bulletins.run() == 0 and Bulletins(engine).stored() == []
    # it was asked, with the memory, before the forget
    assert "green tea" in bulletin_requests(srv)[0]


async def test_a_scope_with_a_great_many_long_memories_gives_the_model_a_bounded_prompt(rt, srv):
    srv.default = echo
    for i in range(150):
        remember(
            rt.engine,
            f"Alice note {i}: " + " ".join(f"word{i}x{j}" for j in range(60)),
            scope_id=ALICE,
            guild_id=G1,
        )
    await rt.orchestrator.observe(group("discord", "g1", "alice", "hello", name="Alice"))
    assert await rt.bulletins.run() == 1
    (prompt,) = bulletin_requests(srv)
    assert len(prompt) < 14_000 and len(Bulletins(rt.engine).get("guild", G1).text) <= MAX_CHARS
