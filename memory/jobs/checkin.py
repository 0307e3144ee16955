"""Writing one check-in (ORCH-8), in ``memory.jobs.base``'s shape; sending it is the bot's (``bot.checkins``):

    gather   the row's memory and the DM's last turns, unless it must wait (quiet hours, the weekly limit)
             or was cancelled (the memory is no longer so, the account is someone else's now)
    ask      the chat model writes the message; an answer that is no message is ``BadCheckin``
    apply    pending -> sending, committed: past this line a row is never sent again (``memory.storage.checkins``)
    failed   the row is postponed (a bounded number of times)

After the platform took the message, ``record_sent`` puts it in the DM's history as the bot's turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

import prompts

from ..engine import MemoryEngine
from ..models import Memory, StoredMessage
from ..protocols import AsyncCompleter
from ..scopes import RecallContext
from ..storage.checkins import Checkin, CheckinStore, Destination, QuietHours, named_day
from ..storage.messages import NewMessage
from ..write.extraction import BadAnswer

log = logging.getLogger(__name__)
HISTORY_TURNS, HISTORY_CHARS = 12, 300
MAX_CHARS = 600  # a check-in is a line or three; anything longer is the model rambling or echoing its prompt


class BadCheckin(BadAnswer):
    """The model's answer is not a message to send (empty, too long, JSON, a refusal to speak)."""


@dataclass(frozen=True, slots=True)
class DmView:
    """Whose DM a destination is now, resolved as that person's own turns are (by the bot's scope resolution)."""

    person_id: str
    ctx: RecallContext
    name: str


@dataclass(frozen=True, slots=True)
class DraftedCheckin:
    """What the model is shown to write one check-in."""

    checkin: Checkin
    where: Destination
    memory: Memory
    name: str
    history: list[StoredMessage]
    zone: tzinfo


@dataclass(frozen=True, slots=True)
class Claimed:
    """'claimed' (the text may be sent now), 'waiting', or what a failed write left: 'postponed', 'failed'..."""

    state: str
    draft: DraftedCheckin | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class CheckinDraft:
    engine: MemoryEngine
    store: CheckinStore
    checkin: Checkin
    where: Destination
    whose_dm: Callable[[Destination], DmView]
    bot_name: str
    zone: tzinfo
    per_week: int
    quiet: QuietHours | None

    def gather(self) -> DraftedCheckin | None:
        """The row's memory and DM, or None when it must wait (quiet hours, the weekly limit) or was cancelled."""
        checkin, now = self.checkin, self.engine.clock.now()
        if not self.store.is_due(checkin.id, now):
            return None  # another process wrote it, or postponed it, since this one read the due rows (SCALE-1)
        memory = self.engine.memory_rows.get(checkin.memory_id)
        if memory.forgotten or memory.superseded_by or memory.consolidated_into:
            self.store.finish(checkin.id, "cancelled")  # what it followed up on is no longer so
            return None
        if self._held(now) or not self.engine.people.remembered(checkin.person_id):
            return None  # SEC-5: after /privacy off nothing is sent or kept for them (held; on again, it may go)
        dm = self.whose_dm(self.where)
        if dm.person_id != checkin.person_id or not dm.ctx.is_dm:
            self.store.finish(checkin.id, "cancelled")
            return None
        history = self.engine.messages.recent(dm.ctx, self.where.channel_id, HISTORY_TURNS)
        return DraftedCheckin(checkin, self.where, memory, dm.name, history, self.zone)

    def _held(self, now: float) -> bool:
        """Not now: it is night where the person is, or they had their check-ins for the week."""
        if self.quiet is not None and self.quiet.contains(datetime.fromtimestamp(now, self.zone)):
            return True
        return self.store.sent_this_week(self.checkin.person_id, now) >= self.per_week

    async def ask(self, plan: DraftedCheckin, model: AsyncCompleter) -> str:
        return message_from(await model("", self._prompt(plan), temperature=0.7))

    def _prompt(self, draft: DraftedCheckin) -> str:
        local = datetime.fromtimestamp(self.engine.clock.now(), draft.zone)
        named = named_day(draft.memory)
        return prompts.render(
            "checkin",
            bot_name=self.bot_name,
            person=json.dumps(draft.name, ensure_ascii=False),
            now=local.strftime("%A %Y-%m-%d %H:%M"),
            kind=draft.memory.kind.value,
            when=named.isoformat() if named else "(no date)",
            fact=json.dumps(draft.memory.content, ensure_ascii=False),
            history=_history(draft, self.bot_name),
        )

    def apply(self, plan: DraftedCheckin, answer: str) -> Claimed:
        if not self.store.claim(self.checkin.id):
            # no longer pending (opted out or forgotten while the model wrote)
            return Claimed("waiting")
        return Claimed("claimed", plan, answer)

    def failed(self, plan: DraftedCheckin, error: Exception) -> Claimed:
        state = self.store.postpone(self.checkin.id)
        log.warning(
            "check-in %d not written (%s: %s); %s",
            self.checkin.id,
            type(error).__name__,
            error,
            state,
        )
        return Claimed("postponed" if state == "pending" else state)


def record_sent(
    engine: MemoryEngine, store: CheckinStore, draft: DraftedCheckin, text: str, bot_name: str
) -> None:
    """The check-in joins the DM's history as the bot's turn and the row is marked sent, in one transaction;
    for someone who said /privacy off while it was being written, the row is marked sent and nothing is kept."""
    where = draft.where
    with engine.transaction():
        if not engine.people.remembered(draft.checkin.person_id):
            store.sent(draft.checkin.id, None)
            return
        stored = engine.messages.add(
            NewMessage(
                platform=where.platform,
                channel_id=where.channel_id,
                author_id="bot",
                author_name=bot_name,
                content=text,
                role="assistant",
                dm_person_id=draft.checkin.person_id,
            )
        )
        store.sent(draft.checkin.id, stored)


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


def _history(draft: DraftedCheckin, bot_name: str) -> str:
    lines: list[Any] = []
    for row in draft.history:
        who = bot_name if row.role == "assistant" else draft.name
        when = datetime.fromtimestamp(row.created_at, draft.zone).strftime("%Y-%m-%d %H:%M")
        lines.append(
            f"- [{when}] {who}: {json.dumps(row.content[:HISTORY_CHARS], ensure_ascii=False)}"
        )
    return "\n".join(lines) or "(none yet)"
