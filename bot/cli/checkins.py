"""``companion checkins list`` (ORCH-8): the check-ins planned, due, sent and given up, soonest first.

It shows ids, kinds, dates and states, and the subject of the memory each follows up on; never a message (the
messages live in the DMs' history) and nothing secret. The store is opened read-only.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .memories import command, engine_for, nonempty
from .output import counted, print_json, say, when

if TYPE_CHECKING:
    from memory import Checkin

    from ..config import Settings

STATES = ("pending", "sending", "sent", "failed", "expired", "cancelled")


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "checkins",
        help="the check-ins the bot will send or has sent",
        description="Check-ins: follow-ups the bot sends in DMs.",
    )
    sub = group.add_subparsers(dest="checkins_command", metavar="COMMAND", required=True)
    p = command(
        sub,
        "list",
        list_checkins,
        "list check-ins: who, what about, when due, and their state",
        json_flag=True,
    )
    p.add_argument(
        "--person", type=nonempty, help="only this person's (a person id, e.g. telegram:55)"
    )
    p.add_argument(
        "--state", choices=STATES, action="append", help="only rows in this state (repeatable)"
    )


def list_checkins(args: argparse.Namespace, settings: Settings) -> None:

    with engine_for(settings, readonly=True) as engine:
        store = engine.checkins
        found, now = store.listing(args.person, tuple(args.state or ())), engine.clock.now()
        people = {person for person, _ in store.people()}
    if args.json:
        return print_json([_as_dict(c, c.person_id in people) for c in found])
    if not found:
        return say(
            "no check-ins"
            + (
                " match"
                if args.person or args.state
                else f" yet ({counted(len(people), 'person')} "
                f"{'has' if len(people) == 1 else 'have'} them on)"
            )
        )
    for c in found:
        state = "due" if c.state == "pending" and c.due_at <= now else c.state
        say(
            f"{c.id:>5}  {state:<9} {when(c.due_at)}  {c.person_id}  {c.kind} “{c.subject}”"
            + ("" if c.person_id in people else "  (off)")
        )


def _as_dict(c: Checkin, on: bool) -> dict[str, object]:
    keys = (
        "id",
        "person_id",
        "memory_id",
        "kind",
        "due_at",
        "state",
        "attempts",
        "claimed_at",
        "sent_at",
        "subject",
    )
    return {
        **{k: getattr(c, k) for k in keys},
        "platform": c.destination.platform if c.destination else None,
        "checkins_on": on,
    }
