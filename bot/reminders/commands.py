"""``/remind <when> <what>`` and ``/reminders [cancel <n>]`` (ORCH-13); ``bot.commands`` hands them here.

A reminder fires in the place it was asked (this DM, this group or channel), at a time read in the person's own
zone (``/timezone``). A time that cannot be read, that is ambiguous or already past is answered with the question to
answer, and nothing is stored. ``/reminders`` numbers the person's reminders soonest first; ``/reminders cancel 2``
deletes the second (its words with it). Someone who said ``/privacy off`` cannot set new ones: a reminder keeps
their words.

In a server or group, its admins (Manage Server on Discord, group admins on Telegram, the owner)
see every reminder set there with ``/reminders`` (whose, when, its words shortened) and cancel any
with ``/reminders cancel <n>``; everyone else sees and cancels only their own, and a DM never shows
anyone else's.
"""

from __future__ import annotations

from typing import Any

from memory import MemoryEngine, Reminder, ReminderPlace, Timezones, split_request

from ..counts import counted

REMIND_HELP = "Tell me when and what, like: /remind tomorrow 8am call mum, /remind in 20 minutes tea, /remind every Monday at 9 stand-up"
# a reminder is posted where it was asked: never where the person may not write themselves
NOT_HERE = (
    "You can't post in this channel, so I won't post a reminder here for you: "
    "ask in a channel where you can write, or in our DMs."
)


SHOWN = 40  # lines of an admin's list; the rest are counted (and can still be cancelled by number)
SHORT = 60  # a reminder's words in an admin's list, shortened to this many characters


SET = "Reminder set for"  # how a stored reminder's answer starts


class ReminderCommands:
    def __init__(self, engine: MemoryEngine, zones: Timezones) -> None:
        self.reminders, self.zones, self.people = engine.reminders, zones, engine.people

    def do_remind(self, arg: str, turn: Any, remembers: bool) -> str:
        if not arg:
            return REMIND_HELP
        if not remembers:
            return "Remembering is off (/privacy), so I can't keep a reminder: it would hold your words. /privacy on turns it back on."
        if not turn.message.may_post and not turn.ctx.is_dm:
            return NOT_HERE
        when, what = split_request(arg)
        stored = self.reminders.ask(
            turn.person_id, reminder_place_of(turn), when, what, self.zones.zone_of(turn.person_id)
        )
        # a slash command's answer may be seen by the asker alone; the reminder itself is posted where it was asked
        where = "" if stored.is_dm else " I'll post it in this channel, mentioning you."
        return f"{SET} {stored.when()}: {stored.text}.{where} (/reminders lists them; /reminders cancel <n> cancels one)"

    def do_reminders(self, arg: str, turn: Any) -> str:
        here = reminder_place_of(turn) if turn.ctx.admin and not turn.ctx.is_dm else None
        listed = self.reminders.in_place(here) if here else self.reminders.mine(turn.person_id)
        action, _, number = arg.partition(" ")
        if action.lower() in ("cancel", "delete", "remove", "stop"):
            return self._cancel(turn, listed, number.strip(), here)
        if action:
            return "Use /reminders to list yours, /reminders cancel <n> to cancel the n-th."
        if here:
            return self._place_list(listed)
        if not listed:
            return "You have no reminders. Set one with /remind <when> <what>, like /remind Friday at 9 call mum."
        lines = [f"{n}. {_line(r)}" for n, r in enumerate(listed, start=1)]
        return "Your reminders:\n" + "\n".join(lines) + "\n/reminders cancel <n> cancels one."

    def _place_list(self, listed: list[Reminder]) -> str:
        """An admin's view of a server or group: everyone's reminders posted here, numbered."""
        if not listed:
            return (
                "Nobody has a reminder set here. (Yours elsewhere: /reminders in our private chat.)"
            )
        lines = [f"{n}. {self._whose(r)}" for n, r in enumerate(listed[:SHOWN], start=1)]
        more = len(listed) - SHOWN
        tail = f"\n...and {more} more (numbered on from {SHOWN + 1})." if more > 0 else ""
        return (
            "Every reminder set here (you're an admin, so you see everyone's):\n"
            + "\n".join(lines)
            + tail
            + "\n/reminders cancel <n> cancels any of them. "
            "(Yours elsewhere: /reminders in our DM.)"
        )

    def _whose(self, r: Reminder) -> str:
        text = r.text if len(r.text) <= SHORT else r.text[: SHORT - 1].rstrip() + "\u2026"
        name = self.people.name(r.person_id)
        failed = " (could NOT be delivered)" if r.state == "undelivered" else ""
        return f"{name} ({r.platform} user {r.platform_user_id}): {text} \u2014 {r.when()}{failed}"

    def _cancel(
        self, turn: Any, listed: list[Reminder], number: str, here: ReminderPlace | None
    ) -> str:
        if not number.isdigit() or not 1 <= int(number) <= len(listed):
            return (
                f"Say which one by its number in /reminders (1 to {len(listed)})."
                if listed
                else "You have no reminders to cancel."
            )
        chosen = listed[int(number) - 1]
        if here is None or chosen.person_id == turn.person_id:
            done = self.reminders.cancel(turn.person_id, chosen.id)
        else:
            done = self.reminders.cancel_in_place(here, chosen.id, admin=turn.person_id)
        if not done:
            return "That reminder was already gone."
        if chosen.person_id == turn.person_id:
            return f"Cancelled: {chosen.text}"
        return f"Cancelled {self.people.name(chosen.person_id)}'s reminder: {chosen.text}"

    def forgotten(self, turn: Any, words: str) -> str:
        """``/forget <words>``: the person's reminders that hold those words are deleted; the sentence to say so."""
        gone = self.reminders.forget_matching(turn.person_id, words)
        return (
            f"Cancelled and forgotten {counted(len(gone), 'reminder')}: " + "; ".join(gone)
            if gone
            else ""
        )


def reminder_place_of(turn: Any) -> ReminderPlace:
    """Where this turn was said: where a reminder set in it fires."""
    m = turn.message
    return ReminderPlace(m.platform, m.channel_id, m.author_id, turn.ctx.guild_id, turn.ctx.is_dm)


def _line(r: Reminder) -> str:
    where = "here in our private chat" if r.is_dm else f"in {r.platform} channel {r.channel_id}"
    failed = (
        " — could NOT be delivered (cancel it, or set it again)" if r.state == "undelivered" else ""
    )
    return f"{r.text} — {r.when()}, {where}{failed}"
