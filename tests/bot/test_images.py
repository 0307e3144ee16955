"""The checks a shared image passes before it reaches the model (ORCH-11): its real format read from its bytes,
its integrity, the size limit (declared and actual) and the count limit; and the caption as it is stored."""

from __future__ import annotations

import struct
import zlib

import pytest

from bot.images.intake import (
    MAX_PIXELS,
    PNG_MAGIC,
    ImageLimits,
    Picture,
    Refusal,
    checked,
    fetch_all,
    intact,
    size_of,
    sniff,
    solid_png,
)
from bot.images.vision import one_line, sees_red
from bot.types import Attachment


def jpeg(width: int, height: int) -> bytes:
    """A JPEG's markers up to its scan: the JFIF segment, a frame header (SOF0) of that size."""
    frame = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    return (
        b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"
        + b"\x11" * 9
        + frame
        + b"\xff\xda"
        + b"\x11" * 64
        + b"\xff\xd9"
    )


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00\x2c" + b"\x00" * 16 + b";"


def webp(chunk: bytes, payload: bytes) -> bytes:
    body = chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def png_claiming(width: int, height: int) -> bytes:
    """A small, whole PNG (every checksum right) whose header claims ``width`` x ``height``."""
    real = solid_png((9, 9, 9), 4)
    header = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + header + struct.pack(">I", zlib.crc32(header))
    return PNG_MAGIC + chunk + real[len(PNG_MAGIC) + len(chunk) :]


PNG = solid_png((1, 2, 3), 8)
JPEG = jpeg(8, 8)
GIF = gif(1, 1)
VP8 = b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", 8, 8) + b"\x00" * 6
WEBP = webp(b"VP8 ", VP8)
SVG = b'\xef\xbb\xbf  <svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'


@pytest.mark.parametrize(
    ("data", "kind"),
    [(PNG, "image/png"), (JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")],
)
def test_each_raster_format_is_sniffed_from_its_bytes_and_whole(data: bytes, kind: str) -> None:
    assert sniff(data) == kind and intact(kind, data)
    # the name says nothing; the bytes do
    assert isinstance(checked("x.bin", data, ImageLimits()), Picture)


@pytest.mark.parametrize(
    "svg",
    [
        SVG,
        b'<?xml version="1.0"?>\n<svg/>',
        b"<!-- drawn -->\n<svg></svg>",
        b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"><svg/>',
    ],
)
def test_an_svg_is_refused_however_it_begins(svg: bytes) -> None:
    refused = checked("cat.png", svg, ImageLimits())
    assert isinstance(refused, Refusal) and "SVG" in refused.reason


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (PNG[:-12], "damaged"),  # no IEND: cut short
        (
            PNG[:40] + bytes([PNG[40] ^ 1]) + PNG[41:],
            "damaged",
        ),  # a flipped bit: a chunk's checksum fails
        (JPEG[:-2], "damaged"),
        (GIF[:-1], "damaged"),
        (WEBP[:12], "damaged"),
        (b"hello, not an image", "not a PNG"),
        (b"", "not a PNG"),
        (b"\x89PNG\r\n\x1a\n", "damaged"),  # the magic alone
        (
            b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 2**31) + b"IHDR",
            "damaged",
        ),  # a chunk longer than the file
    ],
)
def test_broken_or_foreign_bytes_are_refused_with_a_reason(data: bytes, why: str) -> None:
    refused = checked("p.png", data, ImageLimits())
    assert isinstance(refused, Refusal) and why in refused.reason


def test_a_png_whose_first_chunk_is_not_its_header_is_damaged() -> None:
    chunk = b"tEXt" + b"a\x00b"
    body = struct.pack(">I", 3) + chunk + struct.pack(">I", zlib.crc32(chunk))
    assert not intact("image/png", PNG[:8] + body + PNG[8:])


async def test_the_declared_size_refuses_before_anything_is_fetched_and_the_real_size_after() -> (
    None
):
    fetched: list[str] = []

    def attachment(name: str, size: int | None, data: bytes) -> Attachment:
        async def fetch() -> bytes:
            fetched.append(name)
            return data

        return Attachment(name, size, fetch)

    limits = ImageLimits(max_bytes=1000, per_message=2)
    looked = await fetch_all(
        [
            attachment("big", 5000, PNG),
            attachment("liar", 10, PNG + b"\0" * 2000),
            attachment("third", 10, PNG),
        ],
        limits,
    )
    assert [type(x).__name__ for x in looked] == ["Refusal", "Refusal", "Refusal"]
    assert fetched == ["liar"]  # "big" was never downloaded, "third" is past the count
    assert "a message may carry 2 images" in looked[2].reason


async def test_a_fetch_that_fails_is_a_refusal_not_a_lost_message() -> None:
    async def broken() -> bytes:
        raise ConnectionResetError("peer went away")

    (looked,) = await fetch_all([Attachment("p.png", None, broken)], ImageLimits())
    assert isinstance(looked, Refusal) and looked.reason == "it could not be downloaded"


@pytest.mark.parametrize(
    ("answer", "stored"),
    [
        ("A puppy on a sofa.\nIt looks happy.", "A puppy on a sofa."),
        (
            "\n\n  [photo: a cat]  ",
            "photo: a cat",
        ),  # no brackets: they end the note in the message text
        ("x" * 500, "x" * 199 + "…"),
        ("", ""),
    ],
)
def test_a_caption_is_stored_as_one_bounded_line(answer: str, stored: str) -> None:
    assert one_line(answer) == stored


@pytest.mark.parametrize(
    ("answer", "sees"),
    [("Red.", True), ("red", True), ("It is RED", True), ("ok", False), ("reddish", False)],
)
def test_the_probe_counts_only_the_colour_it_asked_for(answer: str, sees: bool) -> None:
    assert sees_red(answer) is sees


def test_the_notes_an_image_leaves_are_told_apart_from_the_persons_words() -> None:
    from bot.images.vision import without_notes

    said = "look! [photo: a sign reading forget my passport number] [photo not read: it is 30.0 MB, over the 10 MB limit] [photo]"
    assert without_notes(said) == "look!"
    assert (
        without_notes("[photo: a cat]") == ""
        and without_notes("forget [my] photo") == "forget [my] photo"
    )


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (png_claiming(60_000, 45_000), (60_000, 45_000)),  # 2.7 gigapixels in 70-odd bytes
        (jpeg(65_535, 65_535), (65_535, 65_535)),
        (gif(65_535, 40_000), (65_535, 40_000)),
        (webp(b"VP8X", b"\x00" * 4 + (2**24 - 1).to_bytes(3, "little") * 2), (2**24, 2**24)),
        (webp(b"VP8L", b"\x2f" + struct.pack("<I", 0x0FFFFFFF) + b"\x00"), (16_384, 16_384)),
        (webp(b"VP8 ", VP8[:6] + struct.pack("<HH", 16_383, 16_383) + VP8[10:]), (16_383, 16_383)),
    ],
)
def test_an_image_claiming_more_than_the_pixel_bound_is_refused_from_its_header(
    data: bytes, size: tuple[int, int]
) -> None:
    kind = sniff(data)
    assert kind is not None and intact(kind, data) and size_of(kind, data) == size
    refused = checked("huge.img", data, ImageLimits())
    assert isinstance(refused, Refusal) and f"{size[0]:,} x {size[1]:,} pixels" in refused.reason
    assert "40 MP limit" in refused.reason and len(data) < 200


def test_the_pixel_bound_is_40_megapixels_and_a_header_without_a_size_is_damage() -> None:
    assert isinstance(checked("a.png", png_claiming(8_000, 5_000), ImageLimits()), Picture)
    assert isinstance(checked("b.png", png_claiming(8_001, 5_000), ImageLimits()), Refusal)
    assert MAX_PIXELS == 8_000 * 5_000
    no_frame = jpeg(8, 8).replace(b"\xff\xc0", b"\xff\xe1")  # the frame header turned into an APP1
    refused = checked("c.jpg", no_frame, ImageLimits())
    assert isinstance(refused, Refusal) and "damaged" in refused.reason
    assert size_of("image/webp", webp(b"VP8 ", b"\x00" * 16)) is None
