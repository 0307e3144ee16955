"""Forget exactly what was asked, and keep it forgotten (issue 20, findings 1 and 2; SEC-3, SEC-5).

A fact is linked to the messages that support it (the lines it cites, else the closest of its speaker's), a
repeat of a known fact is linked too, and a forgotten fact leaves a tombstone: keyed hashes, no words, that
extraction, reflection, consolidation, bulletins and ingest consult, until the person says it again.
"""

from __future__ import annotations

import json

import pytest
from conftest import HashEmbedder, dm_ctx, fts_rids, remember, say

from memory.clock import DAY, FakeClock
from memory.engine import MemoryEngine
from memory.models import NewMemory, Provenance, Scope, Source
from memory.scopes import RecallContext
from memory.tools import MemoryTools
from memory.upkeep.forgetting import forget_memory, forget_person
from memory.write.extraction import Line, Transcript, memories_from
from memory.write.ingest import Ingester, IngestTarget
from memory.write.tombstones import unforgotten
from memory.write.wording import normalised
from tests.pipeline_support import dm, facts, group

DAY0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC
FINCH = "Alice breeds zebrafinches"


@pytest.fixture
def engine(any_engine):
    """Every test here runs on SQLite and on PostgreSQL (SCALE-1)."""
    return any_engine


def user_rows(rt) -> list[str]:
    return [
        r
        for (r,) in rt.engine.db.execute(
            "SELECT content FROM messages WHERE role = 'user' ORDER BY rid"
        )
    ]


def live(rt) -> list[str]:
    return sorted(m.content for m in rt.engine.memory_rows.listing(None, limit=100))


async def batch(rt, srv, messages, answer: str) -> None:
    """Messages observed in one chat, then one extraction of the whole batch answered with ``answer``."""
    for message in messages:
        await rt.orchestrator.observe(message)
    rt.engine.clock.advance(31)
    srv.script(answer)
    assert (await rt.background.tick())["extracted"] >= 0


SAID = [
    "Hi there",
    "I live in Hamburg near the harbour",
    "I work at Acme as a baker",
    "I breed zebrafinches on my balcony",
]
THREE = [
    {
        "speaker": "P1",
        "subject": "home",
        "content": "Alice lives in Hamburg near the harbour",
        "lines": [2],
    },
    {"speaker": "P1", "subject": "job", "content": "Alice works at Acme as a baker", "lines": [3]},
    {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [4]},
]


# -- 1. per-fact sources ---------------------------------------------------------------------------------------
@pytest.mark.asyncio
@pytest.mark.parametrize("cited", [True, False], ids=["cited", "closest"])
async def test_forgetting_one_fact_keeps_the_other_facts_of_its_batch(rt, srv, cited):
    answer = [f if cited else {k: v for k, v in f.items() if k != "lines"} for f in THREE]
    await batch(
        rt,
        srv,
        [dm("telegram", "7", text, mid=str(n)) for n, text in enumerate(SAID)],
        facts(*answer),
    )
    assert len(live(rt)) == 3
    reply = await rt.orchestrator.command(
        "forget", "zebrafinches", dm("telegram", "7", "/forget zebrafinches")
    )
    assert reply == f"Forgotten: {FINCH} (with 1 message it came from)"
    assert live(rt) == ["Alice lives in Hamburg near the harbour", "Alice works at Acme as a baker"]
    assert user_rows(rt) == SAID[:3]  # "Hi there" and the two other facts' messages stay


def _lines() -> Transcript:
    alice = RecallContext("discord", "alice", "g-general", guild_id="g")
    bob = RecallContext("discord", "bob", "g-general", guild_id="g")
    return Transcript(
        (
            Line(alice, "Alice", "I keep bees", "m-alice-1"),
            Line(bob, "Bob", "my sister Dana moves to Oslo", "m-bob"),
            Line(None, "bot", "Nice!", "m-bot"),
            Line(alice, "Alice", "and I play the cello", "m-alice-2"),
        )
    )


def test_a_fact_cannot_cite_another_speakers_line_or_a_line_that_does_not_exist():
    # issue 31.6: a fact is the author's of the lines it cites; tagged Alice and citing Bob's and the bot's lines
    # only, it is nobody's to file (before, it was filed under Alice with no source)
    hostile = {
        "speaker": "P1",
        "subject": "Oslo",
        "content": "Alice's sister Dana moves to Oslo",
        "lines": [2, 3, 999, -1, "#0"],
    }
    invented = {
        "speaker": "P1",
        "subject": "bees",
        "content": "Alice keeps bees",
        "lines": [999, "#0"],
    }
    assert memories_from([hostile, invented], _lines(), Source.AUTO_EXTRACTION) == []


def test_a_fact_without_a_usable_citation_takes_its_speakers_closest_line_never_all_of_them():
    cello = {
        "speaker": "P1",
        "subject": "music",
        "content": "Alice plays the cello",
        "lines": "nonsense",
    }
    bees = {"speaker": "P1", "subject": "bees", "content": "Alice keeps bees", "lines": ["#1"]}
    found = memories_from([cello, bees], _lines(), Source.AUTO_EXTRACTION)
    assert [m.provenance.sources for m in found] == [("m-alice-2",), ("m-alice-1",)]


@pytest.mark.asyncio
async def test_a_model_citing_another_speakers_line_cannot_make_a_fact_forget_their_message(
    rt, srv
):
    said = [
        group("discord", "g1", "alice", "I breed zebrafinches", mid="1"),
        group(
            "discord", "g1", "bob", "I breed zebrafinches too, and I love them", name="Bob", mid="2"
        ),
        group("discord", "g1", "alice", "Anyway, how was your weekend?", mid="3"),
    ]
    forged = {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [2, 999]}
    await batch(rt, srv, said, facts(forged))
    # citing only Bob's line, it is not Alice's fact (issue 31.6): not filed at all
    assert live(rt) == []
    reply = await rt.orchestrator.command(
        "forget", "zebrafinches", group("discord", "g1", "alice", "/forget zebrafinches")
    )
    assert not reply.startswith("Forgotten")
    assert "I breed zebrafinches too, and I love them" in user_rows(rt)


# -- 2. a repeat is a source too ------------------------------------------------------------------------------
@pytest.mark.asyncio
async def test_a_fact_said_twice_is_forgotten_with_both_messages_and_history_no_longer_finds_the_repeat(
    rt, srv
):
    fact = {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [1]}
    await batch(rt, srv, [dm("telegram", "7", "I breed zebrafinches", mid="1")], facts(fact))
    await batch(
        rt, srv, [dm("telegram", "7", "Did I tell you? I breed zebrafinches", mid="2")], facts(fact)
    )
    assert live(rt) == [FINCH]  # the second was a duplicate
    assert len(fts_rids(rt.engine, "zebrafinches", "message_fts")) == 2
    reply = await rt.orchestrator.command(
        "forget", "zebrafinches", dm("telegram", "7", "/forget zebrafinches")
    )
    assert reply == f"Forgotten: {FINCH} (with 2 messages it came from)"
    assert user_rows(rt) == [] and fts_rids(rt.engine, "zebrafinches", "message_fts") == set()


# -- 3. tombstones ----------------------------------------------------------------------------------------------
def test_a_reworded_fact_reads_the_same_and_a_negated_one_does_not():
    same = normalised("Alice breeds zebra finches.")
    assert normalised("zebra-finches: ALICE is breeding them") == same
    assert normalised("Alice's zebra finch breeding") == same
    assert normalised("Alice does not breed zebra finches") != same


@pytest.mark.asyncio
async def test_forget_then_daily_reflection_over_the_remaining_day_does_not_relearn_it(rt, srv):
    clock = rt.engine.clock
    clock.t = DAY0 + 10 * 3600
    said = [
        dm("telegram", "7", "I have lots of birds at home", mid="1"),
        dm("telegram", "7", "I breed zebrafinches", mid="2"),
    ]
    birds = {
        "speaker": "P1",
        "subject": "pets",
        "content": "Alice has lots of birds at home",
        "lines": [1],
    }
    await batch(
        rt,
        srv,
        said,
        facts(birds, {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [2]}),
    )
    await rt.orchestrator.command(
        "forget", "zebrafinches", dm("telegram", "7", "/forget zebrafinches")
    )
    assert user_rows(rt) == ["I have lots of birds at home"]
    # the next morning the model reads what remains of the day and "learns" it back, reworded
    relearned = {
        "speaker": "P1",
        "subject": "birds",
        "content": "Alice is breeding Zebrafinches.",
        "lines": [1],
    }
    srv.default = lambda body: (
        facts(relearned) if "one day of a conversation" in body["messages"][-1]["content"] else "no"
    )
    clock.t = DAY0 + DAY + 4 * 3600
    report = await rt.daily.run()
    assert (report.chats, report.stored) == (1, 0)
    assert live(rt) == ["Alice has lots of birds at home"]


@pytest.mark.asyncio
async def test_saying_it_again_after_the_forget_is_learned_and_lifts_the_tombstone(rt, srv):
    fact = {"speaker": "P1", "subject": "hobby", "content": FINCH, "lines": [1]}
    await batch(rt, srv, [dm("telegram", "7", "I breed zebrafinches", mid="1")], facts(fact))
    await rt.orchestrator.command(
        "forget", "zebrafinches", dm("telegram", "7", "/forget zebrafinches")
    )
    assert rt.engine.memories.tombstones.count() == 1
    rt.engine.clock.advance(3600)
    await batch(
        rt, srv, [dm("telegram", "7", "Actually, I do breed zebrafinches", mid="2")], facts(fact)
    )
    assert live(rt) == [FINCH]
    assert rt.engine.memories.tombstones.count() == 0


def test_a_candidate_from_messages_older_than_the_forget_is_held_back(engine):
    old = say(engine, "I breed zebrafinches", author="alice", dm_person="alice")
    memory = _learned(engine, FINCH, (old,))
    forget_memory(engine, memory.id)
    engine.clock.advance(60)
    again = say(engine, "I breed zebrafinches", author="alice", dm_person="alice")
    older = say(engine, "zebrafinches!", author="alice", dm_person="alice")
    engine.clock.t -= (
        3600  # a message written before the forget, e.g. imported later: still not "said again"
    )
    stale = say(engine, "my zebrafinches", author="alice", dm_person="alice")
    candidates = [
        _new(FINCH, ()),
        _new(FINCH, (stale,)),
        _new(FINCH, (again, stale)),
        _new(FINCH, (again, older)),
    ]
    assert unforgotten(engine, candidates) == [candidates[3]]


def test_the_tombstone_table_holds_no_word_of_the_fact_at_the_byte_level(tmp_path):
    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        remember(engine, "Alice likes green tea")
        mid = say(engine, "I breed Zyqxolotl finches", author="alice", dm_person="alice")
        memory = _learned(
            engine, "Alice breeds Zyqxolotl finches in Quixwell", (mid,), subject="Zyqxolotl hobby"
        )
        forget_memory(engine, memory.id)
        rows = engine.db.rows("SELECT * FROM tombstones")
        assert len(rows) == 1
        dumped = json.dumps(rows).lower()
        assert not any(word in dumped for word in ("zyqxolotl", "quixwell", "finch", "breed"))
        # whose it is, for forgetting the person: an id, not words
        assert rows[0]["scope_id"] == "alice"
    for file in (p for p in tmp_path.iterdir() if p.name.startswith("store.db")):
        data = file.read_bytes().lower()
        assert b"zyqxolotl" not in data and b"quixwell" not in data, file.name


def test_forgetting_the_whole_person_removes_their_tombstones_and_no_one_elses(engine):
    for person in ("alice", "bob"):
        forget_memory(engine, remember(engine, f"{person} breeds zebrafinches", scope_id=person).id)
    forget_person(engine, ["alice"])
    assert [r["scope_id"] for r in engine.db.rows("SELECT scope_id FROM tombstones")] == ["bob"]


def test_reingest_after_editing_another_part_of_the_file_does_not_bring_back_the_forgotten_passage(
    engine, tmp_path
):
    notes = tmp_path / "notes.md"
    notes.write_text(
        "# Alpha\n\nAlpha says the river is wide.\n\n# Beta\n\nBeta says the bridge is red.\n\n# Gamma\n\nGamma is tall.\n"
    )
    ingester = Ingester(engine, IngestTarget(Scope.GUILD, "discord:1"))
    assert ingester.ingest(notes).memories == 3
    (beta,) = [m for m in engine.memory_rows.listing(None, limit=10) if "bridge" in m.content]
    forget_memory(engine, beta.id)
    notes.write_text(notes.read_text().replace("Gamma is tall.", "Gamma is taller than the tower."))
    report = ingester.ingest(notes)
    assert report.memories == 1 and any("forgotten before" in r for r in report.rejected)
    contents = sorted(m.content for m in engine.memory_rows.listing(None, limit=10))
    assert contents == ["Alpha says the river is wide.", "Gamma is taller than the tower."]
    # read again later: still not back
    notes.write_text(notes.read_text() + "\n# Delta\n\nDelta is new.\n")
    assert ingester.ingest(notes).memories == 1
    assert not [m for m in engine.memory_rows.listing(None, limit=10) if "bridge" in m.content]


def test_a_merge_that_says_a_forgotten_fact_again_is_not_written(engine):
    from memory.upkeep.maintenance import consolidate

    forget_memory(engine, remember(engine, FINCH).id)
    a = remember(engine, "Alice keeps zebrafinches on the balcony")
    b = remember(engine, "Alice keeps zebrafinches on the balcony at home")

    def complete(system: str, prompt: str, **_: object) -> str:
        return json.dumps({"subject": "hobby", "content": "Alice is breeding zebrafinches"})

    report = consolidate(engine, complete, threshold=0.5)
    assert (report.clusters, report.new_ids, report.failures) == (1, (), 0)
    assert {m.id for m in engine.memory_rows.listing(None, limit=10)} == {a.id, b.id}


def test_a_bulletin_never_reads_a_memory_that_matches_a_forgotten_fact(engine):
    from memory.upkeep.bulletin import Bulletins

    kept = [
        remember(engine, f"Alice likes {thing}", scope_id="alice")
        for thing in ("tea", "sailing", "jazz")
    ]
    outlived = remember(engine, "Alice breeds zebra finches", scope_id="alice")
    # its twin was forgotten
    engine.memories.tombstones.bury([_new("zebra finches: Alice is breeding them", ())])
    read = Bulletins(engine).sources(Bulletins(engine).scope("dm", "alice"))
    assert {m.id for m in read} == {m.id for m in kept} and outlived.id not in {m.id for m in read}


# -- helpers --------------------------------------------------------------------------------------------------
def _new(content: str, sources: tuple[str, ...], subject: str = "hobby") -> NewMemory:
    return NewMemory(
        content=content,
        subject=subject,
        scope=Scope.USER,
        scope_id="alice",
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=sources),
    )


def _learned(engine, content: str, sources: tuple[str, ...], subject: str = "hobby"):
    result = engine.memories.add(_new(content, sources, subject))
    assert result.status == "stored"
    return result.memory


# -- 4. restore rebuilds the journals (finding 3) ---------------------------------------------------------------
def files_holding(folder, word: str) -> list[str]:
    """Every file under the folder (journals, snapshots, the store, its WAL) whose bytes hold the word."""
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and word.lower().encode() in p.read_bytes().lower()
    ]


async def _session(db, srv, clock, said: str, fact: str) -> None:
    from tests.pipeline_support import build_runtime

    runtime = build_runtime(db, srv, clock)
    await runtime.start(background_loop=False)
    try:
        await batch(
            runtime,
            srv,
            [dm("telegram", "7", said, mid=said)],
            facts({"speaker": "P1", "subject": "x", "content": fact}),
        )
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()


@pytest.mark.asyncio
async def test_after_restore_forget_everything_leaves_no_byte_of_the_phrase_in_any_file_of_the_store_folder(
    cli, srv, tmp_path
):
    from tests.cli_support import Cli
    from tests.pipeline_support import build_runtime

    data, clock = tmp_path / "data", FakeClock()
    store = Cli(data / "store.db", cli.capsys)
    await _session(store.db, srv, clock, "I keep bees", "Alice keeps bees")
    assert store("backup", str(tmp_path / "monday.db")).code == 0
    clock.advance(DAY)
    await _session(
        store.db, srv, clock, "my dog is called Zyqxolotl", "Alice has a dog called Zyqxolotl"
    )
    # the test can fail: the phrase is in a journal
    assert files_holding(data / "memory", "Zyqxolotl")
    restored = store("restore", str(tmp_path / "monday.db"), "--force")
    assert restored.code == 0 and "journals rebuilt (1 lines)" in restored.out
    # the old store's day file did not survive
    assert files_holding(data / "memory", "Zyqxolotl") == []
    assert files_holding(data / "memory", "bees")  # the restored store's journal is back
    runtime = build_runtime(store.db, srv, clock)
    await runtime.start(background_loop=False)
    try:
        await runtime.orchestrator.command(
            "forget", "everything confirm", dm("telegram", "7", "/forget everything confirm")
        )
    finally:
        await runtime.stop()
    assert files_holding(data, "Zyqxolotl") == [] and files_holding(data, "bees") == []


def test_journals_rebuild_makes_the_journals_again_from_the_store_and_drops_strays(cli, tmp_path):
    ids = [
        cli.add(text, "--subject", "x", "--scope", "user", "--scope-id", "discord:alice")
        for text in ("Alice keeps bees", "Alice plays the cello")
    ]
    stray = tmp_path / "memory" / "dm-ghost" / "2020-01-01.md"
    stray.parent.mkdir(parents=True)
    stray.write_text(
        "- 10:00 [other] Alice named her boat Zyqxolotl <!-- m:not-in-this-store -->\n"
    )
    # someone keeps the folder in git: not ours to touch
    kept = tmp_path / "memory" / ".git" / "notes.md"
    kept.parent.mkdir()
    kept.write_text("git notes")
    result = cli("journals", "rebuild", "--json")
    assert result.code == 0 and result.json()["lines"] == 2
    assert files_holding(tmp_path / "memory", "Zyqxolotl") == [] and not stray.parent.exists()
    assert (
        all(files_holding(tmp_path / "memory", memory_id) for memory_id in ids)
        and kept.read_text() == "git notes"
    )


def test_a_forget_by_the_memory_delete_tool_leaves_a_tombstone_too(engine):
    tools = MemoryTools(engine, dm_ctx("alice"))
    stored = json.loads(
        tools.call(
            "memory_store", json.dumps({"type": "semantic", "subject": "hobby", "content": FINCH})
        )
    )
    # a delete acts only on a strong match of this turn's search
    tools.call("memory_search", json.dumps({"query": FINCH}))
    assert (
        json.loads(tools.call("memory_delete", json.dumps({"id": stored["id"]})))["status"]
        == "deleted"
    )
    assert engine.memories.tombstones.count() == 1
    # learned back from what remains: held back
    assert unforgotten(engine, [_new("Alice breeds zebrafinches.", ())]) == []
