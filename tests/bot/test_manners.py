"""ORCH-10, group manners: the CPU decision (plain values in, a verdict out), the /manners command, and unanswered
talk as one block of the next answered turn; the busy-channel replay is ``test_group_replay``."""

from __future__ import annotations

import time

import pytest
from conftest import remember

from bot.manners import CHIME_CAP, READ_CHARS, GroupManners, Talk, decide, score, words
from bot.types import IncomingMessage
from memory.clock import FakeClock
from memory.models import Scope
from memory.storage.manners import Mode
from tests.pg_support import ON_BOTH_ENGINES

ALICE, BOB, CLEO = "501", "502", "503"
HERE = (("502", "Bob"), ("503", "Cleo"))


def msg(
    text: str, *, user: str = ALICE, mentions=(), guild: str | None = "g1", mid: str | None = None
) -> IncomingMessage:
    return IncomingMessage(
        platform="discord",
        channel_id=f"{guild}-general" if guild else f"dm-{user}",
        author_id=user,
        author_name={ALICE: "Alice", BOB: "Bob", CLEO: "Cleo"}[user],
        text=text,
        guild_id=guild,
        message_id=mid,
        participants=HERE if user == ALICE else (("501", "Alice"),),
        mentions=mentions,
        addressed=False,
    )


def after_the_bot_said(text: str, answered: str = ALICE, ago: float = 30.0) -> Talk:
    talk = Talk()
    manners = GroupManners(lambda: "Companion", clock=lambda: 1000.0 - ago)
    manners._talk["k"] = talk
    manners.spoke("k", answered, text)
    return talk


# -- the decision ----------------------------------------------------------------------------------------------
def test_the_bots_name_is_answered_in_every_mode_and_nothing_else_in_addressed():
    for mode in Mode:
        assert decide(mode, msg("hey companion, what's up?"), Talk(), 0.0, "Companion").answer
    talk = after_the_bot_said("Feed the sourdough starter daily with flour")
    assert not decide(
        Mode.ADDRESSED,
        msg("how much flour does the starter need?", user=BOB),
        talk,
        1000.0,
        "Companion",
    ).answer
    assert not decide(
        Mode.ADDRESSED, msg("companionship matters", user=BOB), Talk(), 0.0, "Companion"
    ).answer  # a word, not the name


def test_chime_in_answers_a_question_on_the_bots_own_words_and_not_one_for_someone_else():
    talk = after_the_bot_said("Feed the sourdough starter daily with flour and water")
    follow_up = msg("how much flour does the starter need?", user=BOB)
    assert decide(Mode.CHIME_IN, follow_up, talk, 1000.0, "Companion").answer
    assert not decide(
        Mode.CHIME_IN, msg("Bob, how much flour does the starter need?"), talk, 1000.0, "Companion"
    ).answer
    pointed = msg("<@502> how much flour does the starter need?", mentions=(("502", "Bob"),))
    assert not decide(Mode.CHIME_IN, pointed, talk, 1000.0, "Companion").answer
    assert not decide(
        Mode.CHIME_IN, msg("anyone seen my umbrella?", user=CLEO), talk, 1000.0, "Companion"
    ).answer
    assert decide(
        Mode.ALL, msg("anyone seen my umbrella?", user=CLEO), talk, 1000.0, "Companion"
    ).answer


@pytest.mark.parametrize(
    ("said", "question"),
    [
        ("给酸面种每天喂面粉和水", "酸面种要喂多少面粉？"),  # Chinese: one "word" a sentence before
        ("Füttere den Sauerteig täglich mit Mehl", "wie viel Mehl braucht der Sauerteig?"),
        ("Корми закваску мукой каждый день", "сколько муки нужно закваске?"),
    ],
)
def test_chime_in_reads_the_bots_own_words_in_every_alphabet(said, question):
    talk = after_the_bot_said(said)
    assert decide(Mode.CHIME_IN, msg(question, user=BOB), talk, 1000.0, "Companion").answer
    assert not decide(
        Mode.CHIME_IN, msg("我的雨伞在哪儿？", user=BOB), talk, 1000.0, "Companion"
    ).answer


def test_a_megabyte_message_is_read_from_its_start_only():
    huge = "sourdough starter " + "x" * 1_000_000 + " umbrella"
    assert words(huge) == {"sourdough", "starter", "x" * (READ_CHARS - 18)}


def test_the_same_follow_up_long_after_or_in_a_flood_scores_lower():
    fresh, stale = (
        after_the_bot_said("the bowline knot holds"),
        after_the_bot_said("the bowline knot holds", ago=3600),
    )
    question = msg("does the bowline knot slip?", user=BOB)
    assert score(question, fresh, 1000.0) > score(question, stale, 1000.0)
    fresh.seen.extend([1000.0] * 30)  # thirty messages in the last minute
    assert score(question, fresh, 1000.0) < score(question, stale, 1000.0) + 0.15


def test_chime_ins_stop_at_5_in_the_last_100_messages():
    talk = after_the_bot_said("the bowline knot holds")
    talk.chimes.extend([True] * CHIME_CAP)
    verdict = decide(
        Mode.CHIME_IN, msg("does the bowline knot slip?", user=BOB), talk, 1000.0, "Companion"
    )
    assert not verdict.answer and verdict.why == "chime-in cap"
    talk.chimes.extend([False] * 100)
    assert decide(
        Mode.CHIME_IN, msg("does the bowline knot slip?", user=BOB), talk, 1000.0, "Companion"
    ).answer


def test_a_thanks_from_the_person_answered_is_a_reaction_and_from_anyone_else_nothing():
    talk = after_the_bot_said("A bowline.", answered=ALICE)
    for mode in (Mode.ADDRESSED, Mode.CHIME_IN):
        assert decide(mode, msg("thanks!"), talk, 1000.0, "Companion").reaction == "👍"
        assert decide(mode, msg("thanks!", user=BOB), talk, 1000.0, "Companion").reaction is None
    assert (
        decide(
            Mode.CHIME_IN,
            msg("thanks! but what about a reef knot, will that hold up?"),
            talk,
            1000.0,
            "Companion",
        ).reaction
        is None
    )


@pytest.mark.parametrize(
    "text",
    ["\u200b", "", "?" * 5000, "knot " * 200_000, "\ud800 broken", "thanks" + "!" * 20_000 + "x y"],
)
def test_odd_messages_are_decided_without_an_error(text):
    # Bob was just answered: his thanks is looked at
    talk = after_the_bot_said("the bowline knot holds", answered=BOB)
    started = time.perf_counter()
    verdict = decide(Mode.CHIME_IN, msg(text, user=BOB), talk, 1000.0, "Companion")
    assert isinstance(verdict.answer, bool) and time.perf_counter() - started < 5


async def test_a_borderline_message_goes_to_the_judge_when_there_is_one():
    asked: list[tuple[str, str]] = []

    async def judge(recent: str, text: str) -> bool:
        asked.append((recent, text))
        return True

    clock = FakeClock()
    manners, without = (
        GroupManners(lambda: "Companion", judge, clock=clock.now),
        GroupManners(lambda: "Companion", clock=clock.now),
    )
    manners.spoke("k", ALICE, "the bowline knot holds")
    without.spoke("k", ALICE, "the bowline knot holds")
    clock.advance(600)
    # a question (0.3) with one of its words (0.15)
    borderline = msg("who else has a favourite knot?", user=CLEO)
    assert (await manners.decide(Mode.CHIME_IN, borderline, "k")).answer
    assert asked and "knot" in asked[0][0] and asked[0][1] == borderline.text
    assert not (await without.decide(Mode.CHIME_IN, borderline, "k")).answer


# -- the mode of a place, with /manners ------------------------------------------------------------------------
def admin(
    text: str, *, guild: str | None = "g1", user: str = ALICE, is_admin: bool = True
) -> IncomingMessage:
    return IncomingMessage(
        "discord",
        f"{guild}-general" if guild else f"dm-{user}",
        user,
        "Alice",
        text,
        guild,
        author_is_admin=is_admin,
    )


@ON_BOTH_ENGINES
async def test_only_a_places_admins_set_its_mode_and_a_wrong_word_is_named(rt):
    orch = rt.orchestrator
    assert "No mode is set here" in await orch.command("manners", "", admin("/manners"))
    assert "Only this place's admins" in await orch.command(
        "manners", "all", admin("/manners all", is_admin=False)
    )
    assert await rt.runner.run(rt.engine.place_modes.get, "discord:g1-general") is None
    assert "addressed, chime-in or all" in await orch.command(
        "manners", "loud", admin("/manners loud")
    )
    assert "Done: chime-in mode" in await orch.command(
        "manners", "Chime In", admin("/manners Chime In")
    )
    assert "chime-in mode" in await orch.command("manners", "", admin("/manners", is_admin=False))
    assert await rt.runner.run(rt.engine.place_modes.get, "discord:g1-general") is Mode.CHIME_IN
    # one channel, not the server
    assert await rt.runner.run(rt.engine.place_modes.get, "discord:g2-general") is None
    assert "private chat I answer every message" in await orch.command(
        "manners", "all", admin("/manners all", guild=None)
    )


async def test_the_mode_set_decides_and_a_listed_channel_starts_in_chime_in(rt, srv):
    orch = rt.orchestrator
    question = msg("who won the regatta yesterday?", user=BOB)
    assert (await orch.manners(question, True)).why == "low score"  # chime-in: scored, and too low
    assert (
        await orch.manners(question, False)
    ).why == "not for the bot"  # addressed: not even scored
    await orch.command("manners", "all", admin("/manners all"))
    assert (await orch.manners(question, False)).answer
    assert srv.chat_requests == []  # deciding asked no model


@ON_BOTH_ENGINES
async def test_a_places_shared_memories_make_a_question_on_them_more_likely_for_the_bot(rt):
    await rt.runner.run(
        remember,
        rt.engine,
        "The regatta starts at the harbour wall",
        scope=Scope.GUILD,
        scope_id="discord:g1",
    )
    question = msg("when does the regatta start at the wall?", user=BOB)
    assert (await rt.orchestrator.manners(question, True)).score >= 0.5


# -- unanswered talk is the next answered turn's context, as one block -----------------------------------------
async def test_unanswered_messages_are_one_user_block_in_the_next_answered_turn(rt, srv):
    for i, (user, text) in enumerate(
        [
            (BOB, "the bakery on main closed"),
            (CLEO, "no way, since when?"),
            (BOB, "last week I think"),
        ]
    ):
        await rt.orchestrator.observe(msg(text, user=user, mid=f"m{i}"))
    srv.script("It closed last Tuesday.")
    await rt.orchestrator.reply(msg("Companion, when did the bakery close?", mid="m9"))
    sent = next(b for b in srv.chat_requests if b.get("tools"))["messages"]
    blocks = [m for m in sent[1:-1] if "bakery on main" in m["content"]]
    assert (
        len(blocks) == 1
        and "since when" in blocks[0]["content"]
        and "last week" in blocks[0]["content"]
    )
    assert (
        blocks[0]["role"] == "user"
        and sent[-1]["role"] == "user"
        and "when did the bakery close" in sent[-1]["content"]
    )


# -- the dashboard ----------------------------------------------------------------------------------------------
async def test_the_dashboard_lists_places_sets_a_mode_refuses_nonsense_and_audits(http, dash):
    async with http.get("/api/manners") as r:
        shown = await r.json()
    assert shown["modes"] == ["addressed", "chime-in", "all"] and all(
        p["mode"] is None for p in shown["places"]
    )
    async with http.put("/api/places/discord:g1-general/manners", json={"mode": "all"}) as r:
        assert r.status == 200 and (await r.json())["mode"] == "all"
    for key, sent in (
        ("discord:g1-general", {"mode": "loud"}),
        ("discord:g1-general", {"mode": "all", "x": 1}),
        ("nokey", {"mode": "all"}),
    ):
        async with http.put(f"/api/places/{key}/manners", json=sent) as r:
            assert r.status in (400, 422), (key, sent, r.status)
    async with http.get("/api/manners") as r:
        places = {p["channel_key"]: p["mode"] for p in (await r.json())["places"]}
    assert places["discord:g1-general"] == "all" and "nokey" not in places
    assert (
        await dash.runtime.orchestrator.manners(msg("lunch anyone?", user=BOB), False)
    ).answer  # the bot obeys it
    rows = await dash.store(
        dash.engine.db.rows,
        "SELECT action, target, detail FROM dashboard_audit WHERE action = 'manners.set'",
    )
    assert [(r["action"], r["target"]) for r in rows] == [
        ("manners.set", "discord:g1-general")
    ] and "all" in rows[0]["detail"]


async def test_a_servers_purge_takes_its_channels_modes_and_no_other(rt):
    from memory.upkeep.forgetting import forget_guild

    modes = rt.engine.place_modes
    await rt.runner.run(modes.set, "discord:g1-general", Mode.ALL, "discord:g1")
    await rt.runner.run(modes.set, "discord:g2-general", Mode.CHIME_IN, "discord:g2")
    await rt.runner.run(forget_guild, rt.engine, "discord:g1")
    assert [p.channel_key for p in await rt.runner.run(modes.all)] == ["discord:g2-general"]
