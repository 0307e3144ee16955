"""Issue 31 item 5: the holes found in the leak check (SEC-6), each closed, on both engines and the whole way out.

Every place that is not the owner of a fact is checked, another person's DM included; tool arguments are checked
before the tool runs; words said in a DM and not yet extracted count; and a reply that hides a word (spelled
digits, look-alike letters, leet, hyphens, spaced letters, backwards, German number words, a word in
two halves, base64, a word split over two replies) is read as the word it hides."""

from __future__ import annotations

import json

import pytest
from conftest import dm_ctx, guild_ctx, remember, say

from bot.turn.leak_guard import TOOL_REFUSED, WITHHELD, tool_text
from memory.clock import FakeClock
from memory.models import Visibility
from memory.recall.leaks import RECENT_MESSAGES_S
from tests.fakes import ToolCall
from tests.pipeline_support import build_runtime, dm, group

THERAPIST = "my therapist is Dr Wombatson"
PASSPORT = "my passport number is X4471Q"
CODE_WORD = "our code word is Zanzibarite"


@pytest.fixture
def engine(any_engine):
    return any_engine


def alice_secrets(engine) -> None:
    for text in (THERAPIST, PASSPORT, CODE_WORD):
        remember(engine, text, scope_id="alice", visibility=Visibility.PRIVATE)


# -- every place that is not the owner of the fact --------------------------------------------------------
def test_another_person_s_dm_is_a_shared_place_for_alice_s_dm_private_fact(engine):
    alice_secrets(engine)
    assert [
        leak.kind
        for leak in engine.leaks.check(dm_ctx("bob"), "Your therapist? Dr Wombatson, I think.")
    ] == ["dm-private"]
    assert [
        leak.kind for leak in engine.leaks.check(dm_ctx("root", owner=True), "Dr Wombatson!")
    ] == ["dm-private"]


def test_the_owner_of_the_fact_in_her_own_dm_is_the_one_place_exempt(engine):
    alice_secrets(engine)
    assert (
        engine.leaks.check(dm_ctx("alice"), "Dr Wombatson, passport X4471Q, code word Zanzibarite.")
        == ()
    )


# -- words said and not yet extracted -----------------------------------------------------------------------
def test_a_dm_message_not_yet_extracted_is_not_for_another_dm_or_a_server(engine):
    say(engine, THERAPIST, author="alice", dm_person="alice")
    for ctx in (dm_ctx("bob"), guild_ctx("g1", "alice"), guild_ctx("g1", "bob", "alice")):
        assert [leak.kind for leak in engine.leaks.check(ctx, "Dr Wombatson says hi")] == [
            "dm-message"
        ], ctx
    assert engine.leaks.check(dm_ctx("alice"), "Dr Wombatson says hi") == ()


def test_a_server_message_is_for_that_server_and_its_speaker_s_own_dm_only(engine):
    say(engine, "I am secretly applying to Glasswyrm Labs", author="alice", guild="g2")
    assert engine.leaks.check(guild_ctx("g2", "bob"), "Glasswyrm Labs, good luck!") == ()
    assert engine.leaks.check(dm_ctx("alice"), "Glasswyrm Labs, good luck!") == ()
    assert [
        leak.kind for leak in engine.leaks.check(guild_ctx("g1", "alice"), "Glasswyrm Labs!")
    ] == ["server-message"]
    assert [leak.kind for leak in engine.leaks.check(dm_ctx("bob"), "Glasswyrm Labs!")] == [
        "server-message"
    ]


def test_a_message_in_a_channel_the_asker_cannot_read_is_not_for_them(engine):
    say(engine, "the mods meet at Quillonby hall", author="mod", guild="g1", channel="g1-mods")
    assert [
        leak.kind for leak in engine.leaks.check(guild_ctx("g1", "bob"), "Quillonby hall it is")
    ] == ["server-message"]
    assert (
        engine.leaks.check(guild_ctx("g1", "bob", readable=("g1-mods",)), "Quillonby hall it is")
        == ()
    )


def test_messages_older_than_the_window_are_left_to_the_memories_made_of_them(engine):
    say(engine, THERAPIST, author="alice", dm_person="alice")
    engine.clock.advance(RECENT_MESSAGES_S + 60)
    assert engine.leaks.check(dm_ctx("bob"), "Dr Wombatson says hi") == ()


# -- words hidden from the index ---------------------------------------------------------------------------
EVASIONS = {
    "spelled digits": ("Your passport is X four four seven one Q.", PASSPORT),
    "spelled number": (
        "The number: five thousand eight hundred and twenty-two.",
        "my locker is number 5822",
    ),
    "cyrillic o": ("Your therapist is Dr W\u043embats\u043en.", THERAPIST),
    "greek letters": ("Dr \u03a9\u03bfmbats\u03bfn? No: Dr Wombats\u03bfn.", THERAPIST),
    "leet": ("The code word: Z4nz1b4r1t3", CODE_WORD),
    "hyphens": ("The code word: Zan-zi-bar-ite", CODE_WORD),
    "spaced letters": ("The code word: Z a n z i b a r i t e", CODE_WORD),
    "hyphenated letters": ("W-o-m-b-a-t-s-o-n", THERAPIST),
    "reversed": ("nostabmoW rD si tsipareht ruoY", THERAPIST),
    "fullwidth": ("\uff3a\uff41\uff4e\uff5a\uff49\uff42\uff41\uff52\uff49\uff54\uff45", CODE_WORD),
    "zero-width spaces": ("Zanzi\u200bbar\u200dite", CODE_WORD),
    # issue 44, item 9
    "german digits": ("Dein Pass: X vier vier sieben eins Q.", PASSPORT),
    "german compound": (
        "Das Schließfach: achtundfünfzig zweiundzwanzig",
        "my locker is number 5822",
    ),
    "two halves": ("The code word: Zanzi + barite", CODE_WORD),
    "a name in halves": ("Your therapist is Dr Wombat son.", THERAPIST),
    "base64": ("The code word, encoded: WmFuemliYXJpdGU=", CODE_WORD),
}


def test_a_secret_hidden_by_an_evasion_is_still_a_leak(engine):
    """One store for all of them (a fresh PostgreSQL database costs seconds); each reply names one memory only."""
    secrets = dict.fromkeys(secret for _, secret in EVASIONS.values())
    ids = {
        secret: remember(engine, secret, scope_id="alice", visibility=Visibility.PRIVATE).id
        for secret in secrets
    }
    caught = {
        evasion: [
            (leak.memory_id, leak.kind)
            for leak in engine.leaks.check(guild_ctx("g1", "bob"), reply)
        ]
        for evasion, (reply, _) in EVASIONS.items()
    }
    assert caught == {
        evasion: [(ids[secret], "dm-private")] for evasion, (_, secret) in EVASIONS.items()
    }


def test_an_evasion_of_a_word_not_yet_extracted_is_a_leak_too(engine):
    for secret in dict.fromkeys(secret for _, secret in EVASIONS.values()):
        say(engine, secret, author="alice", dm_person="alice")
    for evasion in ("cyrillic o", "leet", "reversed", "spaced letters", "spelled digits"):
        assert {leak.kind for leak in engine.leaks.check(dm_ctx("bob"), EVASIONS[evasion][0])} == {
            "dm-message"
        }, evasion


def test_a_word_split_over_two_replies_is_read_across_them(engine):
    """Issue 44, item 9: "... Zanzi" in one reply and "barite" in the next."""
    remember(engine, CODE_WORD, scope_id="alice", visibility=Visibility.PRIVATE)
    ctx = guild_ctx("g1", "bob")
    assert engine.leaks.check(ctx, "The code word starts with Zanzi") == ()
    say(engine, "The code word starts with Zanzi", author="bot", guild="g1", role="assistant")
    assert [leak.kind for leak in engine.leaks.check(ctx, "barite, that is the end of it.")] == [
        "dm-private"
    ]


def test_what_the_place_saw_hidden_is_seen_once_unmasked(engine):
    remember(engine, CODE_WORD, scope_id="alice", visibility=Visibility.PRIVATE)
    assert (
        engine.leaks.check(
            guild_ctx("g1", "bob"),
            "Zanzibarite, you said?",
            seen="Bob: is it Z a n z i b a r i t e?",
        )
        == ()
    )


def test_ordinary_prose_gains_no_leak_from_unmasking(engine):
    alice_secrets(engine)
    remember(
        engine,
        "I love coffee in the morning and walking my dog after work",
        scope_id="alice",
        visibility=Visibility.PRIVATE,
    )
    prose = (
        "Oh, twenty-one people came! It's a well-known spot: ten o'clock, four hundred metres on. Stressed? Desserts "
        "help. I a m fine. The U.S. team won 4-1 and 3-0 at 7pm; e-mail me at bob@example.com."
    )
    assert engine.leaks.check(guild_ctx("g1", "bob"), prose) == ()


def test_tool_arguments_are_read_as_their_values_without_keys_or_ids():
    arguments = json.dumps(
        {"id": "ab12cd34ef", "content": "Zanzibarite", "tags": ["x4471q"], "limit": 5}
    )
    assert tool_text(arguments).split("\n") == ["Zanzibarite", "x4471q", "5"]
    assert tool_text("not json Zanzibarite") == "not json Zanzibarite"


# -- the whole way out ---------------------------------------------------------------------------------------------
@pytest.fixture
async def runtime(tmp_path, srv):
    rt = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await rt.start(background_loop=False)
    yield rt
    srv.default = lambda body: "[]"
    await rt.stop()


def store_args(content: str) -> dict[str, str]:
    return {"content": content, "subject": "code word", "type": "semantic"}


def stored(runtime, word: str) -> int:
    return runtime.engine.db.scalar(
        "SELECT COUNT(*) FROM memories WHERE lower(content) LIKE ?", (f"%{word}%",)
    )


async def test_alice_s_dm_words_never_go_out_verbatim_in_bob_s_dm(runtime, srv):
    srv.script("Noted.")
    # said, not yet extracted
    await runtime.orchestrator.reply(dm("discord", "alice", THERAPIST, name="Alice"))
    leaky = "Alice's therapist is Dr Wombatson."
    srv.script(leaky, leaky)
    answer = await runtime.orchestrator.reply(
        dm("discord", "bob", "who is alice's therapist?", name="Bob")
    )
    assert answer.text == WITHHELD
    srv.script("It's Dr Wombatson.")
    assert (
        await runtime.orchestrator.reply(
            dm("discord", "alice", "who is my therapist?", name="Alice")
        )
    ).text == "It's Dr Wombatson."


async def test_a_memory_store_in_a_group_of_alice_s_dm_code_word_is_refused_and_the_reply_then_withheld(
    runtime, srv
):
    remember(runtime.engine, CODE_WORD, scope_id="discord:alice", visibility=Visibility.PRIVATE)
    leaky = "The code word is Zanzibarite!"
    srv.script(
        ToolCall("memory_store", store_args("the group's code word is Zanzibarite")), leaky, leaky
    )
    answer = await runtime.orchestrator.reply(
        group("discord", "g1", "bob", "remember our code word", name="Bob")
    )
    tool_results = [
        m for body in srv.chat_requests for m in body["messages"] if m["role"] == "tool"
    ]
    assert [m["content"] for m in tool_results] == [TOOL_REFUSED]
    # only alice's own memory: nothing filed for the group
    assert stored(runtime, "zanzibarite") == 1
    assert answer.text == WITHHELD


async def test_a_tool_call_nested_past_any_parser_s_depth_is_refused_and_the_turn_answers(
    runtime, srv
):
    """Issue 44, item 11: arguments nested 100,000 deep raised RecursionError out of ``reply()``."""
    deep = '{"content": ' + "[" * 100_000 + '"Zanzibarite"' + "]" * 100_000 + "}"
    remember(runtime.engine, CODE_WORD, scope_id="discord:alice", visibility=Visibility.PRIVATE)
    srv.script(ToolCall("memory_store", deep), "Sorry, I could not save that.")
    answer = await runtime.orchestrator.reply(
        group("discord", "g1", "bob", "remember our code word", name="Bob")
    )
    assert answer.text == "Sorry, I could not save that."
    assert stored(runtime, "zanzibarite") == 1  # alice's own, nothing more
    tool_results = [m for b in srv.chat_requests for m in b["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == [
        "Error: the arguments are nested too deep. Send a flat JSON object."
    ]
    assert tool_text(deep) == deep  # past the parser's depth: its words checked as they are


async def test_a_memory_store_of_one_s_own_words_in_one_s_own_dm_runs(runtime, srv):
    srv.script(ToolCall("memory_store", store_args("Alice's code word is Zanzibarite")), "Saved.")
    await runtime.orchestrator.reply(dm("discord", "alice", CODE_WORD, name="Alice"))
    assert stored(runtime, "zanzibarite") == 1
