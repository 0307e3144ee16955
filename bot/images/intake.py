"""Images a person shares (ORCH-11): fetched within limits, checked from their own bytes, handed on as data URLs.

    ImageLimits  COMPANION_IMAGE_MAX_MB and COMPANION_IMAGES_PER_MESSAGE
    sniff        the real format, read from the first bytes (never the file name or the declared type)
    intact       whether the bytes hold a whole image of that format (a truncated or bit-flipped PNG is not)
    size_of      the width and height an image's header claims, read without decoding it
    fetch_all    each attachment as a ``Picture`` (its data URL) or a ``Refusal`` (why, in a few words)

PNG, JPEG, GIF and WEBP pass. SVG is refused: it is not a raster, and an SVG may carry scripts and
links that have no business in a model request. An image whose header claims more than
``MAX_PIXELS`` is refused, not downscaled (shrinking it means decoding it, the very cost refused): a
2.7 MB PNG of one colour may claim 60,000 x 45,000 pixels, 10.8 GB once the model server decodes it.
The bytes live in memory for one turn only: they go to the model in the request and are dropped; the
store keeps a caption (``bot.images.vision``), never the image.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..counts import counted
from ..types import Attachment

log = logging.getLogger(__name__)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}
FETCH_TIMEOUT_S = (
    30.0  # a 10 MB file over a slow link; a CDN that hangs must not hold the turn for ever
)
MB = 1024 * 1024
# 40 megapixels: 160 MB decoded at 4 bytes a pixel. A phone photo is 12 MP (a 48 MP mode's file is
# over the 10 MB limit anyway), and a model server scales what it gets to a few megapixels at most.
MAX_PIXELS = 40_000_000
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # frame headers (not DHT, JPG, DAC)


@dataclass(frozen=True, slots=True)
class ImageLimits:
    # OpenAI takes up to 20 MB an image; 10 MB is a 12-megapixel phone photo twice over
    max_bytes: int = 10 * MB
    per_message: int = (
        4  # Discord allows 10 attachments, Telegram albums 10: a model reads 4 well in one turn
    )

    @property
    def max_mb(self) -> str:
        return f"{self.max_bytes / MB:g} MB"


@dataclass(frozen=True, slots=True)
class Picture:
    name: str
    media_type: str
    data_url: str  # data:<type>;base64,<bytes>: the OpenAI image content part's url

    def part(self) -> dict[str, object]:
        return {"type": "image_url", "image_url": {"url": self.data_url}}


@dataclass(frozen=True, slots=True)
class Refusal:
    name: str
    reason: str  # completes "I couldn't look at <name>: ..."


def sniff(data: bytes) -> str | None:
    """The media type the bytes begin like: image/png, image/jpeg, image/gif, image/webp, image/svg+xml; else None."""
    if data.startswith(PNG_MAGIC):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"<svg") or (
        head.startswith((b"<?xml", b"<!doctype svg", b"<!--")) and b"<svg" in head
    ):
        return "image/svg+xml"
    return None


def intact(media_type: str, data: bytes) -> bool:
    """A whole image: every PNG chunk's checksum holds and IEND ends it; a JPEG ends with its EOI marker, a GIF
    with its trailer; a WEBP's RIFF length fits the bytes. No decoding: that is the model server's work."""
    if media_type == "image/png":
        return _png_intact(data)
    tail = data.rstrip(b"\x00\r\n")  # some tools pad a file; padding is not damage
    if media_type == "image/jpeg":
        return tail.endswith(b"\xff\xd9")
    if media_type == "image/gif":
        return len(data) > 13 and tail.endswith(b";")
    if media_type == "image/webp":
        return len(data) >= 20 and 12 <= struct.unpack("<I", data[4:8])[0] + 8 <= len(data)
    return False


def _png_intact(data: bytes) -> bool:
    at, first = len(PNG_MAGIC), True
    while at + 12 <= len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, end = data[at + 4 : at + 8], at + 12 + length
        if end > len(data) or (first and kind != b"IHDR"):
            return False
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(data[at + 4 : end - 4]) != crc:
            return False
        if kind == b"IEND":
            return True
        at, first = end, False
    return False


def size_of(media_type: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) as the header says, or None when it says nothing readable. PNG: IHDR; GIF: the
    logical screen; JPEG: the first frame header (SOFn) before the scan; WEBP: VP8, VP8L or VP8X."""
    if media_type == "image/png":
        return struct.unpack(">II", data[16:24]) if len(data) >= 24 else None
    if media_type == "image/gif":
        return struct.unpack("<HH", data[6:10]) if len(data) >= 10 else None
    if media_type == "image/jpeg":
        return _jpeg_size(data)
    if media_type == "image/webp":
        return _webp_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill bytes
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # the end, or the scan: no frame header before it
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_SOF and at + 9 <= len(data):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    kind, body = data[12:16], data[20:30]
    if kind == b"VP8 " and len(body) >= 10 and body[3:6] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", body[6:10])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(body) >= 5 and body[0] == 0x2F:
        (bits,) = struct.unpack("<I", body[1:5])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(body) >= 10:
        return 1 + int.from_bytes(body[4:7], "little"), 1 + int.from_bytes(body[7:10], "little")
    return None


async def fetch_all(
    attachments: Sequence[Attachment], limits: ImageLimits
) -> list[Picture | Refusal]:
    """Every attachment, in order: the first ``per_message`` fetched side by side, the rest refused by count."""
    kept = attachments[: limits.per_message]
    looked = await asyncio.gather(*(fetch_one(a, limits) for a in kept))
    over = [
        Refusal(a.name, f"a message may carry {counted(limits.per_message, 'image')}")
        for a in attachments[len(kept) :]
    ]
    return [*looked, *over]


async def fetch_one(attachment: Attachment, limits: ImageLimits) -> Picture | Refusal:
    """One attachment as a data URL, or why not. Declared sizes are checked before anything is downloaded."""
    if attachment.size is not None and attachment.size > limits.max_bytes:
        return Refusal(attachment.name, _too_big(attachment.size, limits))
    try:
        async with asyncio.timeout(FETCH_TIMEOUT_S):
            data = await attachment.fetch()
    except (
        Exception
    ):  # the platform's file server: a 404, a reset, a timeout. The message still counts
        log.warning("an attached image could not be downloaded", exc_info=True)
        return Refusal(attachment.name, "it could not be downloaded")
    # off the event loop: the checksums and base64 of a 9 MB PNG took 114-183 ms at load 9.5 on 2 cores
    return await asyncio.to_thread(checked, attachment.name, bytes(data), limits)


def checked(name: str, data: bytes, limits: ImageLimits) -> Picture | Refusal:
    """The bytes as a Picture when they are a whole raster image within the limit; else the Refusal that says why."""
    if len(data) > limits.max_bytes:
        return Refusal(name, _too_big(len(data), limits))
    media_type = sniff(data)
    if media_type == "image/svg+xml":
        return Refusal(
            name,
            "it is an SVG drawing, which I don't open (it can carry scripts); a PNG or JPEG works",
        )
    if media_type is None:
        return Refusal(name, "it is not a PNG, JPEG, GIF or WEBP image")
    if not intact(media_type, data) or (size := size_of(media_type, data)) is None:
        return Refusal(name, f"the {FORMATS[media_type]} file is damaged or cut short")
    if size[0] * size[1] > MAX_PIXELS:
        return Refusal(
            name, f"it is {size[0]:,} x {size[1]:,} pixels, over the {MAX_PIXELS // 10**6} MP limit"
        )
    return Picture(
        name, media_type, f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
    )


def solid_png(rgb: tuple[int, int, int], side: int = 16, note: bytes = b"") -> bytes:
    """A square PNG of one colour (the vision probe's; tests' photos), with ``note`` in a tEXt chunk when given."""
    rows = b"".join(b"\x00" + bytes(rgb) * side for _ in range(side))
    chunks = [(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))]
    chunks += [(b"tEXt", b"Comment\x00" + note)] if note else []
    chunks += [(b"IDAT", zlib.compress(rows)), (b"IEND", b"")]
    return PNG_MAGIC + b"".join(
        struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d)) for k, d in chunks
    )


def _too_big(size: int, limits: ImageLimits) -> str:
    return f"it is {size / MB:.1f} MB, over the {limits.max_mb} limit"
