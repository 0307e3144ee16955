"""Consent by identity (issue 31 item 1, issue 44 item 2, SEC-5): whom a fact is about is decided
when it is written (the speaker, an @mention or a reply), never by a display name. The attacks as a
member would try them: rename to "Dave", "Rules" or "House" and ask /about me. Through
python-telegram-bot against the local fake Bot API, the real orchestrator, extraction by a scripted
model, and a real store file."""

from __future__ import annotations

import pytest

from memory.models import EntityRef, NewMemory, Scope, WrittenBy
from memory.upkeep.forgetting import forget_everything
from memory.write.subjects import PlaceNames, subject_of
from tests.bot.test_consent import GROUP_KW, answers_ok, tg_answer, tg_say
from tests.pipeline_support import facts, platforms

BOB, MALLORY, DAVE, ADMIN, SAM_A, SAM_B = 66, 77, 99, 88, 41, 42
GROUP = -1001
REYKJAVIK = "Dave is moving to Reykjavik"


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, lambda dc: None) as (runtime, llm, tg, dc):
        llm.default = answers_ok
        tg.admins[GROUP] = [ADMIN]
        yield runtime, llm, tg


async def said_in_group(
    world, user: int, name: str, text: str, *fact: dict, entities: list | None = None
) -> None:
    """``name`` (account ``user``) says ``text`` in the group; the model then extracts ``fact`` from it."""
    runtime, llm, tg = world
    await tg_say(tg, GROUP, user, text, first_name=name, entities=entities, **GROUP_KW)
    runtime.engine.clock.advance(31)
    llm.script(facts(*({"speaker": "P1", "lines": [1], **f} for f in fact)) if fact else "[]")
    await runtime.background.tick()


def about(subject: str, content: str, *people: str) -> dict:
    return {
        "subject": subject,
        "content": content,
        "entities": [{"name": p, "type": "person"} for p in people],
    }


def memory_id(runtime, words: str) -> str:
    return runtime.engine.db.scalar("SELECT id FROM memories WHERE content LIKE ?", (f"%{words}%",))


async def squatter_gets_nothing(world, name: str, words: str) -> None:
    """Mallory, renamed ``name``, speaks in the group, then asks /about me and vetoes the fact: nothing."""
    runtime, llm, tg = world
    target = memory_id(runtime, words)
    assert target, words
    await said_in_group(world, MALLORY, name, "hello everyone")
    listing = await tg_answer(tg, MALLORY, MALLORY, "/about me", first_name=name)
    assert words not in listing and target[:8] not in listing, listing
    assert "not in your" in await tg_answer(
        tg, MALLORY, MALLORY, f"/about veto {target[:8]}", first_name=name
    )
    assert memory_id(runtime, words) == target


async def test_a_member_renamed_dave_neither_sees_nor_vetoes_bobs_fact_about_dave(world):
    await said_in_group(
        world, BOB, "Bob", "Dave is moving to Reykjavik!", about("Dave", REYKJAVIK, "Dave")
    )
    await squatter_gets_nothing(world, "Dave", "Reykjavik")


async def test_a_member_renamed_rules_cannot_delete_the_admins_rule(world):
    rule = about("Server rules", "Server rules: no spoilers on Fridays")
    await said_in_group(world, ADMIN, "Ada", "server rules: no spoilers on Fridays", rule)
    await squatter_gets_nothing(world, "Rules", "no spoilers")


async def test_a_member_renamed_house_cannot_delete_the_servers_lore(world):
    runtime, llm, tg = world
    lore = NewMemory(
        content="House rule: the quiet room stays quiet",
        subject="House",
        scope=Scope.GUILD,
        scope_id=f"telegram:{GROUP}",
        entities=(EntityRef("House", "person"),),
    )
    runtime.engine.memories.add(lore)
    await squatter_gets_nothing(world, "House", "quiet room")


async def test_the_real_dave_mentioned_by_bob_sees_and_vetoes_the_fact_while_a_second_dave_does_not(
    world,
):
    runtime, llm, tg = world
    await said_in_group(world, DAVE, "Dave", "hi, Dave here")
    # two Daves: the name alone names nobody
    await said_in_group(world, MALLORY, "Dave", "hi, I'm Dave too")
    dave = {"id": DAVE, "is_bot": False, "first_name": "Dave"}
    mention = [{"type": "text_mention", "offset": 0, "length": 4, "user": dave}]
    await said_in_group(
        world,
        BOB,
        "Bob",
        "Dave is moving to Reykjavik",
        about("Dave", REYKJAVIK, "Dave"),
        entities=mention,
    )
    target = memory_id(runtime, "Reykjavik")
    listing = await tg_answer(tg, DAVE, DAVE, "/about me", first_name="Dave")
    assert target[:8] in listing and "told to me by someone" in listing, listing
    await squatter_gets_nothing(world, "Dave", "Reykjavik")
    assert (
        await tg_answer(tg, DAVE, DAVE, f"/about veto {target[:8]}", first_name="Dave")
    ).startswith("Forgotten")
    assert memory_id(runtime, "Reykjavik") is None


async def test_a_fact_naming_the_one_dave_here_without_pointing_at_him_binds_to_nobody(world):
    runtime, llm, tg = world
    await said_in_group(world, DAVE, "Dave", "hi, Dave here")
    await said_in_group(
        world, BOB, "Bob", "Dave is moving to Reykjavik!", about("Dave", REYKJAVIK, "Dave")
    )
    # issue 44: a name many people could have is nobody's identity, even shown by one member here
    assert (
        runtime.engine.db.scalar(
            "SELECT subject_person_id FROM memories WHERE content LIKE '%Reykjavik%'"
        )
        is None
    )
    await squatter_gets_nothing(world, "Dave", "Reykjavik")
    # still Bob's own, to see and veto
    assert memory_id(runtime, "Reykjavik")[:8] in await tg_answer(
        tg, BOB, BOB, "/about me", first_name="Bob"
    )


async def test_a_fact_naming_sam_when_two_members_are_called_sam_binds_to_nobody(world):
    runtime, llm, tg = world
    await said_in_group(world, SAM_A, "Sam", "hi from Sam")
    await said_in_group(world, SAM_B, "Sam", "hi from the other Sam")
    await said_in_group(
        world, BOB, "Bob", "Sam is moving to Oslo", about("Sam", "Sam is moving to Oslo", "Sam")
    )
    assert (
        runtime.engine.db.scalar(
            "SELECT subject_person_id FROM memories WHERE content LIKE '%Oslo%'"
        )
        is None
    )
    for sam in (SAM_A, SAM_B):
        assert "Oslo" not in await tg_answer(tg, sam, sam, "/about me", first_name="Sam")


async def test_an_admins_fact_about_a_member_is_not_the_members_to_veto(world):
    runtime, llm, tg = world
    await said_in_group(world, DAVE, "Dave", "hi, Dave here")
    note = about("Dave", "Dave is banned from the quiz", "Dave")
    await said_in_group(world, ADMIN, "Ada", "Dave is banned from the quiz", note)
    assert memory_id(runtime, "banned")
    assert "banned" not in await tg_answer(tg, DAVE, DAVE, "/about me", first_name="Dave")


async def test_a_first_person_fact_is_about_its_speaker(world):
    runtime, llm, tg = world
    await said_in_group(
        world, BOB, "Bob", "I brew ale at home", about("ale", "Bob brews ale at home", "Bob")
    )
    assert (
        runtime.engine.db.scalar(
            "SELECT subject_person_id FROM memories WHERE content LIKE '%ale%'"
        )
        == f"telegram:{BOB}"
    )


# -- the rule itself, and linking --------------------------------------------------------------------------------
def _fact(subject: str, content: str, *people: str, speaker: str = "bob") -> NewMemory:
    return NewMemory(
        content,
        subject,
        Scope.USER,
        speaker,
        entities=tuple(EntityRef(p, "person") for p in people),
    )


def test_a_name_is_tied_only_to_an_account_the_speaker_pointed_at_and_only_when_written_as_a_name():
    place = PlaceNames.of(
        {}, {"bob": frozenset({"Bob"}), "dave": frozenset({"Dave"}), "m": frozenset({"Mal"})}
    )
    # the one participant showing "Dave" is not pointed at: nobody (issue 44)
    assert subject_of(_fact("Dave", REYKJAVIK, "Dave"), WrittenBy(), place) is None
    pointed = PlaceNames.of({"dave": frozenset({"Dave"})}, place.present)
    said = WrittenBy(("dave",))
    assert subject_of(_fact("move", "@Dave is moving"), said, pointed) == "dave"
    assert subject_of(_fact("Dave", REYKJAVIK, "Dave"), said, pointed) == "dave"
    # a common name the model did not name a person, and a label, are not names: the speaker's words
    assert subject_of(_fact("move", REYKJAVIK), said, pointed) == "bob"
    will = PlaceNames.of({"w": frozenset({"Will"})}, place.present)
    assert subject_of(_fact("Bob", "Bob will be in Oslo", "Bob"), WrittenBy(("w",)), will) == "bob"
    music = PlaceNames.of({"mu": frozenset({"Music"})}, place.present)
    piano = _fact("music", "Bob plays jazz piano", "Bob")
    assert subject_of(piano, WrittenBy(("mu",)), music) == "bob"
    # a rare name needs no entity; two pointed accounts with it are nobody
    greg = PlaceNames.of({"g": frozenset({"Grzegorz"})}, place.present)
    assert subject_of(_fact("x", "Grzegorz has a cat"), WrittenBy(("g",)), greg) == "g"
    two = PlaceNames.of({"g": frozenset({"Grzegorz"}), "h": frozenset({"Grzegorz"})}, place.present)
    assert subject_of(_fact("x", "Grzegorz has a cat"), WrittenBy(("g", "h")), two) is None
    # an admin wrote it
    assert subject_of(_fact("Dave", REYKJAVIK, "Dave"), WrittenBy(("dave",), True), pointed) is None
    assert subject_of(_fact("ale", "Bob brews ale", "Bob"), WrittenBy(), place) == "bob"
    # nobody here
    assert (
        subject_of(_fact("sister", "Bob's sister Jane is a nurse", "Jane"), WrittenBy(), place)
        is None
    )
    # two people
    assert (
        subject_of(_fact("trip", "Dave and Mal went hiking", "Dave", "Mal"), said, pointed) is None
    )


def test_linked_accounts_are_one_person_for_what_others_said_about_them(engine):
    people = engine.people
    tg_dave, dc_dave = (
        people.resolve("telegram", "99", "Dave"),
        people.resolve("discord", "5", "Dave"),
    )
    fact = NewMemory(
        REYKJAVIK,
        "Dave",
        Scope.USER,
        "telegram:66",
        guild_id="telegram:-1001",
        subject_person_id=tg_dave,
    )
    engine.memories.add(fact)
    # the Telegram account joins the Discord person
    people.redeem(people.issue_code(dc_dave), "telegram", "99")
    assert [k.memory.content for k in engine.privacy.kept_about(dc_dave) if k.told] == [REYKJAVIK]
    assert engine.privacy.kept_about(tg_dave) == []


def test_what_others_said_about_me_is_in_my_export_and_goes_with_my_forget_everything(engine):
    from memory.upkeep.transfer import export_person

    people = engine.people
    dave = people.resolve("telegram", "99", "Dave")
    told = NewMemory(
        REYKJAVIK,
        "Dave",
        Scope.USER,
        "telegram:66",
        guild_id="telegram:-1001",
        subject_person_id=dave,
    )
    bobs = NewMemory(
        "Bob brews ale",
        "ale",
        Scope.USER,
        "telegram:66",
        guild_id="telegram:-1001",
        subject_person_id="telegram:66",
    )
    engine.memories.add(told)
    engine.memories.add(bobs)
    assert [m["content"] for m in export_person(engine, [dave])["memories"]] == [REYKJAVIK]
    forget_everything(engine, [dave])
    assert [m.content for m in engine.memory_rows.listing(None, limit=10)] == ["Bob brews ale"]


# -- Discord: an @mention names the account, whoever else shows the same name -----------------------------------
HARBOUR, HARBOUR_CH = 8000, 8001
DC = {"bob": 7002, "dave": 7003, "mallory": 7010}
DC_DM = {"dave": 9103, "mallory": 9110}


def harbour(dc) -> None:
    dc.add_guild(
        HARBOUR,
        "Harbour",
        channels=[(HARBOUR_CH, "general")],
        members=[(uid, n) for n, uid in DC.items()],
    )


async def dc_say(
    runtime, llm, dc, who: str, text: str, *fact: dict, name: str = "", mentions=()
) -> None:
    sent = len(dc.sent)
    shown = dict(username=name or who, mentions=mentions)
    await dc.dispatch_message(
        HARBOUR_CH, DC[who], text, guild_id=HARBOUR, mentions_bot=True, **shown
    )
    await dc.wait_for_sent(sent + 1)
    runtime.engine.clock.advance(31)
    llm.script(facts(*({"speaker": "P1", "lines": [1], **f} for f in fact)) if fact else "[]")
    await runtime.background.tick()


async def dc_about(dc, who: str, name: str, **options) -> str:
    answered = len(dc.interaction_responses)
    await dc.dispatch_interaction(
        "about", user_id=DC[who], channel_id=DC_DM[who], options=options or None, username=name
    )
    return (await dc.wait_for_interaction_responses(answered + 1))[-1]["data"]["content"]


async def test_on_discord_the_mentioned_dave_sees_the_fact_and_a_member_showing_dave_does_not(
    tmp_path,
):
    async with platforms(tmp_path, harbour) as (runtime, llm, tg, dc):
        llm.default = answers_ok
        await dc_say(runtime, llm, dc, "dave", "hi, Dave here", name="Dave")
        await dc_say(runtime, llm, dc, "mallory", "hi, I'm Dave too", name="Dave")
        fact = about("Dave", REYKJAVIK, "Dave")
        await dc_say(
            runtime,
            llm,
            dc,
            "bob",
            f"<@{DC['dave']}> is moving to Reykjavik",
            fact,
            mentions=((DC["dave"], "Dave"),),
        )
        target = memory_id(runtime, "Reykjavik")
        assert target[:8] in await dc_about(dc, "dave", "Dave")
        assert "Reykjavik" not in await dc_about(dc, "mallory", "Dave")
        assert "not in your" in await dc_about(dc, "mallory", "Dave", veto=target[:8])
        assert (await dc_about(dc, "dave", "Dave", veto=target[:8])).startswith("Forgotten")
