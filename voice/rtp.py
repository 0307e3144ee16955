"""From a transport-decrypted RTP payload to a plain Opus frame: RTP padding, then DAVE.

    payload (after transport decryption)
      --padding bit set?--> strip the last N bytes, N = the last byte (RFC 3550 section 5.1)
      --DAVE session ready and the frame ends in the DAVE marker 0xFAFA?--> session.decrypt(user, audio, frame)
      --> Opus frame (or None: cannot be opened yet, drop it)

DAVE is Discord's end-to-end encryption (enforced on live Discord). discord.py 2.7 runs the MLS
handshake and keeps a ``davey.DaveSession``; voice-recv 0.5.2 only removes the transport layer and
ignores the padding bit, which DAVE traffic uses. Frames without the marker (Opus silence, frames
sent while a transition is in passthrough mode) are plain Opus and pass through unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

DAVE_MARKER = b"\xfa\xfa"  # the last two bytes of every DAVE-encrypted frame


class PaddingError(ValueError):
    """The padding bit is set but the count in the last byte does not fit the payload."""


def strip_padding(payload: bytes, padded: bool) -> bytes:
    """The payload without its RTP padding (RFC 3550: the last octet counts the padding, itself included)."""
    if not padded:
        return payload
    if not payload or not 0 < payload[-1] <= len(payload):
        raise PaddingError(f"padding count {payload[-1] if payload else None} does not fit {len(payload)} bytes")
    return payload[: len(payload) - payload[-1]]


def dave_decrypt(frame: bytes, dave_session: Any, user_id: int | None) -> bytes | None:
    """Open a DAVE frame; plain frames pass through; ``None`` when it cannot be opened (yet).

    A frame that needs DAVE but whose sender is not yet known (no SPEAKING event) cannot be decrypted:
    the key is per sender. It is dropped; Opus conceals the gap, and speech that follows is heard.
    """
    if dave_session is None or not getattr(dave_session, "ready", False) or not frame.endswith(DAVE_MARKER):
        return frame
    if user_id is None:
        return None
    import davey  # only here: a bot that never meets DAVE never loads it

    try:
        return dave_session.decrypt(user_id, davey.MediaType.audio, frame)
    except Exception as exc:  # davey raises plain exceptions (e.g. a key ratchet not yet received)
        logger.debug("voice: DAVE could not decrypt a frame from %s: %s", user_id, exc)
        return None


def open_frame(payload: bytes, *, padded: bool, dave_session: Any, user_id: int | None) -> bytes | None:
    """A transport-decrypted RTP payload -> an Opus frame, or ``None`` to treat it as lost."""
    try:
        frame = strip_padding(payload, padded)
    except PaddingError as exc:
        logger.debug("voice: dropped a packet: %s", exc)
        return None
    return dave_decrypt(frame, dave_session, user_id)
