"""Names decide nothing (issue 44 item 2a, SEC-5): a fact is tied to another member only by identity
(an @mention or a reply the fact is about), never because a word of it, or its subject label, equals
a display name. The attacks as members tried them: "Music" against Bob's own "Bob plays jazz piano
every night", "Will" replied to while Bob says he will be in Oslo, a member showing "Dave" before
Bob's fact about Dave. Each asks /about me and vetoes; Bob's fact and his message must stay, byte
for byte. The real subject, pointed at by @mention or reply, still sees and vetoes. Through
python-telegram-bot and discord.py against the local fakes, the real orchestrator, extraction by a
scripted model, and a real store file."""

from __future__ import annotations

import pytest

from tests.bot.test_consent import GROUP_KW, answers_ok, on_disk, tg_answer, tg_say
from tests.bot.test_consent_identity import HARBOUR, HARBOUR_CH, about, memory_id
from tests.pipeline_support import facts, platforms

pytestmark = pytest.mark.asyncio
BOB, MUSIC, MALLORY = 66, 55, 77
GROUP = -1001
DC = {"bob": 7002, "will": 7004, "dave": 7003}
DC_DM = {"will": 9104, "dave": 9103}
PIANO = "Bob plays jazz piano every night"


def harbour(dc) -> None:
    dc.add_guild(
        HARBOUR,
        "Harbour",
        channels=[(HARBOUR_CH, "general")],
        members=[(uid, n.title()) for n, uid in DC.items()],
    )


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, harbour) as (runtime, llm, tg, dc):
        llm.default = answers_ok
        yield runtime, llm, tg, dc


def kept(runtime, words: str) -> tuple[int, int]:
    """(memories, messages) holding ``words``: what a wrong veto would have deleted."""
    like = (f"%{words}%",)
    db = runtime.engine.db
    return (
        db.scalar("SELECT COUNT(*) FROM memories WHERE content LIKE ?", like),
        db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE ?", like),
    )


def in_bytes(runtime, tmp_path, words: str) -> int:
    runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return on_disk(tmp_path, words)


async def tg_said(world, user: int, name: str, text: str, *fact: dict, entities=None) -> None:
    runtime, llm, tg, dc = world
    await tg_say(tg, GROUP, user, text, first_name=name, entities=entities, **GROUP_KW)
    runtime.engine.clock.advance(31)
    llm.script(facts(*({"speaker": "P1", "lines": [1], **f} for f in fact)) if fact else "[]")
    await runtime.background.tick()


async def tg_attacker_gets_nothing(world, tmp_path, user: int, name: str, words: str) -> None:
    """``name`` (account ``user``) lists /about me and vetoes the fact with ``words``: refused,
    and the fact and the message it came from stay in the store's bytes."""
    runtime, llm, tg, dc = world
    target = memory_id(runtime, words)
    before = kept(runtime, words), in_bytes(runtime, tmp_path, words)
    assert target and before[0] == (1, 1) and before[1] > 0, before
    listing = await tg_answer(tg, user, user, "/about me", first_name=name)
    assert words not in listing and target[:8] not in listing, listing
    answer = await tg_answer(tg, user, user, f"/about veto {target[:8]}", first_name=name)
    assert "not in your" in answer, answer
    assert (kept(runtime, words), in_bytes(runtime, tmp_path, words)) == before


async def test_a_member_named_music_gets_no_hold_on_bobs_own_fact_filed_under_music(
    world, tmp_path
):
    await tg_said(world, MUSIC, "Music", "hi all, Music here")
    fact = about("music", PIANO, "Bob")
    await tg_said(world, BOB, "Bob", "I play jazz piano every night", fact)
    await tg_attacker_gets_nothing(world, tmp_path, MUSIC, "Music", "jazz piano")


async def test_a_member_who_showed_dave_before_bobs_fact_about_dave_gets_no_hold_on_it(
    world, tmp_path
):
    await tg_said(world, MALLORY, "Dave", "hi, I'm Dave")
    fact = about("Dave", "Dave is moving to Reykjavik", "Dave")
    await tg_said(world, BOB, "Bob", "Dave is moving to Reykjavik!", fact)
    await tg_attacker_gets_nothing(world, tmp_path, MALLORY, "Dave", "Reykjavik")


# -- Discord: replies -------------------------------------------------------------------------------
async def dc_said(world, who: str, text: str, *fact: dict, reply_to: int | None = None) -> dict:
    runtime, llm, tg, dc = world
    sent = len(dc.sent)
    data = await dc.dispatch_message(
        HARBOUR_CH,
        DC[who],
        text,
        guild_id=HARBOUR,
        mentions_bot=True,
        username=who.title(),
        reply_to=reply_to,
    )
    await dc.wait_for_sent(sent + 1)
    runtime.engine.clock.advance(31)
    llm.script(facts(*({"speaker": "P1", "lines": [1], **f} for f in fact)) if fact else "[]")
    await runtime.background.tick()
    return data


async def dc_about(dc, who: str, name: str, **options) -> str:
    answered = len(dc.interaction_responses)
    await dc.dispatch_interaction(
        "about", user_id=DC[who], channel_id=DC_DM[who], options=options or None, username=name
    )
    return (await dc.wait_for_interaction_responses(answered + 1))[-1]["data"]["content"]


async def test_a_member_named_will_replied_to_gets_no_hold_on_bobs_fact_that_he_will_travel(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    hello = await dc_said(world, "will", "hi, Will here")
    fact = about("Bob", "Bob will be in Oslo next week", "Bob")
    await dc_said(world, "bob", "I will be in Oslo next week", fact, reply_to=int(hello["id"]))
    target = memory_id(runtime, "Oslo")
    before = kept(runtime, "Oslo"), in_bytes(runtime, tmp_path, "Oslo")
    assert target and before[0] == (1, 1), before
    assert "Oslo" not in await dc_about(dc, "will", "Will")
    assert "not in your" in await dc_about(dc, "will", "Will", veto=target[:8])
    assert (kept(runtime, "Oslo"), in_bytes(runtime, tmp_path, "Oslo")) == before


async def test_the_dave_bob_replied_to_sees_and_vetoes_the_fact_about_him_down_to_the_bytes(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    hello = await dc_said(world, "dave", "hi, Dave here")
    fact = about("Dave", "Dave is moving to Reykjavik", "Dave")
    await dc_said(
        world, "bob", "you're moving to Reykjavik, Dave!", fact, reply_to=int(hello["id"])
    )
    target = memory_id(runtime, "Reykjavik")
    assert target[:8] in await dc_about(dc, "dave", "Dave")
    assert (await dc_about(dc, "dave", "Dave", veto=target[:8])).startswith("Forgotten")
    assert kept(runtime, "Reykjavik") == (0, 0)
    assert in_bytes(runtime, tmp_path, "Reykjavik") == 0
