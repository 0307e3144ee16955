"""Speaking one reply, sentence by sentence, while the model is still writing it.

    stream deltas --> SentenceSplitter --> sentence queue --> TTS (worker thread) --> PlaybackBuffer --> Player
                                                                              first audio starts playback

Synthesis runs one sentence at a time in order, so sentence two is being synthesised while sentence one
plays. A sentence the TTS cannot say is logged and skipped: the rest of the reply is still spoken.
``cancel()`` (barge-in) drops everything not yet played.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from .audio import mono_to_discord
from .playback import PlaybackBuffer
from .providers import TextToSpeech
from .sentences import SentenceSplitter, says_nothing

logger = logging.getLogger(__name__)
_POLL_S = 0.02  # one frame: how often we look whether the player has drained


class Player(Protocol):
    """Where the bot's voice goes (a Discord voice client in production)."""

    def play(self, audio: PlaybackBuffer) -> None: ...

    def stop(self) -> None: ...

    def is_playing(self) -> bool: ...


class ReplySpeech:
    """One reply's voice. ``feed`` is the reply stream's sink; ``finish`` ends it and waits for silence."""

    def __init__(self, tts: TextToSpeech, player: Player) -> None:
        self._tts = tts
        self._player = player
        self._splitter = SentenceSplitter()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._worker = asyncio.create_task(self._synthesise_in_order(), name="voice-tts")
        self.buffer = PlaybackBuffer()
        self.streamed = False
        self.spoken: list[str] = []  # sentences whose audio reached the buffer, in order
        self._playing = False

    async def feed(self, delta: str) -> None:
        self.streamed = self.streamed or bool(delta)
        for sentence in self._splitter.feed(delta):
            self._queue.put_nowait(sentence)

    async def finish(self, reply_text: str) -> None:
        """The reply is complete: say what is left, then wait until it has been played."""
        if not self.streamed and not says_nothing(reply_text):
            await self.feed(reply_text)  # the responder did not stream: speak the whole reply
        for sentence in self._splitter.flush():
            self._queue.put_nowait(sentence)
        self._queue.put_nowait(None)
        await self._worker
        self.buffer.finish()
        # The player ends by itself once the buffer is drained; asking it (not the buffer) also ends the
        # wait if the player thread died.
        while self._playing and self._player.is_playing():
            await asyncio.sleep(_POLL_S)

    def cancel(self) -> None:
        """Stop talking now (someone spoke over the bot); later sentences are not synthesised."""
        self.buffer.cancel()
        if self._playing:
            self._player.stop()

    @property
    def interrupted(self) -> bool:
        return self.buffer.cancelled

    async def _synthesise_in_order(self) -> None:
        while (sentence := await self._queue.get()) is not None:
            if self.buffer.cancelled or says_nothing(sentence):
                continue
            try:
                pcm, rate = await asyncio.to_thread(self._tts.synthesize, sentence)
            except (
                Exception
            ):  # any provider failure (SpeechError or a bug in one) costs one sentence only
                logger.exception("voice: could not synthesise %r; skipping it", sentence[:60])
                continue
            self._say(sentence, mono_to_discord(pcm, rate))

    def _say(self, sentence: str, pcm48_stereo: bytes) -> None:
        if self.buffer.cancelled:
            return
        self.buffer.push(pcm48_stereo)
        self.spoken.append(sentence)
        if not self._playing:
            self._playing = True
            self._player.play(self.buffer)
