"""ORCH-2 and ORCH-5: the bot knows the person in front of it, and its snapshot is what chat sees.

After a restart, "what do you remember about me?" reaches the scripted model with the person's stored facts, on
the console (the owner), in a Discord DM and in a Telegram DM, through the real adapters and fake servers. The
runtime snapshot (CLI, dashboard) resolves a person and a place by chat's own code, equals the memory slice of
the prompt the model then receives for the same message, and writes nothing."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from pipeline_support import build_runtime, dm, facts, group, platforms

from bot.adapters.console import ConsoleChat
from bot.types import IncomingMessage
from memory.clock import FakeClock

TG_USER, DC_USER, DC_DM = 55, 7001, 9100
ABOUT_ME = "what do you remember about me?"
BEES = "Keeps two beehives on a balcony in Porto"


def guilds(dc) -> None:
    dc.add_guild(8000, "Guild", channels=[(8001, "general")])


def lines(*said: str):
    """Console input: the lines, then end of input."""
    queue = list(said)

    def read(prompt: str) -> str:
        if not queue:
            raise EOFError
        return queue.pop(0)

    return read


def system_prompt(llm) -> str:
    return llm.chat_requests[-1]["messages"][0]["content"]


def profile(system: str) -> str:
    """The "People in this conversation" section of a system prompt ("" when there is none)."""
    _, found, rest = system.partition("## People in this conversation\n")
    return rest.split("\n## ", 1)[0] if found else ""


def rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of every stored table (the virtual tables' shadow tables included): what a call that must write
    nothing may not change."""
    con = sqlite3.connect(db)
    try:
        tables = [
            n
            for (n,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
        ]
        return {t: sorted(con.execute(f'SELECT * FROM "{t}"'), key=repr) for t in tables}
    finally:
        con.close()


async def learn(runtime, llm, fact: str) -> None:
    """The extraction after the debounce files ``fact`` from what was just said."""
    runtime.engine.clock.advance(31)
    llm.script(facts({"subject": "hobby", "content": fact}))
    assert (await runtime.background.tick())["extracted"] == 1


# -- ORCH-2: after a restart, the person is known -------------------------------------------------------------
async def test_the_console_owner_is_known_after_a_restart(tmp_path, srv):
    db, clock = tmp_path / "bot.db", FakeClock()
    first = build_runtime(db, srv, clock)
    await first.start(background_loop=False)
    srv.script("Lovely!")
    await ConsoleChat(
        first.orchestrator,
        user_name="Sam",
        input_fn=lines("I keep two beehives on my balcony"),
        output=io.StringIO(),
    ).run()
    await learn(first, srv, BEES)
    srv.default = lambda body: "[]"
    await first.stop()
    second = build_runtime(db, srv, clock)
    await second.start(background_loop=False)
    try:
        for question in (ABOUT_ME, "hi"):
            srv.script("You keep bees!")
            out = io.StringIO()
            await ConsoleChat(
                second.orchestrator,
                user_name="Sam",
                input_fn=lines(question),
                output=out,
                stream=False,
            ).run()
            assert "You keep bees!" in out.getvalue()
            # the owner's memory, with no similarity asked of it
            assert BEES in profile(system_prompt(srv)), question
    finally:
        srv.default = lambda body: "[]"
        await second.stop()


async def test_a_discord_dm_person_is_known_after_a_restart(tmp_path):
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("Lovely!")
        await dc.dispatch_message(
            DC_DM, DC_USER, "I keep two beehives on my balcony", username="alice"
        )
        await dc.wait_for_sent(1)
        await learn(runtime, llm, BEES)
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("You keep bees!")
        await dc.dispatch_message(DC_DM, DC_USER, ABOUT_ME, username="alice")
        await dc.wait_for_sent(1)
        assert BEES in profile(system_prompt(llm))


async def test_a_telegram_dm_person_is_known_after_a_restart(tmp_path):
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("Lovely!")
        tg.push_message(TG_USER, TG_USER, "I keep two beehives on my balcony", first_name="Alice")
        await tg.wait_for_sent(1)
        await learn(runtime, llm, BEES)
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("You keep bees!")
        tg.push_message(TG_USER, TG_USER, ABOUT_ME, first_name="Alice")
        await tg.wait_for_sent(1)
        assert BEES in profile(system_prompt(llm))


async def test_a_person_linked_across_platforms_is_known_on_the_other_after_a_restart(tmp_path):
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("Lovely!")
        tg.push_message(TG_USER, TG_USER, "I keep two beehives on my balcony", first_name="Alice")
        await tg.wait_for_sent(1)
        await learn(runtime, llm, BEES)
        tg.push_message(
            TG_USER, TG_USER, "/link", entities=[{"type": "bot_command", "offset": 0, "length": 5}]
        )
        code = (await tg.wait_for_sent(2))[-1]["text"].split("code is ")[1].split()[0]
        await dc.dispatch_interaction(
            "link", user_id=DC_USER, channel_id=DC_DM, options={"code": code}
        )
        assert "Linked" in (await dc.wait_for_interaction_responses(1))[-1]["data"]["content"]
    async with platforms(tmp_path, guilds) as (runtime, llm, tg, dc):
        llm.script("You keep bees!")
        await dc.dispatch_message(DC_DM, DC_USER, ABOUT_ME, username="alice")
        await dc.wait_for_sent(1)
        assert BEES in profile(system_prompt(llm))


async def test_an_owner_is_known_in_their_discord_dm_and_their_memory_stays_out_of_the_server(
    tmp_path,
):
    async with platforms(tmp_path, guilds, owner_ids=[f"discord:{DC_USER}"]) as (
        runtime,
        llm,
        tg,
        dc,
    ):
        llm.script("Lovely!")
        await dc.dispatch_message(
            DC_DM, DC_USER, "I keep two beehives on my balcony", username="owner"
        )
        await dc.wait_for_sent(1)
        await learn(runtime, llm, BEES)
        assert runtime.engine.db.scalar("SELECT scope FROM memories") == "owner"
    async with platforms(tmp_path, guilds, owner_ids=[f"discord:{DC_USER}"]) as (
        runtime,
        llm,
        tg,
        dc,
    ):
        llm.script("You keep bees!")
        await dc.dispatch_message(DC_DM, DC_USER, ABOUT_ME, username="owner")
        await dc.wait_for_sent(1)
        assert BEES in profile(system_prompt(llm))
        llm.script("Hello all!")
        await dc.dispatch_message(
            8001, DC_USER, ABOUT_ME, guild_id=8000, mentions_bot=True, username="owner"
        )
        await dc.wait_for_sent(2)
        assert "beehives" not in "\n".join(
            str(m["content"]) for m in llm.chat_requests[-1]["messages"]
        )


# -- ORCH-5: the snapshot is chat's slice, and writes nothing ---------------------------------------------------
PLACES = {
    "console owner": IncomingMessage(
        "console", "console", "local-user", "Sam", "where do I keep my bees?"
    ),
    "discord DM": dm("discord", "7001", "where do I keep my bees?"),
    "discord server": group("discord", "8000", "7001", "where do I keep my bees?"),
    "telegram DM": IncomingMessage("telegram", "55", "55", "Alice", "where do I keep my bees?"),
    "telegram group": group("telegram", "-100", "55", "where do I keep my bees?", channel="chat"),
}


@pytest.mark.parametrize("place", PLACES)
async def test_the_snapshot_is_the_slice_of_the_real_prompt_and_writes_nothing(
    rt, srv, tmp_path, place
):
    message = PLACES[place]
    orchestrator = rt.orchestrator
    said = IncomingMessage(**{**_fields(message), "text": "hello there", "message_id": "1"})
    assert (
        await orchestrator.command("remember", "I keep my bees on the balcony", said)
    ).startswith("Got it")
    srv.script("Hi!")
    await orchestrator.reply(said)  # a turn of history before the one compared
    await rt.runner.run(rt.engine.recall.flush_access)
    before = await rt.runner.run(rows, tmp_path / "bot.db")
    turn, snap = await rt.runner.run(orchestrator.preview, message)
    # no identity, name, channel state...
    assert await rt.runner.run(rows, tmp_path / "bot.db") == before
    assert await rt.runner.run(rt.engine.recall.flush_access) == 0  # ...and no access count queued
    # shown in the third person (issue 45): never the person's "I" in the bot's prompt
    shown = snap.render()
    assert "bees on the balcony" in shown and "I keep my bees" not in shown and snap.history
    srv.script("On the balcony.")
    await orchestrator.reply(message)
    sent = srv.chat_requests[-1]["messages"]
    assert snap.render() in sent[0]["content"] and sent[1:-1] == snap.history


def _fields(message: IncomingMessage) -> dict:
    return {name: getattr(message, name) for name in message.__slots__}


async def test_a_snapshot_of_someone_never_met_records_no_one(rt):
    stranger = dm("discord", "404", "hi", name="Mallory")
    before = await rt.runner.run(rt.engine.db.scalar, "SELECT COUNT(*) FROM identities")
    turn, _ = await rt.runner.run(rt.orchestrator.preview, stranger)
    assert turn.person_id == "discord:404" and turn.names[turn.person_id] == "Mallory"
    assert await rt.runner.run(rt.engine.db.scalar, "SELECT COUNT(*) FROM identities") == before


def test_the_snapshot_command_sees_the_console_owner_as_chat_does_and_renames_no_one(cli):
    assert (
        cli(
            "memory",
            "add",
            BEES,
            "--subject",
            "bees",
            "--scope",
            "owner",
            "--scope-id",
            "console:local-user",
        ).code
        == 0
    )
    assert cli("snapshot", "hi", "--platform", "discord", "--user", "42", "--name", "Bob").code == 0
    before = rows(cli.db)
    shown = cli("snapshot", "where do I live?", "--user", "local-user", "--json")
    assert shown.code == 0 and BEES in str(shown.json()["sections"]["people"])
    assert (
        cli("snapshot", "hi", "--platform", "discord", "--user", "42", "--name", "Alice").code == 0
    )
    assert (
        cli("snapshot", "hi", "--platform", "telegram", "--user", "77", "--name", "Eve").code == 0
    )
    assert rows(cli.db) == before  # Alice did not become anyone's name, Eve was not recorded
