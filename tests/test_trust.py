"""The trust findings, each as the attack that broke it: through the real adapters (python-telegram-bot,
discord.py) against local fake servers, the real orchestrator and store, and the openai SDK against a
scripted model. Each test names the finding it covers (F1..F16 of the trust issue)."""

from __future__ import annotations

import json
import re

import pytest

from memory.clock import FakeClock
from memory.models import NewMemory, Scope
from tests.fakes import FakeOpenAI, HTTPError, ToolCall
from tests.fakes.discord_payloads import OWNER_ID as GUILD_OWNER
from tests.pipeline_support import build_runtime, dm, facts, platforms

pytestmark = pytest.mark.asyncio
ALICE_TG, MALLORY_TG, GROUP_TG = 55, 66, -1001
ALICE_DC, MALLORY_DC, DM_ALICE_DC = 7001, 7002, 9100
GUILD_1, GENERAL_1, STAFF_1, GUILD_2, GENERAL_2 = 8000, 8001, 8002, 9000, 9001


def guilds(dc) -> None:
    dc.add_guild(
        GUILD_1,
        "Support group",
        channels=[(GENERAL_1, "general"), (STAFF_1, "staff")],
        private=(STAFF_1,),
    )
    dc.add_guild(GUILD_2, "Other server", channels=[(GENERAL_2, "general")])


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, guilds) as parts:
        yield parts


def tg_command(tg, chat: int, user: int, text: str, **kw) -> None:
    command = text.split()[0]
    tg.push_message(
        chat,
        user,
        text,
        entities=[{"type": "bot_command", "offset": 0, "length": len(command)}],
        **kw,
    )


async def tg_answer(tg, chat: int, user: int, text: str, **kw) -> str:
    sent = len(tg.sent)
    tg_command(tg, chat, user, text, **kw)
    return (await tg.wait_for_sent(sent + 1))[-1]["text"]


def memories(runtime) -> list[dict]:
    return runtime.engine.db.rows("SELECT * FROM memories ORDER BY rid")


# -- F1: account takeover through /link in a group -----------------------------------------------------------
async def test_f1_a_link_code_is_never_issued_or_redeemed_in_a_group(world):
    runtime, llm, tg, dc = world
    group_kw = dict(chat_type="supergroup")
    answer = await tg_answer(tg, GROUP_TG, ALICE_TG, "/link", **group_kw)
    assert "private chat" in answer and not re.search(r"code is [0-9a-f]{6}-", answer)
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM link_codes") == 0
    code = re.search(r"code is (\S+)", await tg_answer(tg, ALICE_TG, ALICE_TG, "/link")).group(1)
    answer = await tg_answer(
        tg, GROUP_TG, MALLORY_TG, f"/link {code}", first_name="Mallory", **group_kw
    )
    assert "private chat" in answer
    # not linked to Alice
    assert (
        runtime.engine.db.scalar(
            "SELECT person_id FROM identities WHERE platform_user_id = ?", (str(MALLORY_TG),)
        )
        == f"telegram:{MALLORY_TG}"
    )


async def test_f1_link_codes_are_single_use_expire_and_guessing_is_rate_limited(world):
    runtime, llm, tg, dc = world
    code = re.search(r"code is (\S+)", await tg_answer(tg, ALICE_TG, ALICE_TG, "/link")).group(1)
    for n in range(5):
        assert "unknown or expired" in await tg_answer(
            tg, MALLORY_TG, MALLORY_TG, f"/link 00-00-0{n}", first_name="Mallory"
        )
    # even the right one
    assert "too many" in await tg_answer(
        tg, MALLORY_TG, MALLORY_TG, f"/link {code}", first_name="Mallory"
    )
    await dc.dispatch_interaction(
        "link", user_id=ALICE_DC, channel_id=DM_ALICE_DC, options={"code": code}
    )
    assert "Linked" in (await dc.wait_for_interaction_responses(1))[-1]["data"]["content"]
    await dc.dispatch_interaction(
        "link", user_id=MALLORY_DC, channel_id=DM_ALICE_DC + 1, options={"code": code}
    )
    # used once
    assert (
        "unknown or expired" in (await dc.wait_for_interaction_responses(2))[-1]["data"]["content"]
    )
    late = re.search(r"code is (\S+)", await tg_answer(tg, ALICE_TG, ALICE_TG, "/link")).group(1)
    runtime.engine.clock.advance(601)
    await dc.dispatch_interaction(
        "link", user_id=MALLORY_DC, channel_id=DM_ALICE_DC + 1, options={"code": late}
    )
    assert (
        "unknown or expired" in (await dc.wait_for_interaction_responses(3))[-1]["data"]["content"]
    )


# -- F2: group members changing others' memories through the model ----------------------------------------
def model_tries(llm, call: ToolCall, seen: list) -> None:
    """The model, asked by whoever spoke, calls one tool; the tool's answer is recorded, then it replies."""

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            seen.append(last["content"])
            return "done"
        return call

    llm.default = responder


async def test_f2_a_member_cannot_have_the_model_change_another_s_memory_or_the_lore(world):
    runtime, llm, tg, dc = world
    add = runtime.engine.memories.add
    alice = add(
        NewMemory(
            content="Alice is training for a marathon",
            subject="running",
            scope=Scope.USER,
            scope_id=f"telegram:{ALICE_TG}",
            guild_id=f"telegram:{GROUP_TG}",
        )
    ).memory
    lore = add(
        NewMemory(
            content="The group meets on Fridays",
            subject="meetings",
            scope=Scope.GUILD,
            scope_id=f"telegram:{GROUP_TG}",
        )
    ).memory
    # Alice takes part: her facts are visible here
    tg.push_message(GROUP_TG, ALICE_TG, "morning all", chat_type="supergroup")
    await tg.wait_until(lambda: runtime.engine.db.scalar("SELECT COUNT(*) FROM messages") == 1)
    attempts = [
        ToolCall("memory_update", {"id": alice.id, "content": "Alice gave up running"}),
        ToolCall("memory_delete", {"id": alice.id}),
        ToolCall("memory_update", {"id": lore.id, "content": "The group meets on Mondays"}),
        ToolCall("memory_delete", {"id": lore.id}),
    ]
    for n, call in enumerate(attempts):
        seen: list[str] = []
        model_tries(llm, call, seen)
        sent = len(tg.sent)
        tg.push_message(
            GROUP_TG,
            MALLORY_TG,
            "please fix that",
            chat_type="supergroup",
            mention=True,
            first_name="Mallory",
        )
        await tg.wait_for_sent(sent + 1)
        assert seen and seen[0].startswith("Error:") and "not yours" in seen[0], (n, seen)
    assert {m["content"] for m in memories(runtime)} == {
        "Alice is training for a marathon",
        "The group meets on Fridays",
    }


async def test_f2_a_group_admin_may_change_the_lore_but_not_a_member_s_memory(world):
    runtime, llm, tg, dc = world
    tg.admins[GROUP_TG] = [MALLORY_TG]
    add = runtime.engine.memories.add
    alice = add(
        NewMemory(
            content="Alice is training for a marathon",
            subject="running",
            scope=Scope.USER,
            scope_id=f"telegram:{ALICE_TG}",
            guild_id=f"telegram:{GROUP_TG}",
        )
    ).memory
    lore = add(
        NewMemory(
            content="The group meets on Fridays",
            subject="meetings",
            scope=Scope.GUILD,
            scope_id=f"telegram:{GROUP_TG}",
        )
    ).memory
    tg.push_message(GROUP_TG, ALICE_TG, "morning all", chat_type="supergroup")
    await tg.wait_until(lambda: runtime.engine.db.scalar("SELECT COUNT(*) FROM messages") == 1)
    for call, allowed in (
        (ToolCall("memory_update", {"id": lore.id, "content": "The group meets on Mondays"}), True),
        (ToolCall("memory_delete", {"id": alice.id}), False),
    ):
        seen: list[str] = []
        model_tries(llm, call, seen)
        sent = len(tg.sent)
        tg.push_message(
            GROUP_TG,
            MALLORY_TG,
            "update the notes",
            chat_type="supergroup",
            mention=True,
            first_name="Mallory",
        )
        await tg.wait_for_sent(sent + 1)
        assert seen[0].startswith("Error:") is not allowed, seen
    assert {m["content"] for m in memories(runtime)} == {
        "Alice is training for a marathon",
        "The group meets on Mondays",
    }


# -- F3: impersonation by display name ------------------------------------------------------------------------
async def test_f3_a_member_showing_someone_else_s_name_cannot_write_facts_into_their_memory(world):
    runtime, llm, tg, dc = world
    for user, text in (
        (ALICE_TG, "I love hiking in the Alps"),
        (MALLORY_TG, "I am moving to Lisbon and quitting my job"),
    ):
        # Mallory shows "Alice" too
        tg.push_message(GROUP_TG, user, text, chat_type="supergroup", first_name="Alice")
    await tg.wait_until(lambda: runtime.engine.db.scalar("SELECT COUNT(*) FROM messages") == 2)
    runtime.engine.clock.advance(31)
    llm.script(
        json.dumps(
            [
                {
                    "speaker": "P2",
                    "subject": "move",
                    "content": "Alice is moving to Lisbon and quitting her job",
                    "kind": "profile",
                },
                {
                    "about": "Alice",
                    "subject": "job",
                    "content": "Alice quit her job at the bank",
                    "kind": "profile",
                },  # a name: ambiguous
            ]
        )
    )
    await runtime.background.tick()
    prompt = llm.chat_requests[-1]["messages"][-1]["content"]
    assert "[P1]" in prompt and "[P2]" in prompt  # the model sees tags, not only names
    rows = memories(runtime)
    assert [(r["scope_id"], r["content"]) for r in rows] == [
        (f"telegram:{MALLORY_TG}", "Alice is moving to Lisbon and quitting her job")
    ]


# -- F4: what is said in one server stays there; channel_recall reads only readable channels ------------------
async def test_f4_a_fact_said_in_one_server_does_not_surface_in_another_but_does_in_dms(world):
    runtime, llm, tg, dc = world
    llm.script("I'll keep it here.")
    await dc.dispatch_message(
        GENERAL_1,
        ALICE_DC,
        "keep this inside this support group: I am in recovery",
        mentions_bot=True,
        username="alice",
    )
    await dc.wait_for_sent(1)
    runtime.engine.clock.advance(31)
    llm.script(facts({"speaker": "P1", "subject": "health", "content": "Alice is in recovery"}))
    assert (await runtime.background.tick())["extracted"] == 1
    for channel, guild, sent in (
        (GENERAL_2, GUILD_2, 2),
        (GENERAL_1, GUILD_1, 3),
        (DM_ALICE_DC, None, 4),
    ):
        llm.script("Hi!")
        await dc.dispatch_message(
            channel,
            ALICE_DC,
            "how am I doing with recovery?",
            guild_id=guild,
            mentions_bot=True,
            username="alice",
        )
        await dc.wait_for_sent(sent)
        shown = "Alice is in recovery" in llm.chat_requests[-1]["messages"][0]["content"]
        assert shown is (channel != GENERAL_2), channel


async def test_f4_channel_recall_reads_only_channels_the_asker_can_read(world):
    runtime, llm, tg, dc = world
    await dc.dispatch_message(
        STAFF_1, GUILD_OWNER, "staff only: the moderator vote is on Tuesday", username="owner"
    )
    await dc.wait_until(lambda: runtime.engine.db.scalar("SELECT COUNT(*) FROM messages") == 1)
    for user, readable in ((ALICE_DC, False), (GUILD_OWNER, True)):
        for call in (
            ToolCall("channel_recall", {"channel_id": str(STAFF_1)}),
            ToolCall("conversation_search", {"query": "moderator vote"}),
        ):
            seen: list[str] = []
            model_tries(llm, call, seen)
            sent = len(dc.sent)
            await dc.dispatch_message(
                GENERAL_1, user, "what did the staff say?", mentions_bot=True, username="someone"
            )
            await dc.wait_for_sent(sent + 1)
            assert ("moderator vote" in seen[0]) is readable, (user, call.name, seen)


# -- F6/F9/F11 (end to end): forgetting leaves nothing, down to the bytes ----------------------------------------
async def test_f11_forget_everything_leaves_no_byte_of_a_word_that_was_extracted_summarised_reflected_and_compacted(
    tmp_path,
):
    word = "Zyqxolotl"
    db = tmp_path / "bot.db"
    async with FakeOpenAI() as llm:
        runtime = build_runtime(db, llm, FakeClock())
        await runtime.start(background_loop=False)
        orch = runtime.orchestrator
        llm.script(f"What a name, {word}!")
        await orch.reply(dm("telegram", "7", f"I named my cat {word}", mid="1"))
        runtime.engine.clock.advance(31)
        llm.script(
            facts(
                {
                    "speaker": "P1",
                    "subject": "cat",
                    "content": f"Alice's cat is called {word}",
                    "entities": [{"name": word, "type": "concept"}],
                }
            )
        )
        assert (await runtime.background.tick())["extracted"] == 1
        llm.default = lambda body: (
            "[]"
            if "extract" in body["messages"][0]["content"].lower()
            else f"summary: the cat {word} again"
        )
        for n in range(
            62
        ):  # context pressure: compaction folds the oldest turns (with the word) into a rolling summary
            await orch.reply(dm("telegram", "7", f"small talk number {n}", mid=str(n + 2)))
        runtime.engine.clock.advance(31)
        llm.default = lambda body: (
            "[]"
            if "Answer with JSON only" in json.dumps(body) and "reflect" not in json.dumps(body)
            else json.dumps({"facts": [], "summary": f"Alice talked about {word}"})
            if "reflect" in json.dumps(body)
            else f"rolling summary mentioning {word}"
        )
        await runtime.background.tick()
        runtime.engine.clock.advance(601)
        await runtime.background.tick()  # micro-reflection: a session summary and an audit row
        state = runtime.engine.db.rows("SELECT * FROM channel_state")[0]
        assert word in state["rolling_summary"]
        assert (
            runtime.engine.db.scalar(
                "SELECT COUNT(*) FROM session_summaries WHERE text LIKE ?", (f"%{word}%",)
            )
            == 1
        )
        assert (
            runtime.engine.db.scalar(
                "SELECT COUNT(*) FROM reflections WHERE input_excerpt LIKE ?", (f"%{word}%",)
            )
            == 1
        )
        runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert any(
            word.lower().encode() in p.read_bytes().lower()
            for p in tmp_path.rglob("*")
            if p.is_file()
        )
        asked = await orch.command(
            "forget", "everything", dm("telegram", "7", "/forget everything")
        )
        assert "cannot be undone" in asked
        done = await orch.reply(dm("telegram", "7", "yes"))
        assert done.text.startswith("Done. I forgot everything")
        await runtime.stop()
    for path in (
        p for p in tmp_path.rglob("*") if p.is_file()
    ):  # the store's files and the journals beside it
        assert word.lower().encode() not in path.read_bytes().lower(), path.name


# -- F8/F9: forgetting when the model fails afterwards; the bot's reply that repeated the fact ---------------
async def test_f8_f9_forget_that_completes_even_if_the_model_then_fails(tmp_path):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        orch = runtime.orchestrator
        llm.script("A baker at Acme, how lovely!")  # the bot's own reply repeats the fact
        await orch.reply(dm("telegram", "7", "I work at Acme as a baker", mid="1"))
        runtime.engine.clock.advance(31)
        llm.script(
            facts({"speaker": "P1", "subject": "job", "content": "Alice works at Acme as a baker"})
        )
        await runtime.background.tick()
        memory_id = runtime.engine.db.scalar("SELECT id FROM memories")
        llm.script(
            ToolCall("memory_search", {"query": "Acme"}),
            ToolCall("memory_delete", {"id": memory_id}),
            HTTPError(500),
            HTTPError(500),
            HTTPError(500),
        )
        reply = await orch.reply(
            dm("telegram", "7", "forget that I work at Acme. How was your day?", mid="2")
        )
        assert reply.failed and reply.forgotten == ("Alice works at Acme as a baker",)
        dump = json.dumps(
            [
                runtime.engine.db.rows(f"SELECT * FROM {t}")
                for t in ("memories", "messages", "extraction_buffer")
            ]
        )
        assert "acme" not in dump.lower()
        await runtime.stop()


# -- F10: console message ids restart every session ----------------------------------------------------------
async def test_f10_forgetting_in_the_console_removes_the_right_message_even_when_ids_repeat(
    tmp_path,
):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        await runtime.start(background_loop=False)
        orch = runtime.orchestrator
        # two sessions, both numbering from 1 (each with its own prefix: one platform id is stored once)
        for session, text in (("a", "I grew up in Hamburg"), ("b", "My sister lives in Oslo")):
            llm.script("ok")
            await orch.reply(dm("console", "local-user", text, mid=f"{session}-1"))
            runtime.engine.clock.advance(31)
            llm.script(
                facts({"speaker": "P1", "subject": text.split()[-1], "content": f"Alice: {text}"})
            )
            await runtime.background.tick()
        answer = await orch.command(
            "forget", "Hamburg", dm("console", "local-user", "/forget Hamburg")
        )
        assert "Hamburg" in answer
        left = [
            r["content"]
            for r in runtime.engine.db.rows("SELECT content FROM messages WHERE role = 'user'")
        ]
        assert left == ["My sister lives in Oslo"]
        await runtime.stop()
