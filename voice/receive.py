"""Incoming voice, per speaker: decoded 20 ms frames in, attributed utterances out.

Discord identifies a stream by its RTP SSRC; which user an SSRC belongs to arrives separately (the
voice gateway's SPEAKING event), and audio can come first (measured: in 2 of 4 runs). So everything is
keyed by SSRC, and a finished utterance whose speaker is still unknown is *held*, then released when
``attribute()`` names the user; held audio nobody claims within ``unattributed_ttl_s`` is dropped.

    receive thread:  feed(ssrc, frame) --> UtteranceCutter per ssrc --> SpeechStart / SpeechEnd
    timer (asyncio): tick()            --> ends utterances of speakers who stopped sending
    either:          attribute(ssrc, user) / leave(ssrc)

A speaker who stops sending packets gets no trailing silence to end their utterance (Discord clients
stop transmitting a few frames after they stop talking), hence ``tick()``. Callbacks run outside the
lock, on whichever thread caused them: the caller moves them onto its event loop.

Speculation: once a speaker has been silent for ``VadSettings.speculate_after_ms`` (the VAD's pause, or the time
since their last frame with any sound in it, whichever is longer), ``on_pause`` gets the utterance *so far*,
once per pause, so speech-to-text can start while the end-of-speech pause runs on. It is a guess, never a
turn: only ``on_utterance`` ends an utterance, and the guess is worth something only if the utterance that
ends is its audio plus silence. When ``on_pause`` is not given and ``on_utterance`` is a bound method of an
object with ``speech_paused`` (a ``VoiceSession``), that is used, so the session speculates wherever it is
wired to a hub.

End of turn (VOICE-6): without a turn model an utterance ends after ``VadSettings.end_pause_ms`` of silence. With
one (``voice.turn.EndOfTurn``), each pause that reaches ``turn_complete_ms`` is judged on the speaker's audio so far,
on the model's worker thread: a finished turn ends as soon as the verdict is in, an unfinished one at
``turn_cap_ms``; a verdict is for one pause only (a voiced frame after it makes it stale). The verdict's callback
ends the turn itself, so the answer does not wait for the next frame or tick.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from memory import Clock, SystemClock

from .audio import FRAME_MS, LISTEN_RATE, discord_to_listen, is_silent
from .turn import EndOfTurn, at_pause
from .vad import FRAME_BYTES, SpeechEnd, SpeechStart, UtteranceCutter, VadEvent, VadSettings

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Utterance:
    """One thing one person said: 16 kHz mono PCM."""

    ssrc: int
    user_id: int
    pcm16: bytes
    sample_rate: int = LISTEN_RATE

    @property
    def duration_s(self) -> float:
        return len(self.pcm16) / (2 * self.sample_rate)


@dataclass(frozen=True, slots=True)
class _Paused:
    """A speaker paused mid-utterance: the audio so far, to transcribe ahead of the end (maybe in vain)."""

    utterance: Utterance


@dataclass(frozen=True, slots=True)
class _Started:
    """Someone began speaking (reported to the session for barge-in)."""

    ssrc: int
    user_id: int | None


_Report = Utterance | _Started | _Paused


@dataclass(slots=True)
class _Speaker:
    cutter: UtteranceCutter
    last_frame_at: float
    user_id: int | None = None
    carry: bytes = b""  # 16 kHz samples short of a whole frame
    held: list[tuple[float, bytes]] = field(default_factory=list)  # (ended at, pcm) awaiting a user
    guessed_at: int | None = None  # voiced frames when this pause was reported to on_pause
    sound_at: float = 0.0  # when the last frame that was not (near) silence came
    verdict: tuple[int, Future[bool]] | None = (
        None  # (voiced frames when asked, the turn model's answer)
    )


class ReceiveHub:
    """Per-SSRC utterance cutting with late attribution; thread-safe."""

    def __init__(
        self,
        on_speech: Callable[[int, int | None], None],
        on_utterance: Callable[[Utterance], None],
        *,
        vad: VadSettings = VadSettings(),
        clock: Clock | None = None,
        unattributed_ttl_s: float = 10.0,
        on_pause: Callable[[Utterance], None] | None = None,
        turn: EndOfTurn | None = None,
    ) -> None:
        self._on_speech = on_speech
        self._on_utterance = on_utterance
        self._on_pause = on_pause or getattr(
            getattr(on_utterance, "__self__", None), "speech_paused", None
        )
        self._vad = vad
        self._turn = turn
        # With a model the cutter only ends at the cap: the hub ends a finished turn earlier.
        self._cutting = replace(vad, end_pause_ms=vad.turn_cap_ms) if turn else vad
        self._clock = clock or SystemClock()
        self._ttl = unattributed_ttl_s
        self._speakers: dict[int, _Speaker] = {}
        self._lock = threading.Lock()

    def feed(self, ssrc: int, pcm48_stereo: bytes) -> None:
        """One decoded frame (48 kHz stereo) from stream ``ssrc``."""
        with self._lock:
            speaker = self._speaker(ssrc)
            speaker.last_frame_at = now = self._clock.now()
            pcm = speaker.carry + discord_to_listen(pcm48_stereo)
            if not is_silent(pcm):
                speaker.sound_at = now
            whole = len(pcm) // FRAME_BYTES * FRAME_BYTES
            speaker.carry = pcm[whole:]
            events = [
                e
                for i in range(0, whole, FRAME_BYTES)
                for e in speaker.cutter.push(pcm[i : i + FRAME_BYTES])
            ]
            ready = self._route(ssrc, speaker, events) + self._pause(ssrc, speaker, now)
            asked = self._ask(speaker, now)
        self._report(ready)
        self._await(ssrc, asked)

    def attribute(self, ssrc: int, user_id: int) -> None:
        """Stream ``ssrc`` is ``user_id``: what they said before we knew is released now."""
        with self._lock:
            speaker = self._speaker(ssrc)
            speaker.user_id = user_id
            ready: list[_Report] = [Utterance(ssrc, user_id, pcm) for _, pcm in speaker.held]
            speaker.held.clear()
        self._report(ready)

    def leave(self, ssrc: int) -> None:
        """The speaker left the channel: what they were saying still counts; then they are forgotten."""
        with self._lock:
            speaker = self._speakers.pop(ssrc, None)
            ready = self._route(ssrc, speaker, speaker.cutter.flush()) if speaker else []
        self._report(ready)

    def tick(self) -> None:
        """End utterances of streams silent for an end-of-speech pause; drop audio nobody claimed."""
        now = self._clock.now()
        ready: list[_Report] = []
        asked: list[tuple[int, Future[bool]]] = []
        with self._lock:
            for ssrc, speaker in self._speakers.items():
                ready += self._pause(ssrc, speaker, now)
                asked += [(ssrc, verdict) for verdict in self._ask(speaker, now)]
                self._expire(ssrc, speaker, now)
        self._report(ready)
        for ssrc, verdict in asked:
            self._await(ssrc, [verdict])

    def unattributed(self) -> list[int]:
        """SSRCs heard from but not yet tied to a user."""
        with self._lock:
            return [ssrc for ssrc, s in self._speakers.items() if s.user_id is None]

    def speaking(self, ssrc: int) -> bool:
        with self._lock:
            speaker = self._speakers.get(ssrc)
            return bool(speaker and speaker.cutter.speaking)

    def _speaker(self, ssrc: int) -> _Speaker:
        if ssrc not in self._speakers:
            self._speakers[ssrc] = _Speaker(UtteranceCutter(self._cutting), self._clock.now())
        return self._speakers[ssrc]

    def _pause(self, ssrc: int, speaker: _Speaker, now: float) -> list[_Report]:
        """End the utterance when the pause is long enough for it, else maybe guess at its transcript.

        The pause counts from the voice's end, not the last packet: the silence frames a client sends as it stops
        are pause too (counting from the last packet made every turn ~100 ms later)."""
        silent_ms = self._silent_ms(speaker, now)
        if silent_ms >= self._end_pause_ms(
            speaker
        ):  # also drops a candidate that never became speech
            return self._route(ssrc, speaker, speaker.cutter.flush())
        return self._guess(ssrc, speaker, silent_ms)

    def _end_pause_ms(self, speaker: _Speaker) -> int:
        """The silence that ends this speaker's utterance now: the fixed one, or what the turn model's verdict says."""
        if self._turn is None:
            return self._vad.end_pause_ms
        finished = self._verdict(speaker)
        return (
            self._vad.turn_complete_ms
            if finished and finished.done() and finished.result()
            else self._vad.turn_cap_ms
        )

    @staticmethod
    def _verdict(speaker: _Speaker) -> Future[bool] | None:
        """The turn model's answer for the pause under way (None when not asked, or asked on an earlier pause)."""
        verdict = speaker.verdict
        return verdict[1] if verdict and verdict[0] == speaker.cutter.voiced_frames else None

    def _ask(self, speaker: _Speaker, now: float) -> list[Future[bool]]:
        """Ask the turn model once per pause that reached ``turn_complete_ms``; the new question, if any."""
        cutter = speaker.cutter
        if self._turn is None or not cutter.speaking or self._verdict(speaker) is not None:
            return []
        if self._silent_ms(speaker, now) < self._vad.turn_complete_ms:
            return []
        # The model always hears turn_complete_ms of silence (pipecat gives it its VAD's 200 ms), not the 200-300 ms
        # a tick every 100 ms happens to see: more silence reads as "finished" to it, at a pause for thought too.
        verdict = self._turn.judge(at_pause(cutter.pending() or b"", self._vad.turn_complete_ms))
        speaker.verdict = (cutter.voiced_frames, verdict)
        return [verdict]

    def _await(self, ssrc: int, asked: list[Future[bool]]) -> None:
        """When a verdict comes, end the turn at once if it says finished (outside the lock: it may come at once)."""
        for verdict in asked:
            verdict.add_done_callback(functools.partial(self._verdict_came, ssrc))

    def _verdict_came(self, ssrc: int, _: Future[bool]) -> None:
        with self._lock:
            speaker = self._speakers.get(ssrc)
            ready = self._pause(ssrc, speaker, self._clock.now()) if speaker else []
        self._report(ready)

    def _route(self, ssrc: int, speaker: _Speaker, events: list[VadEvent]) -> list[_Report]:
        """Turn VAD events into reports; an unattributed utterance is held instead."""
        ready: list[_Report] = []
        for event in events:
            if isinstance(event, SpeechStart):
                ready.append(_Started(ssrc, speaker.user_id))
            elif isinstance(event, SpeechEnd) and speaker.user_id is None:
                speaker.held.append((self._clock.now(), event.pcm16))
            elif isinstance(event, SpeechEnd):
                ready.append(Utterance(ssrc, speaker.user_id, event.pcm16))
        return ready

    @staticmethod
    def _silent_ms(speaker: _Speaker, now: float) -> int:
        """How long the speaker has been quiet, in whole frames like the VAD counts time.

        Two measures, the longer wins: the VAD's pause plus the time since the client stopped sending, and the time
        since the last frame with sound in it. The second matters because webrtcvad holds on to "speech" for a few
        frames after it ends: the digital silence a Discord client sends as it stops would not count as pause."""

        def frames(seconds: float) -> int:
            # a timer firing a hair early is not a frame short
            return round(seconds * 1000 / FRAME_MS) * FRAME_MS

        return max(
            speaker.cutter.pause_ms + frames(now - speaker.last_frame_at),
            frames(now - speaker.sound_at),
        )

    def _guess(self, ssrc: int, speaker: _Speaker, silent_ms: float) -> list[_Report]:
        """The utterance so far, once per pause that reached ``speculate_after_ms`` (none when speculation is off).

        A pause is told from the next one by the voiced frames before it: a voiced frame makes a new pause."""
        cutter, after = speaker.cutter, self._vad.speculate_after_ms
        if not cutter.speaking:
            speaker.guessed_at = None
            return []
        if (
            self._on_pause is None
            or not after
            or silent_ms < after
            or speaker.guessed_at == cutter.voiced_frames
        ):
            return []
        speaker.guessed_at = cutter.voiced_frames
        pcm = cutter.pending()
        # user 0 until attributed: a guess is matched to its utterance by stream and audio, never by user
        return [_Paused(Utterance(ssrc, speaker.user_id or 0, pcm))] if pcm else []

    def _expire(self, ssrc: int, speaker: _Speaker, now: float) -> None:
        kept = [(t, pcm) for t, pcm in speaker.held if now - t < self._ttl]
        if len(kept) < len(speaker.held):
            logger.warning(
                "voice: dropped %d utterance(s) from ssrc %d: no user claimed them within %.0f s",
                len(speaker.held) - len(kept),
                ssrc,
                self._ttl,
            )
        speaker.held = kept

    def _report(self, ready: list[_Report]) -> None:
        for item in ready:
            if isinstance(item, Utterance):
                self._on_utterance(item)
            elif isinstance(item, _Paused):
                assert self._on_pause is not None
                self._on_pause(item.utterance)
            else:
                self._on_speech(item.ssrc, item.user_id)
