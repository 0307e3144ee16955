"""Reminders fire (ORCH-13): the job the scheduler runs every minute (``ReminderJob.run``).

    due      pending rows whose time came (``memory.Reminding``), and rows a dead sender left mid-send
    claim    -> 'sending' for this process, one committed statement: of several processes only one gets a row
    send     in the place it was asked (the adapter's ``send_to_channel``); quiet hours do not apply: the
             person chose the time
    record   a one-off row is deleted, a recurring one moves to its next occurrence (local calendar, DST-safe)
    refused  the row waits (1, 2, 4, 8 minutes) and is tried again; after five refusals the person is told in
             their DM ("I couldn't deliver your reminder ..."), and /reminders marks it until they cancel it
    left     in a server or group, the setter is asked of the platform first: one who left or was
             banned posts nothing; their reminders there are deleted (issue 44: a banned
             member's spam went on)

Delivery is at least once (the storage module says why): a sender killed after its claim leaves the row to be
claimed again once its lease ran out, and that copy says it may be a repeat. A reminder whose platform has no
adapter in this process (the console's while ``companion run`` runs) waits for one that has.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from memory import Reminder, Reminding

from ..jobs import LEASE_S

log = logging.getLogger(__name__)
LATE_S = 300.0  # a reminder sent this much after its time says it is late, and when it was due


class Post(Protocol):
    """What an adapter offers reminders: a message to a chat, and one to a person's DM."""

    async def send_to_channel(
        self, channel_id: str, text: str, mention_user_id: str | None = None
    ) -> None: ...

    async def send_to_user(self, user_id: str, text: str) -> None: ...

    async def member_here(self, channel_id: str, user_id: str) -> bool | None:
        """Whether the account is still a member of the server or group the channel is in (False:
        it left or was banned; None: the platform could not say)."""
        ...


@dataclass(frozen=True, slots=True)
class ReminderReport:
    sent: int = 0
    retrying: int = 0  # refused by the platform, tried again later
    undelivered: int = 0  # given up on: the person was told (or will be)
    waiting: int = 0  # no adapter for its platform in this process, or another process has it
    dropped: int = (
        0  # its setter left the server or group, or was banned there: not posted, deleted
    )


class ReminderJob:
    def __init__(self, reminding: Reminding, *, lease_s: float = LEASE_S) -> None:
        self.reminding, self.lease_s = reminding, lease_s
        self.posts: dict[
            str, Post
        ] = {}  # platform -> adapter, filled by whoever starts the adapters

    async def run(self) -> ReminderReport:
        """Send every due reminder; one reminder's failure never stops the others."""
        outcomes: Counter[str] = Counter()
        for reminder in await self.reminding.due():
            try:
                outcomes[await self.fire(reminder)] += 1
            except (
                Exception
            ):  # a background-job edge: the row stays claimed and is taken again after its lease
                log.exception("reminder %d failed", reminder.id)
        for reminder in await self.reminding.undelivered():
            await self.tell(reminder)
        if sum(outcomes.values()):
            log.info("reminders: %s", dict(outcomes))
        return ReminderReport(
            *(outcomes[k] for k in ("sent", "retrying", "undelivered", "waiting", "dropped"))
        )

    async def fire(self, reminder: Reminder) -> str:
        """One due reminder: 'sent', 'retrying', 'undelivered' or 'waiting'."""
        post = self.posts.get(reminder.platform)
        if post is None or not await self.reminding.claim(reminder, self.lease_s):
            return "waiting"
        if await self._setter_gone(post, reminder):
            return "dropped"
        now = self.reminding.now()
        mention = None if reminder.is_dm else reminder.platform_user_id
        try:
            await post.send_to_channel(reminder.channel_id, message(reminder, now), mention)
        except Exception:  # the platform refused it or the line broke: tried again (bounded), then the person is told
            log.exception("reminder %d could not be sent in %s", reminder.id, reminder.platform)
            state = await self.reminding.failed(reminder)
            if state != "undelivered":
                return "retrying"
            await self.tell(reminder)
            return "undelivered"
        if not await self.reminding.delivered(reminder, now):
            log.warning(
                "reminder %d was sent but was no longer this process's to record (forgotten meanwhile?)",
                reminder.id,
            )
        return "sent"

    async def _setter_gone(self, post: Post, reminder: Reminder) -> bool:
        """A member who left a server or group, or was banned from it, posts nothing there any
        more: asked of the platform at fire time (no member list or gateway event needed, and a
        leave while the bot was down counts too); their reminders there are deleted. A platform
        that cannot say: it is posted."""
        if reminder.is_dm:
            return False
        try:
            here = await post.member_here(reminder.channel_id, reminder.platform_user_id)
        except Exception:  # the line broke: the send below meets the same fate, retried as ever
            log.exception("reminder %d: membership of its setter unknown", reminder.id)
            return False
        if here is not False:
            return False
        dropped = await self.reminding.setter_left(reminder)
        log.info(
            "reminder %d: its setter left %s channel %s; %d of their reminders there deleted",
            reminder.id,
            reminder.platform,
            reminder.channel_id,
            dropped,
        )
        return True

    async def tell(self, reminder: Reminder) -> None:
        """The person learns, in their DM, that a reminder could not be delivered; a one-off then goes."""
        post = self.posts.get(reminder.platform)
        if post is None:
            return
        text = f"I couldn't deliver your reminder ({reminder.when()}) in the chat where you asked for it: {reminder.text}"
        try:
            await post.send_to_user(reminder.platform_user_id, text)
        except Exception:
            log.exception(
                "could not tell the person that reminder %d was not delivered; /reminders shows it",
                reminder.id,
            )
            await self.reminding.tell_later(reminder)
            return
        await self.reminding.told(reminder)


def message(reminder: Reminder, now: float) -> str:
    """What the person reads: their words, and whether it is late or may be a repeat."""
    text = f"\u23f0 Reminder: {reminder.text}"
    if now - reminder.due_at > LATE_S:
        text += f"\n(This was due {reminder.when()}; I'm late, I wasn't running then.)"
    if reminder.resent:
        text += "\n(If you already got this one, it's a repeat: I was restarted while sending it.)"
    return text
