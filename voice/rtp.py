"""From a transport-decrypted RTP payload to a plain Opus frame: RTP padding, then DAVE.

    payload (after transport decryption)
      --padding bit set?--> strip the last N bytes, N = the last byte (RFC 3550 section 5.1)
      --DAVE session ready and the frame ends in the DAVE marker 0xFAFA?--> session.decrypt(user, audio, frame)
      --> Opus frame (or None: cannot be opened yet, drop it)

A DAVE frame can only be opened with its sender's key, and who sent it arrives separately (SPEAKING, op 5),
often after the first packets: the words that say who is addressed. ``SenderWait`` holds such frames per
SSRC, still encrypted and bounded in time and bytes, until the sender is known; then they are opened in order.

DAVE is Discord's end-to-end encryption (enforced on live Discord). discord.py 2.7 runs the MLS
handshake and keeps a ``davey.DaveSession``; voice-recv 0.5.2 only removes the transport layer and
ignores the padding bit, which DAVE traffic uses. Frames without the marker (Opus silence, frames
sent while a transition is in passthrough mode) are plain Opus and pass through unchanged.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from memory import Clock, SystemClock

logger = logging.getLogger(__name__)

DAVE_MARKER = b"\xfa\xfa"  # the last two bytes of every DAVE-encrypted frame


class PaddingError(ValueError):
    """The padding bit is set but the count in the last byte does not fit the payload."""


def strip_padding(payload: bytes, padded: bool) -> bytes:
    """The payload without its RTP padding (RFC 3550: the last octet counts the padding, itself included)."""
    if not padded:
        return payload
    if not payload or not 0 < payload[-1] <= len(payload):
        raise PaddingError(
            f"padding count {payload[-1] if payload else None} does not fit {len(payload)} bytes"
        )
    return payload[: len(payload) - payload[-1]]


def dave_decrypt(frame: bytes, dave_session: Any, user_id: int | None) -> bytes | None:
    """Open a DAVE frame; plain frames pass through; ``None`` when it cannot be opened (yet).

    A frame that needs DAVE but whose sender is not yet known (no SPEAKING event) cannot be decrypted:
    the key is per sender. It is dropped; Opus conceals the gap, and speech that follows is heard.
    """
    if (
        dave_session is None
        or not getattr(dave_session, "ready", False)
        or not frame.endswith(DAVE_MARKER)
    ):
        return frame
    if user_id is None:
        return None
    import davey  # only here: a bot that never meets DAVE never loads it

    try:
        return dave_session.decrypt(user_id, davey.MediaType.audio, frame)
    except Exception as exc:  # davey raises plain exceptions (e.g. a key ratchet not yet received)
        logger.debug("voice: DAVE could not decrypt a frame from %s: %s", user_id, exc)
        return None


def open_frame(
    payload: bytes, *, padded: bool, dave_session: Any, user_id: int | None
) -> bytes | None:
    """A transport-decrypted RTP payload -> an Opus frame, or ``None`` to treat it as lost."""
    try:
        frame = strip_padding(payload, padded)
    except PaddingError as exc:
        logger.debug("voice: dropped a packet: %s", exc)
        return None
    return dave_decrypt(frame, dave_session, user_id)


def needs_sender(payload: bytes, *, padded: bool, dave_session: Any) -> bool:
    """Whether opening this payload needs to know who sent it (a DAVE frame on a ready session)."""
    try:
        frame = strip_padding(payload, padded)
    except PaddingError:
        return False  # dropped as lost anyway
    return (
        dave_session is not None
        and bool(getattr(dave_session, "ready", False))
        and frame.endswith(DAVE_MARKER)
    )


@dataclass(frozen=True, slots=True)
class HeldPayload:
    payload: bytes
    padded: bool
    arrived_at: float


class SenderWait:
    """Encrypted payloads per SSRC waiting for their sender, oldest first; not thread-safe (the sink locks).

    Bounds: ``max_age_s`` per frame (SPEAKING normally follows within a fraction of a second; 5 s covers a slow
    gateway), ``max_bytes`` per SSRC (Opus speech is ~8 KB/s) and ``max_streams`` SSRCs, so a stream nobody
    ever names cannot grow memory: past a bound the oldest frames go, with a warning."""

    def __init__(
        self,
        *,
        max_age_s: float = 5.0,
        max_bytes: int = 128_000,
        max_streams: int = 32,
        clock: Clock | None = None,
    ) -> None:
        self.max_age_s, self.max_bytes, self.max_streams = max_age_s, max_bytes, max_streams
        self._clock = clock or SystemClock()
        self._held: dict[int, deque[HeldPayload]] = {}
        self._bytes: dict[int, int] = {}
        self.dropped = 0

    def holding(self, ssrc: int) -> bool:
        return ssrc in self._held

    def waiting(self) -> list[int]:
        """SSRCs with frames held for a sender."""
        return list(self._held)

    def hold(self, ssrc: int, payload: bytes, padded: bool) -> None:
        if ssrc not in self._held and len(self._held) >= self.max_streams:
            self._drop(next(iter(self._held)), "too many unnamed streams")
        frames = self._held.setdefault(ssrc, deque())
        frames.append(HeldPayload(payload, padded, self._clock.now()))
        self._bytes[ssrc] = self._bytes.get(ssrc, 0) + len(payload)
        self._trim(ssrc, frames)

    def release(self, ssrc: int) -> list[HeldPayload]:
        """The frames held for ``ssrc`` (now named), oldest first, minus those too old to use."""
        frames = self._held.get(ssrc)
        if frames is not None:
            self._trim(ssrc, frames)
        self._bytes.pop(ssrc, None)
        return list(self._held.pop(ssrc, ()))

    def forget(self, ssrc: int) -> None:
        self._held.pop(ssrc, None)
        self._bytes.pop(ssrc, None)

    def _trim(self, ssrc: int, frames: deque[HeldPayload]) -> None:
        now, before = self._clock.now(), len(frames)
        while frames and (
            now - frames[0].arrived_at > self.max_age_s or self._bytes[ssrc] > self.max_bytes
        ):
            self._bytes[ssrc] -= len(frames.popleft().payload)
        if len(frames) < before:
            self.dropped += before - len(frames)
            logger.warning(
                "voice: dropped %d frame(s) of ssrc %d held too long for a sender",
                before - len(frames),
                ssrc,
            )

    def _drop(self, ssrc: int, why: str) -> None:
        self.dropped += len(self._held.get(ssrc, ()))
        self.forget(ssrc)
        logger.warning("voice: dropped the held frames of ssrc %d: %s", ssrc, why)
