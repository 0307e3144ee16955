"""split_message: natural boundaries, hard limits, nothing lost but the whitespace at a cut, code fences."""

from __future__ import annotations

import random
import re

import pytest

from bot.adapters.text import split_message


def squeeze(text: str) -> str:
    return re.sub(r"\s", "", text)


def test_short_text_is_one_message_and_blank_text_none():
    assert split_message("  hello\n", 2000) == ["hello"]
    assert split_message(" \n\t ", 2000) == []
    assert split_message("x" * 2000, 2000) == ["x" * 2000]


def test_paragraph_breaks_win():
    first, second = "a" * 1200, "b " * 500
    assert split_message(f"{first}\n\n{second}", 2000) == [first, second.strip()]


def test_a_line_break_beats_a_sentence_end():
    text = "Sentence one. " * 80 + "\n" + "next line " * 150  # the line break sits at 1120
    chunks = split_message(text, 2000)
    assert chunks[0] == ("Sentence one. " * 80).strip() and chunks[1].startswith("next line")


def test_sentence_ends_beat_word_breaks():
    text = ("This is a sentence with several words in it. " * 60).strip()
    chunks = split_message(text, 2000)
    assert all(len(c) <= 2000 for c in chunks)
    assert all(c.endswith(".") for c in chunks)
    assert " ".join(chunks) == text


def test_closing_quotes_stay_with_their_sentence():
    text = ('He said "go home." ' * 150).strip()
    chunks = split_message(text, 2000)
    assert all(c.endswith('home."') for c in chunks) and " ".join(chunks) == text


def test_words_are_not_cut_when_there_are_spaces():
    text = " ".join(f"word{i}" for i in range(1500))
    chunks = split_message(text, 2000)
    assert all(len(c) <= 2000 for c in chunks) and " ".join(chunks) == text


def test_a_long_unbroken_string_is_cut_hard():
    assert [len(c) for c in split_message("x" * 5000, 2000)] == [2000, 2000, 1000]


def test_an_early_paragraph_break_does_not_leave_a_stub():
    text = "Title\n\n" + "word " * 600
    chunks = split_message(text, 2000)
    assert len(chunks[0]) > 1000 and chunks[0].startswith("Title\n\nword")


@pytest.mark.parametrize("limit", [2000, 4096])
def test_nothing_but_whitespace_is_lost(limit):
    text = "\n\n".join(
        f"Paragraph {p}. " + "Some words here, and more! Really? Yes. " * (7 * p + 3)
        for p in range(30)
    )
    chunks = split_message(text, limit)
    assert len(chunks) > 2 and all(len(c) <= limit for c in chunks)
    assert squeeze("".join(chunks)) == squeeze(text)


def test_a_code_block_cut_in_two_is_closed_and_reopened():
    code = "\n".join(f"    value_{i} = compute({i})" for i in range(150))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it with python."
    chunks = split_message(text, 2000)
    assert len(chunks) >= 3 and all(len(c) <= 2000 for c in chunks)
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0  # every message renders on its own
    for later in chunks[1:]:
        if "value_" in later:
            assert later.startswith("```python\n    value_")  # language kept, indentation kept
    assert chunks[0].endswith("\n```") and chunks[-1].endswith("Run it with python.")
    rejoined = "\n".join(c.removesuffix("\n```").removeprefix("```python\n") for c in chunks)
    assert squeeze(rejoined) == squeeze(text)


def test_text_after_a_closed_code_block_is_not_fenced():
    text = "```\nshort()\n```\n\n" + "plain words " * 300
    chunks = split_message(text, 2000)
    assert chunks[0].startswith("```\nshort()\n```") and not chunks[1].startswith("```")


def test_a_limit_too_small_to_be_useful_is_refused():
    with pytest.raises(ValueError):
        split_message("hello", 31)


@pytest.mark.parametrize("limit", [32, 200, 2000])
def test_random_texts_keep_every_visible_character_within_the_limit(limit):
    """Seeded fuzz: long words, emoji, blank runs, code fences with and without a language."""
    pieces = [
        "word",
        "x" * 300,
        ".",
        "!",
        "\n",
        "\n\n",
        "  ",
        "\t",
        "é",
        "🙂",
        "Hi.",
        "\n```\n",
        "\n```js\n",
        "    indented",
        "\n```python\n",
    ]
    rnd = random.Random(limit)
    for _ in range(150):
        text = "".join(
            rnd.choice(pieces) + rnd.choice([" ", "", "\n"]) for _ in range(rnd.randint(1, 600))
        )
        chunks = split_message(text, limit)
        assert all(len(c.strip()) > 0 and len(c) <= limit for c in chunks)
        assert without_fence_lines("\n".join(chunks)) == without_fence_lines(text)


def without_fence_lines(text: str) -> str:
    """The visible characters, ignoring the fence lines a split may add."""
    return squeeze(
        "".join(line for line in text.split("\n") if not line.lstrip().startswith("```"))
    )
