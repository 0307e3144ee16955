"""ORCH-12: a reaction on the bot's reply moves exactly the memories that reply used, and of those only
the reacting person's own (a place's lore: its admins'), one step per person per memory (issue 44,
item 4).

Driven through the orchestrator on a real store with the scripted model: a reply recalls memories,
the adapter's report of its posts is given (``posted``), then reactions arrive as an adapter hands
them over (``reacted``). Through the real adapters: ``tests/bot/test_reactions_by_others.py``."""

from __future__ import annotations

import pytest
from conftest import remember

from bot.types import IncomingMessage, Reaction
from memory.models import Scope, Visibility
from memory.reactions import DOWN_STEP, UP_STEP, polarity
from memory.upkeep.forgetting import forget_memory
from tests.pg_support import ON_BOTH_ENGINES

ALICE, BOB = "601", "602"
A, B = f"discord:{ALICE}", f"discord:{BOB}"
GUILD, CHANNEL = "g1", "g1-general"


def asked(
    text: str, *, user: str = ALICE, guild: str | None = GUILD, mid: str = "q1"
) -> IncomingMessage:
    channel = CHANNEL if guild else f"dm-{user}"
    others = ((BOB, "Bob"),) if user == ALICE and guild else ()
    name = "Alice" if user == ALICE else "Bob"
    return IncomingMessage("discord", channel, user, name, text, guild, mid, participants=others)


def reaction(
    emoji: str,
    *,
    user: str = ALICE,
    post: str = "p1",
    channel: str = CHANNEL,
    guild: str | None = GUILD,
    admin: bool = False,
) -> Reaction:
    return Reaction("discord", channel, post, user, emoji, guild, by_admin=admin)


async def importance(rt) -> dict[str, float]:
    rows = await rt.runner.run(rt.engine.db.rows, "SELECT id, importance FROM memories")
    return {r["id"]: r["importance"] for r in rows}


async def used(rt, scope_id: str | None = None) -> set[str]:
    """The memories replies used (``scope_id``: only those of that person or place)."""
    rows = await rt.runner.run(
        rt.engine.db.rows,
        "SELECT m.id, m.scope_id FROM reply_memories AS u "
        "JOIN memories AS m ON m.rid = u.memory_rid",
    )
    return {r["id"] for r in rows if scope_id in (None, r["scope_id"])}


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {m: after[m] - before[m] for m in after if after[m] != before[m]}


@pytest.fixture
async def answered(rt, srv):
    """Alice asked in the server about the regatta and got a reply (posted as p1 and p2) that used some memories."""
    for text in ("The regatta starts at the harbour wall", "The regatta prize is a brass bell"):
        await rt.runner.run(
            remember, rt.engine, text, scope=Scope.GUILD, scope_id=f"discord:{GUILD}"
        )
    await rt.runner.run(
        remember,
        rt.engine,
        "Bob keeps his boat in Falmouth",
        scope_id=B,
        guild_id=f"discord:{GUILD}",
    )
    await rt.runner.run(
        remember, rt.engine, "My sister lives in Oslo", scope_id=A, visibility=Visibility.PRIVATE
    )
    await rt.runner.run(
        remember,
        rt.engine,
        "Alice rows stroke in the regatta crew",
        scope_id=A,
        guild_id=f"discord:{GUILD}",
    )
    srv.script("It starts at the wall, and the prize is a bell.")
    question = asked("Companion, where does the regatta start, what is the prize, do I row?")
    await rt.orchestrator.reply(question)
    await rt.orchestrator.posted(question, ("p1", "p2"))
    ids = await used(rt)
    # the reply used some memories, not all, Alice's and the lore: "exactly those" can tell
    assert 0 < len(ids) < 5 and await used(rt, A) and await used(rt, f"discord:{GUILD}")
    return ids


@ON_BOTH_ENGINES
async def test_a_thumbs_up_from_the_person_answered_raises_exactly_her_memories_the_reply_used(
    rt, answered
):
    before = await importance(rt)
    # on the second part of the reply: the same reply
    await rt.orchestrator.reacted(reaction("👍", post="p2"))
    assert moved(before, await importance(rt)) == dict.fromkeys(await used(rt, A), UP_STEP)


@ON_BOTH_ENGINES
async def test_a_thumbs_down_from_the_person_answered_lowers_hers_and_marks_them_for_recheck(
    rt, answered
):
    before = await importance(rt)
    await rt.orchestrator.reacted(reaction("👎"))
    hers = await used(rt, A)
    assert moved(before, await importance(rt)) == dict.fromkeys(hers, -DOWN_STEP)
    feedback = rt.engine.feedback
    partitions = await rt.runner.run(
        rt.engine.db.rows, "SELECT DISTINCT partition_key FROM memories"
    )
    marked = await rt.runner.run(feedback.to_recheck, [r["partition_key"] for r in partitions])
    assert {memory_id for memory_id, _ in marked} == hers
    await rt.runner.run(feedback.rechecked, [memory_id for memory_id, _ in marked])
    assert await rt.runner.run(feedback.to_recheck, [r["partition_key"] for r in partitions]) == []


@ON_BOTH_ENGINES
async def test_someone_elses_reaction_is_recorded_and_moves_only_their_own_memories(rt, answered):
    """Bob's votes on Alice's reply: kept, once; they move his own fact the reply used, never
    Alice's or the lore."""
    before = await importance(rt)
    await rt.orchestrator.reacted(reaction("❤️", user=BOB))
    # a second vote on the same reply: not counted
    await rt.orchestrator.reacted(reaction("👍", user=BOB))
    await rt.orchestrator.reacted(reaction("👎", user=BOB, post="p2"))
    assert moved(before, await importance(rt)) == dict.fromkeys(await used(rt, B), UP_STEP)
    assert await rt.runner.run(rt.engine.feedback.to_recheck, ["*"]) == []
    votes = "SELECT person_id FROM reply_reactions"
    assert [r["person_id"] for r in await rt.runner.run(rt.engine.db.rows, votes)] == [B]


@ON_BOTH_ENGINES
async def test_a_places_admin_moves_its_lore_and_a_member_does_not(rt, answered):
    lore = await used(rt, f"discord:{GUILD}")
    before = await importance(rt)
    await rt.orchestrator.reacted(reaction("👍", user=BOB))
    assert not set(moved(before, await importance(rt))) & lore
    await rt.orchestrator.reacted(reaction("👍", user="603", admin=True))
    assert moved(before, await importance(rt)) == {
        **dict.fromkeys(await used(rt, B), UP_STEP),
        **dict.fromkeys(lore, UP_STEP),
    }


async def test_a_persons_votes_move_a_memory_one_step_however_many_replies_used_it(
    rt, srv, answered
):
    """Alice asks again and again, and 👎 every reply: her facts go down one step, not one per
    reply."""
    hers = await used(rt, A)
    before = await importance(rt)
    for n in range(2, 6):
        srv.script("It starts at the wall.")
        question = asked("Companion, do I row in the regatta?", mid=f"q{n}")
        await rt.orchestrator.reply(question)
        await rt.orchestrator.posted(question, (f"p{n}1",))
        await rt.orchestrator.reacted(reaction("👎", post=f"p{n}1"))
    await rt.orchestrator.reacted(reaction("👎"))
    after = await importance(rt)
    assert {m: after[m] - before[m] for m in hers} == dict.fromkeys(hers, -DOWN_STEP)


async def test_others_answered_about_a_shared_fact_move_it_only_in_concert_and_once(rt, srv):
    """SPEC ORCH-12 (the person a reply answered) with issue 44's bound: one person asking about
    Bob's fact again and again moves nothing; the CONCERT-th person answered, voting the same way,
    moves it one step and marks it; later ones move it no further."""
    await rt.runner.run(
        remember,
        rt.engine,
        "Bob keeps his boat in Falmouth",
        scope_id=B,
        guild_id=f"discord:{GUILD}",
    )
    before = await importance(rt)

    async def asks_and_doubts(user: str, n: int) -> None:
        srv.script("In Falmouth.")
        question = IncomingMessage(
            "discord",
            CHANNEL,
            user,
            f"M{user}",
            "Companion, where does Bob keep his boat?",
            GUILD,
            f"c{n}",
            participants=((BOB, "Bob"),),
        )
        await rt.orchestrator.reply(question)
        await rt.orchestrator.posted(question, (f"c{n}",))
        await rt.orchestrator.reacted(reaction("👎", user=user, post=f"c{n}"))

    for n in range(12):  # one person, twelve times
        await asks_and_doubts("703", n)
    assert await used(rt, B) and moved(before, await importance(rt)) == {}
    await asks_and_doubts("704", 20)
    assert moved(before, await importance(rt)) == {}
    await asks_and_doubts("705", 21)  # the third person answered
    bobs = await used(rt, B)
    assert moved(before, await importance(rt)) == dict.fromkeys(bobs, -DOWN_STEP)
    keys = await rt.runner.run(rt.engine.db.rows, "SELECT DISTINCT partition_key FROM memories")
    marked = await rt.runner.run(rt.engine.feedback.to_recheck, [r["partition_key"] for r in keys])
    assert {memory_id for memory_id, _ in marked} == bobs
    await asks_and_doubts("706", 22)
    assert moved(before, await importance(rt)) == dict.fromkeys(bobs, -DOWN_STEP)


@pytest.mark.parametrize(
    "odd",
    [
        reaction("👍", post="p1", channel="g1-other"),  # the same post id in another channel
        reaction("👍", post="p9"),  # not a post of the bot's
        reaction("🎉"),  # an emoji that means nothing here
        reaction(""),
        reaction("👍" * 5000),
    ],
    ids=["other-channel", "unknown-post", "party", "empty", "huge"],
)
async def test_reactions_that_mean_nothing_change_nothing(rt, answered, odd):
    before = await importance(rt)
    await rt.orchestrator.reacted(odd)
    assert await importance(rt) == before
    assert await rt.runner.run(rt.engine.db.scalar, "SELECT COUNT(*) FROM reply_reactions") == 0


async def test_nobody_moves_another_persons_private_memory_and_its_owner_may(rt, srv):
    await rt.runner.run(
        remember, rt.engine, "My sister lives in Oslo", scope_id=A, visibility=Visibility.PRIVATE
    )
    srv.script("Your sister is in Oslo.")
    question = asked("where does my sister live?", guild=None, mid="d1")
    await rt.orchestrator.reply(question)
    await rt.orchestrator.posted(question, ("dp1",))
    assert await used(rt), "the DM reply used Alice's private memory"
    before = await importance(rt)
    # Bob cannot be there: forged
    forged = reaction("👎", user=BOB, post="dp1", channel=f"dm-{ALICE}", guild=None)
    await rt.orchestrator.reacted(forged)
    assert await importance(rt) == before and srv.chat_requests[-1]["messages"][-1][
        "content"
    ].startswith("where does")
    await rt.orchestrator.reacted(reaction("👍", post="dp1", channel=f"dm-{ALICE}", guild=None))
    assert {m: v - before[m] for m, v in (await importance(rt)).items()} == dict.fromkeys(
        before, UP_STEP
    )


@ON_BOTH_ENGINES
async def test_forgetting_a_memory_or_the_reply_drops_their_rows(rt, answered):
    await rt.orchestrator.reacted(reaction("👎"))
    gone = sorted(answered)[0]
    await rt.runner.run(forget_memory, rt.engine, gone)
    count = rt.engine.db.scalar
    rid_gone = "(SELECT rid FROM memories WHERE id = ?)"
    assert (
        await rt.runner.run(
            count, f"SELECT COUNT(*) FROM reply_memories WHERE memory_rid = {rid_gone}", (gone,)
        )
        == 0
    )
    assert (
        await rt.runner.run(
            count, f"SELECT COUNT(*) FROM memory_feedback WHERE memory_rid = {rid_gone}", (gone,)
        )
        == 0
    )
    assert await rt.runner.run(count, "SELECT COUNT(*) FROM reply_memories") == len(answered) - 1
    # the question deleted: its reply goes too
    await rt.orchestrator.message_deleted("discord", CHANNEL, ("q1",))
    for table in ("reply_memories", "reply_posts", "reply_reactions"):
        assert await rt.runner.run(count, f"SELECT COUNT(*) FROM {table}") == 0, table


def test_emoji_variants_read_as_their_meaning():
    assert [polarity(e) for e in ("👍", "👍🏽", "❤️", "❤", "👎🏿", "🎉", "", "👍👍")] == [
        1,
        1,
        1,
        1,
        -1,
        0,
        0,
        0,
    ]


@ON_BOTH_ENGINES
async def test_the_next_reflection_of_the_place_rechecks_what_a_thumbs_down_marked_and_clears_the_mark(
    rt, srv, answered
):
    await rt.orchestrator.reacted(reaction("👎"))
    contents = await rt.runner.run(rt.engine.db.rows, "SELECT id, content FROM memories")
    hers = await used(rt, A)
    doubted = [r["content"] for r in contents if r["id"] in hers]
    assert doubted
    srv.default = lambda body: (
        '{"facts": [], "summary": "the regatta"}' if "reflect" in str(body["messages"][0]) else "[]"
    )
    rt.engine.clock.advance(3600)  # the session went quiet: it is reflected on
    await rt.background.tick()
    reflections = [
        b for b in srv.chat_requests if "reflect on conversations" in str(b["messages"][0])
    ]
    assert reflections and all(
        text in reflections[-1]["messages"][-1]["content"] for text in doubted
    )
    left = await rt.runner.run(
        rt.engine.db.scalar, "SELECT COUNT(*) FROM memory_feedback WHERE recheck = 1"
    )
    assert left == 0
