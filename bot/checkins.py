"""Check-ins (ORCH-8): the bot follows up, in a person's DM, on their dated goals, todos and events.

The job the scheduler runs every few minutes (``CheckinJob.run``), for people who said ``/checkins on``:

    plan    their live dated goals, todos and events, as their DM sees them, become pending rows (once each)
    pick    a due row, for a person outside their quiet hours (their zone) and under the weekly limit
    write   the chat model writes the message from the memory and the DM's last turns
    claim   pending -> sending, committed          <- the line: past it, a row is never sent again
    send    through the platform's delivery (an adapter's ``send_direct``)
    record  the message joins the DM's history as the bot's turn, so a reply is an ordinary turn; the row is 'sent'

Why the line falls there (``memory.checkins``): after a crash the bot cannot know whether a claimed message went
out, and a second "how did it go?" is worse than a missed one; a row the crash left pending is sent after the
restart. A model that fails or answers garbage costs only time: nothing is claimed or sent, and the row is tried
again later, a bounded number of times. A person whose platform has no delivery in this process (the console's
person while ``companion run`` runs) stays pending until it does, or until the row expires.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, time, tzinfo
from typing import Any

import prompts
from memory.checkins import FOLLOWED_KINDS, Checkin, CheckinStore, Destination, QuietHours, named_day
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.messages import NewMessage
from memory.models import Memory, StoredMessage
from memory.store import RecallFilters

from .assembly import Turn
from .llm import ChatClient, LLMError
from .types import IncomingMessage

log = logging.getLogger(__name__)
Deliver = Callable[[str, str], Awaitable[None]]  # (DM channel id, text): one message on one platform
HISTORY_TURNS, HISTORY_CHARS = 12, 300
MAX_CHARS = 600  # a check-in is a line or three; anything longer is the model rambling or echoing its prompt
PLAN_LIMIT = 200  # dated facts looked at per person and run, newest first


class BadCheckin(Exception):
    """The model's answer is not a message to send (empty, too long, JSON, a refusal to speak)."""


@dataclass(frozen=True, slots=True)
class CheckinOptions:
    per_week: int = 2
    quiet: QuietHours | None = QuietHours(time(22), time(9))


@dataclass(frozen=True, slots=True)
class CheckinReport:
    planned: int = 0
    sent: int = 0
    postponed: int = 0  # the model failed: tried again later
    waiting: int = 0  # due but held: quiet hours, the weekly limit, no delivery for the platform here
    failed: int = 0  # claimed, and the platform refused it (never tried again)


@dataclass(frozen=True, slots=True)
class Draft:
    """What the model is shown to write one check-in."""

    checkin: Checkin
    where: Destination
    memory: Memory
    name: str
    history: list[StoredMessage]
    zone: tzinfo


class CheckinJob:
    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        llm: ChatClient,
        resolve: Callable[[IncomingMessage], Turn],
        bot_name: Callable[[], str],
        zone_of: Callable[[str], tzinfo],
        options: CheckinOptions = CheckinOptions(),
    ) -> None:
        self.engine, self.runner, self.llm, self.resolve = engine, runner, llm, resolve
        self.bot_name, self.zone_of, self.options = bot_name, zone_of, options
        self.store = CheckinStore(engine)
        self.deliveries: dict[str, Deliver] = {}  # platform -> delivery, filled by whoever starts the adapters

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
        return CheckinReport(planned, outcomes["sent"], outcomes["postponed"], outcomes["waiting"], outcomes["failed"])

    def plan(self) -> int:
        """Pending rows for each opted-in person's dated goals, todos and events that their DM may see."""
        added = 0
        for person_id, where in self.store.people():
            turn = self.resolve(_incoming(where))
            if turn.person_id != person_id:
                continue  # the account now belongs to someone else (linked since): their own /checkins decides
            found = self.engine.memories.list_memories(
                turn.ctx.memory_partitions(), RecallFilters(kinds=FOLLOWED_KINDS, scope_ids=(person_id,)), limit=PLAN_LIMIT
            )
            added += self.store.plan(person_id, found, self.zone_of(person_id))
        return added

    async def follow_up(self, checkin: Checkin) -> str:
        """One due row: 'sent', 'waiting' (held for now), 'postponed'/'failed'."""
        where = checkin.destination
        deliver = self.deliveries.get(where.platform) if where else None
        if where is None or deliver is None:
            return "waiting"
        draft = await self.runner.run(self._draft, checkin, where)
        if draft is None:
            return "waiting"
        try:
            text = message_from(await self.llm.complete([{"role": "user", "content": self._prompt(draft)}], temperature=0.7))
        except (LLMError, BadCheckin) as exc:
            state = await self.runner.run(self.store.postpone, checkin.id)
            log.warning("check-in %d not written (%s: %s); %s", checkin.id, type(exc).__name__, exc, state)
            return "postponed" if state == "pending" else state
        if not await self.runner.run(self.store.claim, checkin.id):
            return "waiting"  # no longer pending (opted out or forgotten while the model wrote)
        try:
            await deliver(where.channel_id, text)
        except Exception:  # the platform refused it or the line broke: it may have arrived, so it is never retried
            log.exception("check-in %d could not be sent; it is not tried again", checkin.id)
            await self.runner.run(self.store.finish, checkin.id, "failed")
            return "failed"
        await self.runner.run(self._record, draft, text)
        return "sent"

    def _draft(self, checkin: Checkin, where: Destination) -> Draft | None:
        """The row's memory and DM, or None when it must wait (quiet hours, the weekly limit) or was cancelled."""
        now, zone = self.engine.clock.now(), self.zone_of(checkin.person_id)
        memory = self.engine.memories.get(checkin.memory_id)
        if memory.forgotten or memory.superseded_by or memory.consolidated_into:
            self.store.finish(checkin.id, "cancelled")  # what it followed up on is no longer so
            return None
        if self._held(checkin.person_id, now, zone):
            return None
        turn = self.resolve(_incoming(where))
        if turn.person_id != checkin.person_id or not turn.ctx.is_dm:
            self.store.finish(checkin.id, "cancelled")
            return None
        history = self.engine.messages.recent(turn.ctx, where.channel_id, HISTORY_TURNS)
        return Draft(checkin, where, memory, turn.names[turn.person_id], history, zone)

    def _held(self, person_id: str, now: float, zone: tzinfo) -> bool:
        """Not now: it is night where the person is, or they had their check-ins for the week."""
        quiet = self.options.quiet
        if quiet is not None and quiet.contains(datetime.fromtimestamp(now, zone)):
            return True
        return self.store.sent_this_week(person_id, now) >= self.options.per_week

    def _prompt(self, draft: Draft) -> str:
        local = datetime.fromtimestamp(self.engine.clock.now(), draft.zone)
        named = named_day(draft.memory)
        return prompts.render(
            "checkin",
            bot_name=self.bot_name(),
            person=json.dumps(draft.name, ensure_ascii=False),
            now=local.strftime("%A %Y-%m-%d %H:%M"),
            kind=draft.memory.kind.value,
            when=named.isoformat() if named else "(no date)",
            fact=json.dumps(draft.memory.content, ensure_ascii=False),
            history=_history(draft, self.bot_name()),
        )

    def _record(self, draft: Draft, text: str) -> None:
        """The check-in joins the DM's history as the bot's turn and the row is marked sent, in one transaction."""
        where = draft.where
        with self.engine.transaction():
            stored = self.engine.messages.add(
                NewMessage(
                    platform=where.platform,
                    channel_id=where.channel_id,
                    author_id="bot",
                    author_name=self.bot_name(),
                    content=text,
                    role="assistant",
                    dm_person_id=draft.checkin.person_id,
                )
            )
            self.store.sent(draft.checkin.id, stored)


def message_from(answer: str) -> str:
    """The model's answer as the message to send, or BadCheckin."""
    text = answer.strip().strip('"').strip()
    if not text:
        raise BadCheckin("the answer is empty")
    if len(text) > MAX_CHARS:
        raise BadCheckin(f"the answer is {len(text)} characters long")
    if text[0] in "{[<" or "[SKIP]" in text.upper():
        raise BadCheckin(f"the answer is not a message: {text[:40]!r}")
    return text


def _incoming(where: Destination) -> IncomingMessage:
    """The person's DM as a message from them (no text): the same scope resolution as their own turns."""
    return IncomingMessage(platform=where.platform, channel_id=where.channel_id, author_id=where.platform_user_id, author_name="", text="")


def _history(draft: Draft, bot_name: str) -> str:
    lines: list[Any] = []
    for row in draft.history:
        who = bot_name if row.role == "assistant" else draft.name
        when = datetime.fromtimestamp(row.created_at, draft.zone).strftime("%Y-%m-%d %H:%M")
        lines.append(f"- [{when}] {who}: {json.dumps(row.content[:HISTORY_CHARS], ensure_ascii=False)}")
    return "\n".join(lines) or "(none yet)"
