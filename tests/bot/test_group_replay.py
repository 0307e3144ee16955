"""ORCH-10 in a busy channel: a scripted Discord channel of 330 messages among six people, replayed through the real
discord.py adapter, the fake Discord and the fake model, once per mode.

The script (deterministic: a seeded generator) holds small talk, questions people ask each other (by name, by
@mention, or to the room), three questions to the bot with its name, two without it (follow-ups on what the bot
just said), thanks to the bot, and reactions. Each message is handed over and waited for before the next, so every
chat-model call is counted against the message that caused it. What it shows (printed with ``-s``):

    addressed   0 chat-model calls for messages not spoken to the bot; the named questions answered
    chime-in    at most 5 calls per 100 such messages; every question meant for the bot answered
    all         every message reaches the model (which stays silent with [SKIP]), as before modes existed
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from typing import Any

import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from memory.clock import FakeClock
from memory.storage.manners import Mode
from tests.fakes import FakeDiscord, FakeOpenAI
from tests.fakes._base import WAIT_S
from tests.fakes.discord_payloads import OWNER_ID
from tests.pipeline_support import build_runtime

GUILD, CHANNEL = 8800, 8801
PEOPLE = {"Ana": OWNER_ID, "Ben": 7702, "Cleo": 7703, "Dev": 7704, "Eli": 7705, "Fay": 7706}
SMALL_TALK = [
    "morning all",
    "the coffee machine is broken again",
    "that match last night was wild",
    "my cat knocked the plant over",
    "traffic on the bridge was terrible",
    "just finished the quarterly report, finally",
    "it's raining sideways here",
    "new episode drops friday",
    "lunch was a disappointing sandwich",
    "heading out for a run later",
    "the wifi keeps dropping on the third floor",
    "i think the bakery on main closed",
    "weekend plans: absolutely nothing",
    "my headphones died mid call",
    "happy birthday to my sister today",
]
TO_A_FRIEND = [
    "did you see the match?",
    "are you coming to the pub quiz?",
    "can you send me that link?",
    "how was the concert?",
]
TO_THE_ROOM = [
    "who's up for pizza tonight?",
    "anyone seen my blue umbrella?",
    "is it just me or is it cold in here?",
]
# (the question to the bot, its answer): named ones first, each followed later by an unnamed follow-up
NAMED = [
    (
        "Companion, how do I keep a sourdough starter alive?",
        "Feed the sourdough starter daily with flour and water and keep it warm.",
    ),
    (
        "Companion, which knot should I use for a hammock?",
        "A bowline knot holds a hammock well and unties easily.",
    ),
    (
        "Companion, what's a good houseplant for a dark room?",
        "A snake plant copes with a dark room and little water.",
    ),
]
UNNAMED = [
    (
        0,
        "wait, how much flour does the starter need each day?",
        "About equal weights of flour and water each day.",
    ),
    (
        1,
        "does the bowline knot slip when it gets wet?",
        "A bowline can loosen when wet; add a stopper knot.",
    ),
]


@dataclass(frozen=True)
class Line:
    who: str
    text: str
    kind: str  # "talk" | "named" | "unnamed" | "thanks"
    answer: str = ""
    mention: str = ""  # a person @mentioned
    react: str = ""  # the author then reacts to the bot's last post with this emoji


def script(seed: int = 34) -> list[Line]:
    """330 lines: small talk with the bot's questions spread through it (named at 40, 140, 240; follow-ups 6 lines later)."""
    rng, names, lines = random.Random(seed), list(PEOPLE), []
    asked = {40: 0, 140: 1, 240: 2}
    follow = {46: 0, 146: 1}
    for i in range(330):
        who = names[rng.randrange(6)]
        if i in asked:
            q, a = NAMED[asked[i]]
            lines.append(Line(who, q, "named", a))
        elif i - 1 in asked:
            lines.append(Line(lines[-1].who, "thanks!", "thanks", react="👍"))
        elif i in follow:
            _, q, a = UNNAMED[follow[i]]
            lines.append(Line(who, q, "unnamed", a))
        else:
            lines.append(_talk(rng, who, names))
    return lines


def _talk(rng: random.Random, who: str, names: list[str]) -> Line:
    roll, friend = rng.random(), rng.choice([n for n in names if n != who])
    if roll < 0.6:
        return Line(who, rng.choice(SMALL_TALK), "talk")
    if roll < 0.8:
        return Line(who, f"{friend}, {rng.choice(TO_A_FRIEND)}", "talk")
    if roll < 0.9:
        return Line(who, f"<@{PEOPLE[friend]}> {rng.choice(TO_A_FRIEND)}", "talk", mention=friend)
    return Line(who, rng.choice(TO_THE_ROOM), "talk")


class Replay:
    """One run of the script in one mode: the model's answers come from the script, its calls are counted."""

    def __init__(
        self,
        llm: FakeOpenAI,
        dc: FakeDiscord,
        runtime: Any,
        adapter: DiscordAdapter,
        clock: FakeClock,
    ) -> None:
        self.llm, self.dc, self.rt, self.adapter, self.clock = llm, dc, runtime, adapter, clock
        self.chat_calls, self.reacted = 0, 0
        self.answer = "[SKIP]"
        llm.default = self.model

    def model(self, body: dict[str, Any]) -> str:
        if "tools" not in body:  # extraction and reflection: nothing to learn from small talk
            return (
                "[]" if "[P1]" in json.dumps(body) else json.dumps({"facts": [], "summary": "chat"})
            )
        self.chat_calls += 1
        return self.answer

    async def say(self, line: Line, index: int) -> int:
        """Hand one line over, wait until it was handled; the chat-model calls it caused."""
        before, stored = self.chat_calls, await self.users_stored()
        self.answer = line.answer or "[SKIP]"
        self.clock.advance(15)  # four messages a minute: a lively channel, not a flood
        mentions = ((PEOPLE[line.mention], line.mention),) if line.mention else ()
        await self.dc.dispatch_message(
            CHANNEL,
            PEOPLE[line.who],
            line.text,
            guild_id=GUILD,
            username=line.who,
            mentions=mentions,
        )
        await self.handled(stored)
        if line.react and self.dc.sent:
            await self.dc.dispatch_reaction(
                CHANNEL,
                self.dc.sent[-1]["message_id"],
                PEOPLE[line.who],
                line.react,
                username=line.who,
            )
            self.reacted += 1
        if index % 25 == 24:
            await self.rt.background.tick()  # extraction in batches, as the background does
        return self.chat_calls - before

    async def handled(self, stored: int) -> None:
        """The message is stored and its channel's lock is free (answered or observed, and any reaction added)."""
        deadline = time.monotonic() + WAIT_S
        while len(self.adapter._locks) or await self.users_stored() <= stored:
            assert time.monotonic() < deadline, "a message was not handled in time"
            await asyncio.sleep(0.005)

    async def votes(self) -> int:
        """The reactions counted, once every dispatched one was handled (or the wait ran out)."""
        deadline, db = time.monotonic() + WAIT_S, self.rt.engine.db
        while True:
            votes = int(await self.rt.runner.run(db.scalar, "SELECT COUNT(*) FROM reply_reactions"))
            if votes >= self.reacted or time.monotonic() > deadline:
                return votes
            await asyncio.sleep(0.01)

    async def users_stored(self) -> int:
        """Read on the memory thread: the store's connection belongs to it."""
        db = self.rt.engine.db
        return int(
            await self.rt.runner.run(db.scalar, "SELECT COUNT(*) FROM messages WHERE role = 'user'")
        )


async def run(tmp_path, mode: Mode) -> dict[str, Any]:
    lines, calls = script(), {"talk": 0, "named": 0, "unnamed": 0, "thanks": 0}
    async with FakeOpenAI() as llm, FakeDiscord() as dc:
        dc.add_guild(
            GUILD,
            "Lively",
            channels=[(CHANNEL, "general")],
            members=[(uid, n) for n, uid in PEOPLE.items()],
        )
        restore, clock = dc.patch_discord(), FakeClock()
        runtime = build_runtime(
            tmp_path / f"{mode.value}.db", llm, clock, reflection_silence_s=3600
        )
        await runtime.start(background_loop=False)
        adapter = DiscordAdapter(
            runtime.orchestrator, "token", guild_ready_timeout=0.05, ready_timeout=30
        )
        try:
            await adapter.start()
            if mode is not Mode.ADDRESSED:  # addressed is the default: no row at all
                runtime.engine.place_modes.set(f"discord:{CHANNEL}", mode, f"discord:{GUILD}")
            replay = Replay(llm, dc, runtime, adapter, clock)
            answered: dict[str, bool] = {}
            for i, line in enumerate(lines):
                posted = len(dc.sent)
                calls[line.kind] += await replay.say(line, i)
                if line.kind in ("named", "unnamed"):
                    answered[line.text] = any(
                        s.get("content") == line.answer for s in dc.sent[posted:]
                    )
            votes = await replay.votes()
            acks = len(dc.reactions)
        finally:
            llm.default = lambda body: "[]"
            await adapter.stop()
            await runtime.stop()
            restore()
    unaddressed = sum(1 for line in lines if line.kind != "named")
    return {
        "calls": calls,
        "unaddressed": unaddressed,
        "answered": answered,
        "votes": votes,
        "acks": acks,
        "lines": len(lines),
    }


def test_the_script_is_a_busy_channel_of_six_people_with_five_questions_for_the_bot():
    lines = script()
    assert len(lines) >= 300 and {line.who for line in lines} == set(PEOPLE)
    assert [line.kind for line in lines].count("named") == 3 and [
        line.kind for line in lines
    ].count("unnamed") == 2
    assert (
        sum(1 for line in lines if line.mention) > 10
        and sum(1 for line in lines if "," in line.text[:8]) > 20
    )


async def test_in_addressed_mode_no_message_not_spoken_to_the_bot_costs_a_chat_model_call(
    tmp_path, capsys
):
    got = await run(tmp_path, Mode.ADDRESSED)
    report(capsys, "addressed", got)
    assert got["calls"]["talk"] == got["calls"]["unnamed"] == got["calls"]["thanks"] == 0
    assert got["calls"]["named"] == 3 and all(got["answered"][q] for q, _ in NAMED)
    assert not any(got["answered"][q] for _, q, _ in UNNAMED)  # no name, no mention: observed
    # each "thanks!" got a 👍 from the bot; each 👍 on a reply counted
    assert got["acks"] == 3 and got["votes"] == 3


async def test_in_chime_in_mode_at_most_5_in_100_reach_the_model_and_every_question_for_the_bot_is_answered(
    tmp_path, capsys
):
    got = await run(tmp_path, Mode.CHIME_IN)
    report(capsys, "chime-in", got)
    spent = got["calls"]["talk"] + got["calls"]["unnamed"] + got["calls"]["thanks"]
    assert spent * 100 <= 5 * got["unaddressed"], got
    assert all(got["answered"].values()) and len(got["answered"]) == 5, got["answered"]
    assert got["calls"]["thanks"] == 0 and got["acks"] == 3


async def test_in_all_mode_every_message_reaches_the_model_as_before(tmp_path, capsys):
    got = await run(tmp_path, Mode.ALL)
    report(capsys, "all", got)
    assert sum(got["calls"].values()) == got["lines"] and all(got["answered"].values())


def report(capsys: pytest.CaptureFixture[str], mode: str, got: dict[str, Any]) -> None:
    calls = got["calls"]
    spent = calls["talk"] + calls["unnamed"] + calls["thanks"]
    with capsys.disabled():
        print(
            f"\n{mode:>9}: {got['lines']} messages, {got['unaddressed']} not spoken to the bot -> {spent} chat-model calls "
            f"({100 * spent / got['unaddressed']:.1f} per 100); named questions {calls['named']} calls; "
            f"questions for the bot answered {sum(got['answered'].values())}/{len(got['answered'])}; "
            f"acknowledged with a reaction {got['acks']}; reactions counted {got['votes']}"
        )
