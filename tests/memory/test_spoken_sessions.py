"""``memory.SpokenSessions``: what the store keeps of a voice session (VOICE-4, VOICE-5, CROSS-1,
WRITE-4), on a real store through the memory thread, as the bot's voice sessions await it."""

from __future__ import annotations

import json

import pytest
from conftest import count, guild_ctx

from memory import AsyncRunner, EndedSession, SpokenSessions

VOICE, TEXT = "discord:lounge", "discord:g1-general"


@pytest.fixture
async def spoken(engine):
    runner = AsyncRunner()
    yield SpokenSessions(engine, runner)
    runner.shutdown()


def buffered(engine, key: str, text: str, *, held: bool = False) -> int:
    ctx = guild_ctx("g1", "alice", "alice", "bob", channel=key.partition(":")[2])
    engine.channels.touch(key, ctx)
    return engine.buffer.push(key, ctx, text, author_name="Alice", held=held)


def due_now(engine, key: str) -> int:
    return count(
        engine, "extraction_buffer", "channel_key = ? AND due_at <= ?", (key, engine.clock.now())
    )


def ended(summary: str, people: tuple[str, ...] = ("bob", "alice")) -> EndedSession:
    return EndedSession(VOICE, "discord", "g1", "lounge", people, summary, started_at=1000.0)


async def test_an_ended_session_keeps_its_summary_and_makes_only_its_own_turns_due(spoken, engine):
    buffered(engine, VOICE, "we are going camping")
    buffered(engine, TEXT, "someone typing in general")
    kept = await spoken.ended(ended("Alice and Bob planned a camping trip."))
    row = engine.db.one("SELECT * FROM session_summaries WHERE id = ?", (kept,))
    assert (row["modality"], row["guild_id"], row["channel_id"], row["started_at"]) == (
        "voice",
        "g1",
        "lounge",
        1000.0,
    )
    assert json.loads(row["participants"]) == ["alice", "bob"]  # sorted, whoever spoke first
    # another chat's debounce holds
    assert (due_now(engine, VOICE), due_now(engine, TEXT)) == (1, 0)
    voice, text = engine.channels.get(VOICE), engine.channels.get(TEXT)
    assert voice is not None and voice.reflected_at == engine.clock.now()
    assert text is not None and text.reflected_at is None


@pytest.mark.parametrize("summary", ["", "  \n\t", "\u200b", "\u200b \ufeff\u200d"])
async def test_a_blank_or_invisible_summary_is_not_kept_and_the_books_still_close(
    spoken, engine, summary
):
    buffered(engine, VOICE, "we are going camping")
    assert await spoken.ended(ended(summary)) is None
    assert count(engine, "session_summaries") == 0
    reflected = engine.channels.get(VOICE)
    assert due_now(engine, VOICE) == 1 and reflected and reflected.reflected_at is not None


async def test_a_secret_said_in_the_summary_is_not_kept(spoken, engine):
    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2
    kept = await spoken.ended(ended(f"Alice read out her key {key} by mistake."))
    text = engine.db.scalar("SELECT text FROM session_summaries WHERE id = ?", (kept,))
    assert key not in text and "[redacted]" in text


async def test_a_flush_makes_the_released_turns_due_and_leaves_a_turn_awaiting_its_reply(
    spoken, engine
):
    buffered(engine, VOICE, "first turn")
    buffered(engine, VOICE, "second turn")
    buffered(engine, VOICE, "the turn being answered", held=True)
    buffered(engine, TEXT, "typed elsewhere")
    assert await spoken.flushed(VOICE) == 2
    assert (due_now(engine, VOICE), due_now(engine, TEXT)) == (2, 0)
    assert await spoken.flushed("discord:no-such-channel") == 0
