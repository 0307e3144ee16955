"""``companion bench voice``: one scripted voice session, offline, timed from the end of speech to the reply's voice.

    speech (the voice under test, 48 kHz stereo, made before timing) --20 ms frames--> ReceiveHub (VAD per speaker)
        --> VoiceSession --> FasterWhisperSTT --> Orchestrator (voice mode, warm memory, a real store with MiniLM)
        --> the openai SDK --> a zero-latency scripted model on 127.0.0.1 --> ReplySpeech --> EspeakTTS --> player

Speech frames are fed at once (they arrived before the speech ended); from the moment the last one is in,
the clock runs: a Discord client then sends five silence frames in real time and stops, and the hub's tick
(every 100 ms, as ``DiscordVoice`` does) ends the utterance after the end-of-speech pause. ``first_audio_ms``
is from that moment to the first reply frame the player pulls, so it includes the pause, Whisper, recall,
the model round trip and the first sentence's synthesis. The session is wired as the bot wires it, so Whisper
starts speculatively 200 ms into the pause (``VadSettings.speculate_after_ms``) and overlaps the rest of it;
``speculative_stt`` counts those runs, how many served their turn and how many failed. Turns run one after another, each waiting until the
previous reply was played (the player drains as fast as it is fed: no real-time playback to wait out).

Most turns stay on one topic (a camping trip), with fillers, one digression and a return: the warm memory's
hit rate is measured on that. Recall is timed after the spoken session, on the same store, over what Whisper
heard, ``recall_passes`` times: each turn is recalled both ways, one right after the other (the order alternating),
so the two medians come from the same turns under the same load. ``warm_recall_ms`` is the warm memory's step on
the turns it served (reuse or refresh; a fresh warm memory each pass, as a new session would have),
``cold_recall_ms`` a full recall of those same turns, ``warm_full_ms`` the warm memory's own full recalls (a new
topic). ``recall_includes`` says what each does: cold is the turn's embedding plus the store's hybrid recall
(vector scan, FTS, fusion) over the person's and the server's memories; warm is the turn's one embedding for the
drift test (none for a filler or a turn mostly in the topic's searched words) plus, on a refresh, a BM25 top-up for
the words not searched yet, and no vector scan. Both include the standing
rules (the behavioural pool). The store holds the five trip memories plus ``store_size`` synthetic ones in the
same server (10,000 by default: a server after months of use), so the recall a warm turn saves is the one a real
store costs. (The spoken session's own recall steps are not used: only its few full recalls are cold, and they
ran beside Whisper and TTS threads.)

Turns end on the turn model (VOICE-6) when it is installed (what turning it on gives; the bot has it off by
default), else on the fixed pause (``end_of_turn`` says which; ``end_pause_ms`` forces a fixed pause). The
person's speech is said by the voice under test. With ``streaming`` the recommended voice's session runs
again against a model paced like a hosted one (300 ms to the first token, 40 tokens/s):
``first_audio_ms_streaming`` is the figure a user would feel; the reply reaches TTS sentence by sentence as it
streams (the leak check passes whole sentences, ``ReplySpeech`` synthesises each as it completes).
``turn_taking`` is ``measure.turn_set`` on the recommended voice, the fixed pause and the turn model on the same
60 turns; ``machine`` is ``companion bench``'s machine reference with the
load average at the end of the run.

The session runs once per TTS provider installed (espeak-ng always, piper when its extra is installed); the
recommended one (piper when present) gives ``first_audio_ms``; ``first_audio_ms_by_tts`` has each.
``tts_wer`` and ``barge_in_ms`` are ``measure.voice_quality``'s. Logs below WARNING are silenced for the run:
the session's lines hold what was said.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bot.composition import build_runtime as compose
from bot.config import load_settings
from bot.runtime import Runtime
from bot.types import IncomingMessage
from memory.models import Memory, NewMemory, Scope, Visibility
from memory.recall.retrieval import Hit
from memory.scopes import RecallContext
from memory.storage.embeddings import OnnxMiniLM
from voice.audio import mono_to_discord
from voice.playback import PlaybackBuffer
from voice.providers import TextToSpeech
from voice.receive import ReceiveHub
from voice.session import VoiceSession, VoiceSettings
from voice.stt import FasterWhisperSTT
from voice.tts import EspeakTTS, PiperTTS
from voice.turn import load_end_of_turn
from voice.vad import VadSettings
from voice.warm import Decision, WarmMemory, WarmRecord, memory_retrieval

from .bench import BATCH
from .samples import TextGen, percentiles
from .throughput import machine_reference
from .turn_set import turn_taking
from .voice_model import ScriptedModel
from .voice_quality import barge_in_ms, round_trip_wer, sentences

GUILD, CHANNEL, USER, SSRC = "bench-guild", "bench-voice", 42, 4242
FRAME_BYTES, TRAILING_FRAMES, TICK_S = 3840, 5, 0.1
TURN_WAIT_S = (
    30.0  # an utterance with no turn after this (Whisper heard nothing) is counted, not waited on
)
MEMORIES = [
    "Sam is planning a camping trip to the mountains with two friends",
    "Sam owns an old orange two-person tent that leaks in heavy rain",
    "Sam prefers quiet campsites near a lake",
    "Sam's sister Jo is learning the violin",
    "Sam cooks on a small gas stove when camping",
]
# Most turns stay on the camping trip, fillers between, a two-turn digression. Words espeak-ng says so that Whisper tiny.en
# hears them ("the lake district" came back as "make this trip").
TOPICAL = [
    "I'm planning a camping trip to the mountains next weekend",
    "the camping trip to the mountains is next weekend",
    "yeah",
    "for the camping trip to the mountains I need a tent",
    "which tent should I bring on the camping trip to the mountains",
    "okay",
    "my tent for the mountains camping trip leaks in the rain",
    "should I buy a new tent for the camping trip to the mountains",
    "uh huh",
    "where should we camp on the mountains camping trip",
    "which campsite in the mountains is best for camping",
    "right",
    "my sister is learning to play the violin",
    "she practises the violin every evening",
    "anyway, back to the camping trip to the mountains",
    "what food should we bring on the camping trip to the mountains",
    "cool",
    "how cold is the mountains at night when camping",
    "do I need a warm sleeping bag for camping in the mountains",
    "yeah",
    "should I bring a rain jacket camping in the mountains",
    "what about hiking boots for the mountains camping trip",
    "okay",
    "are there good walks near our mountain campsite",
    "can we swim in the lake on the camping trip",
    "uh huh",
    "how long is the drive to the mountains for camping",
    "we leave for the mountains camping trip on friday",
    "right",
    "what should I pack last for the camping trip",
    "is a two person tent enough for three people camping",
    "thanks, the camping trip to the mountains will be great",
]
# The same trip as people say it: on topic for a listener, yet mostly below VOICE-2's 0.65 cosine with MiniLM (measured on
# the text: hit rate 0.16 at the SPEC's 0.85/0.65 with each turn embedded alone, 0.59 with the turn lifted by its topic's last
# three turn vectors as ``WarmMemory`` does; docs/voice.md has the sweep).
NATURAL = [
    "I'm planning a camping trip to the lake district",
    "we want to go next weekend",
    "yeah",
    "my old tent leaks when it rains",
    "should I buy a new tent for the trip",
    "okay",
    "which campsite near a lake would you pick",
    "we will cook on my gas stove",
    "what food should we bring camping",
    "mhm",
    "how cold does it get at night in the lake district",
    "I need a warmer sleeping bag",
    "my sister is learning the violin by the way",
    "she practises every evening",
    "anyway back to the camping trip",
    "do we need to book the campsite",
    "right",
    "how long is the drive to the lake district",
    "we leave on friday morning",
    "should I bring a rain jacket",
    "yeah definitely",
    "what about hiking boots",
    "are there good walks near the lake",
    "I would like a short walk on saturday",
    "cool",
    "can we swim in the lake",
    "the water will be cold",
    "we come back on sunday evening",
    "what should I pack last",
    "thanks that helps",
    "one more thing about the tent",
    "is a two person tent enough for three people",
]


SCRIPTS = {"topical": TOPICAL, "natural": NATURAL}


RECALL_INCLUDES = {
    "cold": "embed the turn + hybrid recall over the store (vector scan, FTS, fusion) + standing rules; the same turns as warm",
    "warm": "embed the turn once (not fillers, nor turns in the topic's words) + BM25 for new words + standing rules; no vector scan",
}
RECALL_PASSES = 3  # x 32 turns: ~85 warm-served turns, each also recalled cold
STREAMING = (0.3, 40.0)  # a hosted small model: 300 ms to the first token, then 40 tokens/s


def machine() -> dict[str, Any]:
    """The machine reference ``companion bench`` prints, so voice figures from two machines can be compared."""
    return machine_reference(OnnxMiniLM())


def tts_providers(names: tuple[str, ...] | None = None) -> dict[str, TextToSpeech]:
    """The offline TTS providers to measure, the recommended one first: piper when installed, then espeak-ng."""
    found: dict[str, TextToSpeech] = {}
    piper = PiperTTS()
    if piper.available():
        piper.load()
        found["piper"] = piper
    found["espeak"] = EspeakTTS()
    return {name: tts for name, tts in found.items() if names is None or name in names}


def run_voice_bench(
    utterances: int = 32,
    *,
    end_pause_ms: int | None = None,
    script: str = "topical",
    progress: Callable[..., None] | None = None,
    stt: FasterWhisperSTT | None = None,
    store_size: int = 10_000,
    providers: tuple[str, ...] | None = None,
    wer_sentences: int | None = None,
    barge_in_runs: int = 5,
    recall_passes: int = RECALL_PASSES,
    streaming: tuple[float, float] | None = STREAMING,
    turn_set: bool = True,
) -> dict[str, Any]:
    """The figures of one scripted session of ``utterances`` turns (at least 1; the script repeats past 32) per TTS
    provider, the round-trip WER of each on ``wer_sentences`` sentences (all by default) and barge-in timings.
    ``stt``: a Whisper already loaded (a test shares its own); by default the bundled one is loaded first.
    ``end_pause_ms``: end turns on that fixed pause; by default on the turn model when it is installed.
    ``streaming``: (time to first token s, tokens/s) of a second session of the recommended voice with a paced model.
    ``turn_set``: also judge the turn-taking set (``measure.turn_set``), fixed pause and turn model side by side."""
    turns, say = SCRIPTS[script], progress or (lambda *_: None)
    texts = [turns[i % len(turns)] for i in range(max(1, utterances))]
    with _quiet_logs():
        timed, voices = _TimedSTT(stt), tts_providers(providers)
        ending = _Ending(end_pause_ms)
        wer = {
            name: round_trip_wer(tts, timed.stt, sentences()[:wer_sentences], say)
            for name, tts in voices.items()
        }
        sessions = asyncio.run(
            _sessions(texts, ending, say, timed, voices, store_size, recall_passes, streaming)
        )
        recommended = next(iter(voices))
        stops = barge_in_ms(voices[recommended], barge_in_runs)
        taking = turn_taking(voices[recommended], recommended, say) if turn_set else None
    figures = sessions[recommended]
    figures["voice"] |= {
        "tts": recommended,
        "store_memories": store_size + len(MEMORIES),
        "first_audio_ms_by_tts": {
            name: result["voice"]["first_audio_ms"]
            for name, result in sessions.items()
            if name in voices
        },
        "first_audio_ms_streaming": sessions["streaming"]["voice"]["first_audio_ms"]
        if streaming
        else None,
        "streaming_model": {"ttft_ms": round(streaming[0] * 1000), "tokens_per_s": streaming[1]}
        if streaming
        else None,
        "tts_wer": wer,
        "barge_in_ms": {**percentiles(stops, digits=1), "max": round(max(stops), 1)},
        "turn_taking": taking,
        "machine": machine() | {"load_average": [round(x, 2) for x in os.getloadavg()]},
    }
    return figures


class _Ending:
    """How the bench's sessions end turns: a fixed pause when one is asked for, else as the bot would."""

    def __init__(self, end_pause_ms: int | None) -> None:
        self.turn = None if end_pause_ms else load_end_of_turn()
        self.vad = VadSettings(end_pause_ms=end_pause_ms or VadSettings().end_pause_ms)

    @property
    def label(self) -> str:
        return "turn model" if self.turn else f"{self.vad.end_pause_ms} ms pause"


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Our loggers and the chatty libraries' at WARNING for the run: a table, not a scroll of requests and transcripts."""
    names = (
        "voice",
        "bot",
        "memory",
        "measure",
        "faster_whisper",
        "httpx",
        "httpx2",
        "openai",
        "aiohttp",
    )
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


async def _sessions(
    texts: list[str],
    ending: _Ending,
    progress: Callable[..., None],
    stt: _TimedSTT,
    voices: dict[str, TextToSpeech],
    store_size: int,
    recall_passes: int,
    streaming: tuple[float, float] | None,
) -> dict[str, dict[str, Any]]:
    """One session per provider, in one event loop (a runtime's HTTP client must not outlive its loop); recall is
    timed after the first (the recommended provider's): it does not depend on the voice. Then, with ``streaming``,
    the recommended provider again with a model paced at (time to first token, tokens/s)."""
    found: dict[str, dict[str, Any]] = {}
    for name, tts in voices.items():
        found[name] = await _session(
            texts, ending, progress, stt, tts, store_size, recall_passes if not found else 0
        )
    if streaming:
        progress(
            f"the session again with a model streaming after {streaming[0]} s at {streaming[1]} tokens/s"
        )
        recommended = voices[next(iter(voices))]
        found["streaming"] = await _session(
            texts, ending, progress, stt, recommended, store_size, 0, ScriptedModel(*streaming)
        )
    return found


async def _session(
    texts: list[str],
    ending: _Ending,
    progress: Callable[..., None],
    stt: _TimedSTT,
    tts: TextToSpeech,
    store_size: int,
    recall_passes: int = 0,
    scripted: ScriptedModel | None = None,
) -> dict[str, Any]:
    speech = _speech(texts, tts)
    stt.busy_s = stt.audio_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        async with scripted or ScriptedModel() as model:
            runtime = _runtime(Path(tmp), model.base_url, store_size)
            await runtime.start(background_loop=False)
            try:
                figures = await _measure(runtime, stt, tts, speech, ending, progress)
                if recall_passes:
                    heard = [turn.heard for turn in figures.pop("turns")]
                    figures["voice"] |= await runtime.orchestrator.runner.run(
                        recall_figures, runtime, heard, recall_passes
                    )
                return figures
            finally:
                await runtime.stop()


def _speech(texts: list[str], tts: TextToSpeech) -> list[bytes]:
    """The person's side, spoken by the voice under test (espeak-ng at 160 words/min, as it was measured before): the
    turn model hears the same voice as the turn-taking set."""
    speaker = EspeakTTS(words_per_minute=160) if isinstance(tts, EspeakTTS) else tts
    return [mono_to_discord(*_voiced(*speaker.synthesize(text))) for text in texts]


def _voiced(pcm16: bytes, rate: int) -> tuple[bytes, int]:
    """The speech without espeak-ng's trailing ~350 ms of silence: the clock must start when the voice stops
    (left in, the VAD would count it as pause before the clock starts)."""
    samples = np.frombuffer(pcm16, "<i2")
    loud = np.nonzero(np.abs(samples) > 300)[0]  # about 1% of full scale
    return samples[: int(loud[-1]) + 1 if loud.size else 0].tobytes(), rate


def _runtime(tmp: Path, base_url: str, store_size: int = 0) -> Runtime:
    settings = load_settings(
        _env_file=None,
        db_path=tmp / "bench.db",
        llm_base_url=base_url,
        llm_api_key="bench",
        embeddings="local",
        scheduler_enabled=False,
    )
    runtime = compose(settings)
    for text in MEMORIES:
        runtime.engine.memories.add(
            NewMemory(
                content=text,
                subject=text[:40],
                scope=Scope.USER,
                scope_id=f"bench:{USER}",
                visibility=Visibility.PUBLIC,
                guild_id=f"bench:{GUILD}",
            )
        )
    _fill(runtime, store_size)
    return runtime


def _fill(runtime: Runtime, size: int) -> None:
    """``size`` synthetic memories of the server (random words and unit vectors, as ``companion bench`` loads)."""
    gen = TextGen(seed=7)
    for lo in range(0, size, BATCH):
        n = min(BATCH, size - lo)
        contents, subjects, vectors = (
            gen.sentences(n, 8, 20),
            gen.sentences(n, 2, 3),
            gen.vectors(n),
        )
        scope = f"bench:{GUILD}"
        items = [
            (
                NewMemory(
                    content=contents[j],
                    subject=subjects[j],
                    scope=Scope.GUILD,
                    scope_id=scope,
                    guild_id=scope,
                ),
                vectors[j],
            )
            for j in range(n)
        ]
        runtime.engine.memories.insert_batch(items)


async def _measure(
    runtime: Runtime,
    stt: _TimedSTT,
    tts: TextToSpeech,
    speech: list[bytes],
    ending: _Ending,
    progress: Callable[..., None],
) -> dict[str, Any]:
    player = _FirstFramePlayer()
    settings = VoiceSettings(vad=ending.vad, turn=ending.turn)
    session = VoiceSession(stt, tts, _Responder(runtime), player, settings)
    hub = ReceiveHub(
        session.speech_started, session.utterance_ready, vad=settings.vad, turn=settings.turn
    )
    hub.attribute(SSRC, USER)
    session.start()
    first_audio: list[float] = []
    unanswered = 0
    try:
        for i, pcm in enumerate(speech):
            heard = await _turn(hub, session, player, pcm)
            first_audio += [heard] if heard is not None else []
            unanswered += heard is None
            progress(i + 1, len(speech))
    finally:
        await session.close()
    figures = _figures(
        first_audio, stt, runtime.orchestrator.voice.sessions[f"bench:{CHANNEL}"], ending, session
    )
    figures["voice"]["unanswered"] = unanswered
    return figures


async def _turn(
    hub: ReceiveHub, session: VoiceSession, player: _FirstFramePlayer, pcm: bytes
) -> float | None:
    """Milliseconds from the end of ``pcm`` to the reply's first audio; None when no turn came of it within
    ``TURN_WAIT_S`` (Whisper heard nothing in it: such an utterance makes no turn)."""
    player.first_frame_at = None
    before = len(session.turns)
    for i in range(0, len(pcm), FRAME_BYTES):
        hub.feed(SSRC, pcm[i : i + FRAME_BYTES].ljust(FRAME_BYTES, b"\0"))
    ended = time.perf_counter()
    for k in range(
        TRAILING_FRAMES
    ):  # what a Discord client sends after it stops talking, in real time
        await asyncio.sleep(max(0.0, ended + (k + 1) * 0.02 - time.perf_counter()))
        hub.feed(SSRC, b"\0" * FRAME_BYTES)
    while len(session.turns) <= before:
        if time.perf_counter() - ended > TURN_WAIT_S:
            return None
        hub.tick()
        await asyncio.sleep(TICK_S)
    while (
        session.idle_for() == 0.0
    ):  # a turn the hub cut in two: its second half is answered before the next
        hub.tick()
        await asyncio.sleep(TICK_S)
    return ((player.first_frame_at or time.perf_counter()) - ended) * 1000


def _figures(
    first_audio: list[float], stt: _TimedSTT, voice: Any, ending: _Ending, session: VoiceSession
) -> dict[str, Any]:
    return {
        "voice": {
            "utterances": len(first_audio),
            "end_of_turn": ending.label,
            "first_audio_ms": percentiles(first_audio, digits=1),
            "stt_rtf": round(stt.busy_s / stt.audio_s, 3) if stt.audio_s else None,
            "warm_hit_rate": round(voice.warm.stats.hit_rate, 3),
            "speculative_stt": {
                "started": session.speculation.started,
                "used": session.speculation.used,
                "failed": session.speculation.failed,
            },
        },
        "turns": list(session.turns),
    }


# -- warm vs cold recall, on the memory thread after the session -----------------------------------------------
def recall_figures(runtime: Runtime, heard: list[str], passes: int) -> dict[str, Any]:
    """``warm_recall_ms``, ``cold_recall_ms`` (the same turns) and ``warm_full_ms`` over ``passes`` replays of ``heard``."""
    warm: list[tuple[WarmRecord, float]] = []  # (the warm decision, ms)
    cold: list[float] = []
    for _ in range(passes):
        memory: WarmMemory[tuple[Hit[Memory], ...]] = WarmMemory(
            runtime.engine.embeddings.embed_queries,
            runtime.engine.clock,
            runtime.orchestrator.voice.options.warm,
        )
        for i, text in enumerate(heard):
            ctx = runtime.orchestrator.peek(_message(text)).ctx
            if (
                i % 2
            ):  # the order alternates: neither side always runs on caches the other just warmed
                cold_ms, warm_turn = (
                    _cold_recall(runtime, ctx, text),
                    _warm_recall(runtime, memory, ctx, text),
                )
            else:
                warm_turn, cold_ms = (
                    _warm_recall(runtime, memory, ctx, text),
                    _cold_recall(runtime, ctx, text),
                )
            warm.append(warm_turn)
            cold.append(cold_ms)
    served = [i for i, (record, _) in enumerate(warm) if record.decision is not Decision.FULL]
    return {
        "warm_recall_ms": _spread([warm[i][1] for i in served])
        | {"by_reason": _by_reason([warm[i] for i in served])},
        "cold_recall_ms": _spread([cold[i] for i in served]),
        "warm_full_ms": _spread([ms for record, ms in warm if record.decision is Decision.FULL]),
        "recall_includes": RECALL_INCLUDES,
    }


def _warm_recall(
    runtime: Runtime, memory: WarmMemory, ctx: RecallContext, text: str
) -> tuple[WarmRecord, float]:
    """What ``VoiceSessions.preload`` does for memory: the warm decision, then the standing rules."""
    start = time.perf_counter()
    result = memory.turn(text, memory_retrieval(runtime.engine.recall, ctx))
    tuple(runtime.orchestrator.voice.pool.facts(ctx, text))
    return result.record, (time.perf_counter() - start) * 1000


def _cold_recall(runtime: Runtime, ctx: RecallContext, text: str) -> float:
    """The same step with no warm memory: embed the turn, recall over the store, then the standing rules."""
    start = time.perf_counter()
    memory_retrieval(runtime.engine.recall, ctx).full(
        text, runtime.engine.embeddings.embed_query(text)
    )
    tuple(runtime.orchestrator.voice.pool.facts(ctx, text))
    return (time.perf_counter() - start) * 1000


def _spread(samples: list[float]) -> dict[str, Any]:
    return (percentiles(samples) if samples else {"p50": None, "p95": None}) | {
        "turns": len(samples)
    }


def _by_reason(samples: list[tuple[WarmRecord, float]]) -> dict[str, dict[str, Any]]:
    """Each kind of warm turn apart: a filler costs nothing, an embedded turn one model run (+ a BM25 top-up)."""
    reasons = sorted({record.reason for record, _ in samples})
    return {
        reason: _spread([ms for record, ms in samples if record.reason == reason])
        for reason in reasons
    }


def _message(text: str, user_id: int = USER) -> IncomingMessage:
    """What ``DiscordVoice`` makes of a transcript (``_Responder`` sends the same)."""
    return IncomingMessage(
        platform="bench",
        channel_id=CHANNEL,
        author_id=str(user_id),
        author_name="Sam",
        text=text,
        guild_id=GUILD,
        modality="voice",
        addressed=False,
    )


class _TimedSTT:
    """The bundled Whisper, loaded before the session, timed per utterance (for ``stt_rtf``)."""

    def __init__(self, stt: FasterWhisperSTT | None = None) -> None:
        self.stt = stt or FasterWhisperSTT()
        self.stt.load()
        self.busy_s = self.audio_s = 0.0

    def transcribe(self, pcm16: bytes, sample_rate: int) -> str:
        start = time.perf_counter()
        text = self.stt.transcribe(pcm16, sample_rate)
        self.busy_s += time.perf_counter() - start
        self.audio_s += len(pcm16) / 2 / sample_rate
        return text


class _Responder:
    """What ``DiscordVoice`` does with a transcript: a voice ``IncomingMessage`` for the orchestrator."""

    def __init__(self, runtime: Runtime) -> None:
        self._orchestrator = runtime.orchestrator

    async def respond(self, user_id: int, text: str, stream) -> str:
        return (await self._orchestrator.reply(_message(text, user_id), stream=stream)).text


class _FirstFramePlayer:
    """A player thread that drains the reply as fast as it comes and notes when the first frame was pulled."""

    def __init__(self) -> None:
        self.first_frame_at: float | None = None
        self._thread: threading.Thread | None = None

    def play(self, audio: PlaybackBuffer) -> None:
        self._thread = threading.Thread(target=self._drain, args=(audio,), daemon=True)
        self._thread.start()

    def _drain(self, audio: PlaybackBuffer) -> None:
        while frame := audio.read():
            if self.first_frame_at is None and any(frame):
                self.first_frame_at = time.perf_counter()
            time.sleep(0.001)  # a silence frame means "wait for the next sentence"; do not spin

    def stop(self) -> None:
        pass

    def is_playing(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
