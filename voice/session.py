"""One voice channel conversation: utterances in, spoken replies out, one turn at a time.

    ReceiveHub (receive thread) --speech_started--> barge-in: stop the reply being spoken
                                --utterance_ready--> queue --> turn: STT --> Responder --> ReplySpeech

Speculative transcription: when a speaker pauses (``speech_paused``, after ``VadSettings.speculate_after_ms``
of silence) the audio so far is transcribed in the background. If that pause ends the utterance, the
utterance's audio is the audio guessed on (plus at most trailing silence), and the turn takes the transcript already under way
instead of running STT a second time: the end-of-speech pause and Whisper overlap. Any other utterance
(speech resumed, so the audio grew) is transcribed as usual and the guess is dropped unused; a guess whose
STT failed falls back to the usual path. A guess never makes a turn by itself.

Turns run in arrival order (two people at once are answered one after the other); the next turn starts
when the bot has finished speaking, so it never talks over itself. A failing STT, TTS or responder
costs that turn (logged), never the session. The platform side is behind two Protocols: a
``Responder`` (the bot's conversation, which stores every turn: VOICE-5) and a ``Player``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from memory import Clock, SystemClock

from .audio import is_silent
from .providers import SpeechToText, TextToSpeech
from .receive import Utterance
from .speaking import Player, ReplySpeech
from .turn import EndOfTurn
from .vad import VadSettings

logger = logging.getLogger(__name__)

TextSink = Callable[[str], Awaitable[None]]


class Responder(Protocol):
    async def respond(self, user_id: int, text: str, stream: TextSink) -> str:
        """Answer what ``user_id`` said (streaming text deltas to ``stream``); returns the whole reply."""
        ...


@dataclass(frozen=True, slots=True)
class VoiceSettings:
    vad: VadSettings = VadSettings()
    idle_timeout_s: float = 300.0  # leave after this long with nobody speaking and nothing said
    barge_in: bool = True  # stop talking when someone starts speaking
    max_pending: int = 8  # utterances waiting for a turn; older ones are dropped past this
    turn: EndOfTurn | None = (
        None  # the turn model (VOICE-6); None: turns end on VadSettings.end_pause_ms
    )


@dataclass(slots=True)
class Speculation:
    """Counts of speculative transcriptions, for logs and the benchmark."""

    started: int = 0
    used: int = 0  # the utterance ended at that pause: its transcript served the turn
    failed: int = 0  # the speculative STT raised: the turn transcribed again


@dataclass(frozen=True, slots=True)
class SpokenTurn:
    """What happened in one turn, kept for logs and tests."""

    user_id: int
    heard: str
    reply: str
    spoken: tuple[str, ...]
    interrupted: bool


class VoiceSession:
    """Runs the turns of one channel; ``start()`` in the event loop, then feed it from any thread."""

    def __init__(
        self,
        stt: SpeechToText,
        tts: TextToSpeech,
        responder: Responder,
        player: Player,
        settings: VoiceSettings = VoiceSettings(),
        clock: Clock | None = None,
    ) -> None:
        self._stt, self._tts, self._responder, self._player = stt, tts, responder, player
        self.settings = settings
        self._clock = clock or SystemClock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Utterance] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._speech: ReplySpeech | None = None
        self.last_activity = self._clock.now()
        self.turns: list[SpokenTurn] = []
        self._guesses: dict[
            int, tuple[bytes, asyncio.Future[str]]
        ] = {}  # ssrc -> (audio, its transcript)
        self.speculation = Speculation()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="voice-session")

    async def close(self) -> None:
        """Stop talking and stop taking turns; safe to call twice."""
        if self._speech is not None:
            self._speech.cancel()
        for _, guess in self._guesses.values():
            guess.cancel()
        self._guesses.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def idle_for(self) -> float:
        """Seconds since anyone spoke or the bot said anything."""
        busy = self._speech is not None or not self._queue.empty()
        return 0.0 if busy else self._clock.now() - self.last_activity

    # -- called by the receive side, from its thread ----------------------------------------------
    def speech_started(self, ssrc: int, user_id: int | None) -> None:
        self._call_in_loop(self._barge_in, user_id)

    def utterance_ready(self, utterance: Utterance) -> None:
        self._call_in_loop(self._enqueue, utterance)

    def speech_paused(self, so_far: Utterance) -> None:
        """A speaker paused: start transcribing what they said so far, in case the pause ends the utterance."""
        self._call_in_loop(self._speculate, so_far)

    def _call_in_loop(self, callback: Callable[..., None], *args: object) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback, *args)

    def _barge_in(self, user_id: int | None) -> None:
        self.last_activity = self._clock.now()
        if self.settings.barge_in and self._speech is not None and not self._speech.interrupted:
            logger.info("voice: %s started speaking; the bot stops talking", user_id or "someone")
            self._speech.cancel()

    def _enqueue(self, utterance: Utterance) -> None:
        self.last_activity = self._clock.now()
        if self._queue.qsize() >= self.settings.max_pending:
            dropped = self._queue.get_nowait()
            logger.warning(
                "voice: too many utterances waiting; dropped one from %s", dropped.user_id
            )
        self._queue.put_nowait(utterance)

    def _speculate(self, so_far: Utterance) -> None:
        if self._task is None:
            return  # closed
        guess = asyncio.ensure_future(
            asyncio.to_thread(self._stt.transcribe, so_far.pcm16, so_far.sample_rate)
        )
        guess.add_done_callback(_quietly)
        # a newer pause of the same speaker replaces the older
        self._guesses[so_far.ssrc] = (
            so_far.pcm16,
            guess,
        )
        self.speculation.started += 1

    # -- turns --------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            utterance = await self._queue.get()
            try:
                await self._turn(utterance)
            except Exception:  # one broken turn must not end the session
                logger.exception("voice: a turn from user %s failed", utterance.user_id)
            finally:
                self._speech = None
                self.last_activity = self._clock.now()

    async def _turn(self, utterance: Utterance) -> None:
        heard = await self._transcribe(utterance)
        if not heard:
            return  # noise, or STT failed (logged): nothing to answer
        self._speech = speech = ReplySpeech(self._tts, self._player)
        reply = ""
        try:
            reply = await self._responder.respond(utterance.user_id, heard, speech.feed)
        finally:
            await speech.finish(reply)  # on failure: what had streamed is still said, then silence
        self.turns.append(
            SpokenTurn(utterance.user_id, heard, reply, tuple(speech.spoken), speech.interrupted)
        )
        # people's words: not at INFO
        logger.debug("voice: %s said %r; replied %r", utterance.user_id, heard[:80], reply[:80])

    async def _transcribe(self, utterance: Utterance) -> str:
        guessed = self._guessed(utterance)
        if guessed is not None:
            try:
                heard = (await guessed).strip()
                self.speculation.used += 1
                return heard
            except asyncio.CancelledError:
                raise
            except Exception:  # the guess failed: the utterance gets its own try below
                self.speculation.failed += 1
                logger.warning(
                    "voice: speculative transcription failed; transcribing the utterance again",
                    exc_info=True,
                )
        try:
            return (
                await asyncio.to_thread(
                    self._stt.transcribe, utterance.pcm16, utterance.sample_rate
                )
            ).strip()
        except Exception:  # the provider's failure costs this utterance; the session listens on
            logger.exception(
                "voice: could not transcribe %.1f s from user %s",
                utterance.duration_s,
                utterance.user_id,
            )
            return ""

    def _guessed(self, utterance: Utterance) -> asyncio.Future[str] | None:
        """The transcript under way for this utterance's speech, if a pause guessed it (and forget that guess)."""
        audio, guess = self._guesses.get(utterance.ssrc, (b"", None))
        if guess is None or not same_speech(audio, utterance.pcm16):
            return (
                None  # no guess, or speech went on after it: the partial transcript is never used
            )
        del self._guesses[utterance.ssrc]
        return guess


def same_speech(guessed: bytes, final: bytes) -> bool:
    """The utterance is the guessed audio, at most followed by silence.

    The VAD keeps up to 200 ms of the closing pause, and it may still have been growing when the guess was taken;
    silence added after the speech changes nothing a transcriber hears (Whisper pads every input with zeros to
    30 s). Anything else, speech above all, makes it another utterance."""
    return final.startswith(guessed) and is_silent(final[len(guessed) :])


def _quietly(future: asyncio.Future[str]) -> None:
    """A guess nobody awaits must not log "exception was never retrieved"; a used one re-raises to its turn."""
    if not future.cancelled():
        future.exception()
