"""A photo cannot launder another person's DM words past the leak check (SEC-6, ORCH-11), through
the real Telegram adapter against the fake Bot API and a scripted model.

A photo's caption and the model's description of it are stored as the sender's words, like anything
they type; and words said in a group count as seen there only when said by someone who may know
them: Bob typing (or photographing) Alice's DM-only fact in the group does not make a reply
repeating it fine."""

from __future__ import annotations

import pytest

from bot.images.intake import solid_png
from bot.turn.leak_guard import WITHHELD
from tests.fakes import FakeFile
from tests.pipeline_support import platforms

pytestmark = pytest.mark.asyncio
ALICE, BOB, GROUP = 55, 56, -1001
FACT = "my therapist is Dr Wombatson, every Tuesday"
REPEAT = "That's Dr Wombatson, Alice's therapist!"


def no_guilds(dc) -> None:
    return None


@pytest.mark.parametrize(
    ("typed", "described"),
    [
        ("look, Alice's therapist is Dr Wombatson", "a business card on a table"),
        ("whose card is this?", "a business card reading Dr Wombatson, therapist"),
    ],
    ids=["caption", "description"],
)
async def test_a_photo_in_the_group_carrying_alice_s_dm_fact_does_not_let_a_reply_repeat_it(
    tmp_path, typed: str, described: str
):
    async with platforms(tmp_path, no_guilds, vision="on") as (runtime, llm, tg, dc):
        llm.script("Thanks for telling me.")
        tg.push_message(ALICE, ALICE, FACT, first_name="Alice")
        await tg.wait_for_sent(1)
        llm.script(described, REPEAT, REPEAT)
        card = FakeFile("card.png", solid_png((200, 200, 200)))
        tg.push_photo(
            GROUP, BOB, card, caption=typed, chat_type="supergroup", first_name="Bob", mention=True
        )
        said = [m["text"] for m in await tg.wait_for_sent(2)]
        stored = runtime.engine.db.scalar(
            "SELECT content FROM messages WHERE role = 'user' ORDER BY rowid DESC LIMIT 1"
        )
    assert "wombatson" in stored.lower()  # the group's message holds the words, as Bob's
    assert said[-1] == WITHHELD
    assert "wombatson" not in " ".join(said[1:]).lower()


async def test_alice_saying_her_own_fact_in_the_group_still_lets_the_reply_repeat_it(tmp_path):
    async with platforms(tmp_path, no_guilds, vision="on") as (runtime, llm, tg, dc):
        llm.script("Thanks for telling me.")
        tg.push_message(ALICE, ALICE, FACT, first_name="Alice")
        await tg.wait_for_sent(1)
        llm.script("a business card on a table", REPEAT)
        card = FakeFile("card.png", solid_png((200, 200, 200)))
        tg.push_photo(
            GROUP,
            ALICE,
            card,
            caption="my therapist Dr Wombatson's card",
            chat_type="supergroup",
            first_name="Alice",
            mention=True,
        )
        said = [m["text"] for m in await tg.wait_for_sent(2)]
    assert said[-1] == REPEAT
