"""What the bot is saying: a queue of 20 ms frames between the session (asyncio) and the player thread.

The session pushes each sentence's audio as soon as it is synthesised; discord.py's player thread calls
``read()`` every 20 ms. While the next sentence is still being synthesised the queue is empty but not
finished, and ``read()`` gives silence so the stream stays open (an empty read would end playback
after the first sentence). ``finish()`` says no more is coming; ``cancel()`` (barge-in) ends it now.
"""

from __future__ import annotations

import threading
from collections import deque

from .audio import DISCORD_FRAME_BYTES, discord_frames

SILENCE_FRAME = b"\0" * DISCORD_FRAME_BYTES


class PlaybackBuffer:
    """Thread-safe frames of 48 kHz stereo PCM; ``read() == b""`` means playback is over."""

    def __init__(self) -> None:
        self._frames: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._finished = self._cancelled = False
        self.frames_played = 0

    def push(self, pcm48_stereo: bytes) -> None:
        frames = discord_frames(pcm48_stereo)
        with self._lock:
            if not (self._cancelled or self._finished):
                self._frames.extend(frames)

    def finish(self) -> None:
        """Nothing more will be pushed: playback ends once the queue is drained."""
        with self._lock:
            self._finished = True

    def cancel(self) -> None:
        """Stop at the next frame and drop what is queued (someone started talking over the bot)."""
        with self._lock:
            self._cancelled = self._finished = True
            self._frames.clear()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def read(self) -> bytes:
        with self._lock:
            if self._frames:
                self.frames_played += 1
                return self._frames.popleft()
            return b"" if self._finished else SILENCE_FRAME
