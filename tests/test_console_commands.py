"""Small things the console's person meets (issue 22): /remember files a short subject, and /export writes the whole
document to a private file and says where, instead of a truncated dump that sends you to "the operator"."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from bot.commands import short_subject
from tests.pipeline_support import dm


async def test_remember_files_a_short_subject_not_the_whole_sentence(rt) -> None:
    answer = await rt.orchestrator.command(
        "remember", "my cat is called Biscuit", dm("console", "local-user", "/remember ...")
    )
    assert answer.startswith("Got it")
    row = rt.engine.db.one("SELECT subject, content FROM memories")
    assert (row["subject"], row["content"]) == ("cat", "my cat is called Biscuit")


@pytest.mark.parametrize(
    ("fact", "subject"),
    [
        ("I'm vegetarian", "Alice"),
        ("my favourite colour is teal", "favourite colour"),
        ("Biscuit loves tuna", "Biscuit"),
        ("pizza", "pizza"),
    ],
)
def test_a_remembered_fact_is_about_a_word_or_three_or_about_the_speaker(
    fact: str, subject: str
) -> None:
    assert short_subject(fact, "Alice") == subject


async def test_console_export_writes_a_private_file_beside_the_store_and_says_where(
    rt, tmp_path: Path
) -> None:
    long_facts = [
        f"my {place} trip went along the coast " + f"and {place} was lovely " * 40
        for place in ("Porto", "Oslo", "Lima", "Kyoto", "Perth")
    ]
    for fact in [
        "my cat is called Biscuit",
        *long_facts,
    ]:  # more than a chat message could carry whole
        await rt.orchestrator.command(
            "remember", fact, dm("console", "local-user", "/remember ...")
        )
    answer = await rt.orchestrator.command("export", "", dm("console", "local-user", "/export"))
    [written] = (tmp_path / "exports").glob("*.json")
    assert str(written) in answer and "operator" not in answer and "{" not in answer
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    data = json.loads(written.read_text())
    assert sorted(m["content"] for m in data["memories"]) == sorted(
        ["my cat is called Biscuit", *(f.strip() for f in long_facts)]
    )
    again = await rt.orchestrator.command("export", "", dm("console", "local-user", "/export"))
    # a second export never overwrites the first
    assert len(list((tmp_path / "exports").glob("*.json"))) == 2 and again != answer


async def test_export_on_a_chat_platform_still_answers_in_the_dm(rt, tmp_path: Path) -> None:
    await rt.orchestrator.command(
        "remember", "my cat is called Biscuit", dm("telegram", "55", "/remember ...")
    )
    answer = await rt.orchestrator.command("export", "", dm("telegram", "55", "/export"))
    assert "Biscuit" in answer and not (tmp_path / "exports").exists()


async def test_the_operators_forget_of_the_person_takes_their_export_files_too(
    rt, tmp_path: Path
) -> None:
    """The dashboard and ``companion memory forget-person`` forget through ``memory.forgetting``,
    which deletes the /export files beside the store as /forget everything does."""
    said = dm("console", "local-user", "/remember ...")
    await rt.orchestrator.command("remember", "my cat is called Biscuit", said)
    await rt.orchestrator.command("export", "", dm("console", "local-user", "/export"))
    [written] = (tmp_path / "exports").glob("*.json")
    person = await rt.runner.run(rt.engine.people.lookup, "console", "local-user")
    counts = await rt.orchestrator.memory.forgetting.person([person])
    assert counts["export files"] == 1 and not written.exists()
    assert list((tmp_path / "exports").glob("*")) == []
