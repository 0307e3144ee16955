"""Voice mode through the real Orchestrator, without audio: transcribed turns (``modality="voice"``) against a real
store, the openai SDK talking to the scripted FakeOpenAI, and a FakeClock. The audio half is covered by
``test_voice_orchestrator_e2e.py``; here are the rules a spoken turn is answered by (VOICE-1..5, CROSS-1,
TOOLS-2, WRITE-4).
"""

from __future__ import annotations

import json

import pytest
from conftest import remember

from bot.spoken.sessions import VoiceOptions
from bot.types import IncomingMessage
from memory.clock import FakeClock
from memory.models import Scope
from tests.fakes import ToolCall
from tests.pipeline_support import build_runtime, facts, group, last_reply_prompt
from tests.voice_support import routed_model
from voice.compaction import CompactionSettings

GUILD, LOUNGE = "g1", "lounge"
ALICE, BOB = "u1", "u2"
KEY = f"discord:{LOUNGE}"


@pytest.fixture
async def rt(tmp_path, srv):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = routed_model([])
    await runtime.stop()


def said(
    text: str,
    *,
    user: str = ALICE,
    name: str = "Alice",
    others: tuple = (),
    guild: str = GUILD,
    channel: str = LOUNGE,
) -> IncomingMessage:
    """A transcribed utterance, as the voice adapter hands it over (never addressed by a mention)."""
    return IncomingMessage(
        platform="discord",
        channel_id=channel,
        author_id=user,
        author_name=name,
        text=text,
        guild_id=guild,
        participants=others,
        modality="voice",
        addressed=False,
    )


def reply_prompts(srv) -> list[str]:
    """The system prompts of the reply requests (those offered tools), oldest first."""
    return [b["messages"][0]["content"] for b in srv.chat_requests if b.get("tools")]


def rows(rt, where: str = "1") -> list[dict]:
    return rt.engine.db.rows(
        f"SELECT role, content, modality FROM messages WHERE {where} ORDER BY created_at, role DESC"
    )


# -- VOICE-1: short spoken replies, and silence in a group ---------------------------------------------------
async def test_voice_skip_in_a_group_stores_the_turn_and_no_reply_and_streams_nothing(rt, srv):
    srv.script("[SKIP]")
    streamed: list[str] = []

    async def sink(delta: str) -> None:
        streamed.append(delta)

    reply = await rt.orchestrator.reply(
        said("shall we get pizza tonight?", others=((BOB, "Bob"),)), stream=sink
    )
    assert reply.skipped and reply.text == "" and streamed == []
    assert (
        "answer exactly [SKIP]" in reply_prompts(srv)[-1]
        and "live voice conversation" in reply_prompts(srv)[-1]
    )
    assert rows(rt) == [
        {"role": "user", "content": "shall we get pizza tonight?", "modality": "voice"}
    ]
    # the skipped turn still goes to extraction
    assert rt.engine.db.scalar("SELECT held FROM extraction_buffer") == 0


async def test_a_voice_turn_naming_the_bot_or_following_up_on_its_answer_is_never_offered_silence(
    rt, srv
):
    bob = ((BOB, "Bob"),)
    srv.script("It is noon.", "Probably pasta.", "[SKIP]")
    await rt.orchestrator.reply(said("Companion, what time is it?", others=bob))
    rt.engine.clock.advance(5)
    # a follow-up to the bot's answer
    await rt.orchestrator.reply(said("and what should I cook?", others=bob))
    rt.engine.clock.advance(60)
    # a minute later: talk between the two
    await rt.orchestrator.reply(said("what do you think Bob", others=bob))
    assert ["[SKIP]" in p for p in reply_prompts(srv)] == [False, False, True]


async def test_the_voice_skip_rule_also_holds_for_unaddressed_text_in_a_configured_channel(rt, srv):
    srv.script("[SKIP]", "Hi!")
    chatter = IncomingMessage(
        platform="discord",
        channel_id="chat",
        author_id=ALICE,
        author_name="Alice",
        text="lunch?",
        guild_id=GUILD,
        participants=((BOB, "Bob"),),
        addressed=False,
    )
    assert (await rt.orchestrator.reply(chatter)).skipped
    alone = IncomingMessage(
        platform="discord",
        channel_id="chat",
        author_id=ALICE,
        author_name="Alice",
        text="lunch?",
        guild_id=GUILD,
        addressed=False,
    )
    assert (await rt.orchestrator.reply(alone)).text == "Hi!"  # nobody else here: it is for the bot
    skip_prompt, alone_prompt = reply_prompts(srv)
    assert "answer exactly [SKIP]" in skip_prompt and "[SKIP]" not in alone_prompt
    assert "live voice conversation" not in skip_prompt


# -- VOICE-2/3: warm memory and caches on the orchestrator path -----------------------------------------------
CAMPING = [
    "I'm planning a camping trip to the lake district next weekend",
    "The camping trip to the lake district is next weekend and I need a tent",
    "For the camping trip I need a tent that works in the lake district rain",
    "Which tent should I bring camping in the lake district next weekend",
]


@pytest.fixture
async def warm_rt(tmp_path, srv, minilm):
    from bot.composition import build_runtime as compose
    from bot.config import load_settings

    settings = load_settings(
        db_path=tmp_path / "bot.db",
        llm_base_url=srv.base_url,
        llm_api_key="k",
        embeddings="none",
        scheduler_enabled=False,
        llm_timeout_s=60.0,  # a deadline no busy machine reaches against the fake model
    )
    runtime = compose(settings, clock=FakeClock(), embedder=minilm, backoff_s=0.0)
    await runtime.start(background_loop=False)
    for text in (
        "Alice owns a bright orange two-person tent",
        "Alice's sister Jo is learning the violin",
    ):
        remember(runtime.engine, text, scope=Scope.GUILD, scope_id=f"discord:{GUILD}")
    yield runtime
    srv.default = routed_model([])
    await runtime.stop()


async def test_on_topic_voice_turns_reuse_the_warm_recall_and_a_new_topic_or_five_minutes_recall_afresh(
    warm_rt, srv
):
    srv.default = routed_model([])
    for text in [*CAMPING, "yeah", "My sister wants to learn to play the violin"]:
        await warm_rt.orchestrator.reply(said(text))
        warm_rt.engine.clock.advance(5)
    warm_rt.engine.clock.advance(300)
    await warm_rt.orchestrator.reply(said(CAMPING[3]))
    log = [(r.decision.value, r.reason) for r in warm_rt.orchestrator.voice.sessions[KEY].warm.log]
    # the camping stretch and "yeah"
    assert log[0] == ("full", "cold") and all(d != "full" for d, _ in log[1:5])
    assert (
        log[4] == ("reuse", "low-signal")
        and log[5] == ("full", "drift")
        and log[6] == ("full", "expired")
    )
    assert [d for d, _ in log].count("full") == 3 and len(reply_prompts(srv)) == 7


async def test_a_voice_memory_delete_drops_the_warm_recall_and_the_transcript(rt, srv):
    tent = remember(
        rt.engine,
        "Alice owns an orange tent",
        scope_id=f"discord:{ALICE}",
        guild_id=f"discord:{GUILD}",
    )
    find, delete = (
        ToolCall("memory_search", {"query": "orange tent"}),
        ToolCall("memory_delete", {"id": tent.id}),
    )
    srv.script("Nice.", find, delete, "Forgotten.", "Sure.")
    await rt.orchestrator.reply(said("I love my orange tent"))
    session = rt.orchestrator.voice.sessions[KEY]
    assert session.transcript.turns
    # the model deletes it
    reply = await rt.orchestrator.reply(said("the tent, drop it from your memory"))
    assert reply.forgotten == ("Alice owns an orange tent",)
    assert session.transcript.turns == () and session.transcript.summary == ""
    await rt.orchestrator.reply(said("what else do you know"))
    assert [r.reason for r in session.warm.log][
        -1
    ] == "cold"  # no warm snapshot survived the forget
    assert "orange tent" not in last_reply_prompt(srv)


async def test_a_similar_voice_conversation_search_within_45_seconds_is_answered_from_the_cache(
    rt, srv
):
    search = ToolCall("conversation_search", {"query": "camping trip plans"})
    again = ToolCall("conversation_search", {"query": "camping trip plans please"})
    srv.script(search, "Found it.", again, "Same.")
    await rt.orchestrator.reply(said("what did we say about the camping trip?"))
    rt.engine.clock.advance(10)
    await rt.orchestrator.reply(said("remind me about the camping trip plans"))
    tool_results = [
        m["content"] for b in srv.chat_requests for m in b["messages"] if m["role"] == "tool"
    ]
    first, second = tool_results[0], tool_results[-1]
    assert first == second and rt.orchestrator.voice.sessions[KEY].history.hits == 1
    # said after the cached search: not in it
    assert "remind me about the camping trip plans" not in second


# -- TOOLS-2: the voice write limit ---------------------------------------------------------------------------
async def test_a_voice_memory_write_beyond_five_a_minute_is_refused_to_the_model(rt, srv):
    things = [
        "apples",
        "a blue bicycle",
        "jazz records",
        "a cat named Miso",
        "the piano",
        "mountain hiking",
    ]
    stores = [
        ToolCall("memory_store", {"type": "semantic", "subject": t, "content": f"Alice likes {t}"})
        for t in things
    ]
    srv.script(stores, "Noted all that.", list(stores[5:]), "Noted.")
    await rt.orchestrator.reply(said("I like lots of things"))
    results = [
        json.loads(m["content"]) if m["content"].startswith("{") else m["content"]
        for m in srv.chat_requests[1]["messages"]
        if m["role"] == "tool"
    ]
    assert [r["status"] for r in results[:5]] == ["stored"] * 5
    assert results[5].startswith("Error: too many memory writes this minute")
    text = IncomingMessage(
        platform="discord",
        channel_id="chat",
        author_id=ALICE,
        author_name="Alice",
        text="and hiking",
        guild_id=GUILD,
    )
    await rt.orchestrator.reply(text)  # typing is not rate limited
    assert (
        rt.engine.db.scalar(
            "SELECT COUNT(*) FROM memories WHERE content = 'Alice likes mountain hiking'"
        )
        == 1
    )


# -- VOICE-4 and WRITE-4: compaction off the reply path ---------------------------------------------------------
async def test_a_long_voice_session_is_compacted_after_the_reply_and_its_turns_go_to_extraction_first(
    rt, srv
):
    rt.orchestrator.voice.options = VoiceOptions(
        compaction=CompactionSettings(keep_recent=4, batch_size=2)
    )
    extracted = facts(
        {"about": "Alice", "subject": "trip", "content": "Alice is planning a camping trip"}
    )
    srv.default = routed_model(
        ["Fun!", "Nice.", "Great.", "Sure."],
        summary="Alice is planning a camping trip.",
        extracted=extracted,
    )
    for text in (
        "I am planning a camping trip",
        "it is in the lake district",
        "we leave on friday",
    ):
        await rt.orchestrator.reply(said(text))
        rt.engine.clock.advance(5)
    session = rt.orchestrator.voice.sessions[KEY]
    await session.compacting  # started after the third reply, as a task on the event loop
    systems = [b["messages"][0]["content"] for b in srv.chat_requests]
    # WRITE-4: extraction first
    assert systems.index(next(s for s in systems if s.startswith("You extract"))) < systems.index(
        next(s for s in systems if s.startswith("You keep the rolling summary"))
    )
    assert (
        rt.engine.db.scalar(
            "SELECT COUNT(*) FROM memories WHERE content = 'Alice is planning a camping trip'"
        )
        == 1
    )
    assert (
        session.transcript.summary == "Alice is planning a camping trip."
        and session.transcript.folded == 2
    )
    await rt.orchestrator.reply(said("what should I pack"))
    assert "Alice is planning a camping trip." in reply_prompts(srv)[-1]


# -- VOICE-5 and CROSS-1: the session ends ---------------------------------------------------------------------
async def voice_session(
    rt, srv, *, guild: str = GUILD, summary: str = "Alice planned a camping trip with Bob."
) -> None:
    srv.default = routed_model(["Sounds fun."], summary=summary)
    await rt.orchestrator.reply(
        said("Bob and I are planning a camping trip", others=((BOB, "Bob"),), guild=guild)
    )
    await rt.orchestrator.voice_ended("discord", guild, LOUNGE)


async def test_a_voice_summary_reaches_text_in_the_same_guild_for_30_minutes_and_never_another_guild(
    rt, srv
):
    await voice_session(rt, srv)
    assert (
        rt.engine.db.scalar(
            "SELECT COUNT(*) FROM extraction_buffer WHERE due_at > ?", (rt.engine.clock.now(),)
        )
        == 0
    )
    srv.default = routed_model(["Hi."] * 3)
    rt.engine.clock.advance(29 * 60)
    await rt.orchestrator.reply(group("discord", GUILD, ALICE, "hello again", channel="general"))
    await rt.orchestrator.reply(group("discord", "g2", ALICE, "hello there", channel="general"))
    rt.engine.clock.advance(2 * 60)
    await rt.orchestrator.reply(
        group("discord", GUILD, ALICE, "hello once more", channel="general")
    )
    same_guild, other_guild, later = reply_prompts(srv)[-3:]
    assert (
        "Recent voice session context" in same_guild
        and "Alice planned a camping trip with Bob." in same_guild
    )
    assert "camping trip with Bob" not in other_guild and "camping trip with Bob" not in later


async def test_forgetting_everything_removes_the_voice_turns_and_the_voice_summary(rt, srv):
    await voice_session(rt, srv)
    assert (
        rows(rt, "modality = 'voice'")
        and rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 1
    )
    dm = IncomingMessage(
        platform="discord",
        channel_id="dm-u1",
        author_id=ALICE,
        author_name="Alice",
        text="/forget everything",
    )
    answer = await rt.orchestrator.command("forget", "everything confirm", dm)
    assert answer.startswith("Done.")
    assert (
        rows(rt, "modality = 'voice'") == []
        and rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 0
    )


async def test_stopping_the_bot_ends_open_voice_sessions_and_keeps_their_summaries(tmp_path, srv):
    import sqlite3

    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await runtime.start(background_loop=False)
    srv.default = routed_model(["Sounds fun."], summary="Alice talked about camping.")
    await runtime.orchestrator.reply(said("I am going camping"))
    await runtime.stop()
    with sqlite3.connect(tmp_path / "bot.db") as con:
        assert con.execute("SELECT modality, text FROM session_summaries").fetchall() == [
            ("voice", "Alice talked about camping.")
        ]


async def test_forgetting_a_fact_learned_in_voice_removes_that_voice_sessions_summary(rt, srv):
    store = ToolCall(
        "memory_store",
        {"type": "semantic", "subject": "camping", "content": "Alice is going camping in Wales"},
    )
    srv.script(store, "Noted.")
    await rt.orchestrator.reply(said("I am going camping in Wales"))
    srv.default = routed_model([], summary="Alice is going camping in Wales.")
    await rt.orchestrator.voice_ended("discord", GUILD, LOUNGE)
    assert (
        rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries WHERE modality = 'voice'") == 1
    )
    dm = IncomingMessage(
        platform="discord",
        channel_id="dm-u1",
        author_id=ALICE,
        author_name="Alice",
        text="/forget camping",
    )
    assert (await rt.orchestrator.command("forget", "camping in Wales", dm)).startswith("Forgotten")
    # it paraphrased the forgotten fact
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 0
    assert rows(rt, "content LIKE '%Wales%'") == []  # and the spoken turn it came from
