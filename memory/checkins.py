"""The memory's side of check-ins (ORCH-8), for the job on the memory thread
(``bot.checkins``); sending is the bot's. Whose DM a destination is comes from the bot's scope
resolution (``whose_dm``), so a check-in sees what the person's own turns there would.

    plan    the opted-in people's live dated goals, todos and events, as their DM sees
            them, become pending rows
    draft   the job that writes one due row (``memory.jobs.checkin.CheckinDraft``)
    record  a sent check-in joins the DM's history as the bot's turn; the row is 'sent'
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo

from .engine import MemoryEngine
from .jobs.checkin import CheckinDraft, DmView, DraftedCheckin, record_sent
from .storage.checkins import FOLLOWED_KINDS, Checkin, Destination, QuietHours
from .storage.memories import RecallFilters

PLAN_LIMIT = 200  # dated facts looked at per person and run, newest first
WhoseDm = Callable[[Destination], DmView]


class Checkins:
    def __init__(self, engine: MemoryEngine) -> None:
        self.engine, self.store = engine, engine.checkins

    def plan(self, whose_dm: WhoseDm, zone_of: Callable[[str], tzinfo]) -> int:
        """Pending rows for each opted-in person's dated goals, todos and events that their DM
        may see."""
        added = 0
        for person_id, where in self.store.people():
            dm = whose_dm(where)
            if dm.person_id != person_id:
                # the account is someone else's now (linked since): their own /checkins decides
                continue
            if not self.engine.people.remembered(person_id):
                continue  # SEC-5: /privacy off: nothing new is written about them, check-ins too
            found = self.engine.memory_rows.listing(
                dm.ctx.memory_partitions(),
                RecallFilters(kinds=FOLLOWED_KINDS, scope_ids=(person_id,)),
                limit=PLAN_LIMIT,
            )
            added += self.store.plan(person_id, found, zone_of(person_id))
        return added

    def draft(
        self,
        checkin: Checkin,
        where: Destination,
        whose_dm: WhoseDm,
        bot_name: str,
        zone: tzinfo,
        per_week: int,
        quiet: QuietHours | None,
    ) -> CheckinDraft:
        """The job that writes ``checkin`` for ``where``, held by quiet hours and the weekly
        limit."""
        return CheckinDraft(
            self.engine, self.store, checkin, where, whose_dm, bot_name, zone, per_week, quiet
        )

    def record(self, draft: DraftedCheckin, text: str, bot_name: str) -> None:
        """The sent check-in in the DM's history as the bot's turn, the row 'sent': one
        transaction."""
        record_sent(self.engine, self.store, draft, text, bot_name)
