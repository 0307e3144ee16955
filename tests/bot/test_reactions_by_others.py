"""Other people's reactions move no one's memories (issue 44, item 4; ORCH-12), through the real
adapters.

Twenty fresh accounts each 👎 the reply to Alice that used her shared fact: it fell from 4.75 to 0.
Bob asked about Alice's fact twelve times and 👎 each reply: it fell to 0 and was marked for recheck.
Now their votes are recorded and move nothing; Alice's own 👎 lowers her fact by one step and marks
it, once however often she repeats it; a place's admin moves its lore. discord.py and
python-telegram-bot against the local fakes, the real runtime and store, the scripted model.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import remember

from memory.models import Scope
from memory.reactions import DOWN_STEP, UP_STEP
from tests.fakes.discord_payloads import OWNER_ID
from tests.pipeline_support import platforms

pytestmark = pytest.mark.asyncio
GUILD, CHANNEL, GROUP = 8000, 8001, -100777
ALICE, BOB, CAROL = 7001, 7002, 7003  # Carol: Telegram's group admin
FRESH = range(9_100, 9_120)  # twenty accounts made for the attack
FACT = "Alice keeps a brass sextant on her boat"
LORE = "The harbour club's boat race starts at the lighthouse"


def guilds(dc) -> None:
    people = [(ALICE, "alice"), (BOB, "bob"), (OWNER_ID, "owner")]
    dc.add_guild(GUILD, "Harbour", channels=[(CHANNEL, "general")], members=people)


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, guilds) as parts:
        yield parts


@dataclass
class Place:
    """One platform's place: who says what in it, and how a reaction lands there."""

    runtime: Any
    llm: Any
    tg: Any
    dc: Any
    platform: str

    @property
    def key(self) -> str:
        return f"{self.platform}:{GUILD if self.platform == 'discord' else GROUP}"

    async def ask(self, who: int, text: str) -> int:
        """``who`` asks the bot in the place; the id of the bot's post that answered."""
        self.llm.script("A brass sextant, and the race starts at the lighthouse.")
        if self.platform == "discord":
            sent = len(self.dc.sent)
            name = {ALICE: "alice", BOB: "bob"}.get(who, "owner")
            await self.dc.dispatch_message(
                CHANNEL, who, text, guild_id=GUILD, mentions_bot=True, username=name
            )
            return await self.posted((await self.dc.wait_for_sent(sent + 1))[-1]["message_id"])
        sent = len(self.tg.sent)
        name = {ALICE: "Alice", BOB: "Bob", CAROL: "Carol"}[who]
        self.tg.push_message(
            GROUP, who, text, chat_type="supergroup", first_name=name, mention=True
        )
        return await self.posted((await self.tg.wait_for_sent(sent + 1))[-1]["message_id"])

    async def posted(self, post: int) -> int:
        """Wait until the adapter reported the post (a reaction finds its reply by it)."""
        for _ in range(3000):
            if await self.run("SELECT 1 FROM reply_posts WHERE post_id = ?", (str(post),)):
                return post
            await asyncio.sleep(0.01)
        raise AssertionError(f"the post {post} was never recorded")

    async def react(self, post: int, who: int, emoji: str) -> None:
        if self.platform == "discord":
            await self.dc.dispatch_reaction(CHANNEL, post, who, emoji, username=f"user{who}")
        else:
            self.tg.push_reaction(GROUP, post, who, emoji, first_name=f"user{who}")

    async def run(self, sql: str, args: tuple = ()) -> Any:
        return await self.runtime.runner.run(self.runtime.engine.db.rows, sql, args)

    async def votes(self, n: int) -> None:
        """Wait until ``n`` reactions were recorded (the adapters hand them over in the
        background)."""
        for _ in range(3000):
            if len(await self.run("SELECT person_id FROM reply_reactions")) >= n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"fewer than {n} reactions were recorded")

    async def state(self, content: str) -> tuple[float, int]:
        """The memory's importance and its recheck mark."""
        rows = await self.run(
            "SELECT m.importance, COALESCE(f.recheck, 0) AS recheck FROM memories AS m "
            "LEFT JOIN memory_feedback AS f ON f.memory_rid = m.rid WHERE m.content = ?",
            (content,),
        )
        return rows[0]["importance"], rows[0]["recheck"]

    async def used(self, post: int) -> set[str]:
        rows = await self.run(
            "SELECT m.content FROM reply_posts AS p JOIN reply_memories AS u "
            "ON u.reply_rid = p.reply_rid JOIN memories AS m ON m.rid = u.memory_rid "
            "WHERE p.post_id = ?",
            (str(post),),
        )
        return {r["content"] for r in rows}


async def a_place(world, platform: str) -> Place:
    runtime, llm, tg, dc = world
    place = Place(runtime, llm, tg, dc, platform)
    engine = runtime.engine
    alice = f"{platform}:{ALICE}"
    await runtime.runner.run(
        remember, engine, FACT, subject="Alice", scope_id=alice, guild_id=place.key, importance=4.75
    )
    await runtime.runner.run(remember, engine, LORE, scope=Scope.GUILD, scope_id=place.key)
    if platform == "telegram":
        tg.admins[GROUP] = [CAROL]
    return place


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_twenty_fresh_accounts_thumbs_down_leave_alices_fact_as_it_was(world, platform):
    place = await a_place(world, platform)
    mine = await place.ask(ALICE, "what do I keep on my boat?")
    assert FACT in await place.used(mine), "the reply did not use Alice's fact: the test is hollow"
    for who in FRESH:
        await place.react(mine, who, "👎")
    await place.votes(20)  # recorded, each of them
    assert await place.state(FACT) == (4.75, 0)


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_bobs_twelve_thumbs_down_leave_alices_fact_and_her_own_moves_it_once(world, platform):
    place = await a_place(world, platform)
    mine = [
        await place.ask(ALICE, "what do I keep on my boat?")
    ]  # she is one of the place's people
    for n in range(12):
        post = await place.ask(BOB, f"what does Alice keep on her boat? ({n})")
        assert FACT in await place.used(post), "the reply did not use Alice's fact: hollow"
        await place.react(post, BOB, "👎")
    await place.votes(12)
    assert await place.state(FACT) == (4.75, 0)
    # Alice's own 👎 works as before: one step, marked for the next reflection; again, no further
    mine += [await place.ask(ALICE, f"what do I keep on my boat? ({n})") for n in range(2)]
    for n, post in enumerate(mine):
        await place.react(post, ALICE, "👎")
        await place.votes(13 + n)
        assert await place.state(FACT) == (pytest.approx(4.75 - DOWN_STEP), 1)


@pytest.mark.parametrize("platform", ["discord", "telegram"])
async def test_the_lore_moves_by_an_admins_reaction_and_by_nobody_elses(world, platform):
    place = await a_place(world, platform)
    admin = OWNER_ID if platform == "discord" else CAROL
    post = await place.ask(ALICE, "where does the boat race start?")
    assert LORE in await place.used(post), "the reply did not use the lore: the test is hollow"
    await place.react(post, ALICE, "👍")
    await place.react(post, BOB, "👍")
    await place.votes(2)
    assert await place.state(LORE) == (5.0, 0)
    await place.react(post, admin, "👍")
    await place.votes(3)
    assert await place.state(LORE) == (pytest.approx(5.0 + UP_STEP), 0)
