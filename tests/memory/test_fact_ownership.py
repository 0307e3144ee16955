"""Who owns a fact the model read in a conversation (issue 30.1, issue 31.6; ORCH-7, ORCH-9, SEC-1).

The scripted model answers as real models did: a small model filed the person's "I have a grey cat
called Biscuit" as the bot's own because the bot had echoed it, filed a fact tagged Bob that cited
Mallory's line, and filed the half marathon the person had asked, in the same conversation, to
forget. Each pass (extraction, micro reflection, daily reflection) runs on a real store through the
real runtime.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest
from pipeline_support import dm, facts, group

from memory.clock import DAY
from memory.models import SELF_SUBJECT, Source
from memory.scopes import RecallContext
from memory.write.extraction import Line, Transcript, memories_from
from memory.write.forget_asked import forgets_in
from memory.write.ownership import asks_only

DAY0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC
CAT = "I have a grey cat called Biscuit"
# a person's fact is filed in the third person (issue 45)
CAT_FILED = "Alice has a grey cat called Biscuit"
ECHO = "Biscuit sounds lovely! A grey cat is the best company on a rainy day."
OWL = "Not really: I'm a night owl, I do my best thinking after midnight."
STEAL = "I steal from the collection box"
RACE = "I'm running a half marathon in October"
POTTERY = "I also started pottery classes on Tuesdays"
EXTRACT, MICRO, DAILY = "Extract durable memories", "session has ended", "one day of a conversation"
LINE = re.compile(r'^#(\d+) \[(\w+)\] (?:\S+ \(\w+\) )?"[^"]*": (".*")$')


def numbered(prompt: str) -> dict[str, tuple[int, str]]:
    """The transcript in a job's prompt: each line's text -> (its number, its speaker's tag)."""
    out = {}
    for row in prompt.splitlines():
        if match := LINE.match(row):
            out[json.loads(match.group(3))] = (int(match.group(1)), match.group(2))
    return out


def cite(prompt: str, text: str) -> list[int]:
    return [numbered(prompt)[text][0]]


def tag(prompt: str, text: str) -> str:
    return numbered(prompt)[text][1]


def item(speaker: str, content: str, lines: list[int] | None = None) -> dict[str, Any]:
    """One candidate as the model writes it (``lines`` left out when None)."""
    found: dict[str, Any] = {
        "speaker": speaker,
        "subject": content.split()[-1].lower(),
        "content": content,
    }
    return found if lines is None else {**found, "lines": lines}


Answer = Callable[[str], list[dict[str, Any]]]


def model(srv, replies: dict[str, str], **jobs: Answer) -> None:
    """The scripted model: a chat turn gets the reply for the text it answers; a job (``extract``, ``micro``,
    ``daily``) gets its candidates, built from the numbered transcript it was shown (nothing, if not given)."""
    markers = {"extract": EXTRACT, "micro": MICRO, "daily": DAILY}

    def respond(body: dict[str, Any]) -> str:
        prompt = str(body["messages"][-1]["content"])
        for job, marker in markers.items():
            if marker in prompt:
                found = jobs[job](prompt) if job in jobs else []
                return (
                    json.dumps({"facts": found, "summary": "a chat"})
                    if job == "micro"
                    else facts(*found)
                )
        # a reply, or a judge's no
        return next((reply for said, reply in replies.items() if said in prompt), "no")

    srv.default = respond


def live(rt) -> list[dict[str, Any]]:
    return rt.engine.db.rows(
        "SELECT subject, content, scope, scope_id, partition_key FROM memories ORDER BY content"
    )


def contents(rt) -> list[str]:
    return [m["content"] for m in live(rt)]


async def extract(rt) -> None:
    rt.engine.clock.advance(31)
    await rt.background.tick()


async def talk(rt, *turns: tuple[str, Any]) -> None:
    """Each turn answered (``reply``) or only seen (``observe``), a second apart: their order is the transcript's."""
    for how, message in turns:
        rt.engine.clock.advance(1)
        await getattr(rt.orchestrator, how)(message)


def log_lines(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "memory.write.extraction")


# -- 1. a self that cannot be written by others ------------------------------------------------------------
@pytest.mark.parametrize("cited", ["the bot's echo", "the person's line", "nothing"])
async def test_the_persons_cat_echoed_by_the_bot_is_filed_under_the_person_never_as_the_bots_own(
    rt, srv, caplog, cited
):
    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        lines = {
            "the bot's echo": cite(prompt, ECHO),
            "the person's line": cite(prompt, CAT),
            "nothing": None,
        }[cited]
        item = {"speaker": "bot", "kind": "profile", "subject": "pet", "content": CAT}
        return [item if lines is None else {**item, "lines": lines}]

    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {CAT: ECHO}, extract=as_the_model_did)
    await talk(rt, ("reply", dm("telegram", "7", CAT, mid="1")))
    await extract(rt)
    (fact,) = live(rt)
    assert fact["subject"] != SELF_SUBJECT and fact["partition_key"] == "user|telegram:7|private"
    assert (
        "1 fact(s) filed (1 the model gave the bot, filed under the person who said it), 0 dropped"
        in log_lines(caplog)
    )
    await rt.orchestrator.reply(dm("telegram", "7", "what do you know about yourself?"))
    shown = srv.chat_requests[-1]["messages"][0]["content"]
    assert (
        "Biscuit" in shown
        and "Biscuit" not in shown.partition("## What you know about yourself\n")[2].split("\n#")[0]
    )


async def test_the_bots_own_night_owl_said_in_its_line_and_by_no_person_is_its_self_fact(rt, srv):
    owl = lambda p: [item("bot", "I am a night owl", cite(p, OWL))]
    model(srv, {"Do you like mornings?": OWL}, extract=owl)
    await talk(rt, ("reply", dm("telegram", "7", "Do you like mornings?", mid="1")))
    await extract(rt)
    (fact,) = live(rt)
    assert (fact["subject"], fact["content"]) == (SELF_SUBJECT, "I am a night owl")


async def test_a_self_fact_citing_no_line_of_the_bot_is_not_filed_even_when_the_bots_words_match(
    rt, srv, caplog
):
    # "citations, not shared words": before, an uncited "bot" fact took the bot line sharing the most words
    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {"Do you like mornings?": OWL}, extract=lambda p: [item("bot", "I am a night owl")])
    await talk(rt, ("reply", dm("telegram", "7", "Do you like mornings?", mid="1")))
    await extract(rt)
    assert live(rt) == []
    assert "self fact: no line of the bot that it cites says it: 1" in log_lines(caplog)


# -- 3. a fact's author is the author of the lines it cites -------------------------------------------------
@pytest.mark.parametrize("cited", [True, False], ids=["cites Mallory", "cites nothing"])
async def test_a_fact_tagged_bob_from_mallorys_line_is_dropped_and_never_filed_under_bob(
    rt, srv, caplog, cited
):
    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        item = {
            "speaker": tag(prompt, "Anyone up for the quiz on Friday?"),
            "subject": "confession",
        }
        item["content"] = "Bob steals from the collection box"
        return [{**item, "lines": cite(prompt, STEAL)} if cited else item]

    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {}, extract=as_the_model_did)
    await talk(
        rt,
        (
            "observe",
            group("discord", "g1", "bob", "Anyone up for the quiz on Friday?", name="Bob", mid="1"),
        ),
        ("observe", group("discord", "g1", "mallory", STEAL, name="Mallory", mid="2")),
    )
    await extract(rt)
    assert live(rt) == []
    reason = (
        "citation and tag disagree: 1"
        if cited
        else "another person's line says it, not the tagged one's: 1"
    )
    assert f"0 fact(s) filed, 1 dropped ({reason})" in log_lines(caplog)


async def test_a_fact_citing_two_people_goes_to_the_one_whose_line_says_it(rt, srv):
    def both(prompt: str) -> list[dict[str, Any]]:
        lines = cite(prompt, "Guess what I do on Sundays") + cite(prompt, STEAL)
        # no tag
        return [
            {
                "subject": "confession",
                "content": "Mallory steals from the collection box",
                "lines": lines,
            }
        ]

    model(srv, {}, extract=both)
    await talk(
        rt,
        (
            "observe",
            group("discord", "g1", "bob", "Guess what I do on Sundays", name="Bob", mid="1"),
        ),
        ("observe", group("discord", "g1", "mallory", STEAL, name="Mallory", mid="2")),
    )
    await extract(rt)
    assert [m["partition_key"] for m in live(rt)] == ["user|discord:mallory|public|discord:g1"]


# -- 2. a forget said in the same transcript ----------------------------------------------------------------
@pytest.mark.parametrize(
    "ask,at_the_reply",
    [
        ("Actually, forget the half marathon.", True),
        ("Hmm, forget that", False),
        ("/forget half marathon", True),
    ],
)
async def test_a_forget_asked_in_the_same_conversation_stops_its_fact_and_only_that_one(
    rt, srv, caplog, ask, at_the_reply
):
    """An ask that names its words is done at the reply, as /forget (ORCH-9): the line is gone before extraction;
    "forget that" names nothing, and extraction holds the fact back."""

    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        race = (
            [item("P1", "Alice is running a half marathon in October", cite(prompt, RACE))]
            if RACE in prompt
            else []
        )
        return [*race, item("P1", "Alice takes pottery classes", cite(prompt, POTTERY))]

    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {RACE: "Good luck!", ask: "Sure.", POTTERY: "Fun!"}, extract=as_the_model_did)
    await talk(
        rt,
        *(
            ("reply", dm("telegram", "7", text, mid=str(n)))
            for n, text in enumerate([RACE, ask, POTTERY])
        ),
    )
    await extract(rt)
    assert contents(rt) == ["Alice takes pottery classes"]
    if at_the_reply:
        assert not [
            r
            for r in rt.engine.db.rows("SELECT content FROM messages")
            if "marathon" in r["content"]
        ]
    else:
        assert "asked to forget in this conversation: 1" in log_lines(caplog)


@pytest.mark.parametrize("lines", [None, [1]])
async def test_a_fact_none_of_whose_words_was_said_is_not_filed(rt, srv, caplog, lines):
    """A real 1.5B answered a 20-line conversation with the extraction prompt's own example, tagged as the
    person's; a fact holding even one word of the conversation (a resolved date aside) is still filed."""

    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        return [
            item("P1", "My favourite season is autumn", lines),
            item("P1", "Alice's pottery class is on 2026-12-01", lines),  # "pottery" was said
            item("P1", "What should I make with the pottery?", lines),  # a question is not a fact
            # nor is one with a fragment after it (a real 1.5B filed this one); a statement beside one is
            item("P1", "What should I make with the pottery? Something quick.", lines),
            item("P1", "Is pottery hard? Alice finds the pottery class relaxing.", lines),
        ]

    caplog.set_level(logging.INFO, "memory.write.extraction")
    model(srv, {CAT: "Lovely!", POTTERY: "Fun!"}, extract=as_the_model_did)
    await talk(
        rt,
        *(
            ("reply", dm("telegram", "7", text, mid=str(n)))
            for n, text in enumerate([CAT, POTTERY])
        ),
    )
    await extract(rt)
    assert sorted(contents(rt)) == [
        "Alice's pottery class is on 2026-12-01",
        "Is pottery hard? Alice finds the pottery class relaxing.",
    ]
    assert "none of its words is in the conversation: 1" in log_lines(caplog)
    assert "a question, not a fact: 2" in log_lines(caplog)


async def test_a_forget_by_one_person_does_not_stop_another_persons_fact(rt, srv):
    def as_the_model_did(prompt: str) -> list[dict[str, Any]]:
        said = "I'm running a half marathon too"
        return [item(tag(prompt, said), "Bob is running a half marathon", cite(prompt, said))]

    model(srv, {}, extract=as_the_model_did)
    await talk(
        rt,
        (
            "observe",
            group("discord", "g1", "bob", "I'm running a half marathon too", name="Bob", mid="1"),
        ),
        (
            "observe",
            group("discord", "g1", "alice", "forget the half marathon", name="Alice", mid="2"),
        ),
    )
    await extract(rt)
    assert contents(rt) == ["Bob is running a half marathon"]


# -- the same rules in micro and daily reflection -----------------------------------------------------------
GROUP_DAY = [
    ("reply", "alice", "Alice", CAT),
    ("observe", "bob", "Bob", "Anyone up for the quiz on Friday?"),
    ("observe", "mallory", "Mallory", STEAL),
    ("reply", "bob", "Bob", "Juniper, are you more of a morning person?"),
    ("reply", "alice", "Alice", RACE),
    ("observe", "alice", "Alice", "Actually, forget the half marathon."),
]
REPLIES = {CAT: ECHO, "morning person?": OWL, RACE: "Good luck!"}


def the_bad_answer(prompt: str) -> list[dict[str, Any]]:
    """What a weak model files from the group's day: the person's cat as the bot's (citing the echo), Mallory's
    line under Bob, the bot's real self fact, and the half marathon Alice asked to forget."""
    bob = tag(prompt, "Anyone up for the quiz on Friday?")
    return [
        item("bot", CAT, cite(prompt, ECHO)),
        item(bob, "Bob steals from the collection box", cite(prompt, STEAL)),
        item("bot", "I am a night owl", cite(prompt, OWL)),
        item(tag(prompt, RACE), "Alice is running a half marathon in October", cite(prompt, RACE)),
    ]


def owned_as_it_should_be(rt) -> None:
    by_content = {m["content"]: m for m in live(rt)}
    assert sorted(by_content) == [CAT_FILED, "I am a night owl"]
    # Alice's, said in g1
    assert by_content[CAT_FILED]["partition_key"] == "user|discord:alice|public|discord:g1"
    assert by_content["I am a night owl"]["subject"] == SELF_SUBJECT
    assert (
        by_content["I am a night owl"]["scope"],
        by_content["I am a night owl"]["scope_id"],
    ) == ("guild", "discord:g1")


async def group_day(rt) -> None:
    await talk(
        rt,
        *(
            (how, group("discord", "g1", who, text, name=name, mid=str(n)))
            for n, (how, who, name, text) in enumerate(GROUP_DAY)
        ),
    )


async def test_micro_reflection_files_by_the_same_ownership_rules(rt, srv):
    model(srv, REPLIES, micro=the_bad_answer)
    await group_day(rt)
    await extract(rt)  # extraction answers nothing here
    rt.engine.clock.advance(601)
    assert (await rt.background.tick())[
        "reflected"
    ] == 2  # the facts stored: the cat (Alice's) and the night owl
    owned_as_it_should_be(rt)


async def test_daily_reflection_files_by_the_same_ownership_rules(rt, srv):
    rt.engine.clock.t = DAY0 + 10 * 3600
    model(srv, REPLIES, daily=the_bad_answer)
    await group_day(rt)
    await extract(rt)
    rt.engine.clock.t = DAY0 + DAY + 4 * 3600
    report = await rt.daily.run()
    assert (report.chats, report.failed) == (1, 0)
    owned_as_it_should_be(rt)


# -- the rules on a transcript alone ----------------------------------------------------------------------------
def _dm(*said: tuple[str | None, str]) -> Transcript:
    alice = RecallContext("telegram", "telegram:7", "dm-7", is_dm=True)
    return Transcript(
        tuple(
            Line(alice if who else None, who or "Juniper", text, f"m{n}")
            for n, (who, text) in enumerate(said, 1)
        )
    )


@pytest.mark.parametrize("tagged", ["assistant", "Juniper", "[bot]"])
def test_the_bot_named_any_way_a_model_writes_it_owns_only_what_its_own_line_says(tagged):
    transcript = _dm(("Alice", CAT), (None, ECHO), ("Alice", "Do you like mornings?"), (None, OWL))
    cat = {"speaker": tagged, "subject": "pet", "content": CAT, "lines": [2]}
    owl = {"speaker": tagged, "subject": "sleep", "content": "I am a night owl", "lines": [4]}
    found = memories_from([cat, owl], transcript, Source.AUTO_EXTRACTION)
    assert [(m.content, m.subject, m.provenance.sources) for m in found] == [
        (CAT_FILED, "pet", ("m1",)),  # the person's line says it: theirs, from their line
        ("I am a night owl", SELF_SUBJECT, ("m4",)),
    ]


def test_a_question_that_holds_the_words_is_not_a_statement_to_move_a_fact_to():
    # "Are you a night owl?" is no person's statement that they are one: not the bot's (a person's line holds
    # its words) and not Alice's either
    transcript = _dm(("Alice", "Are you a night owl?"), (None, OWL))
    owl = {"speaker": "bot", "subject": "sleep", "content": "I am a night owl", "lines": [2]}
    assert memories_from([owl], transcript, Source.AUTO_EXTRACTION) == []


# -- what the real 0.5B model sent (Qwen2.5-Coder-0.5B-Instruct on llama.cpp, temperature 0) --------------------
def _group(*said: tuple[str | None, str]) -> Transcript:
    ctx = lambda who: RecallContext("discord", who.lower(), "g1-general", guild_id="g1")  # noqa: E731
    return Transcript(
        tuple(
            Line(ctx(who) if who else None, who or "Juniper", text, f"m{n}")
            for n, (who, text) in enumerate(said, 1)
        )
    )


def test_the_small_models_bob_fact_filed_as_the_bots_own_is_bobs():
    transcript = _group(
        ("Bob", "Anyone up for the quiz on Friday?"),
        ("Mallory", STEAL),
        ("Bob", "I work as a nurse at St Mary's"),
        (None, "Hi Bob!"),
    )
    sent = [
        {
            "type": "behavioral",
            "kind": "profile",
            "speaker": "bot",
            "lines": [1],
            "subject": "Bob",
            "content": "I work as a nurse at St Mary's",
        },
        {
            "type": "behavioral",
            "kind": "profile",
            "speaker": "bot",
            "lines": [4],
            "subject": "Bob",
            "content": "Hi Bob!",
        },
    ]
    # before: both filed as the bot's own
    (fact,) = memories_from(sent, transcript, Source.AUTO_EXTRACTION)
    assert (fact.subject, fact.scope_id, fact.guild_id, fact.provenance.sources) == (
        "Bob",
        "bob",
        "g1",
        ("m3",),
    )


def test_the_small_models_citations_beside_the_right_lines_still_let_the_forget_hold():
    transcript = _dm(
        ("Alice", RACE), (None, "Good luck with the half marathon!"), ("Alice", "Actually, forget the half marathon."), (None, "Sure."),
        ("Alice", POTTERY), (None, "Pottery is fun!"),
    )  # fmt: skip
    sent = [
        {"speaker": "P1", "lines": [1, 2, 3], "subject": "Alice", "content": RACE},
        {
            "speaker": "P1",
            "lines": [4, 5],
            "subject": "Alice",
            "content": "Actually, forget the half marathon.",
        },
        {"speaker": "P1", "lines": [6, 7], "subject": "Alice", "content": POTTERY},
        {"speaker": "P1", "lines": [8, 9], "subject": "Alice", "content": "Pottery is fun!"},
    ]
    # before: all four filed, the half marathon too
    found = memories_from(sent, transcript, Source.AUTO_EXTRACTION)
    assert [(m.content, m.provenance.sources) for m in found] == [
        ("Alice also started pottery classes on Tuesdays", ("m5",))
    ]


@pytest.mark.parametrize(
    ("said", "what"),
    [
        ("Actually, forget the half marathon.", "the half marathon"),
        ("Juniper, please forget my address.", "my address"),
        ("/forget Zanzibarite", "Zanzibarite"),
        ("Could you please not remember that?", ""),
        ("Hmm, forget that", ""),
        ("I always forget my keys", None),
        ("Don't forget my birthday is May 3", None),
        ("I don't remember his name", None),
        ("I'll never forget that trip", None),
        # issue 44: English, not asks
        ("Don't keep my birthday a secret", None),
        ("Don't keep me waiting, I get grumpy", None),
        ("Don't store the cheese in the fridge door", None),
        ("Don't remember me as grumpy", None),
        ("Forget about it, it's fine", None),
        ("Please don't keep my phone number on file, thanks", "my phone number"),
    ],
)
def test_an_ask_to_forget_is_told_from_talk_about_forgetting(said, what):
    asks = forgets_in(["alice"], [said])
    assert [a.what for a in asks] == ([] if what is None else [what])


@pytest.mark.parametrize(
    "text,only_asks",
    [
        ("你知道林晓是做什么工作的吗？", True),  # filed by the real 1.5B from a Chinese chat
        ("今晚做什么菜好？要快一点的。", True),  # a fragment after it (filed in a later run)
        ("アリスの仕事は何ですか？", True),
        ("你好吗？我住在成都，离锦江不远。", False),  # a statement beside the question
        ("What should I cook tonight? Something quick.", True),
        ("Is it raining? I love rain.", False),
    ],
)
def test_a_question_states_nothing_in_any_script(text, only_asks):
    assert asks_only(text) is only_asks
