"""Counts as a person writes them (issue 45: "1 calls" in /usage): singular for one, else plural."""

from __future__ import annotations

import pytest

from bot.counts import counted


@pytest.mark.parametrize(
    "n, noun, written",
    [
        (1, "call", "1 call"),
        (0, "call", "0 calls"),
        (2, "call", "2 calls"),
        (1_024, "token", "1,024 tokens"),
        (1, "memory", "1 memory"),
        (3, "memory", "3 memories"),
        (1, "person", "1 person"),
        (2, "person", "2 people"),
        (2, "day", "2 days"),
        (2, "box", "2 boxes"),
        (2, "session summary", "2 session summaries"),
    ],
)
def test_a_count_takes_the_singular_only_for_one(n: int, noun: str, written: str) -> None:
    assert counted(n, noun) == written
