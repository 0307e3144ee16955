"""What a person meets first (issue 31 item 10): the console's owner (every new user) sees in /about me what
/memories shows; /export on Telegram and Discord arrives whole, as one valid JSON file, through the real
adapters against the local fake servers; /forget everything leaves no earlier export file (nor its words)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bot.test_consent import tg_command
from tests.pipeline_support import dm, platforms

pytestmark = pytest.mark.asyncio
FACTS = ["my cat is called Biscuit", "I grow Ulvenmoor tomatoes", "my sister lives in Tarragona"]
# each fact about 500 characters: six of them are far past what one chat message (or the old 3,400 cut) carries
PLACES = ("Porto", "Oslo", "Lima", "Kyoto", "Perth", "Quito")
LONG = [
    f"my {place} trip went along the coast " + f"and {place} was lovely " * 25 for place in PLACES
]


async def console(rt, name: str, argument: str = "") -> str:
    return await rt.orchestrator.command(
        name, argument, dm("console", "local-user", f"/{name} {argument}")
    )


async def test_the_console_owner_sees_in_about_me_what_memories_lists(rt) -> None:
    for fact in FACTS:
        assert (await console(rt, "remember", fact)).startswith("Got it")
    listed = await console(rt, "memories")
    about = await console(rt, "about", "me")
    assert "I keep nothing about you" not in about
    for fact in FACTS:
        assert fact in listed and fact in about, about
    short = (
        next(line for line in about.splitlines() if "Biscuit" in line).split("[")[1].split("]")[0]
    )
    assert (await console(rt, "about", f"veto {short}")).startswith("Forgotten")
    assert "Biscuit" not in await console(rt, "memories")


async def test_forget_everything_on_the_console_deletes_the_earlier_export_files_to_the_last_byte(
    rt, tmp_path: Path
) -> None:
    await console(rt, "remember", FACTS[1])
    await console(rt, "export")
    await console(rt, "export")
    assert len(list((tmp_path / "exports").glob("*.json"))) == 2
    assert "Done" in await console(rt, "forget", "everything confirm")
    assert list((tmp_path / "exports").glob("*")) == []
    holding = [
        p for p in tmp_path.rglob("*") if p.is_file() and b"ulvenmoor" in p.read_bytes().lower()
    ]
    assert holding == []


async def test_export_on_telegram_arrives_whole_as_one_json_file(tmp_path: Path) -> None:
    async with platforms(tmp_path, lambda dc: None) as (runtime, llm, tg, dc):
        for fact in [FACTS[1], *LONG]:
            sent = len(tg.sent)
            tg_command(tg, 55, 55, f"/remember {fact}")
            await tg.wait_for_sent(sent + 1)
        tg_command(tg, 55, 55, "/export")
        [document] = await tg.wait_for_documents(1)
    assert document["filename"] == "companion-export.json" and document["chat_id"] == 55
    data = json.loads(document["data"])  # whole: valid JSON, every memory in it
    assert len(document["data"]) > 3_400
    assert sorted(m["content"] for m in data["memories"]) == sorted(
        f.strip() for f in [FACTS[1], *LONG]
    )


async def test_export_on_discord_arrives_whole_as_one_json_file(tmp_path: Path) -> None:
    async with platforms(tmp_path, lambda dc: None) as (runtime, llm, tg, dc):
        for fact in [FACTS[1], *LONG]:
            answered = len(dc.interaction_responses)
            await dc.dispatch_interaction(
                "remember", user_id=7001, channel_id=9100, options={"text": fact}
            )
            await dc.wait_for_interaction_responses(answered + 1)
        answered = len(dc.interaction_responses)
        await dc.dispatch_interaction("export", user_id=7001, channel_id=9100)
        response = (await dc.wait_for_interaction_responses(answered + 1))[-1]
    document = response["files"]["companion-export.json"]
    data = json.loads(document)
    assert len(document) > 3_400
    assert sorted(m["content"] for m in data["memories"]) == sorted(
        f.strip() for f in [FACTS[1], *LONG]
    )
