"""``/usage`` (ORCH-14): what the model calls cost, from the usage ledger (``memory.Spending``), by whom it may be seen.

    /usage me [days]       anyone: their own spend, and their daily budget
    /usage server [days]   a server's or group's admins (or the owner), in it: the place's spend, by job, model and person
    /usage all [days]      the owner, in their own DM (or the console): everything, by place, job, model and person
    /usage [days]          the widest of those the asker may see

``days``: 1 (today, the default) to 31, days ending today (UTC). Another person's spend is never shown to someone who
is not an admin of a place they share, nor a DM's to anyone but its person and the owner.
"""

from __future__ import annotations

from typing import Any

from memory import MemoryEngine, People, Spend, Spending, SpendingLine

from ..counts import counted
from .budgets import Limits

MAX_DAYS = 31
USAGE_HELP = "Use /usage me, /usage server (admins) or /usage all (my owner, in our DM), with a number of days if you like: /usage me 7"
NOT_ADMIN = "Only this place's admins (or my owner) can see its usage. /usage me shows yours."
NOT_OWNER = (
    "Only my owner can see everyone's usage, in a private chat with me. /usage me shows yours."
)


class UsageCommands:
    def __init__(self, engine: MemoryEngine, people: People, limits: Limits) -> None:
        self.engine, self.people, self.limits = engine, people, limits
        self.ledger = Spending(engine)

    def do_usage(self, arg: str, turn: Any) -> str:
        words, days = arg.lower().split(), 1
        if (
            words and words[-1].isascii() and words[-1].isdigit()
        ):  # "²" is a digit to isdigit, not to int
            number = words.pop()
            # 5,000 digits: out of range, never converted
            days = int(number) if len(number) <= 2 else 0
        view = words[0] if len(words) == 1 else "" if not words else "?"
        if view not in ("", "me", "server", "all") or not 1 <= days <= MAX_DAYS:
            return USAGE_HELP
        view = view or ("all" if turn.ctx.owner_private else "server" if turn.ctx.admin else "me")
        first, last = self.ledger.span(days)
        if view == "me":
            return self._own(turn.person_id, first, last)
        if view == "server":
            return self._place(turn, first, last)
        return self._everything(first, last) if turn.ctx.owner_private else NOT_OWNER

    def _own(self, person_id: str, first: str, last: str) -> str:
        lines = self.ledger.person(person_id, first, last)
        total = sum((line.spend for line in lines), Spend())
        head = f"Your usage {_span(first, last)}: {_spend(total)}."
        budget = self.limits.person_tokens
        today = self.ledger.person_spent(last, person_id).tokens
        left = f"\nToday: {today:,} of your {budget:,} tokens a day." if budget else ""
        return head + (f"\nBy job: {_listed(lines)}" if lines else "") + left

    def _place(self, turn: Any, first: str, last: str) -> str:
        place = turn.ctx.guild_id
        if place is None:
            return "Send /usage server in the server or group itself (admins only). /usage me shows yours."
        if not turn.ctx.admin:
            return NOT_ADMIN
        head = f"This place's usage {_span(first, last)}: {_spend(self.ledger.totals(first, last, place))}."
        budget = self.limits.server_tokens
        today = self.ledger.place_spent(last, place).tokens
        parts = [head, f"Today: {today:,} of its {budget:,} tokens a day." if budget else ""]
        parts += self._groups(first, last, place)
        return "\n".join(p for p in parts if p)

    def _everything(self, first: str, last: str) -> str:
        head = f"All usage {_span(first, last)}: {_spend(self.ledger.totals(first, last))}."
        places = self.ledger.by("place_id", first, last, limit=10)
        where = [SpendingLine(line.label or "private chats", line.spend) for line in places]
        return "\n".join(
            [head, f"By place: {_listed(where)}" if where else "", *self._groups(first, last, None)]
        ).replace("\n\n", "\n")

    def _groups(self, first: str, last: str, place: str | None) -> list[str]:
        kinds = self.ledger.by("kind", first, last, place, limit=10)
        models = self.ledger.by("model", first, last, place, limit=5)
        people = [
            SpendingLine(self.people.name(line.label) or line.label, line.spend)
            for line in self.ledger.people(first, last, place, limit=10)
        ]
        return [
            f"By {what}: {_listed(lines)}"
            for what, lines in (("job", kinds), ("model", models), ("person", people))
            if lines
        ]


def _span(first: str, last: str) -> str:
    return f"today ({last}, UTC)" if first == last else f"from {first} to {last} (UTC)"


def _spend(spend: Spend) -> str:
    unreported = (
        f"; {counted(spend.unreported, 'call')} without figures" if spend.unreported else ""
    )
    return (
        f"{counted(spend.tokens, 'token')} in {counted(spend.calls, 'call')} "
        f"({spend.prompt_tokens:,} read, {spend.cached_tokens:,} of them "
        f"cached; {spend.completion_tokens:,} written{unreported})"
    )


def _listed(lines: list[SpendingLine]) -> str:
    return " · ".join(f"{line.label} {line.spend.tokens:,}" for line in lines)
