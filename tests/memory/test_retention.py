"""Retention (SEC-7, issue 33): raw messages past the window go once extracted and summarised, through the forget
path, down to the bytes; memories stay and are recalled as before; a place the bot left is purged after the grace
period and not before (the clock decides; nothing sleeps), and not at all if the bot comes back."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import count, dm_ctx, guild_ctx, say

from memory.clock import DAY
from memory.engine import MemoryEngine
from memory.models import FactKind, NewMemory, Provenance, Scope, Visibility
from memory.upkeep.forgetting import forget_memory
from memory.upkeep.retention import MIN_DAYS, Departures, expire_messages

DAYS = 100
WINDOW = 90


def word(day: int) -> str:
    return f"zibberwock{day:03d}x"


def in_files(engine: MemoryEngine, needle: str) -> int:
    path = Path(engine.db.path)
    files = [path, path.with_name(path.name + "-wal")]
    return sum(f.read_bytes().lower().count(needle.lower().encode()) for f in files if f.exists())


def learned(engine: MemoryEngine, content: str, source: str) -> str:
    new = NewMemory(
        content=content,
        subject="Alice",
        scope=Scope.USER,
        scope_id="alice",
        visibility=Visibility.PRIVATE,
        kind=FactKind.PROFILE,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=(source,)),
    )
    return engine.memories.add(new).memory.id


@pytest.fixture
def hundred_days(engine, clock) -> dict[int, str]:
    """Alice's DM and a server chat, two turns a day for 100 days, each day's turns naming that day's word; the
    first day's turn taught a memory. Returns the stored id of each day's DM turn."""
    ids = {}
    for day in range(DAYS):
        ids[day] = say(
            engine, f"today I saw a {word(day)} in the garden", author="alice", dm_person="alice"
        )
        say(engine, f"the server heard of {word(day)} too", author="bob", guild="g1")
        clock.advance(DAY)
    return ids


def test_the_job_keeps_only_the_window_and_nothing_of_the_expired_messages_in_the_files(
    engine, clock, hundred_days
):
    tea = learned(engine, "Alice grows Darjeeling tea in her greenhouse", hundred_days[0])
    recent = learned(engine, "Alice keeps bees on her roof", hundred_days[95])
    ctx = dm_ctx("alice")
    before = [h.item.id for h in engine.recall.recall(ctx, "what does Alice grow", reinforce=False)]

    done = expire_messages(engine, WINDOW)

    assert done.messages == 2 * (DAYS - WINDOW)  # days 0..9, both chats
    oldest = engine.db.scalar("SELECT MIN(created_at) FROM messages")
    assert oldest >= clock.now() - WINDOW * DAY
    for day in range(DAYS - WINDOW):
        assert in_files(engine, word(day)) == 0, day  # rows, FTS, context of later turns, WAL
    assert in_files(engine, word(DAYS - 1)) > 0  # the window is kept
    assert count(engine, "message_fts") == count(engine, "messages") == 2 * WINDOW
    assert count(engine, "message_vec") == 2 * WINDOW
    # memories intact, recalled as before; the one whose source expired says so, and can still be forgotten
    assert engine.memory_rows.get(tea).content == "Alice grows Darjeeling tea in her greenhouse"
    assert engine.memory_rows.get(tea).provenance.expired_at == clock.now()
    assert engine.memory_rows.get(recent).provenance.expired_at is None
    assert [
        h.item.id for h in engine.recall.recall(ctx, "what does Alice grow", reinforce=False)
    ] == before
    assert forget_memory(engine, tea).memories == [tea]
    assert count(engine, "memories", "id = ?", (tea,)) == 0


def test_a_message_still_waiting_for_extraction_or_reflection_is_kept_past_the_window(
    engine, clock, hundred_days
):
    engine.buffer.push("discord:dm-alice", dm_ctx("alice"), "buffered", message_id=hundred_days[1])
    state = engine.channels
    state.touch("discord:g1-general", guild_ctx("g1", "bob"))
    # never reflected
    engine.db.execute(
        "UPDATE channel_state SET session_started_at = ?", (clock.now() - DAYS * DAY - 1,)
    )

    expire_messages(engine, WINDOW)

    assert count(engine, "messages", "id = ?", (hundred_days[1],)) == 1  # not yet extracted
    # the server's session was never summarised
    assert count(engine, "messages", "guild_id = 'g1'") == DAYS
    assert count(engine, "messages", "guild_id IS NULL") == WINDOW + 1


def test_running_again_finds_nothing_and_a_window_shorter_than_the_daily_look_back_is_refused(
    engine, hundred_days
):
    assert expire_messages(engine, WINDOW).messages > 0
    assert expire_messages(engine, WINDOW).messages == 0
    with pytest.raises(ValueError, match="at least"):
        expire_messages(engine, MIN_DAYS - 1)


def test_the_audit_excerpts_of_expired_days_go_and_their_facts_stay(engine, clock, hundred_days):
    old = engine.reflections.start(
        "daily",
        "old day",
        f"Alice: today I saw a {word(3)}",
        channel_key="discord:dm-alice",
        people=("alice",),
    )
    engine.reflections.finish(old, facts=["Alice gardens"])
    # run on day 3
    engine.db.execute(
        "UPDATE reflections SET started_at = ? WHERE id = ?", (clock.now() - 97 * DAY, old)
    )
    expire_messages(engine, WINDOW)
    row = engine.db.one("SELECT input_excerpt, facts FROM reflections WHERE id = ?", (old,))
    assert row["input_excerpt"] == "" and "Alice gardens" in row["facts"]
    assert in_files(engine, word(3)) == 0


# -- a place the bot left -----------------------------------------------------------------------------------
G7 = "discord:g7"  # the key the pipeline files the place's rows under (``place_key``)


@pytest.fixture
def server(engine) -> None:
    say(engine, "the g7 server secret is plumbago", author="bob", guild=G7)
    engine.memories.add(
        NewMemory(
            content="The g7 server meets on Thursdays",
            subject="meetings",
            scope=Scope.GUILD,
            scope_id=G7,
        )
    )


def kept_of_g7(engine: MemoryEngine) -> int:
    return count(engine, "messages", "guild_id = ?", (G7,)) + count(
        engine, "memories", "scope_id = ?", (G7,)
    )


def test_a_server_that_removed_the_bot_is_purged_after_the_grace_period_and_not_before(
    engine, clock, server, caplog
):
    departures = Departures(engine, grace_days=30)
    departures.left("discord", "g7")  # as the adapter tells it: the platform's own id
    clock.advance(30 * DAY - 1)
    assert departures.purge_due() == [] and kept_of_g7(engine) == 2
    clock.advance(1)
    with caplog.at_level(logging.INFO, logger="memory.upkeep.retention"):
        [counts] = departures.purge_due()
    assert counts["memories"] == 1 and counts["messages"] == 1 and counts["rows"] >= 2
    assert kept_of_g7(engine) == 0
    assert in_files(engine, "plumbago") == 0 and in_files(engine, "Thursdays") == 0
    assert [r.getMessage() for r in caplog.records if "purged" in r.getMessage()] == [
        f"retention: discord place {G7} purged 30 days after the bot was removed "
        f"({counts['rows']} rows: 1 memories, 1 messages)"
    ]
    audit = [e for e in engine.audit.recent() if e.action == "guild.purge"]
    assert len(audit) == 1 and audit[0].target == G7 and audit[0].who == "retention"
    assert audit[0].detail["memories"] == 1 and audit[0].detail["messages"] == 1
    assert audit[0].detail["rows"] == counts["rows"]
    assert departures.get(G7) is None and departures.purge_due() == []


def test_a_departure_recorded_under_the_platform_s_own_id_is_still_purged(engine, clock, server):
    """Departures written before they were keyed hold "g7": read as "discord:g7", its rows go."""
    engine.db.execute(
        "INSERT INTO place_departures (guild_id, platform, left_at, purge_at) VALUES (?, ?, ?, ?)",
        ("g7", "discord", clock.now(), clock.now() + 30 * DAY),
    )
    departures = Departures(engine, grace_days=30)
    assert departures.left("discord", "g7").left_at == clock.now()  # told again: one place
    clock.advance(30 * DAY)
    [counts] = departures.purge_due()
    assert counts["memories"] == 1 and counts["messages"] == 1 and kept_of_g7(engine) == 0
    assert count(engine, "place_departures") == 0 and in_files(engine, "plumbago") == 0


def test_an_old_departure_is_cancelled_when_the_bot_is_added_back(engine, clock, server):
    engine.db.execute(
        "INSERT INTO place_departures (guild_id, platform, left_at, purge_at) VALUES (?, ?, ?, ?)",
        ("g7", "discord", clock.now(), clock.now() + 30 * DAY),
    )
    departures = Departures(engine, grace_days=30)
    assert departures.returned("discord", "g7") is True
    clock.advance(60 * DAY)
    assert departures.purge_due() == [] and kept_of_g7(engine) == 2


def test_a_purge_that_finds_nothing_says_so(engine, clock, server, caplog):
    """A place where nothing was kept (or rows filed under another key): a warning and rows 0 in
    the audit, never a purge that looks like one."""
    departures = Departures(engine, grace_days=30)
    departures.left("telegram", "-100")
    clock.advance(30 * DAY)
    with caplog.at_level(logging.INFO, logger="memory.upkeep.retention"):
        [counts] = departures.purge_due()
    assert counts["rows"] == 0 and kept_of_g7(engine) == 2
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [
        "retention: telegram place telegram:-100: nothing of it was found to purge 30 days after "
        "the bot was removed"
    ]
    [audit] = [e for e in engine.audit.recent() if e.action == "guild.purge"]
    assert audit.target == "telegram:-100" and audit.detail["rows"] == 0


def test_a_server_that_adds_the_bot_back_within_the_grace_period_is_not_purged(
    engine, clock, server
):
    departures = Departures(engine, grace_days=30)
    departures.left("discord", "g7")
    clock.advance(10 * DAY)
    assert departures.returned("discord", "g7") is True
    clock.advance(60 * DAY)
    assert departures.purge_due() == [] and kept_of_g7(engine) == 2


def test_a_removal_told_twice_keeps_the_first_date(engine, clock, server):
    departures = Departures(engine, grace_days=30)
    first = departures.left("telegram", "-100")
    clock.advance(5 * DAY)
    assert departures.left("telegram", "-100") == first


def test_expiry_and_the_purge_after_leaving_on_both_engines(any_engine, clock):
    """The same rules on SQLite and PostgreSQL (SCALE-1): the window kept, memories noted, a place purged once."""
    engine = any_engine
    first = say(engine, f"today I saw a {word(0)}", author="alice", dm_person="alice")
    tea = learned(engine, "Alice grows Darjeeling tea in her greenhouse", first)
    say(engine, "the g8 server met", author="bob", guild="discord:g8")
    clock.advance(DAYS * DAY)
    say(engine, "a fresh turn", author="alice", dm_person="alice")
    assert expire_messages(engine, WINDOW).messages == 2
    assert (
        count(engine, "messages") == 1
        and engine.memory_rows.get(tea).provenance.expired_at == clock.now()
    )
    say(engine, "the g8 server meets", author="bob", guild="discord:g8")
    departures = Departures(engine, grace_days=30)
    departures.left("discord", "g8")
    clock.advance(30 * DAY)
    [counts] = departures.purge_due()
    assert counts["messages"] == 1 and departures.purge_due() == []


def test_the_forget_audit_reads_every_surface_on_both_engines(any_engine, tmp_path):
    """`companion audit forget` on SQLite and PostgreSQL: the store's own surfaces are 0 after a real forget, and on
    PostgreSQL the data directory is read when this user may (its WAL keeps deleted rows until reused:
    docs/postgresql.md), or reported unreadable."""
    from memory.upkeep.forgetting import forget_everything
    from memory.upkeep.leftovers import Folders, Sought, audit

    engine = any_engine
    first = say(engine, "my kayak is called Zanzibarro", author="alice", dm_person="alice")
    learned(engine, "Alice's kayak is called Zanzibarro", first)
    target, folders = Sought(("Zanzibarro",), ("alice",)), Folders(tmp_path / "journals")
    before = {f.surface: f.remaining for f in audit(engine, target, folders)}
    assert before["tables"] and before["fts"]
    forget_everything(engine, ["alice"])
    after = {f.surface: f.remaining for f in audit(engine, target, folders)}
    assert after["tables"] == after["fts"] == after["vectors"] == 0
    if engine.db.engine == "postgresql":
        assert "data directory" in after
    else:
        assert after["db file"] == after["wal"] == 0


def test_a_forgotten_number_is_not_found_inside_a_platform_id(engine, tmp_path):
    """A bib number 4417 forgotten: a message whose 19-digit platform id holds "4417" is no
    leftover (the audit reported one, a third of the group trust suite's runs), while the
    number in words still is, in the tables, the store's file and a file beside it."""
    from memory.storage.messages import NewMessage
    from memory.upkeep.leftover_files import bytes_in
    from memory.upkeep.leftovers import Folders, Sought, audit

    engine.messages.add_many(
        [
            NewMessage(
                platform="discord", channel_id="9109", author_id="bob", author_name="Bob",
                role="user", content="see you at the race",
                platform_message_id="1579514417530273846",
                guild_id="7001",
            )
        ]
    )  # fmt: skip
    engine.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    target, folders = Sought(("4417",)), Folders(tmp_path / "journals")
    assert {f.surface: f.remaining for f in audit(engine, target, folders)}["tables"] == 0
    say(engine, "my bib number is 4417", author="bob", dm_person="bob")
    assert {f.surface: f.remaining for f in audit(engine, target, folders)}["tables"] == 1
    assert bytes_in(b"id 1579514417530273846, bib 4417.", [b"4417"]) == 1
    assert bytes_in(b"bib4417x and 4417", [b"4417"]) == 2  # letters may touch it


def test_a_run_in_small_steps_deletes_what_one_run_would(engine, hundred_days):
    """The bot expires a batch per call on the memory thread (replies get their turn between calls)."""
    total, calls = 0, 0
    while (done := expire_messages(engine, WINDOW, batch=3, most=3).messages) >= 3:
        total, calls = total + done, calls + 1
    total += done
    assert total == 2 * (DAYS - WINDOW) and calls >= 6
    assert count(engine, "messages") == 2 * WINDOW
