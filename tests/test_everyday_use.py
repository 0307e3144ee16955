"""Rough edges a new user met, as tests: the snapshot is exactly what a reply gets, each kind of session
summary under its own heading, a batch postponed while the model was down is retried at start, and the
console's /remember files the fact where extraction would."""

from __future__ import annotations

import pytest

from memory.clock import FakeClock
from memory.models import NewMemory, Scope, Visibility
from tests.fakes import HTTPError
from tests.pipeline_support import build_runtime, dm, facts, group

pytestmark = pytest.mark.asyncio


async def test_the_snapshot_is_exactly_the_memory_slice_the_reply_gets(rt, srv):
    add = rt.engine.memories.add
    add(
        NewMemory(
            content="Alice sings in a choir",
            subject="singing",
            scope=Scope.USER,
            scope_id="telegram:7",
            guild_id="telegram:g",
        )
    )
    add(
        NewMemory(
            content="The group rehearses on Sundays",
            subject="rehearsal",
            scope=Scope.GUILD,
            scope_id="telegram:g",
        )
    )
    add(
        NewMemory(
            content="Alice's private worry",
            subject="worry",
            scope=Scope.USER,
            scope_id="telegram:7",
            visibility=Visibility.PRIVATE,
        )
    )
    message = group("telegram", "g", "7", "when do we rehearse the choir songs?")
    orchestrator = rt.orchestrator
    snap = orchestrator.assembler.snapshot(orchestrator.resolve(message))
    srv.script("On Sunday.")
    await orchestrator.reply(message)
    system = srv.chat_requests[-1]["messages"][0]["content"]
    assert snap.render() and snap.render() in system
    assert "private worry" not in system


async def test_text_and_voice_session_summaries_have_their_own_headings(rt, srv):
    summaries = rt.background.summaries
    summaries.add(
        platform="telegram",
        guild_id=None,
        channel_id="dm-7",
        participants=["telegram:7"],
        text="We planned a picnic",
    )
    snap = rt.orchestrator.assembler.snapshot(
        rt.orchestrator.resolve(dm("telegram", "7", "what did we plan?"))
    )
    sections = {s.key: (s.title, s.lines) for s in snap.sections}
    assert sections["sessions"][1] == [] and "picnic" in sections["text_sessions"][1][0]
    assert sections["text_sessions"][0] == "Recent conversation sessions here"


async def test_a_batch_postponed_while_the_model_was_down_is_retried_at_start(tmp_path, srv):
    clock = FakeClock()
    first = build_runtime(tmp_path / "bot.db", srv, clock)
    await first.start(background_loop=False)
    srv.script("ok")
    await first.orchestrator.reply(dm("telegram", "7", "I restore old bicycles", mid="1"))
    clock.advance(31)
    srv.script(HTTPError(503), HTTPError(503), HTTPError(503))
    assert (await first.background.tick())["extracted"] == 0  # postponed by a backoff
    # still down while it shuts down (its flush fails too)
    srv.default = lambda body: HTTPError(503)
    await first.stop()
    srv.default = None
    second = build_runtime(tmp_path / "bot.db", srv, clock)
    await second.start(background_loop=False)
    try:
        srv.script(
            facts({"speaker": "P1", "subject": "hobby", "content": "Alice restores old bicycles"})
        )
        assert (await second.background.tick())["extracted"] == 1  # at once, not after the backoff
    finally:
        srv.default = lambda body: "[]"
        await second.stop()


async def test_remember_files_a_fact_where_extraction_would_and_without_the_display_name(rt, srv):
    orchestrator = rt.orchestrator
    answer = await orchestrator.command(
        "remember", "my favourite colour is teal", dm("console", "local-user", "/remember ...")
    )
    assert answer.startswith("Got it")
    row = rt.engine.db.one("SELECT content, scope, visibility, partition_key FROM memories")
    assert row["content"] == "my favourite colour is teal"  # not "you: my favourite colour is teal"
    turn = orchestrator.resolve(dm("console", "local-user", "what colour do I like?"))
    assert row["partition_key"] in turn.ctx.memory_partitions()
