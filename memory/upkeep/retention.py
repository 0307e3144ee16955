"""Retention (SEC-7): raw messages are kept only while they are needed, and a place the bot left is purged.

    expire_messages   messages older than the retention window that were extracted and summarised are deleted
                      through the forget path's message delete (``MessageLog.delete_rids``: their FTS rows,
                      vectors, cached vectors, buffered copies, and the context later turns quoted them in), the
                      reflection audits of that time lose their excerpts, and the file is scrubbed. Memories and
                      summaries stay: a memory learned from an expired message keeps its source ids (ids, no
                      words) and gets ``provenance.expired_at``, so forgetting it later still follows them
    Departures        a server or group the bot was removed from (``place_departures``): purged with
                      ``forget_guild`` once the grace period has passed, unless the bot was added back first

"Extracted" means no buffered or parked extraction still reads the message (nor, for a bot reply, the turn it
answers); "summarised" means its chat's session was reflected on (or a later session began). A message that
fails either is kept until it passes: a window never cuts into work still to be done. The daily reflection
looks back ``CATCH_UP_DAYS``, so a window is never shorter than that (``MIN_DAYS``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..clock import DAY
from ..engine import MemoryEngine
from ..models import Provenance
from ..scopes import place_key
from ..storage.departures import Departure
from .daily import CATCH_UP_DAYS
from .forgetting import forget_guild

log = logging.getLogger(__name__)
MIN_DAYS = CATCH_UP_DAYS + 1
BATCH = 2_000  # messages deleted per transaction: a run never holds the write lock for long


@dataclass(frozen=True, slots=True)
class Expired:
    messages: int = 0
    memories_noted: int = 0  # memories whose sources expired (kept, their provenance says so)


def expire_messages(
    engine: MemoryEngine, days: float, *, batch: int = BATCH, most: int | None = None
) -> Expired:
    """Delete what the window no longer keeps (``days`` >= ``MIN_DAYS``), one chat at a time, in batches; then
    scrub the file. ``most``: stop once about that many are deleted (the bot calls again, so replies waiting for
    the memory thread get their turn between calls)."""
    if days < MIN_DAYS:
        raise ValueError(
            f"a retention window is at least {MIN_DAYS} days (the daily reflection reads that far back)"
        )
    cutoff = engine.clock.now() - days * DAY
    deleted = noted = 0
    for platform, channel_id in engine.messages.chats_before(cutoff):
        after = (float("-inf"), 0)
        while found := engine.messages.older_than(platform, channel_id, cutoff, after, batch):
            after = (found[-1]["created_at"], found[-1]["rid"])
            with (
                engine.db.transaction()
            ):  # read and deleted in one transaction: nothing is buffered meanwhile
                done = _expirable(engine, f"{platform}:{channel_id}", found)
                noted += _note_expired(engine, [m["id"] for m in done])
                deleted += engine.messages.delete_rids([m["rid"] for m in done])
            if len(found) < batch or (most is not None and deleted >= most):
                break
        if most is not None and deleted >= most:
            break
    with engine.db.transaction():
        engine.reflections.blank_excerpts(cutoff)
    if deleted:
        engine.db.scrub()
        log.info(
            "retention: %d messages older than %g days deleted; %d memories note their sources expired",
            deleted,
            days,
            noted,
        )
    return Expired(deleted, noted)


def _expirable(
    engine: MemoryEngine, channel_key: str, found: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Those no extraction still reads (buffered or parked, or the turn a bot reply answers) and whose session was
    reflected on (or a later one began)."""
    rids, ids = engine.buffer.still_to_read()
    state = engine.channels.get(channel_key)
    open_since = (
        state.session_started_at
        if state is not None and state.reflected_at is None
        else float("inf")
    )
    return [
        m
        for m in found
        if m["rid"] not in rids
        and m["id"] not in ids
        and m["answers_rid"] not in rids
        and m["created_at"] < open_since
    ]


def _note_expired(engine: MemoryEngine, message_ids: list[str]) -> int:
    """Memories learned from these messages keep living; their provenance records when the sources expired."""
    found = engine.memory_rows.sourced_from(message_ids)
    now = engine.clock.now()
    for rid, prov in found:
        engine.memory_rows.set_provenance(rid, _expired(prov, now))
    return len(found)


def _expired(prov: Provenance, at: float) -> Provenance:
    data = prov.as_dict()
    data["expired_at"] = prov.expired_at or at
    return Provenance.from_dict(data)


# -- a place the bot left ---------------------------------------------------------------------------------
class Departures:
    """The servers and groups the bot was removed from (``engine.departures``), purged after
    ``grace_days``. A place is told as the adapters know it (platform, the platform's id) and kept
    under the key its rows are filed under (``place_key``), so the purge finds what was written."""

    def __init__(self, engine: MemoryEngine, grace_days: float) -> None:
        self.engine, self.rows, self.grace_days = engine, engine.departures, grace_days

    def left(self, platform: str, place_id: str) -> Departure:
        """The bot was removed (kicked, or the place deleted): its purge is due after the grace period. Told twice,
        the first departure's date holds (a re-delivered event does not postpone the purge)."""
        key, now = place_key(platform, place_id), self.engine.clock.now()
        self.rows.add(Departure(key, platform, now, now + self.grace_days * DAY))
        found = self.get(key)
        assert found is not None
        return found

    def returned(self, platform: str, place_id: str) -> bool:
        """The bot was added back before the purge: nothing is purged. True when a purge was pending."""
        return self.rows.remove(place_key(platform, place_id))

    def get(self, key: str) -> Departure | None:
        """The pending departure of the place whose store key is ``key`` ("discord:7001")."""
        return self.rows.get(key)

    def due(self) -> list[Departure]:
        return self.rows.due(self.engine.clock.now())

    def purge(self, departure: Departure) -> dict[str, int]:
        """Everything of the place, as the dashboard's guild purge does it, with one audit row and
        one log line (ids and counts, never words: each table's count, ``rows`` their sum); the
        departure goes with it. A purge that found nothing says so (a warning, ``rows: 0``): a place
        where nothing was kept, or rows filed under another key. Nothing when the bot was added
        back meanwhile."""
        if self.get(departure.guild_id) is None:
            return {}
        counts = forget_guild(self.engine, departure.guild_id)
        counts["rows"] = sum(counts.values())
        with self.engine.db.transaction():
            self.rows.remove(departure.guild_id)
            detail = {"platform": departure.platform, "left_at": departure.left_at, **counts}
            self.engine.audit.record("retention", "guild.purge", departure.guild_id, detail=detail)
        _log_purge(departure, self.grace_days, counts)
        return counts

    def purge_due(self) -> list[dict[str, int]]:
        """Every place whose grace period has passed: what was purged of each (``purge``'s)."""
        return [self.purge(departure) for departure in self.due()]


def _log_purge(departure: Departure, grace_days: float, counts: dict[str, int]) -> None:
    place = f"{departure.platform} place {departure.guild_id}"
    if not counts["rows"]:
        log.warning(
            "retention: %s: nothing of it was found to purge %g days after the bot was removed",
            place,
            grace_days,
        )
        return
    log.info(
        "retention: %s purged %g days after the bot was removed "
        "(%d rows: %d memories, %d messages)",
        place,
        grace_days,
        counts["rows"],
        counts.get("memories", 0),
        counts.get("messages", 0),
    )
