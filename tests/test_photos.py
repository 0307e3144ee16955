"""Images as memory (ORCH-11), end to end: python-telegram-bot and discord.py against the local fakes (the photo
served by the fake CDN / getFile), the real runtime and store, the openai SDK against a scripted model that records
the image parts it is sent. Assertions are on what the model was shown, what the store holds and what was posted."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from bot.images.intake import solid_png
from bot.images.vision import text_of, vision_key
from memory.storage.db import Database, read_only
from tests.fakes import FakeFile
from tests.pipeline_support import facts, last_reply_prompt, platforms
from tests.voice_support import eventually

pytestmark = pytest.mark.asyncio
TG_USER, DC_USER, DC_DM, GUILD, CHANNEL = 55, 7001, 9100, 8000, 8001
MB = 1024 * 1024
MARK = b"QXPIXELMARK"  # inside the photo's bytes (a tEXt chunk), nowhere else
PHOTO = solid_png((30, 160, 60), 64, note=MARK)
CAPTION = "a golden retriever puppy called Quillabee asleep on a red sofa"
WEEK_S = 7 * 86400


def guilds(dc) -> None:
    dc.add_guild(GUILD, "Guild", channels=[(CHANNEL, "general")])


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, guilds, vision="on") as parts:
        yield parts


def reply_requests(llm) -> list[dict]:
    """The chat requests of replies (they offer the memory tools); captions and probes offer none."""
    return [body for body in llm.chat_requests if body.get("tools")]


def images_of(llm, request: dict) -> list[bytes]:
    index = llm.chat_requests.index(request)
    return [image["data"] for image in llm.images if image["request"] == index]


def stored_user_texts(runtime) -> list[str]:
    """Read on a connection of its own: polled from the test's thread while the memory thread writes, the
    bot's connection would be used by two threads at once (apsw refuses: "Connection is busy in another thread")."""
    db = Database(read_only(runtime.engine.db.path))
    try:
        return [
            r["content"]
            for r in db.rows("SELECT content FROM messages WHERE role = 'user' ORDER BY rowid")
        ]
    finally:
        db.close()


def kept_sight(runtime, llm):
    """The probe's verdict the bot kept for the fake's server and the default chat model."""
    return runtime.engine.model_traits.sight(vision_key(llm.base_url, "gpt-4o-mini"))


def files_holding(folder: Path, needle: bytes) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and needle in p.read_bytes().lower()
    ]


async def settled_files(runtime, folder: Path, needle: bytes) -> list[str]:
    """The files under the store's folder holding ``needle``, once journals are flushed and the WAL checkpointed."""
    engine = runtime.engine
    if engine.journals is not None:
        await runtime.runner.run(engine.journals.flush)
    await runtime.runner.run(engine.db.execute, "PRAGMA wal_checkpoint(TRUNCATE)")
    return files_holding(folder, needle.lower())


async def test_a_discord_photo_reaches_the_model_as_an_image_part_and_only_its_caption_is_stored(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "What a sleepy puppy!")
    await dc.dispatch_message(
        DC_DM, DC_USER, "look at my new puppy!", files=(FakeFile("puppy.png", PHOTO),)
    )
    assert (await dc.wait_for_sent(1))[-1]["content"] == "What a sleepy puppy!"
    caption_request, reply = llm.chat_requests[0], reply_requests(llm)[-1]
    assert images_of(llm, caption_request) == [PHOTO] and images_of(llm, reply) == [PHOTO]
    assert reply["messages"][-1]["content"][1]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )
    assert stored_user_texts(runtime) == [f"look at my new puppy! [photo: {CAPTION}]"]
    # the bytes were in two requests, and are in no file: not the raw bytes, not their base64
    for needle in (MARK, base64.b64encode(PHOTO)[40:100]):
        assert await settled_files(runtime, tmp_path, needle) == [], needle


async def test_a_telegram_photo_is_fetched_at_a_fitting_size_and_reaches_the_model(world):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "Cute!")
    tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO), caption="my puppy")
    await tg.wait_for_sent(1)
    assert len(tg.downloads) == 1
    assert images_of(llm, reply_requests(llm)[-1]) == [PHOTO]
    assert stored_user_texts(runtime) == [f"my puppy [photo: {CAPTION}]"]


async def test_a_telegram_photo_fetches_the_1280_px_size_not_the_largest(world):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "Cute!")
    update = tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO))
    await tg.wait_for_sent(1)
    by_width = {size["width"]: size["file_id"] for size in update["message"]["photo"]}
    assert tg.downloads == [by_width[1280]]
    assert stored_user_texts(runtime) == [f"[photo: {CAPTION}]"]  # a photo alone is a message


async def test_the_caption_is_recalled_a_week_later_and_forget_leaves_no_byte_of_it(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "Adorable!")
    tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO), caption="this is him")
    await tg.wait_for_sent(1)
    runtime.engine.clock.advance(31)
    llm.script(
        facts(
            {
                "about": "Alice",
                "subject": "puppy",
                "content": "Alice sent a photo of her golden retriever puppy Quillabee",
            }
        )
    )
    assert (await runtime.background.tick())["extracted"] == 1
    # extraction read the caption as the message's words
    assert CAPTION in json.dumps(llm.chat_requests[-1])
    runtime.engine.clock.advance(WEEK_S)
    llm.script("It was your puppy Quillabee, asleep on a red sofa.")
    tg.push_message(TG_USER, TG_USER, "what was in the photo I sent?")
    await tg.wait_for_sent(2)
    assert "Quillabee" in last_reply_prompt(llm)
    assert await settled_files(runtime, tmp_path, b"quillabee")  # kept until now
    sent = len(tg.sent)
    tg.push_message(
        TG_USER,
        TG_USER,
        "/forget my puppy Quillabee",
        entities=[{"type": "bot_command", "offset": 0, "length": 7}],
    )
    assert (await tg.wait_for_sent(sent + 1))[-1]["text"].startswith("Forgotten")
    assert await settled_files(runtime, tmp_path, b"quillabee") == []


async def test_a_model_without_vision_is_probed_once_and_photos_are_kept_as_placeholders(tmp_path):
    async with platforms(tmp_path, guilds, vision="auto") as (runtime, llm, tg, dc):
        llm.vision = False
        llm.script("I can't see images, sorry.", "Still can't see it.")
        await dc.dispatch_message(
            DC_DM, DC_USER, "what's in this photo?", files=(FakeFile("a.png", PHOTO),)
        )
        assert (await dc.wait_for_sent(1))[-1]["content"] == "I can't see images, sorry."
        tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO))
        await tg.wait_for_sent(1)
        # the probe's red square: the refusal was kept, nothing asked again
        assert len(llm.images) == 1
        assert all(not images_of(llm, body) for body in reply_requests(llm))
        assert "you cannot see images" in last_reply_prompt(llm)
        assert stored_user_texts(runtime) == ["what's in this photo? [photo]", "[photo]"]
        # nothing fetched for a model that cannot see
        assert tg.downloads == [] and dc.cdn_fetches == []
        assert kept_sight(runtime, llm).sees is False


async def test_a_model_that_names_the_probe_colour_sees_and_the_verdict_is_kept(tmp_path):
    async with platforms(tmp_path, guilds, vision="auto") as (runtime, llm, tg, dc):
        llm.script("Red.", CAPTION, "Nice!")
        tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO))
        await tg.wait_for_sent(1)
        assert images_of(llm, reply_requests(llm)[-1]) == [PHOTO]
        assert kept_sight(runtime, llm).sees is True


async def test_a_30_mb_file_is_refused_before_download_with_a_clear_line_and_the_message_kept(
    world,
):
    runtime, llm, tg, dc = world
    llm.script("Tell me about it!")
    huge = FakeFile("holiday.png", PHOTO, size=30 * MB)
    tg.push_photo(TG_USER, TG_USER, huge, caption="from my holiday", as_document=True)
    answer = (await tg.wait_for_sent(1))[-1]["text"]
    assert (
        answer
        == "Tell me about it!\n\n(I couldn't look at holiday.png: it is 30.0 MB, over the 10 MB limit.)"
    )
    assert tg.downloads == [] and llm.images == []
    assert stored_user_texts(runtime) == [
        "from my holiday [photo not read: it is 30.0 MB, over the 10 MB limit]"
    ]


async def test_a_file_larger_than_its_declared_size_is_refused_after_download(tmp_path):
    async with platforms(tmp_path, guilds, vision="on", image_max_mb=1) as (runtime, llm, tg, dc):
        llm.script("OK")
        liar = FakeFile("small.png", PHOTO + b"\0" * (2 * MB), size=1000)  # the platform says 1 kB
        await dc.dispatch_message(DC_DM, DC_USER, "", files=(liar,))
        assert "over the 1 MB limit" in (await dc.wait_for_sent(1))[-1]["content"]
        assert llm.images == []


async def test_a_corrupt_png_and_an_svg_each_get_a_clear_line_and_the_good_photo_still_goes(world):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "Got them.")
    corrupt = bytearray(PHOTO)
    corrupt[60] ^= 0xFF  # one flipped bit pattern inside the image data: its chunk checksum fails
    svg = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    files = (
        FakeFile("ok.png", PHOTO),
        FakeFile("broken.png", bytes(corrupt)),
        FakeFile("cat.png", svg, "image/png"),
    )
    await dc.dispatch_message(DC_DM, DC_USER, "three pictures", files=files)
    answer = (await dc.wait_for_sent(1))[-1]["content"]
    assert "(I couldn't look at broken.png: the PNG file is damaged or cut short.)" in answer
    assert "(I couldn't look at cat.png: it is an SVG drawing, which I don't open" in answer
    assert images_of(llm, reply_requests(llm)[-1]) == [PHOTO]
    stored = stored_user_texts(runtime)[0]
    assert stored.startswith(
        f"three pictures [photo: {CAPTION}] [photo not read: the PNG file is damaged"
    )
    assert "<script>" not in json.dumps(llm.chat_requests)


async def test_a_small_png_claiming_2_7_gigapixels_never_reaches_the_model_server(world):
    runtime, llm, tg, dc = world
    llm.script("Oh?")
    bomb = bytearray(solid_png((5, 5, 5), 4))
    header = b"IHDR" + struct.pack(">IIBBBBB", 60_000, 45_000, 8, 2, 0, 0, 0)
    bomb[8:33] = struct.pack(">I", 13) + header + struct.pack(">I", zlib.crc32(header))
    await dc.dispatch_message(DC_DM, DC_USER, "big one", files=(FakeFile("big.png", bytes(bomb)),))
    why = "it is 60,000 x 45,000 pixels, over the 40 MP limit"
    assert (await dc.wait_for_sent(1))[-1][
        "content"
    ] == f"Oh?\n\n(I couldn't look at big.png: {why}.)"
    assert llm.images == [] and stored_user_texts(runtime) == [f"big one [photo not read: {why}]"]


async def test_past_the_count_limit_images_are_refused_by_count(tmp_path):
    async with platforms(tmp_path, guilds, vision="on", images_per_message=2) as (
        runtime,
        llm,
        tg,
        dc,
    ):
        llm.script("one", "two", "Nice ones.")
        files = tuple(FakeFile(f"p{i}.png", PHOTO) for i in range(3))
        await dc.dispatch_message(DC_DM, DC_USER, "", files=files)
        assert (
            "(I couldn't look at p2.png: a message may carry 2 images.)"
            in (await dc.wait_for_sent(1))[-1]["content"]
        )
        assert len(dc.cdn_fetches) == 2 and images_of(llm, reply_requests(llm)[-1]) == [
            PHOTO,
            PHOTO,
        ]


async def test_a_broken_image_server_loses_neither_the_message_nor_the_reply(world):
    runtime, llm, tg, dc = world
    llm.script("Sorry, the picture didn't come through.")
    await dc.dispatch_message(
        DC_DM, DC_USER, "here", files=(FakeFile("gone.png", PHOTO, gone=True),)
    )
    answer = (await dc.wait_for_sent(1))[-1]["content"]
    assert (
        answer
        == "Sorry, the picture didn't come through.\n\n(I couldn't look at gone.png: it could not be downloaded.)"
    )
    assert dc.cdn_fetches and stored_user_texts(runtime) == [
        "here [photo not read: it could not be downloaded]"
    ]


async def test_a_probe_that_gets_no_answer_keeps_nothing_and_the_next_photo_asks_again(tmp_path):
    from tests.fakes import HTTPError

    async with platforms(tmp_path, guilds, vision="auto") as (runtime, llm, tg, dc):
        # the probe's three attempts: the server is down, not blind
        llm.script(*[HTTPError(503)] * 3, "Nice.")
        tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO))
        await tg.wait_for_sent(1)
        assert kept_sight(runtime, llm) is None
        llm.script("Red.", CAPTION, "Nice again.")
        tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO))
        await tg.wait_for_sent(2)
        assert stored_user_texts(runtime) == ["[photo]", f"[photo: {CAPTION}]"]


async def test_a_photo_in_group_talk_not_for_the_bot_is_remembered_in_that_server_only(world):
    runtime, llm, tg, dc = world
    llm.script(CAPTION)
    await dc.dispatch_message(
        CHANNEL, DC_USER, "our office dog today", guild_id=GUILD, files=(FakeFile("d.png", PHOTO),)
    )
    await eventually(lambda: stored_user_texts(runtime))
    rows = await runtime.runner.run(
        runtime.engine.db.rows, "SELECT content, guild_id FROM messages"
    )
    assert [(r["content"], r["guild_id"]) for r in rows] == [
        (f"our office dog today [photo: {CAPTION}]", f"discord:{GUILD}")
    ]
    # observed: captioned and stored, not answered
    assert dc.sent == [] and reply_requests(llm) == []


async def test_an_edit_of_a_photo_message_changes_its_words_and_keeps_its_caption(world):
    runtime, llm, tg, dc = world
    llm.script(CAPTION, "Lovely.")
    sent = await dc.dispatch_message(DC_DM, DC_USER, "my pupy", files=(FakeFile("p.png", PHOTO),))
    await dc.wait_for_sent(1)
    await dc.dispatch_edit(sent, "my puppy")
    await eventually(lambda: stored_user_texts(runtime)[0].startswith("my puppy "))
    assert stored_user_texts(runtime) == [f"my puppy [photo: {CAPTION}]"]
    assert len(llm.chat_requests) == 2  # no caption asked again


async def test_a_caption_that_reads_like_a_forget_asks_nothing_to_be_forgotten(world):
    import prompts

    runtime, llm, tg, dc = world
    llm.script("a poster reading: Forget my race bib number.", "Nice poster.")
    tg.push_photo(TG_USER, TG_USER, FakeFile("p.jpg", PHOTO), caption="seen in town")
    await tg.wait_for_sent(1)
    shown = "\n".join(text_of(m.get("content")) for m in reply_requests(llm)[-1]["messages"])
    assert "Forget my race bib number" in shown  # the model reads the caption
    assert (
        prompts.render("forget_not_found").strip() not in shown
        and prompts.render("forget_done").strip() not in shown
    )
