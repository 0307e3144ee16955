"""Consent (SEC-5): /privacy stops the bot remembering a person (or a whole server) while it still answers, and
/about lets a person see and veto what is kept about them, what others told the bot included. Through the real
adapters (python-telegram-bot, discord.py) against local fake servers, the real orchestrator and store, the
openai SDK against a scripted model; forgetting and not storing are checked in the bytes of the store's files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import say

from bot.model.honesty import NOTES
from memory.models import EntityRef, NewMemory, Scope, Visibility
from memory.upkeep.forgetting import forget_everything
from tests.fakes import ToolCall
from tests.pipeline_support import facts, platforms

pytestmark = pytest.mark.asyncio
ALICE, BOB, MALLORY, ADMIN = 55, 66, 77, 88
GROUP, OTHER_GROUP = -1001, -2002
ALICE_DC, DM_ALICE_DC = 7001, 9100
WORD = "Zyqxolotl"  # distinctive: no other text in the store shares its letters
GROUP_KW = dict(chat_type="supergroup")


@pytest.fixture
async def world(tmp_path):
    async with platforms(tmp_path, lambda dc: None) as parts:
        yield parts


def on_disk(folder: Path, word: str) -> int:
    """How often the word occurs in any file the bot wrote (store, WAL, journals), case-insensitively."""
    pattern = re.compile(re.escape(word.lower()).encode())
    return sum(
        len(pattern.findall(p.read_bytes().lower())) for p in folder.rglob("*") if p.is_file()
    )


def stored(runtime, word: str) -> int:
    return runtime.engine.db.scalar(
        "SELECT COUNT(*) FROM messages WHERE content LIKE ?", (f"%{word}%",)
    )


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


async def tg_say(tg, chat: int, user: int, text: str, **kw) -> str:
    """A message the bot answers (a DM, or a mention in a group); returns the answer."""
    sent = len(tg.sent)
    tg.push_message(chat, user, text, mention=chat < 0, **kw)
    return (await tg.wait_for_sent(sent + 1))[-1]["text"]


def answers_ok(body) -> str:
    """A plain "ok" to every reply; "nothing to learn" to every background job (they ask for JSON)."""
    return "[]" if "JSON" in str(body["messages"][0]["content"]) else "ok"


def model_saves_then_echoes(llm, seen: list[str]) -> None:
    """The model tries to save what it heard, then answers repeating the word (its reply must not be kept either)."""

    def responder(body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            seen.append(last["content"])
            return f"Lovely, {WORD} it is."
        if last["role"] == "user" and WORD in str(last["content"]):
            return ToolCall(
                "memory_store",
                {"type": "fact", "subject": "pet", "content": f"The cat is called {WORD}"},
            )
        return "[]"

    llm.default = responder


# -- /privacy off: nothing kept, replies still arrive ----------------------------------------------------------
async def test_after_privacy_off_messages_in_a_dm_and_a_group_leave_no_byte_in_the_store_files_and_are_still_answered(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    assert "won't keep anything you say" in await tg_answer(tg, ALICE, ALICE, "/privacy off")
    seen: list[str] = []
    model_saves_then_echoes(llm, seen)
    for n in range(3):
        assert WORD in await tg_say(tg, ALICE, ALICE, f"my cat {WORD} did trick {n}")
        assert WORD in await tg_say(
            tg, GROUP, ALICE, f"everyone, my cat {WORD} did trick {n}", **GROUP_KW
        )
        # observed, not answered
        tg.push_message(GROUP, ALICE, f"(not to the bot) {WORD} is asleep now {n}", **GROUP_KW)
    # Bob is remembered as usual
    assert await tg_say(tg, GROUP, BOB, "nice cat pics today", first_name="Bob", **GROUP_KW)
    # the save was refused
    assert seen and all(s.startswith("Error:") and "/privacy off" in s for s in seen)
    runtime.engine.clock.advance(700)
    await runtime.background.tick()  # extraction, reflection: nothing of Alice's is waiting
    runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert on_disk(tmp_path, WORD) == 0
    assert (
        runtime.engine.db.scalar(
            "SELECT COUNT(*) FROM messages WHERE author_id = ?", (f"telegram:{ALICE}",)
        )
        == 0
    )
    assert stored(runtime, "nice cat pics") == 1
    # /privacy on resumes: the same word said now is kept (so the check above could fail)
    assert "again" in await tg_answer(tg, ALICE, ALICE, "/privacy on")
    assert WORD in await tg_say(tg, ALICE, ALICE, f"{WORD} is back")
    assert stored(runtime, WORD) == 2 and on_disk(tmp_path, WORD) > 0  # her message and the reply


async def test_privacy_off_on_one_account_covers_the_linked_account_and_outlives_forget_everything(
    world,
):
    runtime, llm, tg, dc = world
    code = re.search(r"code is (\S+)", await tg_answer(tg, ALICE, ALICE, "/link")).group(1)
    await dc.dispatch_interaction(
        "link", user_id=ALICE_DC, channel_id=DM_ALICE_DC, options={"code": code}
    )
    await dc.wait_for_interaction_responses(1)
    await dc.dispatch_interaction(
        "privacy", user_id=ALICE_DC, channel_id=DM_ALICE_DC, options={"choice": "off"}
    )
    assert "won't keep" in (await dc.wait_for_interaction_responses(2))[-1]["data"]["content"]
    llm.default = lambda body: "[]" if "JSON" in str(body["messages"][0]["content"]) else "Noted."
    # ORCH-9: "Noted." with remembering off is a claim nothing backs: the reply says so
    assert await tg_say(tg, ALICE, ALICE, f"{WORD} on telegram") == "Noted.\n\n" + NOTES["keep"]
    assert stored(runtime, WORD) == 0
    tg_command(tg, ALICE, ALICE, "/forget everything confirm")
    await tg.wait_for_sent(len(tg.sent) + 1)
    await dc.dispatch_message(DM_ALICE_DC, ALICE_DC, f"{WORD} on discord")
    await dc.wait_for_sent(1)
    assert (
        await tg_say(tg, ALICE, ALICE, f"{WORD} on telegram again") == "Noted.\n\n" + NOTES["keep"]
    )
    assert (
        stored(runtime, WORD) == 0
        and runtime.engine.db.scalar("SELECT COUNT(*) FROM messages") == 0
    )


async def test_remember_by_command_is_refused_while_privacy_is_off(world):
    runtime, llm, tg, dc = world
    await tg_answer(tg, ALICE, ALICE, "/privacy off")
    assert "didn't keep" in await tg_answer(tg, ALICE, ALICE, f"/remember my cat is {WORD}")
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM memories") == 0


async def test_privacy_off_drops_what_was_still_waiting_to_be_learned(world):
    runtime, llm, tg, dc = world
    llm.default = answers_ok
    await tg_say(tg, ALICE, ALICE, f"my cat is {WORD}")
    await tg_answer(tg, ALICE, ALICE, "/privacy off")
    runtime.engine.clock.advance(31)
    llm.default = lambda body: facts(
        {"speaker": "P1", "subject": "cat", "content": f"Alice's cat is {WORD}"}
    )
    await runtime.background.tick()
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM memories") == 0
    assert stored(runtime, WORD) == 1  # the past stays until /forget everything


async def test_an_edit_after_privacy_off_keeps_neither_the_new_words_nor_the_old(world):
    runtime, llm, tg, dc = world
    llm.default = answers_ok
    update = tg.push_message(ALICE, ALICE, "my cat is Tom")
    await tg.wait_for_sent(1)
    await tg_answer(tg, ALICE, ALICE, "/privacy off")
    tg.push_edit(update, f"my cat is {WORD}")
    await tg.wait_until(
        lambda: runtime.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE role = 'user'") == 0
    )
    assert stored(runtime, WORD) == 0


# -- /privacy server off: admins only, nobody for someone else ---------------------------------------------------
async def test_only_a_group_admin_can_switch_remembering_off_for_the_whole_group(world):
    runtime, llm, tg, dc = world
    tg.admins[GROUP] = [ADMIN]
    llm.default = answers_ok
    refused = await tg_answer(
        tg, GROUP, MALLORY, "/privacy server off", first_name="Mallory", **GROUP_KW
    )
    assert "Only this server's admins" in refused
    await tg_say(tg, GROUP, BOB, "Bob says hello", first_name="Bob", **GROUP_KW)
    assert stored(runtime, "Bob says hello") == 1
    assert "won't keep anything said here" in await tg_answer(
        tg, GROUP, ADMIN, "/privacy server off", first_name="Ada", **GROUP_KW
    )
    await tg_say(tg, GROUP, BOB, f"Bob in the group: {WORD}", first_name="Bob", **GROUP_KW)
    await tg_say(tg, OTHER_GROUP, BOB, "Bob in the other group", first_name="Bob", **GROUP_KW)
    await tg_say(tg, BOB, BOB, "Bob in his DM", first_name="Bob")
    # nor the bot's reply ("ok" is kept only where remembering is on)
    assert stored(runtime, WORD) == 0
    assert stored(runtime, "Bob in the other group") == 1 and stored(runtime, "Bob in his DM") == 1
    await tg_answer(tg, GROUP, ADMIN, "/privacy server on", first_name="Ada", **GROUP_KW)
    await tg_say(tg, GROUP, BOB, f"Bob again: {WORD}", first_name="Bob", **GROUP_KW)
    assert stored(runtime, WORD) == 1


async def test_a_group_member_cannot_switch_privacy_for_someone_else(world):
    runtime, llm, tg, dc = world
    llm.default = answers_ok
    for attempt in (
        "/privacy off @Alice",
        "/privacy off Alice",
        "/privacy off 55",
        "/privacy server",
    ):
        answer = await tg_answer(tg, GROUP, MALLORY, attempt, first_name="Mallory", **GROUP_KW)
        assert "Nothing was changed" in answer, attempt
    await tg_say(tg, GROUP, ALICE, f"Alice is still remembered: {WORD}", **GROUP_KW)
    await tg_say(
        tg, GROUP, MALLORY, "Mallory is still remembered too", first_name="Mallory", **GROUP_KW
    )
    assert stored(runtime, WORD) == 1 and stored(runtime, "Mallory is still remembered") == 1
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM person_settings") == 0


# -- /about me and /about veto --------------------------------------------------------------------------------------
def add(runtime, content: str, scope: Scope, scope_id: str, **kw) -> str:
    new = NewMemory(
        content=content, subject=kw.pop("subject", "x"), scope=scope, scope_id=scope_id, **kw
    )
    return runtime.engine.memories.add(new).memory.id


async def about_world(runtime, llm, tg) -> dict[str, str]:
    """Alice and Bob share a group; Bob tells the bot about Alice there (extracted by the scripted model). Facts
    about Alice elsewhere: Bob's other group (Alice is not in it), Bob's DM, the owner's memory; and one about Carol."""
    llm.default = answers_ok
    await tg_say(tg, GROUP, ALICE, "hi all", **GROUP_KW)
    # Bob names her by account (a text mention): a name alone binds nobody
    user = {"id": ALICE, "is_bot": False, "first_name": "Alice"}
    alice = [{"type": "text_mention", "offset": 0, "length": 5, "user": user}]
    said = f"Alice is allergic to {WORD} nuts"
    await tg_say(tg, GROUP, BOB, said, first_name="Bob", entities=alice, **GROUP_KW)
    runtime.engine.clock.advance(31)
    # P1 is Alice
    person = [{"name": "Alice", "type": "person"}]
    llm.script(facts({"speaker": "P2", "subject": "Alice", "content": said, "entities": person}))
    assert (await runtime.background.tick())["extracted"] == 1
    bob, group, other = f"telegram:{BOB}", f"telegram:{GROUP}", f"telegram:{OTHER_GROUP}"
    told = runtime.engine.db.scalar("SELECT id FROM memories WHERE content LIKE '%allergic%'")
    return {
        "told": told,
        "own": add(
            runtime,
            "Alice likes rowing",
            Scope.USER,
            f"telegram:{ALICE}",
            visibility=Visibility.PRIVATE,
        ),
        "lore": add(
            runtime,
            "The meetup host changes monthly",
            Scope.GUILD,
            group,
            entities=(EntityRef("Alice", "person"),),
        ),
        "other_server": add(
            runtime, "Alice plays the cello", Scope.USER, bob, subject="Alice", guild_id=other
        ),
        "bob_dm": add(
            runtime,
            "Alice owes me money",
            Scope.USER,
            bob,
            subject="Alice",
            visibility=Visibility.PRIVATE,
        ),
        "owner": add(
            runtime, "Alice might get a raise", Scope.OWNER, "console:local-user", subject="Alice"
        ),
        "carol": add(
            runtime, "Carol runs marathons", Scope.USER, bob, subject="Carol", guild_id=group
        ),
    }


async def test_about_me_shows_what_others_said_about_me_in_a_shared_group_and_nothing_from_elsewhere(
    world,
):
    runtime, llm, tg, dc = world
    ids = await about_world(runtime, llm, tg)
    listing = await tg_answer(tg, ALICE, ALICE, "/about me")
    shown = {name for name, mid in ids.items() if mid[:8] in listing}
    # lore names her, but is the server's: never hers to veto (SEC-5)
    assert shown == {"told", "own"}, listing
    assert (
        "Alice plays the cello" not in listing
        and "owes me money" not in listing
        and "raise" not in listing
    )
    assert "in a private chat" in await tg_answer(tg, GROUP, ALICE, "/about me", **GROUP_KW)


async def test_a_veto_forgets_a_fact_someone_else_told_with_its_message_down_to_the_bytes(
    world, tmp_path
):
    runtime, llm, tg, dc = world
    ids = await about_world(runtime, llm, tg)
    runtime.engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert on_disk(tmp_path, WORD) > 0
    answer = await tg_answer(tg, ALICE, ALICE, f"/about veto {ids['told'][:8]}")
    assert answer.startswith("Forgotten:") and "message" in answer
    assert on_disk(tmp_path, WORD) == 0
    assert runtime.engine.db.scalar("SELECT COUNT(*) FROM memories") == len(ids) - 1


async def test_a_veto_of_anything_not_in_my_list_is_refused_and_changes_nothing(world):
    runtime, llm, tg, dc = world
    ids = await about_world(runtime, llm, tg)
    before = runtime.engine.db.rows("SELECT id, content FROM memories ORDER BY rid")
    for name in ("other_server", "bob_dm", "owner", "carol", "lore"):
        answer = await tg_answer(tg, ALICE, ALICE, f"/about veto {ids[name][:8]}")
        assert "not in your /about me list" in answer, name
    for prefix in ("", "a", ids["told"][:3]):  # too short to name one memory
        assert "Forgotten" not in await tg_answer(tg, ALICE, ALICE, f"/about veto {prefix}".strip())
    # Alice's own
    assert "not in your" in await tg_answer(
        tg, BOB, BOB, f"/about veto {ids['own'][:8]}", first_name="Bob"
    )
    assert runtime.engine.db.rows("SELECT id, content FROM memories ORDER BY rid") == before


async def test_a_member_showing_my_name_sees_none_of_what_was_said_about_me(world):
    runtime, llm, tg, dc = world
    ids = await about_world(runtime, llm, tg)
    # Mallory renames herself "Alice"
    await tg_say(tg, GROUP, MALLORY, "hello", first_name="Alice", **GROUP_KW)
    listing = await tg_answer(tg, MALLORY, MALLORY, "/about me", first_name="Alice")
    assert ids["told"][:8] not in listing and "allergic" not in listing
    assert "not in your" in await tg_answer(
        tg, MALLORY, MALLORY, f"/about veto {ids['told'][:8]}", first_name="Alice"
    )
    assert (
        runtime.engine.db.scalar("SELECT COUNT(*) FROM memories WHERE id = ?", (ids["told"],)) == 1
    )


async def test_the_operator_forgetting_a_person_keeps_their_privacy_off_on_every_account(engine):
    people, privacy = engine.people, engine.privacy
    alice, bob = people.resolve("telegram", "55", "Alice"), people.resolve("telegram", "66", "Bob")
    people.redeem(people.issue_code(alice), "discord", "7001")  # Alice's second account
    privacy.set_person(alice, False)
    say(engine, "my cat is Tom", author=alice, dm_person=alice)
    # what the dashboard and `companion memory forget-person` call
    counts = forget_everything(engine, [alice])
    assert counts["messages"] == 1 and counts["identities"] == 2
    assert not people.remembered("telegram:55") and not people.remembered("discord:7001")
    assert people.remembered(bob)
