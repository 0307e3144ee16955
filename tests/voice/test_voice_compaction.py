"""VOICE-4 compaction with the WRITE-4 flush: a scripted model, a recording flush, turns as plain values."""

from __future__ import annotations

import pytest
from conftest import ScriptedCompleter

from voice.compaction import VoiceTranscript, VoiceTurn

START = 1_700_000_000.0


def turn(i: int) -> VoiceTurn:
    if i % 3 == 2:
        return VoiceTurn("bot", "Companion", f"reply number {i}", START + 5 * i, role="assistant")
    who = ("alice", "Alice") if i % 3 == 0 else ("bob", "Bob")
    return VoiceTurn(*who, f"turn number {i} about the raid", START + 5 * i)


class AsyncCompleter:
    """The scripted completer, awaited as the voice session awaits the model."""

    def __init__(self, *answers: str | BaseException):
        self.scripted = ScriptedCompleter(*answers)
        self.calls = self.scripted.calls

    async def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        return self.scripted(system, user, temperature=temperature)


class Flush:
    """The caller's extraction hook: records each batch and what the model had been asked by then."""

    def __init__(self, completer: AsyncCompleter, *errors: BaseException):
        self.completer, self.errors = completer, list(errors)
        self.batches: list[tuple[VoiceTurn, ...]] = []
        self.model_calls_before: list[int] = []

    async def __call__(self, batch):
        self.batches.append(batch)
        self.model_calls_before.append(len(self.completer.calls))
        if self.errors:
            raise self.errors.pop(0)


def transcript(*answers):
    completer = AsyncCompleter(*answers)
    flush = Flush(completer)
    return VoiceTranscript(completer, flush), completer, flush


async def feed(t: VoiceTranscript, numbers) -> list[int]:
    return [await t.add(turn(i)) for i in numbers]


async def test_voice_compaction_sixty_turns_fold_the_oldest_ten_after_flushing_exactly_those_ten():
    t, completer, flush = transcript("Alice and Bob plan a raid; Bob brings potions.")
    folded = await feed(t, range(60))
    assert folded == [0] * 59 + [10]
    assert flush.batches == [tuple(turn(i) for i in range(10))]
    assert flush.model_calls_before == [0]  # the flush ran before the model saw the turns
    assert t.turns == tuple(turn(i) for i in range(10, 60)) and t.folded == 10
    assert t.summary == "Alice and Bob plan a raid; Bob brings potions."


async def test_voice_compaction_waits_for_a_whole_batch_beyond_the_fifty_kept():
    t, completer, flush = transcript()
    await feed(t, range(59))
    assert completer.calls == [] and flush.batches == []
    assert len(t.turns) == 59 and t.summary == ""


async def test_voice_compaction_shows_the_model_the_previous_summary_the_speakers_and_the_priorities():
    t, completer, flush = transcript("first summary", "second summary")
    await feed(t, range(70))
    first, second = (call["user"] for call in completer.calls)
    assert (
        'Alice: "turn number 0 about the raid"' in first
        and 'Companion (assistant): "reply number 2"' in first
    )
    assert "turn number 10" not in first and "first summary" not in first
    assert "first summary" in second and "turn number 10 about the raid" in second
    assert (
        first.index("Speaker attribution")
        < first.index("Current activity")
        < first.index("Open threads")
        < first.index("Decisions")
        < first.index("Screen context")
    )
    assert "1200 characters" in first
    assert t.summary == "second summary" and t.folded == 20


async def test_voice_compaction_caps_the_rolling_summary_at_1200_characters():
    t, completer, flush = transcript("word " * 600)
    await feed(t, range(60))
    assert 1100 < len(t.summary) <= 1200
    assert t.summary.endswith("…") and not t.summary.endswith(" …")


async def test_voice_compaction_a_failing_model_keeps_the_turns_verbatim_and_retries_on_the_next_turn_without_a_second_flush():
    t, completer, flush = transcript(ConnectionError("model down"), "Alice and Bob plan a raid.")
    await feed(t, range(60))
    assert len(t.turns) == 60 and t.summary == "" and t.failures == 1
    assert "model down" in t.last_error
    assert await t.add(turn(60)) == 10
    assert t.turns == tuple(turn(i) for i in range(10, 61))
    assert t.summary == "Alice and Bob plan a raid." and t.last_error is None
    assert flush.batches == [tuple(turn(i) for i in range(10))]  # extraction ran once for the batch


async def test_voice_compaction_an_empty_answer_counts_as_a_failure_not_as_an_empty_summary():
    t, completer, flush = transcript("   ", "the raid is at nine")
    await feed(t, range(61))
    assert t.failures == 1 and t.summary == "the raid is at nine" and len(t.turns) == 51


async def test_voice_compaction_a_failing_flush_keeps_the_turns_and_asks_the_model_nothing_until_the_flush_succeeds():
    completer = AsyncCompleter("the raid is at nine")
    flush = Flush(completer, RuntimeError("extraction queue full"))
    t = VoiceTranscript(completer, flush)
    await feed(t, range(60))
    assert completer.calls == [] and len(t.turns) == 60 and "extraction queue full" in t.last_error
    await t.add(turn(60))
    assert len(flush.batches) == 2 and flush.batches[0] == flush.batches[1]
    assert len(completer.calls) == 1 and len(t.turns) == 51


async def test_voice_compaction_a_backlog_after_an_outage_folds_batch_by_batch_oldest_first():
    t, completer, flush = transcript(*[ConnectionError("down")] * 12, "s1", "s2")
    await feed(t, range(71))  # 12 failed attempts (at 60 to 71 turns): two batches are due by now
    assert len(t.turns) == 71
    assert await t.add(turn(71)) == 20
    assert [b[0] for b in flush.batches] == [turn(0), turn(10)]
    assert t.summary == "s2" and t.turns[0] == turn(20)


@pytest.mark.parametrize("role, expected", [("user", "Alice: hi"), ("assistant", "hi")])
def test_voice_compaction_verbatim_turns_become_chat_messages_for_the_voice_prompt(role, expected):
    t, _, _ = transcript()
    t.append(
        VoiceTurn(
            "alice" if role == "user" else "bot",
            "Alice" if role == "user" else "Companion",
            "hi",
            START,
            role=role,
        )
    )
    assert t.messages() == [{"role": role, "content": expected}]
