"""The dashboard's and ``/usage``'s services on the face: ``Spending`` (the usage ledger's reads
over UTC days ending today, ORCH-14) and ``Tuning`` (the recall knobs, RET-3: a change is whole or
nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from memory import Charge, MemoryEngine, Spend, Spending
from memory.settings import Tuning


def at(clock, iso: str) -> None:
    clock.t = datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp()


def test_a_span_is_the_utc_days_ending_today_across_a_year(engine: MemoryEngine, clock):
    spending = Spending(engine)
    at(clock, "2027-01-02T23:59:59")
    assert spending.span(1) == ("2027-01-02", "2027-01-02")
    assert spending.span(3) == ("2026-12-31", "2027-01-02")
    at(clock, "2027-01-03T00:00:00")  # a new UTC day starts a new span
    assert spending.span(1) == ("2027-01-03", "2027-01-03")


def test_the_reads_are_the_ledgers_own_counts(engine: MemoryEngine, clock):
    at(clock, "2026-11-27T12:00:00")
    spending, day = Spending(engine), "2026-11-27"
    engine.ledger.add(
        day, Charge("reply", "discord:ann", "discord", "discord:9"), "m", Spend(1, 0, 90, 0, 10)
    )
    engine.ledger.add("2026-11-26", Charge("reply", "discord:ann"), "m", Spend(1, 0, 5, 0, 5))
    first, last = spending.span(2)
    assert spending.person_spent(day, "discord:ann").tokens == 100
    assert spending.place_spent(day, "discord:9").tokens == 100
    assert spending.totals(first, last).tokens == 110
    assert spending.totals(*spending.span(1), "discord:9").tokens == 100
    assert [(x.label, x.spend.tokens) for x in spending.person("discord:ann", first, last)] == [
        ("reply", 110)
    ]
    assert [x.label for x in spending.people(first, last)] == ["discord:ann"]
    with pytest.raises(ValueError):
        spending.by("person_id; DROP TABLE usage_ledger", first, last)


def test_a_bad_second_corpus_changes_neither(engine: MemoryEngine):
    tuning = Tuning(engine)
    before = tuning.shown()
    with pytest.raises(ValidationError):
        tuning.change({"top_k": 3}, {"fusion": "magic"})
    assert tuning.shown() == before
    with pytest.raises(ValidationError):
        tuning.change({"no_such_knob": 1}, {})
    assert tuning.shown() == before


def test_a_change_is_merged_and_shown_with_its_help(engine: MemoryEngine):
    tuning = Tuning(engine)
    weights = tuning.shown().memories["weights"]
    shown = tuning.change({"top_k": 3, "weights": {"recency": 0.1}}, {"top_k": 7})
    assert shown.memories["top_k"] == 3 and shown.messages["top_k"] == 7
    assert shown.memories["weights"] == {**weights, "recency": 0.1}  # the rest of the dict kept
    assert shown == Tuning(engine).shown() and "weights.semantic" in shown.help
