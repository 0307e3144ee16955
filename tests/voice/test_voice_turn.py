"""End of turn by a model (VOICE-6): a pause for thought is waited through, a finished question is answered fast.

The hub and the session are the real ones; the speech is espeak-ng's and the clock a ``FakeClock``. The turn model
is scripted at its Protocol edge (``TurnModel``: audio in, a probability out) so each test knows its verdicts, and
runs inline so the fake clock stands still while it "thinks"; the real Smart Turn file is tested on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np
import pytest

from bot.config import ConfigError, load_settings
from bot.spoken.providers import voice_settings
from memory.clock import FakeClock
from tests.voice_support import ThreadPlayer, ToneTTS, eventually, spoken
from voice.audio import DISCORD_FRAME_BYTES, LISTEN_RATE, resample
from voice.receive import ReceiveHub, Utterance
from voice.session import VoiceSession, VoiceSettings
from voice.tts import EspeakTTS
from voice.turn import (
    SMART_TURN_FILE,
    EndOfTurn,
    SmartTurn,
    at_pause,
    default_model_dir,
    load_end_of_turn,
    smart_turn_features,
)
from voice.vad import VadSettings

ALICE, SSRC = 3003, 11
VAD = VadSettings()  # 700 ms fixed pause; with a model: asked at 200 ms, capped at 2 s


class ScriptedTurns:
    """Answers each question from ``script`` (a probability, or an exception); records the audio it was given."""

    def __init__(self, *script: float | Exception) -> None:
        self.script = list(script)
        self.heard: list[bytes] = []

    def complete(self, pcm16: bytes) -> float:
        self.heard.append(pcm16)
        answer = self.script.pop(0) if self.script else 0.0
        if isinstance(answer, Exception):
            raise answer
        return answer


class Inline(Executor):
    """Runs the model in the caller's thread (the standard library has no such executor)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


class Ends:
    """What the hub reports, with the fake time of each end."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.utterances: list[tuple[float, Utterance]] = []
        self.starts = 0

    def speech(self, ssrc: int, user_id: int | None) -> None:
        self.starts += 1

    def utterance(self, utterance: Utterance) -> None:
        self.utterances.append((self.clock.now(), utterance))


def hub_with(
    model: ScriptedTurns | None, vad: VadSettings = VAD
) -> tuple[ReceiveHub, Ends, FakeClock]:
    clock = FakeClock(0.0)
    ends = Ends(clock)
    turn = EndOfTurn(model, executor=Inline()) if model else None
    hub = ReceiveHub(ends.speech, ends.utterance, vad=vad, clock=clock, turn=turn)
    hub.attribute(SSRC, ALICE)
    return hub, ends, clock


def say(hub: ReceiveHub, clock: FakeClock, pcm: bytes, *, silence_s: float = 0.0) -> float:
    """Feed speech as a client sends it, then ``silence_s`` of nothing sent with the hub ticked every 20 ms; the
    fake time of the speech's last sound (espeak-ng ends with ~350 ms of silence: pause too)."""
    ended = clock.now()
    for i in range(0, len(pcm), DISCORD_FRAME_BYTES):
        clock.advance(0.02)
        hub.feed(SSRC, pcm[i : i + DISCORD_FRAME_BYTES])
        ended = (
            clock.now()
            if np.abs(np.frombuffer(pcm[i : i + DISCORD_FRAME_BYTES], "<i2")).max(initial=0) > 300
            else ended
        )
    for _ in range(round(silence_s / 0.02)):
        clock.advance(0.02)
        hub.tick()
    return ended


def test_voice_a_finished_question_ends_at_the_short_pause_not_the_700_ms_one():
    hub, ends, clock = hub_with(ScriptedTurns(0.93))
    spoke = say(hub, clock, spoken("What do you think about that?"), silence_s=1.0)
    ((at, utterance),) = ends.utterances
    # the model is asked at 200 ms and says finished
    assert at - spoke <= 0.3 and utterance.user_id == ALICE

    old, old_ends, old_clock = hub_with(None)
    old_spoke = say(old, old_clock, spoken("What do you think about that?"), silence_s=1.0)
    assert old_ends.utterances[0][0] - old_spoke >= 0.7  # the fixed pause it replaces


def test_voice_a_pause_for_thought_is_waited_through_and_the_whole_sentence_is_one_utterance():
    model = ScriptedTurns(0.08, 0.91)  # the pause: unfinished; the end: finished
    hub, ends, clock = hub_with(model)
    # longer than the old 700 ms: it would have cut in
    say(hub, clock, spoken("I was thinking"), silence_s=1.2)
    assert ends.utterances == []
    spoke = say(hub, clock, spoken("maybe we could go on Sunday."), silence_s=1.0)
    ((at, utterance),) = ends.utterances
    # both halves and the pause between them
    assert at - spoke <= 0.3 and utterance.duration_s > 1.2 + 1.0
    assert len(model.heard) == 2  # once per pause, not at every tick


def test_voice_an_unfinished_turn_still_ends_at_the_cap_when_nobody_goes_on():
    hub, ends, clock = hub_with(ScriptedTurns(0.05))
    spoke = say(hub, clock, spoken("So the thing is"), silence_s=3.0)
    ((at, _),) = ends.utterances
    assert 2.0 <= at - spoke <= 2.2


def test_voice_a_failing_turn_model_costs_the_short_wait_not_the_turn(caplog):
    hub, ends, clock = hub_with(ScriptedTurns(RuntimeError("onnxruntime fell over")))
    spoke = say(hub, clock, spoken("What do you think about that?"), silence_s=3.0)
    assert len(ends.utterances) == 1 and ends.utterances[0][0] - spoke >= 2.0
    assert "the turn model failed" in caplog.text


def test_voice_the_model_hears_the_speech_then_exactly_the_short_pause():
    model = ScriptedTurns(0.9)
    hub, _, clock = hub_with(model)
    speech = spoken("What do you think about that?")
    say(hub, clock, speech, silence_s=1.0)
    heard = np.frombuffer(model.heard[0], "<i2")
    tail = heard[-LISTEN_RATE // 5 :]  # 200 ms: the pause when it was asked
    # sound right before the pause
    assert not tail.any() and np.abs(heard[: -LISTEN_RATE // 5][-160:]).max() > 64


def test_voice_a_late_verdict_on_an_earlier_pause_never_ends_the_turn_after_speech_went_on():
    release = threading.Event()

    class Slow(ScriptedTurns):
        def complete(self, pcm16: bytes) -> float:
            release.wait(10)
            return super().complete(pcm16)

    clock = FakeClock(0.0)
    ends = Ends(clock)
    hub = ReceiveHub(
        ends.speech, ends.utterance, vad=VAD, clock=clock, turn=EndOfTurn(Slow(0.99, 0.0))
    )
    hub.attribute(SSRC, ALICE)
    say(hub, clock, spoken("I was thinking"), silence_s=0.3)  # asked; the answer is held back
    say(hub, clock, spoken("maybe we could go"))  # speech went on before the verdict
    release.set()
    with pytest.raises(TimeoutError):
        _wait(lambda: bool(ends.utterances), 0.5)  # "finished" was about the first pause: stale


def test_voice_barge_in_and_separate_speakers_keep_working_with_the_model():
    model = ScriptedTurns(0.9, 0.9)
    hub, ends, clock = hub_with(model)
    hub.attribute(12, 4004)
    speech = spoken("What do you think about that?")
    for i in range(
        0, len(speech), DISCORD_FRAME_BYTES
    ):  # two people at once, each on their own stream
        clock.advance(0.02)
        hub.feed(SSRC, speech[i : i + DISCORD_FRAME_BYTES])
        hub.feed(12, speech[i : i + DISCORD_FRAME_BYTES])
    say(hub, clock, b"", silence_s=0.6)
    assert ends.starts == 2  # the onset that stops the bot talking
    assert sorted(u.user_id for _, u in ends.utterances) == [ALICE, 4004]


# -- the session: who is answered, and when ----------------------------------------------------------------------
class Responder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def respond(self, user_id: int, text: str, stream) -> str:
        self.asked.append(text)
        await stream("Okay.")
        return "Okay."


class ByLength:
    """Hears the first half in short audio and the whole sentence in long audio: the guesses made at each pause
    run in threads, in no fixed order, so a script in call order would not do."""

    def __init__(self) -> None:
        self.heard: list[float] = []

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        self.heard.append(len(pcm16) / 2 / sample_rate)
        return (
            "I was thinking"
            if self.heard[-1] < 1.5
            else "I was thinking maybe we could go on Sunday."
        )


async def test_voice_a_speaker_pausing_mid_sentence_is_answered_once_when_they_finish():
    stt = ByLength()
    responder = Responder()
    clock = FakeClock(0.0)
    settings = VoiceSettings(turn=EndOfTurn(ScriptedTurns(0.1, 0.9), executor=Inline()))
    session = VoiceSession(stt, ToneTTS(), responder, ThreadPlayer(), settings)
    hub = ReceiveHub(
        session.speech_started,
        session.utterance_ready,
        vad=settings.vad,
        clock=clock,
        turn=settings.turn,
    )
    hub.attribute(SSRC, ALICE)
    session.start()
    try:
        say(hub, clock, spoken("I was thinking"), silence_s=0.9)
        say(hub, clock, spoken("maybe we could go on Sunday."), silence_s=0.4)
        await eventually(lambda: session.turns)
        assert responder.asked == ["I was thinking maybe we could go on Sunday."]  # never the half
        assert len(session.turns) == 1
    finally:
        await session.close()


# -- the real model file, the fallback and the settings ------------------------------------------------------------
def test_voice_smart_turn_reads_8_s_of_features_and_gives_a_probability():
    model = SmartTurn(default_model_dir() / SMART_TURN_FILE)  # put there by scripts/install-run
    model.load()
    pcm = at_pause(spoken_16k("What do you think about that?"), 200)
    assert smart_turn_features(pcm).shape == (1, 80, 800)
    assert smart_turn_features(pcm * 10).shape == (1, 80, 800)  # longer than 8 s: the last 8 s
    first, again = model.complete(pcm), model.complete(pcm)
    assert 0.0 < first < 1.0 and first == again


def test_voice_a_missing_turn_model_falls_back_to_the_fixed_pause_with_one_clear_line(
    tmp_path, caplog
):
    caplog.set_level(logging.WARNING)
    assert load_end_of_turn(tmp_path) is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert (
        str(tmp_path / SMART_TURN_FILE) in line
        and "fixed pause" in line
        and "scripts/install-run" in line
    )
    settings = voice_settings(
        load_settings(_env_file=None, voice_turn_model=True, voice_turn_model_dir=tmp_path)
    )
    assert settings.turn is None and settings.vad.end_pause_ms == 700


def test_voice_the_turn_settings_come_from_config_and_an_inverted_pair_is_refused():
    chosen = load_settings(
        _env_file=None,
        voice_turn_model=True,
        voice_turn_complete_ms=250,
        voice_turn_cap_ms=1500,
        voice_turn_threshold=0.7,
    )
    settings = voice_settings(chosen)
    assert (settings.vad.turn_complete_ms, settings.vad.turn_cap_ms) == (250, 1500)
    assert settings.turn is not None and settings.turn.threshold == 0.7
    # off by default: docs/voice.md says why
    assert voice_settings(load_settings(_env_file=None)).turn is None
    with pytest.raises(
        ConfigError, match="COMPANION_VOICE_TURN_CAP_MS.*COMPANION_VOICE_TURN_COMPLETE_MS"
    ):
        load_settings(_env_file=None, voice_turn_complete_ms=900, voice_turn_cap_ms=800)
    with pytest.raises(ValueError):
        VadSettings(turn_complete_ms=0)
    with pytest.raises(ValueError):
        EndOfTurn(ScriptedTurns(), threshold=1.0)


def test_voice_at_pause_replaces_whatever_silence_came_with_the_speech():
    speech = spoken_16k("Good evening.")
    assert at_pause(speech + b"\0" * 9_000, 200) == at_pause(speech, 200)
    assert len(at_pause(b"", 100)) == LISTEN_RATE // 10 * 2  # no speech at all: only the pause


def spoken_16k(text: str) -> bytes:
    pcm, rate = EspeakTTS(words_per_minute=150).synthesize(text)
    return resample(pcm, rate, LISTEN_RATE)


def _wait(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.01)
