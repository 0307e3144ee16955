"""Photos and the daily budgets (ORCH-11, ORCH-14), through the real adapters behind the budgets as
``companion run`` wires them: discord.py and python-telegram-bot against the local fakes, the openai
SDK against a fake model server that counts the image parts it is sent.

Every look at a photo is a model call charged to the person who shared it and the place it was
shared in, group talk not spoken to the bot too; once that person's or that place's day is spent, no
photo is looked at (0 image requests) and it is kept as "[photo not read: ...]", never described
later (the bytes are not kept)."""

from __future__ import annotations

import pytest

from bot.images.intake import solid_png
from bot.spending.budgets import PERSON_SPENT
from memory.storage.db import Database, read_only
from memory.storage.manners import Mode
from tests.fakes import FakeFile
from tests.pipeline_support import platforms
from tests.voice_support import eventually

pytestmark = pytest.mark.asyncio
GUILD, CHANNEL, DM_BOB, DM_CAROL = 8000, 8001, 9100, 9200
BOB, CAROL, TG_DANA = 7002, 7003, 55
PLACE = f"discord:{GUILD}"
REPLY = "sure thing"
SPENT_NOTE = "[photo not read: the day's budget is spent]"


def guilds(dc) -> None:
    dc.add_guild(GUILD, "Guild", channels=[(CHANNEL, "general")])


def photos(count: int) -> tuple[FakeFile, ...]:
    return tuple(FakeFile(f"p{n}.png", solid_png((10 * n, 90, 40))) for n in range(count))


def world(tmp_path, **budgets):
    return platforms(tmp_path, guilds, budgeted=True, vision="on", **budgets)


def user_texts(runtime) -> list[str]:
    """The stored user messages, read on a connection of its own (the memory thread writes)."""
    db = Database(read_only(runtime.engine.db.path))
    try:
        return [r["content"] for r in db.rows("SELECT content FROM messages WHERE role = 'user'")]
    finally:
        db.close()


def ledger(runtime, kind: str) -> list[tuple[str, str, int]]:
    """(person, place, calls) of the ledger's rows of ``kind``."""
    db = Database(read_only(runtime.engine.db.path))
    try:
        rows = db.rows(
            "SELECT person_id, place_id, calls FROM usage_ledger WHERE kind = ?", (kind,)
        )
        return sorted((r["person_id"], r["place_id"], r["calls"]) for r in rows)
    finally:
        db.close()


async def group_only_listens(runtime) -> None:
    """Talk in the channel not spoken to the bot is stored, not answered (ORCH-10: addressed)."""
    await runtime.runner.run(
        runtime.engine.place_modes.set, f"discord:{CHANNEL}", Mode.ADDRESSED, PLACE
    )


async def test_a_new_person_s_first_reply_and_their_photos_are_charged_to_them_and_the_place(
    tmp_path,
):
    async with world(tmp_path, budget_person_tokens=100_000) as (runtime, llm, tg, dc):
        llm.default = lambda body: REPLY
        await group_only_listens(runtime)
        await dc.dispatch_message(DM_CAROL, CAROL, "hello, I'm new here", username="carol")
        await dc.wait_for_sent(1)
        await eventually(lambda: ledger(runtime, "reply") != [])
        # talk not for the bot: its photos are looked at all the same, Carol and the place pay
        await dc.dispatch_message(
            CHANNEL, CAROL, "our garden", guild_id=GUILD, files=photos(2), username="carol"
        )
        await eventually(lambda: len(user_texts(runtime)) == 2)
        await eventually(lambda: sum(c for *_, c in ledger(runtime, "caption")) == 4)
        replies, captions = ledger(runtime, "reply"), ledger(runtime, "caption")
        llm.default = lambda body: "[]"
    assert replies == [("", "", 1), (f"discord:{CAROL}", "", 1)]
    assert captions == [("", PLACE, 2), (f"discord:{CAROL}", PLACE, 2)]
    assert len(llm.images) == 2
    assert ledger(runtime, "other") == []


async def test_once_a_person_s_day_is_spent_no_photo_of_theirs_is_looked_at_anywhere(tmp_path):
    async with world(tmp_path, budget_person_tokens=500) as (runtime, llm, tg, dc):
        llm.default = lambda body: REPLY
        await group_only_listens(runtime)
        await dc.dispatch_message(DM_BOB, BOB, "hello", username="bob")  # about 1,000 tokens
        await dc.wait_for_sent(1)
        images = len(llm.images)
        # a DM of four photos: held back, the photos kept unread
        await dc.dispatch_message(DM_BOB, BOB, "my holiday", files=photos(4), username="bob")
        assert (await dc.wait_for_sent(2))[-1]["content"] == PERSON_SPENT
        # five messages of four photos each in group talk not for the bot
        for n in range(5):
            await dc.dispatch_message(
                CHANNEL, BOB, f"more {n}", guild_id=GUILD, files=photos(4), username="bob"
            )
        await eventually(lambda: len(user_texts(runtime)) == 7)
        # and on Telegram, another person, the same
        tg.push_message(TG_DANA, TG_DANA, "hi there", first_name="Dana")
        await tg.wait_for_sent(1)
        tg.push_photo(TG_DANA, TG_DANA, FakeFile("cat.png", solid_png((1, 2, 3))), caption="cat")
        assert (await tg.wait_for_sent(2))[-1]["text"] == PERSON_SPENT
        stored = user_texts(runtime)
        llm.default = lambda body: "[]"
    assert len(llm.images) == images == 0 and ledger(runtime, "caption") == []
    assert stored[1] == "my holiday " + " ".join([SPENT_NOTE] * 4)
    assert all(text.endswith(" ".join([SPENT_NOTE] * 4)) for text in stored[2:7])
    assert stored[-1] == f"cat {SPENT_NOTE}"


async def test_once_a_place_s_day_is_spent_nobody_s_photo_there_is_looked_at_but_in_a_dm_it_is(
    tmp_path,
):
    async with world(tmp_path, budget_server_tokens=500) as (runtime, llm, tg, dc):
        llm.default = lambda body: REPLY
        await group_only_listens(runtime)
        await dc.dispatch_message(
            CHANNEL, BOB, "hello all", guild_id=GUILD, mentions_bot=True, username="bob"
        )
        await dc.wait_for_sent(1)
        images = len(llm.images)
        await dc.dispatch_message(
            CHANNEL, CAROL, "look", guild_id=GUILD, files=photos(3), username="carol"
        )
        await eventually(lambda: len(user_texts(runtime)) == 2)
        assert len(llm.images) == images
        await dc.dispatch_message(DM_CAROL, CAROL, "look", files=photos(1), username="carol")
        await dc.wait_for_sent(2)
        stored = user_texts(runtime)
        llm.default = lambda body: "[]"
    assert stored[1] == "look " + " ".join([SPENT_NOTE] * 3)
    assert stored[2] == f"look [photo: {REPLY}]" and len(llm.images) == images + 2
