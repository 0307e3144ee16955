"""EVAL-2: ``companion eval answers`` through ``bot.cli.main`` against the fake OpenAI-compatible
server.

A tiny LoCoMo-format conversation of our own (two sessions, four questions, one of them adversarial)
is told to the bot; the scripted model extracts its facts when asked and answers a question from
what its prompt holds, so the memory's answers, the no-memory baseline's and the whole
conversation's differ as they should."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from measure.answers import Options, chosen
from measure.scoring import abstains, multi_f1, normalise_answer, score_answer, token_f1, verdict
from tests.fakes import FakeOpenAI

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ava",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ava", "dia_id": "D1:1", "text": "I adopted a grey cat called Pepper."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! I started pottery classes."},
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Ava", "dia_id": "D2:1", "text": "I ran the Leeds half marathon."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "Well done! My bowl came out blue."},
        ],
    },
    "qa": [
        {"question": "What is Ava's cat called?", "answer": "Pepper", "evidence": ["D1:1"],
         "category": 4},
        {"question": "What classes did Ben start?", "answer": "pottery classes",
         "evidence": ["D1:2"], "category": 1},
        {"question": "Which race did Ava run?", "answer": "the Leeds half marathon",
         "evidence": ["D2:1"], "category": 2},
        {"question": "What is Ben's cat called?", "adversarial_answer": "Pepper",
         "evidence": ["D1:1"], "category": 5},
    ],
}  # fmt: skip
# What the model keeps of each line, in the third person.
FACTS = {
    "I adopted a grey cat called Pepper.": "Ava adopted a grey cat called Pepper.",
    "Lovely! I started pottery classes.": "Ben started pottery classes.",
    "I ran the Leeds half marathon.": "Ava ran the Leeds half marathon.",
}
# The model's answer to each question when its prompt holds what it needs, keyed by a word that must
# be there.
ANSWERS = {
    "What is Ava's cat called?": ("Pepper", "Her cat is called Pepper."),
    "What classes did Ben start?": ("pottery", "Pottery classes"),
    "Which race did Ava run?": ("Leeds", "The Leeds half marathon"),
}
DONT_KNOW = "I don't know; that was never mentioned."
EXTRACT = "Extract durable memories"
WHOLE = "Below is a conversation between"
JUDGE = "Label a generated answer"


def model(body: dict[str, Any]) -> Any:
    """Extraction files each line's fact; the judge says CORRECT to a right answer; a question is
    answered from what the request holds (system prompt, history), "I don't know" when it holds
    nothing that answers it."""
    messages = body["messages"]
    last = str(messages[-1].get("content"))
    if EXTRACT in last:
        lines = re.findall(r'^#(\d+) \[(P\d+)\] [^"]*"[^"]*": (".*")$', last, re.MULTILINE)
        return json.dumps(
            [
                {"type": "episodic", "kind": "event", "speaker": tag, "lines": [int(n)],
                 "subject": "life", "content": FACTS[json.loads(text)], "importance": 6}
                for n, tag, text in lines
                if json.loads(text) in FACTS
            ]
        )  # fmt: skip
    if JUDGE in last:
        return "Same thing.\nCORRECT" if "Pepper" in last.split("Generated answer:")[1] else "WRONG"
    question = re.sub(r'^"[^"]*": ', "", last.split("\n\n(")[0])  # a group's line names its speaker
    if question in ANSWERS:
        word, answer = ANSWERS[question]
        held = "\n".join(str(m.get("content")) for m in messages[:-1])
        return answer if word in held else DONT_KNOW
    if question == "What is Ben's cat called?":
        return DONT_KNOW
    return "[]"  # any other background job: nothing to keep


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture
async def srv():
    async with FakeOpenAI() as server:
        server.default = model
        yield server


@pytest.fixture
def companion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)  # no stray .env is read
    for name in [n for n in os.environ if n.startswith("COMPANION_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("COMPANION_LLM_MAX_RETRIES", "0")

    async def run(srv: FakeOpenAI | None, *argv: str) -> tuple[int, str, str]:
        url = srv.base_url if srv is not None else "http://127.0.0.1:9/v1"
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", url)
        capsys.readouterr()
        line = ["--db", str(tmp_path / "store.db"), "--embeddings", "none", *argv]
        code = await asyncio.to_thread(main, line)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def rows(out: str, method: str) -> dict[str, dict[str, Any]]:
    return {r["question"]: r for r in json.loads(out)["answers"] if r["method"] == method}


# -- the scoring, against values worked out by hand
# ---------------------------------------------------------
def test_the_normaliser_drops_case_punctuation_articles_and_and() -> None:
    assert normalise_answer("The Cat, and a DOG!  An owl's nest.") == "cat dog owls nest"
    assert normalise_answer("“Pepper” — the cat…") == "pepper cat"


def test_token_f1_is_the_harmonic_mean_of_the_overlap() -> None:
    assert token_f1("Her cat is called Pepper.", "Pepper") == pytest.approx(
        2 * (1 / 5) / (1 / 5 + 1)
    )  # 1/3
    # 2 shared of 4 said (p = 1/2) and of 2 wanted (r = 1): 2/3
    assert token_f1("pottery classes on Tuesdays", "pottery classes") == pytest.approx(2 / 3)
    assert token_f1("The Leeds half marathon", "the Leeds half marathon") == 1.0
    assert token_f1("a cat", "the dog") == 0.0 and token_f1("", "dog") == 0.0
    assert token_f1("cat cat", "cat") == pytest.approx(
        2 * 0.5 * 1 / 1.5
    )  # a token counts as often as in both


def test_each_category_is_scored_as_locomo_scores_it() -> None:
    # category 1: each gold part against its best answer part, averaged: (1 + 1 + 0) / 3
    assert multi_f1("pottery, painting", "painting, pottery, running") == pytest.approx(2 / 3)
    assert score_answer("pottery, painting", "painting, pottery, running", 1) == pytest.approx(
        2 / 3
    )
    assert (
        score_answer("Sweden", "Sweden; she moved from there", 3) == 1.0
    )  # category 3: the gold up to its ";"
    assert (
        score_answer("Pepper", "Pepper", 5) == 0.0 and score_answer(DONT_KNOW, "Pepper", 5) == 1.0
    )


def test_an_answer_abstains_when_it_says_it_does_not_know() -> None:
    for text in (
        "I don't know.",
        "That wasn't mentioned in the conversation.",
        "No information available",
        "Ben didn’t mention a cat.",
        "I do not have any information about that.",
        "我不知道。",
    ):
        assert abstains(text), text
    for text in ("Pepper", "Ben's cat is called Pepper.", "He knows a lot about cats."):
        assert not abstains(text), text


def test_the_judges_label_is_the_last_one_it_wrote() -> None:
    assert verdict("It names the same cat.\nCORRECT") == "CORRECT"
    assert verdict("It is not correct at all: WRONG") == "WRONG"
    assert verdict('{"label": "wrong"}') == "WRONG" and verdict("I cannot tell.") is None


def test_questions_are_drawn_with_the_seed_from_the_chosen_categories() -> None:
    unanswered = {"question": "Why?", "evidence": [], "category": 3}  # LoCoMo has a few: left out
    samples = [
        {**SAMPLE, "sample_id": f"s{i}", "qa": [*SAMPLE["qa"], unanswered]} for i in range(5)
    ]
    every = chosen(samples, Options())
    assert len(every) == 15 and {q.category for q in every} == {1, 2, 4}
    drawn = chosen(samples, Options(questions=4, seed=7))
    assert drawn == chosen(samples, Options(questions=4, seed=7)) and len(drawn) == 4
    assert drawn == sorted(drawn, key=every.index)  # in file order: a conversation's asked together
    assert chosen(samples, Options(questions=4, seed=8)) != drawn
    trick = chosen(samples, Options(categories=(5,)))
    assert len(trick) == 5 and trick[0].gold == "Pepper"


# -- end to end through the CLI
# -----------------------------------------------------------------------------
async def test_the_answers_come_through_the_reply_path_with_memory_and_baselines(
    srv: FakeOpenAI, companion, tmp_path: Path
) -> None:
    data = write(tmp_path / "tiny.json", [SAMPLE])
    code, out, err = await companion(
        srv, "eval", "answers", str(data), "--categories", "1,2,3,4,5",
        "--baseline", "none", "--baseline", "full", "--judge-model", "judge-model", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert result["questions"] == 4 and result["methods"] == ["memory", "none", "full"]
    assert len(result["answers"]) == 12  # each question, each method: a row of its own
    memory, none, full = rows(out, "memory"), rows(out, "none"), rows(out, "full")
    cat = memory["What is Ava's cat called?"]
    assert (cat["answer"], cat["gold"], cat["f1"]) == (
        "Her cat is called Pepper.",
        "Pepper",
        0.3333,
    )
    assert cat["judge"] == "CORRECT" and memory["Which race did Ava run?"]["f1"] == 1.0
    assert memory["What classes did Ben start?"]["f1"] == 1.0
    trick = memory["What is Ben's cat called?"]
    assert trick["f1"] == 1.0 and trick["baited_answer"] == "Pepper" and trick["judge"] is None
    # no memory: nothing to answer from, but the trick question is still right
    assert [none[q]["answer"] for q in ANSWERS] == [DONT_KNOW] * 3
    assert none["What is Ben's cat called?"]["f1"] == 1.0
    assert full["Which race did Ava run?"]["answer"] == "The Leeds half marathon"
    summary = result["summary"]
    assert summary["memory"]["f1"]["overall"] > 2 * summary["none"]["f1"]["overall"]
    assert summary["memory"]["f1"]["4"] == 0.3333 and summary["none"]["f1"]["5"] == 1.0
    assert summary["memory"]["judge_correct"] == 0.3333 and summary["memory"]["judged"] == 3

    # the question reached the model in the bot's own system prompt, with the tools; its facts
    # extracted before
    asked = [
        b
        for b in srv.chat_requests
        if "What is Ava's cat" in (said := str(b["messages"][-1]["content"])) and JUDGE not in said
    ]
    assert len(asked) == 3 and [bool(b.get("tools")) for b in asked] == [True, True, False]
    assert asked[0]["messages"][-1]["content"].startswith('"Quinn": What is Ava')  # a person's line
    system = asked[0]["messages"][0]["content"]
    assert system.startswith("You are") and "a companion who talks with people on discord" in system
    assert "Pepper" in system and "Pepper" not in asked[1]["messages"][0]["content"]
    assert any(EXTRACT in str(b["messages"][-1]["content"]) for b in srv.chat_requests)
    whole = [b for b in srv.chat_requests if WHOLE in str(b["messages"][0]["content"])]
    assert len(whole) == 4 and not whole[0].get("tools")
    assert "Session 2 (10:00 am on 20 June, 2023):" in whole[0]["messages"][0]["content"]
    assert {
        b["model"] for b in srv.chat_requests if JUDGE in str(b["messages"][-1]["content"])
    } == {"judge-model"}
    assert (
        "[1/1] tiny: 4 turns, 4 questions" in err and "left" in err and "session 2 of 2 told" in err
    )


async def test_raw_files_the_turns_without_asking_for_extraction(
    srv: FakeOpenAI, companion, tmp_path: Path
) -> None:
    data = write(tmp_path / "tiny.json", [SAMPLE])
    code, out, err = await companion(srv, "eval", "answers", str(data), "--raw", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["raw"] and result["memories_stored"] == {"eval-tiny": 4}
    assert not any(EXTRACT in str(b["messages"][-1]["content"]) for b in srv.chat_requests)
    # the turns, as memories, answer the questions
    assert rows(out, "memory")["Which race did Ava run?"]["f1"] == 1.0
    assert [r["category"] for r in result["answers"]] == [4, 1, 2]  # categories 1-4 by default


async def test_a_sample_of_questions_and_the_summary_for_people(
    srv: FakeOpenAI, companion, tmp_path: Path
) -> None:
    other = {**SAMPLE, "sample_id": "other"}
    data = write(tmp_path / "two.json", [SAMPLE, other])
    code, out, _ = await companion(
        srv, "eval", "answers", str(data), "--questions", "2", "--seed", "3", "--raw", "--json",
        "--limit", "1",
    )  # fmt: skip
    picked = [(r["sample_id"], r["question"]) for r in json.loads(out)["answers"]]
    assert code == 0 and len(picked) == 2 and {s for s, _ in picked} == {"tiny"}
    again = await companion(
        srv, "eval", "answers", str(data), "--questions", "2", "--seed", "3", "--raw"
    )
    assert again[0] == 0 and "token F1" in again[1] and "overall" in again[1]
    assert re.search(r"^memory\s+\S+", again[1], re.MULTILINE)


async def test_the_full_baseline_says_when_the_conversation_does_not_fit(
    srv: FakeOpenAI, companion, tmp_path: Path
) -> None:
    data = write(tmp_path / "tiny.json", [SAMPLE])
    code, out, err = await companion(
        srv, "eval", "answers", str(data), "--raw", "--baseline", "full", "--context-tokens", "100",
    )  # fmt: skip
    assert code == 0 and "does not fit a context of 100" in err
    assert not any(WHOLE in str(b["messages"][0]["content"]) for b in srv.chat_requests)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ("[{not json", "is not usable LoCoMo data"),
        ({"qa": []}, "is not usable LoCoMo data"),
        (
            [{**SAMPLE, "conversation": {**SAMPLE["conversation"], "session_1_date_time": "soon"}}],
            "date",
        ),
    ],
)
async def test_bad_input_is_one_error_line(
    companion, tmp_path: Path, content: Any, says: str
) -> None:
    path = tmp_path / "data.json"
    if content is not None:
        write(path, content)
    code, out, err = await companion(None, "eval", "answers", str(path))
    assert code == 2 and out == "" and "Traceback" not in err
    assert (
        len(err.strip().splitlines()) == 1 and says in err and err.startswith("companion: error:")
    )
