"""ORCH-9: the shipped real-model check, run against the scripted fake server behaving as an ideal model.

The ideal model calls its tools as structured calls (memory_store for what the person tells, memory_search then
memory_delete for a forget), answers extraction with the right JSON (each fact cited to the person's line, a
forgotten one left out), never writes a tool call as text; the fake server reports a prefix cache. Scored
perfectly: every must-be-0 figure is 0, every gold fact found, nothing else stored, and the cached share high.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from conftest import HashEmbedder

from bot.cli.modelcheck import table
from bot.composition import build_runtime
from bot.config import load_settings
from bot.modelcheck import AFTER_RESTART, BEFORE_RESTART, GOLD, run_check, words_left
from bot.modelcheck_report import TOOL_TEXT, Report, TurnRecord
from bot.modelcheck_scripts import CHINESE, GERMAN, SCRIPTS, language_of
from bot.types import NO_ANSWER
from tests.fakes import FakeOpenAI, ToolCall

# What the ideal model keeps of each line that tells something durable (the gold facts, and the two forgotten).
KEEP = {
    "I have a grey cat called Biscuit.": "Sam has a grey cat called Biscuit.",
    "I work as a nurse at the children's hospital.": "Sam works as a nurse at the children's hospital.",
    "I live in Leeds, near the river.": "Sam lives in Leeds, near the river.",
    "I much prefer tea to coffee, green tea especially.": "Sam prefers tea to coffee, green tea especially.",
    "My dentist appointment is on 3 December at 9am.": "Sam has a dentist appointment on 3 December at 9am.",
    "Remember that my sister Priya's birthday is on 12 May.": "Sam's sister Priya has her birthday on 12 May.",
    "My race bib number for Sunday is 4417.": "Sam's race bib number for Sunday is 4417.",
    "I'm running the Harrogate half marathon in March.": "Sam is running the Harrogate half marathon in March.",
    "I've started learning the cello on weekends.": "Sam has started learning the cello on weekends.",
}
FORGETS = {
    "Forget my race bib number.": "race bib number",
    "Forget that I'm running the half marathon.": "half marathon",
}
# The German chat as a model keeps it: in German, names as written, but the job filed in English
# (LANG-3 misses it).
KEEP_DE = {
    "Ich habe einen grauen Kater namens Krümel.": "Jonas hat einen grauen Kater namens Krümel.",
    "Ich arbeite als Krankenpfleger im Kinderkrankenhaus.": (
        "Jonas works as a nurse at the children's hospital."
    ),
    "Ich wohne in München, nicht weit vom Englischen Garten.": (
        "Jonas wohnt in München, nahe dem Englischen Garten."
    ),
    "Meine Schwester Lena studiert Medizin in Hamburg.": (
        "Jonas' Schwester Lena studiert Medizin in Hamburg."
    ),
    "Ich trinke viel lieber Tee als Kaffee, am liebsten grünen Tee.": (
        "Jonas trinkt lieber Tee als Kaffee, am liebsten grünen Tee."
    ),
    "Mein Zahnarzttermin ist am 3. Dezember um 9 Uhr.": (
        "Jonas hat am 3. Dezember um 9 Uhr einen Zahnarzttermin."
    ),
    "Merk dir, dass ich allergisch gegen Erdnüsse bin.": "Jonas ist allergisch gegen Erdnüsse.",
    "Ich habe angefangen, am Wochenende Geige zu lernen.": (
        "Jonas lernt seit Kurzem am Wochenende Geige."
    ),
}
# The Chinese chat: all in Chinese, but the allergy kept in the person's own first person
# (ORCH-15 misses it).
KEEP_ZH = {
    "我养了一只橘猫，叫豆豆。": "林晓养了一只叫豆豆的橘猫。",
    "我在儿童医院当护士。": "林晓在儿童医院当护士。",
    "我住在成都，离锦江不远。": "林晓住在成都，离锦江不远。",
    "我哥哥林涛在深圳当程序员。": "林晓的哥哥林涛在深圳当程序员。",
    "比起咖啡，我更喜欢喝茶，尤其是绿茶。": "林晓喜欢喝茶胜过咖啡，尤其是绿茶。",
    "我12月3日上午9点要去看牙医。": "林晓12月3日上午9点要去看牙医。",
    "记住，我对花生过敏。": "我对花生过敏。",
    "我最近开始在周末学古筝。": "林晓最近开始在周末学古筝。",
}


def speaking(keep: dict[str, str]) -> Callable[[dict[str, Any]], Any]:
    """A model that stores each line of ``keep`` as its fact (by tool and in extraction) and
    forgets when asked."""

    def model(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        last = messages[-1]
        if "Extract durable memories" in str(last.get("content")):
            return _extraction(str(last["content"]), keep)
        if not body.get("tools"):
            return "[]"
        said = next(str(m["content"]) for m in reversed(messages) if m["role"] == "user").split(
            "\n\n("
        )[0]
        if last["role"] == "tool":
            return _after_tools(said, messages)
        if "already forgotten" in str(
            last["content"]
        ):  # a forget in words: the pipeline did it (ORCH-9)
            return "Done: I forgot that."
        if said in FORGETS:
            return ToolCall("memory_search", {"query": FORGETS[said]})
        if said in keep:
            return ToolCall(
                "memory_store",
                {"type": "semantic", "kind": "profile", "subject": "Sam", "content": keep[said]},
            )
        return (
            "I remember you, Sam: a nurse in Leeds with a cat called Biscuit."
            if "remember" in said
            else NICE[next(_SAID) % len(NICE)]
        )

    return model


ideal = speaking(KEEP)


def _after_tools(said: str, messages: list[dict[str, Any]]) -> Any:
    results = json.loads(messages[-1]["content"])
    if "results" in results:  # the search of a forget: delete each strong match
        strong = [r["id"] for r in results["results"] if r.get("match") == "strong"]
        return [
            ToolCall("memory_delete", {"id": i}) for i in strong
        ] or "I had nothing stored about that."
    if said in FORGETS:
        return "Done: I forgot that."
    # a model worth the name does not say the same thing every time
    return ACKS[next(_SAID) % len(ACKS)]


ACKS = ("Got it, I'll remember that.", "Noted, thanks for telling me.", "Good to know!")
NICE = ("Nice, Sam!", "Lovely, Sam!", "Oh, how nice!")
_SAID = itertools.count()  # each reply of the fake differs from the one before


def _extraction(prompt: str, keep: dict[str, str]) -> str:
    """The person's durable lines as facts citing them; a line asked to be forgotten in the transcript is left out."""
    lines = re.findall(r'^#(\d+) \[(P\d+)\] [^"]*"[^"]*": (".*")$', prompt, re.MULTILINE)
    said = [(int(n), tag, json.loads(text)) for n, tag, text in lines]
    forgotten = {FORGETS[t].split()[-1] for _, _, t in said if t in FORGETS}  # "number", "marathon"
    items = [
        {
            "type": "semantic",
            "kind": "profile",
            "speaker": tag,
            "lines": [n],
            "subject": "Sam",
            "content": keep[text],
            "importance": 7,
        }
        for n, tag, text in said
        if text in keep and not any(word in keep[text] for word in forgotten)
    ]
    return json.dumps(items)


def _build(settings, clock):
    return build_runtime(settings, clock=clock, embedder=HashEmbedder(), backoff_s=0.0)


@pytest.fixture
async def srv():
    async with FakeOpenAI() as server:
        server.default = ideal
        yield server


async def test_against_an_ideal_model_the_check_scores_perfectly(srv, tmp_path):
    settings = load_settings(
        llm_base_url=srv.base_url, llm_api_key="test-key", embeddings="none", llm_timeout_s=5.0
    )
    seen: list[TurnRecord] = []
    report = await run_check(
        settings,
        tmp_path,
        build=lambda s, clock: build_runtime(
            s, clock=clock, embedder=HashEmbedder(), backoff_s=0.0
        ),
        on_turn=seen.append,
    )
    assert [t.said for t in report.turns] == [
        *BEFORE_RESTART,
        *AFTER_RESTART,
    ] and seen == report.turns
    assert report.failures == []
    assert (
        report.json_shown == report.json_stored == 0
        and report.wrong_self_facts == []
        and report.words_left == []
    )
    # a store per fact; the forgets the pipeline does itself
    assert report.tool_calls == report.tool_calls_honoured >= 9
    assert (
        report.gold_found == [g.label for g in GOLD]
        and report.recall == 1.0
        and report.precision == 1.0
    )
    assert report.cached_from_turn_2 is not None and report.cached_from_turn_2 >= 0.7
    # a message that only asks to forget is answered without the model
    assert [t.said for t in report.turns if not t.usage] == list(FORGETS)
    assert all(t.cached_share is not None for t in report.turns if t.usage)
    assert "4417" not in json.dumps(report.facts) and "Harrogate" not in json.dumps(report.facts)
    assert "FAILED" not in table(report)


def searched(said: str) -> str:
    """A call to a tool nobody offered, written as text inside a sentence, searching the person's
    own words (the same reply to new words every turn would be a parrot, asked again:
    ``bot.model.reply_checks``; a reply that is only such a call is asked again too)."""
    query = re.sub(r"\b[Mm]y\s+", "", said.split("\n")[0])  # (saying "my cat" is the person's)
    call = json.dumps({"name": "web_search", "arguments": {"query": query}})
    return f"Searching: {call}"


async def test_the_check_counts_what_a_model_does_wrong(srv, tmp_path):
    """A model that writes its tool call as text, and an extraction that files the person's cat as the bot's own:
    the check reports them; the forgets asked in words are done all the same."""
    # a call to a tool nobody offered, written as bare JSON in a sentence: not a call the bot may
    # run, so the person sees it
    as_text = searched

    def careless(body: dict[str, Any]) -> Any:
        last = str(body["messages"][-1].get("content"))
        if "Extract durable memories" in last:
            cat = re.search(r"^#(\d+) \[bot\]", last, re.MULTILINE)
            line = int(cat.group(1)) if cat else 1
            item = {
                "type": "semantic",
                "kind": "profile",
                "speaker": "bot",
                "lines": [line],
                "subject": "me",
                "content": "My cat is called Biscuit.",
            }
            return json.dumps([item])
        return as_text(last) if body.get("tools") else "[]"

    srv.default = careless
    settings = load_settings(
        llm_base_url=srv.base_url, llm_api_key="test-key", embeddings="none", llm_timeout_s=5.0
    )
    report = await run_check(
        settings,
        tmp_path,
        build=lambda s, clock: build_runtime(
            s, clock=clock, embedder=HashEmbedder(), backoff_s=0.0
        ),
    )
    # every turn the model answered (the two asks to forget need none; the call quoting "Hi! I'm
    # Sam" takes the person's name, so it is asked again and its "[]" shown)
    answered = [t for t in report.turns if t.said not in FORGETS and "I'm Sam" not in t.said]
    assert report.json_shown == len(answered) and report.json_stored > 0
    # the model never deletes, but a forget in words is done before it is asked
    assert report.words_left == []
    assert report.failures and "FAILED" in table(report)


def test_json_shown_recognises_the_textual_tool_call_forms():
    for text in (
        '{"name": "memory_store", "arguments": {"content": "x"}}',
        '```json\n{"name": "memory_search"}\n```',
        "<tool_call>\n{...}\n</tool_call>",
        '<|python_tag|>{"name": "memory_store", "parameters": {}}',
        '[TOOL_CALLS] [{"name": "memory_store"}]',
        'memory_search(query="cat")',
    ):
        assert TOOL_TEXT.search(text), text
    for text in ("Your cat Biscuit sounds lovely!", "I saved that to memory.", "Name: Sam"):
        assert not TOOL_TEXT.search(text), text


def test_a_forgotten_word_is_found_in_any_file_of_the_folder_at_the_byte_level(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "journal.jsonl").write_bytes(b'{"x": "HARROGATE"}')
    (tmp_path / "companion.db-wal").write_bytes(b"\x00\x014417\x00")
    assert words_left(tmp_path, ("4417", "harrogate")) == [
        "4417 in companion.db-wal",
        "harrogate in memory/journal.jsonl",
    ]


def test_digits_inside_an_id_are_not_the_forgotten_word_but_beside_one_they_are(tmp_path):
    uuid, digest = b"1b7e743f-08f2-4417-9af1-2e84205a4dfe", b"ab" * 10 + b"4417" + b"cd" * 10
    (tmp_path / "ids.db").write_bytes(b"\x00" + uuid + b"\x01" + digest + b"\x00")
    assert words_left(tmp_path, ("4417",)) == []
    (tmp_path / "prose.db").write_bytes(uuid + b"bib 4417." + digest)
    assert words_left(tmp_path, ("4417",)) == ["4417 in prose.db"]


def test_the_report_of_nothing_is_not_a_perfect_score():
    report = Report("m", "http://x")
    assert report.precision is None and report.recall == 0.0 and report.cached_from_turn_2 is None


def test_a_self_fact_holding_the_persons_words_is_counted_and_the_bots_own_taste_is_not():
    report = Report(
        "m", "http://x", self_facts=["My cat is called Biscuit.", "My favourite season is autumn."]
    )
    assert report.wrong_self_facts == ["My cat is called Biscuit."]
    assert report.failures == ["1 of the person's facts filed as the bot's own"]


async def test_the_command_reports_as_json_and_never_opens_the_configured_store(
    cli, srv, monkeypatch, tmp_path
):
    monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
    monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
    result = await asyncio.to_thread(cli, "modelcheck", "--json", "--keep", str(tmp_path / "kept"))
    assert result.code == 0, result.err
    data = result.json()
    assert (
        data["failures"] == []
        and data["recall"] == 1.0
        and data["json_shown"] == 0
        and data["turns"] == 20
    )
    assert data["language"] == "en" and data["facts_in_language"] == data["facts_stored"] == 7
    assert not (tmp_path / "store.db").exists()  # the configured store was never made
    assert (
        tmp_path / "kept" / "companion.db"
    ).exists()  # --keep: the check's own store stays for a look
    srv.default = lambda body: (
        searched(body["messages"][-1]["content"]) if body.get("tools") else "[]"
    )
    result = await asyncio.to_thread(cli, "modelcheck")
    assert result.code == 1 and "FAILED: tool-call text shown in 17 turns, stored in" in result.out


def test_the_command_refuses_a_folder_that_holds_something(cli, tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "companion.db").write_bytes(b"mine")
    result = cli("modelcheck", "--keep", str(tmp_path / "used"), "--timeout", "5")
    assert result.code == 2 and "is not empty: the check needs a new store" in result.err
    assert (tmp_path / "used" / "companion.db").read_bytes() == b"mine"


# the model stores "我对花生过敏。" with its tool (the person's words, kept as said) and extraction
# files it too, told about her (issue 45: Chinese in the third person)
TOLD_ZH = ["林晓对花生过敏。"]


@pytest.mark.parametrize(
    ("script", "keep", "not_in_language", "first_person", "missed", "told"),
    [
        (GERMAN, KEEP_DE, ["Jonas works as a nurse at the children's hospital."], [], ["job"], []),
        (CHINESE, KEEP_ZH, [], ["我对花生过敏。"], [], TOLD_ZH),
    ],
    ids=["de", "zh"],
)
async def test_a_german_or_chinese_chat_is_scored_by_the_language_its_facts_are_filed_in(
    srv, tmp_path, script, keep, not_in_language, first_person, missed, told
):
    """LANG-3: the scripted chat in the person's language; a fact filed in English is counted out
    and misses its gold fact (key words in the chat's language), a fact in the person's own first
    person is counted."""
    srv.default = speaking(keep)
    settings = load_settings(
        llm_base_url=srv.base_url, llm_api_key="test-key", embeddings="none", llm_timeout_s=5.0
    )
    report = await run_check(settings, tmp_path, build=_build, script=script)
    assert [t.said for t in report.turns] == [*script.before, *script.after]
    assert sorted(report.facts) == sorted([*keep.values(), *told]) and report.failures == []
    assert report.in_language == [f for f in report.facts if f not in not_in_language]
    assert report.first_person == first_person
    assert report.gold_found == [g.label for g in script.gold if g.label not in missed]
    shown = "".join(t.shown for t in report.turns)
    assert all(line in shown for line in ("Nice, Sam!", "Got it, I'll remember that."))


def test_a_facts_language_is_chinese_by_its_han_letters_and_german_by_its_function_words():
    for text, language in (
        ("林晓养了一只叫豆豆的橘猫。", "zh"),
        ("Sam 喜欢喝绿茶", "zh"),  # 5 Han letters of 8
        ("林晓 likes 绿茶", "en"),  # 4 of 9: not most
        ("Lin Xiao has a cat called 豆豆.", "en"),
        ("Jonas hat einen grauen Kater namens Krümel.", "de"),
        ("Jonas' Schwester Lena studiert Medizin in Hamburg.", "de"),
        ("Jonas has a grey cat called Krümel.", "en"),
        ("Jonas lives in München.", "en"),
        ("Sam: München", "en"),  # no function word of either: not German
        ("Sam wears a hat", "en"),  # "hat" is German, "a" English: a tie is not German
        ("", "en"),
    ):
        assert language_of(text) == language, text


async def test_the_command_runs_the_german_and_the_chinese_chat_and_prints_the_share(
    cli, srv, monkeypatch
):
    monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
    monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
    srv.default = speaking(KEEP_DE)
    result = await asyncio.to_thread(cli, "modelcheck", "--language", "de")
    assert result.code == 0, result.err
    assert re.search(r"^facts in the conversation's language +7 of 8 \(88%\)$", result.out, re.M)
    assert re.search(r"^gold facts found \(recall\) +7 of 8 \(88%\)$", result.out, re.M)
    assert (
        "facts not in the conversation's language (de):\n"
        "  Jonas works as a nurse at the children's hospital." in result.out
    )
    srv.default = speaking(KEEP_ZH)
    result = await asyncio.to_thread(cli, "modelcheck", "--language", "zh", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["language"] == "zh" and data["turns"] == 17
    assert data["facts_in_language"] == data["facts_stored"] == 9
    assert data["facts_in_first_person"] == ["我对花生过敏。"] and data["recall"] == 1.0
    result = cli("modelcheck", "--language", "fr")
    assert result.code == 2 and "invalid choice: 'fr'" in result.err


def test_a_first_person_fact_is_counted_in_whichever_language_it_is_filed():
    report = Report(
        "m",
        "http://x",
        script=GERMAN,
        facts=["I have a pet named Krümel", "Ich bin Jonas", "我对花生过敏。", "Jonas mag Tee"],
    )
    assert report.first_person == ["I have a pet named Krümel", "Ich bin Jonas", "我对花生过敏。"]
    assert report.in_language == ["Ich bin Jonas", "Jonas mag Tee"]


def test_a_gold_key_word_is_found_as_a_word_a_possessive_a_word_start_or_inside_chinese():
    from bot.modelcheck_scripts import ENGLISH

    (remember,) = [g for g in ENGLISH.gold if g.label == "remember that"]
    assert remember.matches("Remember that my sister Priya's birthday is on 12 May.")
    (plan,) = [g for g in GERMAN.gold if g.label == "dated plan"]
    assert plan.matches("Jonas hat am 3. Dezember einen Zahnarzttermin.")
    assert not plan.matches("Jonas has a dentist appointment on 3 December.")
    (sibling,) = [g for g in CHINESE.gold if g.label == "sibling"]
    assert sibling.matches("林晓的哥哥林涛在深圳当程序员。")
    assert not sibling.matches("林晓 has a brother named Lin Tao.")
    assert not [g for g in ENGLISH.gold if g.matches("Sam drinks a lot of tears")]


# The second English conversation (issue 45): what a model keeps of it, the locker code among it
# (the forget asked in words must take it), and right answers to its recall questions.
KEEP_2 = {
    "I just moved from Bristol to Glasgow last week.": "Maya moved from Bristol to Glasgow.",
    "My new flat is on Byres Road, right above a bakery.": "Maya's flat is on Byres Road.",
    "My grandfather Tomas turns 90 next month.": "Maya's grandfather Tomas turns 90 next month.",
    "I teach chemistry at a secondary school.": "Maya teaches chemistry at a secondary school.",
    "My locker code at the gym is 5821.": "Maya's gym locker code is 5821.",
    "I'm allergic to shellfish, so no prawns for me.": "Maya is allergic to shellfish.",
}
ANSWERS_2 = {
    "Where do I live now?": "You live in Glasgow now.",
    "What's my grandfather's name?": "Your grandfather is Tomas.",
    "What subject do I teach?": "You teach chemistry.",
    "What am I allergic to?": "Shellfish, so no prawns.",
    "How old is my grandfather turning?": "He turns 90 next month.",
}


def answering(keep: dict[str, str], answers: dict[str, str]) -> Callable[[dict[str, Any]], Any]:
    """``speaking(keep)``, answering each recall question with ``answers``."""
    inner = speaking(keep)

    def model(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        said = str(last["content"]).split("\n\n(")[0] if last["role"] == "user" else ""
        return answers[said] if body.get("tools") and said in answers else inner(body)

    return model


@pytest.mark.parametrize(
    ("answers", "invent", "right"),
    [(ANSWERS_2, False, 5), ({q: "I don't know." for q in ANSWERS_2}, True, 0)],
)
async def test_the_second_conversation_scores_answers_the_reminder_and_the_forget(
    srv, tmp_path, answers, invent, right
):
    keep = KEEP_2 | (
        {"I just moved from Bristol to Glasgow last week.": "Maya owns a yacht called Seagull."}
        if invent
        else {}
    )
    srv.default = answering(keep, answers)
    settings = load_settings(
        llm_base_url=srv.base_url, llm_api_key="test-key", embeddings="none", llm_timeout_s=5.0
    )
    report = await run_check(settings, tmp_path, build=_build, script=SCRIPTS["en2"])
    data = report.as_dict()
    assert data["answers_right"] == right and len(data["answers"]) == 5
    # asked in words, with no tool call: the pipeline set it; asked to delete: no byte of it left
    assert data["reminders_stored"] == 1 and report.words_left == []
    assert not any("5821" in f for f in report.facts)
    assert data["invented_facts"] == (["Maya owns a yacht called Seagull."] if invent else [])
    assert ("recall answers right" in table(report)) and report.failures == []


def test_a_reply_of_the_prompts_words_or_the_last_reply_again_is_counted():
    """Issue 45: the real 0.5B answered every turn with a sentence of
    ``prompts/tool_results.md`` ("I saved, updated, and forgot something." before it was
    reworded), and the 1.5B twice in a row with "Jestem w stanie pomóc. Jak mogę Ci pomóc?"; the
    bot's own "no answer" and apology are not the model's."""
    said = [
        "Hi",
        "I have a cat",
        "I live in Leeds",
        "Thanks",
        "Bye",
        "Again?",
        "Hmm",
        "a",
        "b",
        "c",
    ]
    shown = [
        "(bot is thinking…)\nbot> Hello! Nice to meet you.\n",
        "bot> Jestem w stanie pomóc. Jak mogę Ci pomóc?\n",
        "bot> Jestem w stanie pomóc. Jak mogę Ci pomóc?\n",
        "bot> Tool results, from the system, not from the person, who does not see them.\n",
        f"bot> {NO_ANSWER}\n",
        f"bot> {NO_ANSWER}\n",
        "bot> Done.\n\n(Done: what you asked me to forget is forgotten.)\n",
        "bot> Saving\n",
        "bot> Saving\n",
        "bot> Saving\n",
    ]
    report = Report(
        "m", "http://x", turns=[TurnRecord(s, t) for s, t in zip(said, shown, strict=True)]
    )
    assert report.parroted == [
        "Jestem w stanie pomóc. Jak mogę Ci pomóc?",
        "Tool results, from the system, not from the person, who does not see them.",
        "Saving",
    ]
    assert any("3 replies parroted" in f for f in report.failures)
