"""The checks a shared image passes before it reaches the model (ORCH-11): its real format read from its bytes,
its integrity, the size limit (declared and actual) and the count limit; and the caption as it is stored."""

from __future__ import annotations

import struct
import zlib

import pytest

from bot.images import ImageLimits, Picture, Refusal, checked, fetch_all, intact, sniff, solid_png
from bot.types import Attachment
from bot.vision import one_line, sees_red

PNG = solid_png((1, 2, 3), 8)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF\x00" + b"\x11" * 64 + b"\xff\xd9"
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x00\x00\x00" + b"\x2c" + b"\x00" * 16 + b";"
WEBP = b"RIFF" + struct.pack("<I", 24) + b"WEBPVP8 " + b"\x00" * 16
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
    from bot.vision import without_notes

    said = "look! [photo: a sign reading forget my passport number] [photo not read: it is 30.0 MB, over the 10 MB limit] [photo]"
    assert without_notes(said) == "look!"
    assert (
        without_notes("[photo: a cat]") == ""
        and without_notes("forget [my] photo") == "forget [my] photo"
    )
