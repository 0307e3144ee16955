"""Per-speaker receiving: streams keyed by SSRC, late attribution to users, people who stop or leave.

Time is a ``FakeClock``; frames are fed as the receive thread feeds them (48 kHz stereo, 20 ms).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memory.clock import FakeClock
from tests.voice_support import silence, spoken
from voice.audio import DISCORD_FRAME_BYTES
from voice.receive import ReceiveHub, Utterance
from voice.vad import VadSettings

ALICE, BOB = 3003, 3004


class Recorder:
    """Collects what the hub reports."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, int | None]] = []
        self.utterances: list[Utterance] = []

    def speech(self, ssrc: int, user_id: int | None) -> None:
        self.starts.append((ssrc, user_id))

    def utterance(self, utterance: Utterance) -> None:
        self.utterances.append(utterance)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def seen() -> Recorder:
    return Recorder()


@pytest.fixture
def hub(seen, clock) -> ReceiveHub:
    return ReceiveHub(
        seen.speech,
        seen.utterance,
        vad=VadSettings(end_pause_ms=400),
        clock=clock,
        unattributed_ttl_s=5,
    )


def feed(hub: ReceiveHub, clock: FakeClock, ssrc: int, pcm: bytes) -> None:
    for i in range(0, len(pcm), DISCORD_FRAME_BYTES):
        hub.feed(ssrc, pcm[i : i + DISCORD_FRAME_BYTES])
        clock.advance(0.02)


def test_an_attributed_speaker_gets_one_utterance_per_sentence(hub, seen, clock):
    hub.attribute(11, ALICE)
    feed(hub, clock, 11, spoken("Good evening everybody.") + silence(0.6))
    assert seen.starts == [(11, ALICE)]
    (utterance,) = seen.utterances
    assert (utterance.ssrc, utterance.user_id) == (11, ALICE) and 1.0 < utterance.duration_s < 3.0


def test_audio_before_the_speaking_event_is_held_and_then_attributed(hub, seen, clock):
    feed(hub, clock, 11, spoken("Good evening everybody.") + silence(0.6))
    assert seen.utterances == [] and hub.unattributed() == [11]
    hub.attribute(11, ALICE)
    assert [u.user_id for u in seen.utterances] == [ALICE] and hub.unattributed() == []


def test_held_audio_nobody_claims_is_dropped_with_a_warning(hub, seen, clock, caplog):
    feed(hub, clock, 11, spoken("Good evening everybody.") + silence(0.6))
    clock.advance(6)
    with caplog.at_level(logging.WARNING, "voice.receive"):
        hub.tick()
    hub.attribute(11, ALICE)
    assert seen.utterances == [] and "no user claimed" in caplog.text


def voice_only(pcm48_stereo: bytes) -> bytes:
    """Speech without espeak-ng's trailing silence (whole frames): the voice ends where the audio does."""
    samples = np.frombuffer(pcm48_stereo, "<i2")
    last = int(np.nonzero(np.abs(samples) > 300)[0][-1])
    return pcm48_stereo[: (last * 2 // DISCORD_FRAME_BYTES + 1) * DISCORD_FRAME_BYTES]


def test_a_speaker_who_stops_sending_mid_sentence_is_ended_by_the_timer(hub, seen, clock):
    hub.attribute(11, ALICE)
    # no trailing silence: the client went quiet
    feed(hub, clock, 11, voice_only(spoken("Good evening everybody.")))
    assert seen.utterances == []
    clock.advance(0.1)
    hub.tick()
    assert seen.utterances == []  # a short gap is not yet the end
    clock.advance(0.4)
    hub.tick()
    assert [u.user_id for u in seen.utterances] == [ALICE]


def test_a_speaker_leaving_mid_utterance_still_counts_and_is_then_forgotten(hub, seen, clock):
    hub.attribute(11, ALICE)
    feed(hub, clock, 11, spoken("Good evening everybody."))
    hub.leave(11)
    assert [u.user_id for u in seen.utterances] == [ALICE]
    assert not hub.speaking(11) and hub.unattributed() == []


def test_two_people_talking_at_once_are_kept_apart(hub, seen, clock):
    hub.attribute(11, ALICE)
    hub.attribute(22, BOB)
    alice, bob = (
        spoken("I like green apples.") + silence(0.6),
        spoken("My dog is called Rex.") + silence(0.6),
    )
    for i in range(0, max(len(alice), len(bob)), DISCORD_FRAME_BYTES):
        for ssrc, pcm in ((11, alice), (22, bob)):
            if i < len(pcm):
                hub.feed(ssrc, pcm[i : i + DISCORD_FRAME_BYTES])
        clock.advance(0.02)
    assert sorted(u.user_id for u in seen.utterances) == [ALICE, BOB]
    assert {s for s, _ in seen.starts} == {11, 22}


def test_silence_produces_nothing(hub, seen, clock):
    hub.attribute(11, ALICE)
    feed(hub, clock, 11, silence(2.0))
    clock.advance(1)
    hub.tick()
    assert seen.starts == [] and seen.utterances == []


def test_the_silence_a_client_sends_as_it_stops_counts_as_pause(hub, seen, clock):
    """A Discord client sends five silence frames and stops: the end-of-speech pause runs from the voice's end."""
    hub.attribute(11, ALICE)
    feed(hub, clock, 11, voice_only(spoken("Good evening everybody.")) + silence(0.1))
    clock.advance(0.3)  # the 400 ms pause: 100 ms of silence frames, then 300 ms of nothing
    hub.tick()
    assert [u.user_id for u in seen.utterances] == [ALICE]
