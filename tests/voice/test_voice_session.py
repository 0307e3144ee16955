"""A voice session's turns: speaking while the reply streams, barge-in, [SKIP], and failures that cost a
turn but never the session. Providers are scripted at their Protocol edge; the session is the real one.
"""

from __future__ import annotations

import asyncio

import pytest

from memory.clock import FakeClock
from tests.voice_support import ScriptedSTT, ThreadPlayer, ToneTTS, eventually
from voice.providers import TranscriptionFailed
from voice.receive import Utterance
from voice.session import VoiceSession, VoiceSettings

ALICE, BOB = 3003, 3004


class StreamingResponder:
    """Streams each scripted reply in small deltas; a reply may wait on ``gate`` halfway, or raise."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[int, str]] = []
        self.gate: asyncio.Event | None = None

    async def respond(self, user_id: int, text: str, stream) -> str:
        self.asked.append((user_id, text))
        reply = self.replies.pop(0) if self.replies else "Okay."
        if isinstance(reply, Exception):
            raise reply
        half = len(reply) // 2
        for i, piece in enumerate((reply[:half], reply[half:])):
            if i == 1 and self.gate is not None:
                await self.gate.wait()
            for j in range(0, len(piece), 4):
                await stream(piece[j : j + 4])
        return reply


def utterance(user_id: int = ALICE) -> Utterance:
    return Utterance(ssrc=11, user_id=user_id, pcm16=b"\x01\x00" * 16000)


@pytest.fixture
def player() -> ThreadPlayer:
    return ThreadPlayer(speed=8)


async def started(session: VoiceSession) -> VoiceSession:
    session.start()
    return session


async def test_a_streamed_reply_is_spoken_sentence_by_sentence_in_order(player):
    tts = ToneTTS()
    session = await started(
        VoiceSession(
            ScriptedSTT("how are you"),
            tts,
            StreamingResponder("I am fine. Thanks for asking! And you?"),
            player,
        )
    )
    session.utterance_ready(utterance())
    await eventually(lambda: session.turns)
    (turn,) = session.turns
    assert (turn.user_id, turn.heard, turn.interrupted) == (ALICE, "how are you", False)
    assert turn.spoken == ("I am fine.", "Thanks for asking!", "And you?") == tuple(tts.said)
    assert len(player.frames) >= 3 * 10  # three 200 ms sentences were played
    await session.close()


async def test_speaking_starts_before_the_reply_has_finished_streaming(player):
    responder = StreamingResponder("The first sentence is ready. The second one takes a while.")
    responder.gate = asyncio.Event()
    session = await started(VoiceSession(ScriptedSTT("tell me"), ToneTTS(), responder, player))
    session.utterance_ready(utterance())
    await eventually(lambda: player.frames)  # the first sentence plays while the model still writes
    assert session.turns == []
    responder.gate.set()
    await eventually(lambda: session.turns)
    assert session.turns[0].spoken == (
        "The first sentence is ready.",
        "The second one takes a while.",
    )
    await session.close()


async def test_someone_speaking_over_the_bot_stops_it():
    responder = StreamingResponder("Let me tell you a long story. It goes on and on. And on.")
    player = ThreadPlayer(speed=1)
    session = await started(
        VoiceSession(ScriptedSTT("a story please"), ToneTTS(seconds=2.0), responder, player)
    )
    session.utterance_ready(utterance())
    await eventually(lambda: player.frames)
    session.speech_started(22, BOB)
    await eventually(lambda: session.turns, timeout=60)
    (turn,) = session.turns
    assert turn.interrupted and player.stops == 1
    assert len(player.frames) < 50  # well under one second of the six queued was played
    await session.close()


async def test_barge_in_can_be_switched_off(player):
    session = await started(
        VoiceSession(
            ScriptedSTT("hi"),
            ToneTTS(),
            StreamingResponder("Hello. Hi."),
            player,
            VoiceSettings(barge_in=False),
        )
    )
    session.utterance_ready(utterance())
    await eventually(lambda: session._speech is not None and session._speech.spoken)
    session.speech_started(22, BOB)
    await eventually(lambda: session.turns)
    assert not session.turns[0].interrupted and len(session.turns[0].spoken) == 2
    await session.close()


async def test_a_skip_answer_is_stored_but_not_spoken(player):
    tts = ToneTTS()
    session = await started(
        VoiceSession(
            ScriptedSTT("they were talking to each other"),
            tts,
            StreamingResponder("[SKIP]"),
            player,
        )
    )
    session.utterance_ready(utterance())
    await eventually(lambda: session.turns)
    assert session.turns[0].reply == "[SKIP]" and session.turns[0].spoken == () and tts.said == []
    assert player.frames == []
    await session.close()


async def test_a_failed_transcription_costs_one_turn_and_the_session_goes_on(player, caplog):
    responder = StreamingResponder("Yes?")
    session = await started(
        VoiceSession(
            ScriptedSTT(TranscriptionFailed("model gone"), "are you there"),
            ToneTTS(),
            responder,
            player,
        )
    )
    session.utterance_ready(utterance())
    session.utterance_ready(utterance())
    await eventually(lambda: session.turns)
    assert responder.asked == [(ALICE, "are you there")] and "could not transcribe" in caplog.text
    await session.close()


async def test_a_sentence_the_tts_cannot_say_is_skipped_and_the_rest_is_spoken(player):
    session = await started(
        VoiceSession(
            ScriptedSTT("hi"),
            ToneTTS(fail_on=("broken",)),
            StreamingResponder("Hello there. This is broken. Goodbye."),
            player,
        )
    )
    session.utterance_ready(utterance())
    await eventually(lambda: session.turns)
    assert session.turns[0].spoken == ("Hello there.", "Goodbye.")
    await session.close()


async def test_a_failing_responder_costs_one_turn_and_the_session_goes_on(player, caplog):
    responder = StreamingResponder(RuntimeError("orchestrator exploded"), "Still here.")
    session = await started(VoiceSession(ScriptedSTT("one", "two"), ToneTTS(), responder, player))
    session.utterance_ready(utterance())
    session.utterance_ready(utterance(BOB))
    await eventually(lambda: session.turns)
    assert [(t.user_id, t.reply) for t in session.turns] == [(BOB, "Still here.")]
    assert "orchestrator exploded" in caplog.text
    await session.close()


async def test_empty_transcripts_are_not_answered(player):
    responder = StreamingResponder()
    session = await started(VoiceSession(ScriptedSTT("", "  "), ToneTTS(), responder, player))
    session.utterance_ready(utterance())
    session.utterance_ready(utterance())
    await eventually(lambda: session._queue.empty() and session._speech is None)
    await asyncio.sleep(0.05)
    assert responder.asked == [] and session.turns == []
    await session.close()


async def test_idle_time_counts_from_the_last_thing_anyone_said(player):
    clock = FakeClock()
    session = await started(
        VoiceSession(ScriptedSTT("hi"), ToneTTS(), StreamingResponder("Hey."), player, clock=clock)
    )
    clock.advance(30)
    assert session.idle_for() == 30
    session.speech_started(11, ALICE)
    await asyncio.sleep(0)
    assert session.idle_for() == 0
    await session.close()
