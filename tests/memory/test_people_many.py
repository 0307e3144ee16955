"""A turn's accounts and people's facts read in one statement (SCALE-1: each read is a round trip to a PostgreSQL server), with the
answers ``resolve``/``lookup``/``shares`` give one account at a time. Runs on both engines."""

from __future__ import annotations

import pytest
from conftest import remember

from memory.engine import MemoryEngine
from memory.models import Visibility
from memory.storage.memories import RecallFilters


@pytest.fixture
def engine(any_engine: MemoryEngine) -> MemoryEngine:
    return any_engine


def _identities(engine: MemoryEngine) -> list[tuple[str, str, str]]:
    rows = engine.db.rows(
        "SELECT platform_user_id, person_id, display_name FROM identities ORDER BY platform_user_id"
    )
    return [(r["platform_user_id"], r["person_id"], r["display_name"]) for r in rows]


def test_an_account_listed_twice_in_one_turn_is_recorded_once_with_its_last_name(engine):
    people = engine.people
    found = people.resolve_many("discord", [("7", "Sam"), ("8", "Kim"), ("7", "Sammy")])
    assert found == ["discord:7", "discord:8", "discord:7"]
    assert _identities(engine) == [("7", "discord:7", "Sammy"), ("8", "discord:8", "Kim")]


def test_resolving_many_gives_what_resolving_each_gives_a_linked_account_included(engine):
    people = engine.people
    alice = people.resolve("discord", "1", "alice")
    people.redeem(people.issue_code(alice), "telegram", "2")
    assert people.resolve_many("telegram", [("2", ""), ("3", "bob")]) == [alice, "telegram:3"]
    assert people.lookup_many("telegram", ["2", "3", "4"]) == [alice, "telegram:3", "telegram:4"]


def test_looking_many_up_records_no_account_and_no_name(engine):
    people = engine.people
    people.resolve("discord", "1", "alice")
    before = _identities(engine)
    assert people.lookup_many("discord", ["1", "99"]) == ["discord:1", "discord:99"]
    assert _identities(engine) == before


def test_only_the_people_who_opted_in_share_and_an_off_switch_counts_as_not(engine):
    people = engine.people
    people.set_sharing("discord:1", True)
    people.set_sharing("discord:2", False)
    assert people.sharing(("discord:1", "discord:2", "discord:3")) == {"discord:1"}
    assert people.sharing(()) == set()
    assert all(
        people.shares(p) == (p in {"discord:1"}) for p in ("discord:1", "discord:2", "discord:3")
    )


def test_listing_several_groups_at_once_gives_each_what_listing_it_alone_gives(engine):
    facts = ["bees", "kayaks", "tents", "maps", "owls", "figs", "kites", "lamps"]
    for i, thing in enumerate(facts):  # three people, some facts private, different importances
        owner = ("alice", "bob", "carol")[i % 3]
        vis = Visibility.PRIVATE if i % 4 == 0 else Visibility.PUBLIC
        remember(
            engine,
            f"{owner.title()} collects {thing} number {i}",
            scope_id=owner,
            visibility=vis,
            importance=1.0 + i,
        )
    rows = engine.memory_rows
    parts = {p: tuple(engine.memory_rows.partitions_of(p)) for p in ("alice", "bob", "carol")}
    groups = [
        (parts["alice"], 2),
        (parts["alice"] + parts["bob"], 3),
        (parts["carol"], 0),
        ((), 5),
        (parts["bob"], 9),
    ]
    together = rows.listing_many(groups, RecallFilters(), "important")
    alone = [
        rows.listing(p, RecallFilters(), "important", n, False) if p else [] for p, n in groups
    ]
    assert [[m.id for m in g] for g in together] == [[m.id for m in g] for g in alone]
    assert [len(g) for g in together] == [2, 3, 0, 0, 3]
