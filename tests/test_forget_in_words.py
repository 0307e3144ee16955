"""A forget asked in words is done before the model answers only when it cannot be anything else (issue 44,
item 3).

"Don't keep my birthday a secret", "Don't keep me waiting, I get grumpy" and "Don't store the cheese in the
fridge door" each deleted the person's closest memory for good, with a tombstone, and the reply said "(Done:
what you asked me to forget is forgotten.)". Driven through the orchestrator on a real store with the scripted
model: every memory stays, down to its bytes in the store's files; the plain asks still forget.
"""

from __future__ import annotations

import pytest
from conftest import remember

from bot.model.honesty import FORGOTTEN
from tests.pipeline_support import dm
from tests.test_forget_unextracted import copies

ALICE = "telegram:7"
# each the closest memory to one of the sentences below, by the words they share
KEPT = {
    "Alice's birthday is on 3 May": "birthday is on 3 May",
    "Alice gets grumpy when she is kept waiting": "grumpy",
    "Alice keeps Stilton cheese in the fridge door": "Stilton",
    "Alice's phone number is 07700 900461": "900461",
    "Alice lives in Leeds": "Leeds",
    "Alice's ex is called Marcus": "Marcus",
}

# ordinary English: none of these is an ask to forget anything
NOT_ASKS = [
    "Don't keep my birthday a secret",
    "Don't keep me waiting, I get grumpy",
    "Don't store the cheese in the fridge door",
    "Don't keep it a secret, my birthday is on 3 May",
    "Don't remember me as grumpy",
    "Forget about it, it's fine",
    "Forget the cheese, let's have pasta",
    "Don't save my seat, I'm not coming",
    "Don't keep my phone number a secret from the others",
    "Forget about my ex, he's not worth it",
    # issue 45: other words for a forget, said of something else
    "Scratch that, I meant Tuesday",
    "Never mind my ex, he's always late",
    "Never mind, I found my phone",
    "I had to delete my old account in Leeds",
]


async def alice_knows(rt) -> None:
    for content in KEPT:
        await rt.runner.run(remember, rt.engine, content, subject="Alice", scope_id=ALICE)


def kept(rt) -> set[str]:
    return {
        r["content"] for r in rt.engine.db.rows("SELECT content FROM memories WHERE forgotten = 0")
    }


@pytest.mark.parametrize("said", NOT_ASKS)
async def test_ordinary_english_forgets_nothing_down_to_the_bytes(rt, srv, said):
    await alice_knows(rt)
    srv.script("Sure thing!")
    reply = await rt.orchestrator.reply(dm("telegram", "7", said, mid="m1"))
    assert reply.forgotten == () and FORGOTTEN not in reply.text
    assert kept(rt) == set(KEPT)
    assert rt.engine.memories.tombstones.count() == 0
    # not only the rows: every memory's words are still in the store's files
    assert all(copies(rt, word) > 0 for word in KEPT.values())


@pytest.mark.parametrize(
    ("said", "gone"),
    [
        ("please don't keep my phone number", "Alice's phone number is 07700 900461"),
        ("Forget that I live in Leeds", "Alice lives in Leeds"),
        (
            "Please don't keep my phone number on file, thanks",
            "Alice's phone number is 07700 900461",
        ),
        ("forget what I said about Leeds", "Alice lives in Leeds"),
        ("Don't remember my ex's name", "Alice's ex is called Marcus"),
        # issue 45: a forget asked in other words
        ("Scratch what I said about Leeds.", "Alice lives in Leeds"),
        ("Never mind the part about my ex.", "Alice's ex is called Marcus"),
        ("Please delete my phone number from your memory", "Alice's phone number is 07700 900461"),
        ("Erase my ex's name, please.", "Alice's ex is called Marcus"),
    ],
)
async def test_a_plain_ask_still_forgets_before_the_model_answers(rt, srv, said, gone):
    await alice_knows(rt)
    srv.script("Done.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", said, mid="m1"))
    assert gone in reply.forgotten
    assert kept(rt) == set(KEPT) - {gone}
    assert copies(rt, KEPT[gone]) == 0


async def test_forget_the_thing_is_an_ask_only_when_the_person_said_the_thing(rt, srv):
    """ "Forget the cheese." names no "my" and no "I said": done before the model only when Alice said
    "cheese" herself (her message is there); else the model reads it (here: it does nothing)."""
    await alice_knows(rt)
    srv.script("Sure.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Forget the cheese.", mid="m1"))
    assert reply.forgotten == () and kept(rt) == set(KEPT)
    srv.script("Nice.")
    await rt.orchestrator.reply(dm("telegram", "7", "I keep Stilton cheese in the door", mid="m2"))
    srv.script("Done.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Actually, forget the cheese.", mid="m3")
    )
    assert "Alice keeps Stilton cheese in the fridge door" in reply.forgotten
    assert copies(rt, "Stilton") == 0


async def test_what_a_turn_forgets_first_is_not_in_the_prompt_it_is_answered_with(rt, srv):
    """Issue 45: the snapshot was recalled before the forget, so the model was shown the fact the
    same message had just forgotten; and a message that only asks to forget recalled a snapshot
    that nobody reads (it is answered without the model)."""
    await alice_knows(rt)
    srv.script("Marcus, I think.")
    said = "Forget that I live in Leeds. And what's my ex called again?"
    reply = await rt.orchestrator.reply(dm("telegram", "7", said, mid="m1"))
    assert "Alice lives in Leeds" in reply.forgotten
    system = srv.chat_requests[-1]["messages"][0]["content"]
    assert "Marcus" in system and "lives in Leeds" not in system
    asked, used = len(srv.chat_requests), _accessed(rt)
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Please don't keep my phone number", mid="m2")
    )
    assert "Alice's phone number is 07700 900461" in reply.forgotten
    assert len(srv.chat_requests) == asked and _accessed(rt) == used  # no model, no recall


def _accessed(rt) -> int:
    return rt.engine.db.scalar("SELECT coalesce(sum(access_count), 0) FROM memories")
