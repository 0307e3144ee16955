"""The usage ledger (ORCH-14, ``memory.storage.ledger``) on both engines: calls add up per person and per place, the
polite line is counted once a day, and forgetting a person takes their id out of every row (and, on SQLite, out of
the store's bytes) while their place keeps its totals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import HashEmbedder

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.storage.ledger import Charge, Spend, day_of
from memory.upkeep.forgetting import forget_guild, forget_person
from memory.upkeep.transfer import export_person

DAY = "2026-11-27"
GUILD = "discord:900"
ALICE = "discord:zyqxolotl-alice"  # distinctive: no other text in the store shares it


@pytest.fixture
def engine(any_engine: MemoryEngine) -> MemoryEngine:
    return any_engine


def call(prompt: int, completion: int, cached: int = 0) -> Spend:
    return Spend(calls=1, prompt_tokens=prompt, cached_tokens=cached, completion_tokens=completion)


def test_each_call_adds_to_its_person_and_to_its_place_and_the_totals_are_the_sums(engine):
    ledger = engine.ledger
    ledger.add(DAY, Charge("reply", ALICE, "discord", GUILD), "chat-m", call(100, 20, 40))
    ledger.add(DAY, Charge("reply", ALICE, "discord", GUILD), "chat-m", call(150, 30))
    # a group batch: no one's
    ledger.add(DAY, Charge("extraction", "", "discord", GUILD), "small-m", call(500, 50))
    # Bob's DM
    ledger.add(DAY, Charge("reply", "discord:bob", "discord", ""), "chat-m", call(70, 7))
    assert ledger.person_spent(DAY, ALICE) == Spend(2, 0, 250, 40, 50)
    assert ledger.place_spent(DAY, GUILD).tokens == 250 + 50 + 550
    # every call once, from the places' own rows
    assert ledger.totals(DAY, DAY) == Spend(4, 0, 820, 40, 107)
    assert {line.label: line.spend.tokens for line in ledger.by("kind", DAY, DAY)} == {
        "reply": 377,
        "extraction": 550,
    }
    assert [(line.label, line.spend.tokens) for line in ledger.people(DAY, DAY, GUILD)] == [
        (ALICE, 300)
    ]
    assert ledger.person_spent("2026-11-28", ALICE) == Spend()  # a new day starts from nothing


def test_an_answer_without_figures_counts_as_an_unreported_call():
    assert Spend(calls=1, unreported=1).tokens == 0
    assert Spend(1, 0, 10, 0, 2) + Spend(calls=1, unreported=1) == Spend(2, 1, 10, 0, 2)


def test_the_polite_line_is_counted_once_a_day_per_person_and_place(engine):
    ledger = engine.ledger
    assert ledger.first_notice(DAY, ALICE)
    assert not ledger.first_notice(DAY, ALICE)
    assert ledger.first_notice(DAY, ALICE, GUILD)  # the server's budget is another notice
    assert ledger.first_notice("2026-11-28", ALICE)
    assert ledger.person_spent(DAY, ALICE) == Spend()  # a notice costs no tokens and no calls
    assert ledger.totals(DAY, DAY) == Spend()


def test_a_ledger_is_grouped_only_by_its_own_columns(engine):
    with pytest.raises(ValueError):
        engine.ledger.by("person_id; DROP TABLE usage_ledger", DAY, DAY)


def test_forgetting_a_person_removes_their_rows_and_their_place_keeps_its_totals(engine):
    ledger = engine.ledger
    ledger.add(DAY, Charge("reply", ALICE, "discord", GUILD), "chat-m", call(100, 20))
    ledger.add(DAY, Charge("reply", "discord:bob", "discord", GUILD), "chat-m", call(10, 2))
    ledger.first_notice(DAY, ALICE)
    assert [r["kind"] for r in export_person(engine, [ALICE])["usage_ledger"]] == [
        "reply",
        "notice",
    ]
    forget_person(engine, [ALICE])
    assert engine.db.scalar("SELECT COUNT(*) FROM usage_ledger WHERE person_id = ?", (ALICE,)) == 0
    assert ledger.place_spent(DAY, GUILD).tokens == 132  # the server's total does not shrink
    assert ledger.person_spent(DAY, "discord:bob").tokens == 12
    assert ledger.first_notice(DAY, ALICE)  # nothing of theirs is left, not even the line said


def test_a_guild_purge_takes_its_usage_rows(engine):
    ledger = engine.ledger
    ledger.add(DAY, Charge("reply", ALICE, "discord", GUILD), "chat-m", call(100, 20))
    ledger.add(DAY, Charge("reply", ALICE, "discord", ""), "chat-m", call(5, 1))  # Alice's DM stays
    forget_guild(engine, GUILD)
    assert ledger.place_spent(DAY, GUILD) == Spend()
    assert ledger.person_spent(DAY, ALICE).tokens == 6


def test_the_ledger_day_is_the_utc_date():
    assert (
        day_of(0.0) == "1970-01-01"
        and day_of(86_399.0) == "1970-01-01"
        and day_of(86_400.0) == "1970-01-02"
    )


def test_forgetting_a_person_leaves_no_byte_of_their_id_in_the_store_files(tmp_path: Path):
    path = tmp_path / "store.db"
    with MemoryEngine(path, HashEmbedder(), FakeClock()) as engine:
        ledger = engine.ledger
        for n in range(300):  # others' rows around theirs, so freed pages are reused, not dropped
            ledger.add(DAY, Charge("reply", f"discord:{n}", "discord", GUILD), "chat-m", call(n, 1))
        for kind in ("reply", "extraction", "checkin"):
            ledger.add(DAY, Charge(kind, ALICE, "discord", GUILD), "chat-m", call(100, 20))
        ledger.first_notice(DAY, ALICE)
        engine.db.execute("ANALYZE")  # index samples (sqlite_stat4) hold keys too
        assert sum(_occurrences(path, ALICE).values()) > 0
        forget_person(engine, [ALICE])
    assert _occurrences(path, ALICE) == dict.fromkeys(_occurrences(path, ALICE), 0)
    assert sum(_occurrences(path, "discord:299").values()) > 0  # the others' rows are there


def _occurrences(path: Path, word: str) -> dict[str, int]:
    pattern = re.compile(re.escape(word.lower()).encode())
    return {
        p.name: len(pattern.findall(p.read_bytes().lower()))
        for p in path.parent.iterdir()
        if p.name.startswith(path.name)
    }
