"""``/remind <when> <what>`` and ``/reminders [cancel <n>]`` (ORCH-13); ``bot.commands`` hands them here.

A reminder fires in the place it was asked (this DM, this group or channel), at a time read in the person's own
zone (``/timezone``). A time that cannot be read, that is ambiguous or already past is answered with the question to
answer, and nothing is stored. ``/reminders`` numbers the person's reminders soonest first; ``/reminders cancel 2``
deletes the second (its words with it). Someone who said ``/privacy off`` cannot set new ones: a reminder keeps
their words.
"""

from __future__ import annotations

from typing import Any

from memory import MemoryEngine, Place, Reminder, Timezones, split_request

REMIND_HELP = "Tell me when and what, like: /remind tomorrow 8am call mum, /remind in 20 minutes tea, /remind every Monday at 9 stand-up"
# a reminder is posted where it was asked: never where the person may not write themselves
NOT_HERE = (
    "You can't post in this channel, so I won't post a reminder here for you: "
    "ask in a channel where you can write, or in our DMs."
)


class ReminderCommands:
    def __init__(self, engine: MemoryEngine, zones: Timezones) -> None:
        self.reminders, self.zones = engine.reminders, zones

    def do_remind(self, arg: str, turn: Any, remembers: bool) -> str:
        if not arg:
            return REMIND_HELP
        if not remembers:
            return "Remembering is off (/privacy), so I can't keep a reminder: it would hold your words. /privacy on turns it back on."
        if not turn.message.may_post and not turn.ctx.is_dm:
            return NOT_HERE
        when, what = split_request(arg)
        stored = self.reminders.ask(
            turn.person_id, place_of(turn), when, what, self.zones.zone_of(turn.person_id)
        )
        # a slash command's answer may be seen by the asker alone; the reminder itself is posted where it was asked
        where = "" if stored.is_dm else " I'll post it in this channel, mentioning you."
        return f"Reminder set for {stored.when()}: {stored.text}.{where} (/reminders lists them; /reminders cancel <n> cancels one)"

    def do_reminders(self, arg: str, turn: Any) -> str:
        mine = self.reminders.mine(turn.person_id)
        action, _, number = arg.partition(" ")
        if action.lower() in ("cancel", "delete", "remove", "stop"):
            return self._cancel(turn.person_id, mine, number.strip())
        if action:
            return "Use /reminders to list yours, /reminders cancel <n> to cancel the n-th."
        if not mine:
            return "You have no reminders. Set one with /remind <when> <what>, like /remind Friday at 9 call mum."
        lines = [f"{n}. {_line(r)}" for n, r in enumerate(mine, start=1)]
        return "Your reminders:\n" + "\n".join(lines) + "\n/reminders cancel <n> cancels one."

    def _cancel(self, person_id: str, mine: list[Reminder], number: str) -> str:
        if not number.isdigit() or not 1 <= int(number) <= len(mine):
            return (
                f"Say which one by its number in /reminders (1 to {len(mine)})."
                if mine
                else "You have no reminders to cancel."
            )
        chosen = mine[int(number) - 1]
        if not self.reminders.cancel(person_id, chosen.id):
            return "That reminder was already gone."
        return f"Cancelled: {chosen.text}"

    def forgotten(self, turn: Any, words: str) -> str:
        """``/forget <words>``: the person's reminders that hold those words are deleted; the sentence to say so."""
        gone = self.reminders.forget_matching(turn.person_id, words)
        return (
            f"Cancelled and forgotten {len(gone)} reminder(s): " + "; ".join(gone) if gone else ""
        )


def place_of(turn: Any) -> Place:
    """Where this turn was said: where a reminder set in it fires."""
    m = turn.message
    return Place(m.platform, m.channel_id, m.author_id, turn.ctx.guild_id, turn.ctx.is_dm)


def _line(r: Reminder) -> str:
    where = "here in our private chat" if r.is_dm else f"in {r.platform} channel {r.channel_id}"
    failed = (
        " — could NOT be delivered (cancel it, or set it again)" if r.state == "undelivered" else ""
    )
    return f"{r.text} — {r.when()}, {where}{failed}"
