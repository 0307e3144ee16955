"""Check-ins (ORCH-8): the bot follows up, in a person's DM, on their dated goals, todos and events.

The job the scheduler runs every few minutes (``CheckinJob.run``), for people who said ``/checkins on``:

    plan    their live dated goals, todos and events, as their DM sees them, become pending rows (once each)
    pick    a due row, for a person outside their quiet hours (their zone) and under the weekly limit
    write   the chat model writes the message from the memory and the DM's last turns  (memory.jobs.checkin)
    claim   pending -> sending, committed          <- the line: past it, a row is never sent again
    send    through the platform's delivery (an adapter's ``send_direct``)
    record  the message joins the DM's history as the bot's turn, so a reply is an ordinary turn; the row is 'sent'

Why the line falls there (``memory.storage.checkins``): after a crash the bot cannot know whether a claimed message went
out, and a second "how did it go?" is worse than a missed one; a row the crash left pending is sent after the
restart. A model that fails or answers garbage costs only time: nothing is claimed or sent, and the row is tried
again later, a bounded number of times. A person whose platform has no delivery in this process (the console's
person while ``companion run`` runs) stays pending until it does, or until the row expires.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import time, tzinfo

from memory import Checkin, Checkins, Destination, DmView, QuietHours

from .assembly import Turn
from .jobs import JobRunner
from .schedule import CHECKINS
from .types import IncomingMessage

log = logging.getLogger(__name__)
# (DM channel id, text): one message on one platform
Deliver = Callable[[str, str], Awaitable[None]]
# (person id, (platform, platform user id)) -> may write one
Allowed = Callable[[str, tuple[str, str]], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class CheckinOptions:
    per_week: int = 2
    quiet: QuietHours | None = QuietHours(time(22), time(9))


@dataclass(frozen=True, slots=True)
class CheckinReport:
    planned: int = 0
    sent: int = 0
    postponed: int = 0  # the model failed: tried again later
    waiting: int = (
        0  # due but held: quiet hours, the weekly limit, no delivery for the platform here
    )
    failed: int = 0  # claimed, and the platform refused it (never tried again)


class CheckinJob:
    def __init__(
        self,
        jobs: JobRunner,
        resolve: Callable[[IncomingMessage], Turn],
        bot_name: Callable[[], str],
        zone_of: Callable[[str], tzinfo],
        options: CheckinOptions = CheckinOptions(),
        *,
        allowed: Allowed | None = None,
    ) -> None:
        self.jobs, self.engine, self.runner, self.resolve = jobs, jobs.engine, jobs.runner, resolve
        self.bot_name, self.zone_of, self.options = bot_name, zone_of, options
        self.store, self.follow = jobs.engine.checkins, Checkins(jobs.engine)
        self.deliveries: dict[
            str, Deliver
        ] = {}  # platform -> delivery, filled by whoever starts the adapters
        self.allowed = allowed  # ORCH-14: whether a person's day's spend still allows a check-in (None: always)

    async def run(self) -> CheckinReport:
        """Plan, then follow up on every due row in turn; one row's failure never stops the others."""
        planned = await self.runner.run(self.plan)
        outcomes: Counter[str] = Counter()
        for checkin in await self.runner.run(self.store.due, self.engine.clock.now()):
            try:
                outcomes[await self.follow_up(checkin)] += 1
            except Exception:  # a background-job edge: a row not yet claimed is postponed (bounded), a claimed one stays
                log.exception("check-in %d failed", checkin.id)
                state = await self.runner.run(self.store.postpone, checkin.id)
                outcomes["postponed" if state == "pending" else state] += 1
        if planned or outcomes["sent"] or outcomes["postponed"]:
            log.info("check-ins: %d planned, %s", planned, dict(outcomes))
        return CheckinReport(
            planned,
            outcomes["sent"],
            outcomes["postponed"],
            outcomes["waiting"],
            outcomes["failed"],
        )

    def plan(self) -> int:
        """Pending rows for each opted-in person's dated goals, todos and events that their DM may see."""
        return self.follow.plan(self._dm, self.zone_of)

    async def follow_up(self, checkin: Checkin) -> str:
        """One due row: 'sent', 'waiting' (held for now), 'postponed'/'failed'."""
        where = checkin.destination
        deliver = self.deliveries.get(where.platform) if where else None
        if where is None or deliver is None:
            return "waiting"
        if self.allowed is not None and not await self.allowed(
            checkin.person_id, (where.platform, where.platform_user_id)
        ):
            return "waiting"  # ORCH-14: a daily budget nearly spent; tried again on a later run (a new day)
        bot_name, zone, options = self.bot_name(), self.zone_of(checkin.person_id), self.options
        job = self.follow.draft(
            checkin, where, self._dm, bot_name, zone, options.per_week, options.quiet
        )
        claimed = await self.jobs.run(job, claim=CHECKINS.key(row=checkin.id))
        if claimed is None or claimed.draft is None:
            return claimed.state if claimed is not None else "waiting"
        try:
            await deliver(where.channel_id, claimed.text)
        except (
            Exception
        ):  # the platform refused it or the line broke: it may have arrived, so it is never retried
            log.exception("check-in %d could not be sent; it is not tried again", checkin.id)
            await self.runner.run(self.store.finish, checkin.id, "failed")
            return "failed"
        await self.runner.run(self.follow.record, claimed.draft, claimed.text, bot_name)
        return "sent"

    def _dm(self, where: Destination) -> DmView:
        turn = self.resolve(_incoming(where))
        return DmView(turn.person_id, turn.ctx, turn.names[turn.person_id])


def _incoming(where: Destination) -> IncomingMessage:
    """The person's DM as a message from them (no text): the same scope resolution as their own turns."""
    return IncomingMessage(
        platform=where.platform,
        channel_id=where.channel_id,
        author_id=where.platform_user_id,
        author_name="",
        text="",
    )
