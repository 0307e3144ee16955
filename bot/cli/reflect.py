"""``companion reflect daily [--day D] [--dry-run]``: the daily reflection (MAINT-4) on demand.

Without ``--dry-run`` it does what the 04:00 job does (``bot.daily.DailyReflection``): every chat-day that is
due (or only those of ``--day``) is reflected, its facts stored, the day marked done. With ``--dry-run`` the
model is asked the same question and the facts it would store are printed; nothing is stored, audited or
marked, so the real run still finds the day due.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import date
from typing import TYPE_CHECKING, Any

from .memories import command
from .output import counted, print_json, say

if TYPE_CHECKING:
    from memory import ChatDay

    from ..config import Settings
    from ..runtime import Runtime


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "reflect",
        help="run a reflection now",
        description="Run a reflection now, instead of waiting for its schedule.",
    )
    sub = group.add_subparsers(dest="reflect_command", metavar="COMMAND", required=True)
    p = command(
        sub,
        "daily",
        reflect_daily,
        "reflect each chat's day now: the facts it holds, filed where they were said",
        json_flag=True,
    )
    p.set_defaults(uses_model=True)
    p.add_argument(
        "--day",
        type=parse_day,
        metavar="YYYY-MM-DD",
        help="only this day (one of the last 7; default: every day that is due)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="ask the model and show what would be stored; store nothing",
    )


def parse_day(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date like 2026-03-29, not {text!r}") from None


def reflect_daily(args: argparse.Namespace, settings: Settings) -> int:
    from ..composition import build_runtime

    runtime = build_runtime(settings)
    try:
        results = asyncio.run(_reflect(runtime, args.day, args.dry_run))
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()
    if args.json:
        print_json({"dry_run": args.dry_run, "chats": results})
    else:
        _show(results, args.day, args.dry_run)
    return 1 if any(r["failed"] for r in results) else 0


async def _reflect(runtime: Runtime, day: str | None, dry_run: bool) -> list[dict[str, Any]]:
    daily = runtime.daily
    assert daily is not None, "build_runtime always builds the daily reflection"
    due = await runtime.runner.run(daily.days.due, runtime.engine.clock.now())
    results = []
    for chat in [c for c in due if day in (None, c.day)]:
        if dry_run:
            facts = await _would_store(runtime, chat)
            results.append(
                {
                    "chat": chat.channel_key,
                    "day": chat.day,
                    "failed": facts is None,
                    "facts": facts or [],
                }
            )
        else:
            stored = await daily.reflect(chat)
            results.append(
                {
                    "chat": chat.channel_key,
                    "day": chat.day,
                    "failed": stored is None,
                    "stored": stored or 0,
                }
            )
    return results


async def _would_store(runtime: Runtime, chat: ChatDay) -> list[dict[str, Any]] | None:
    """The daily reflection's own reading and asking (``memory.jobs.day``), without the audit, the write or the mark."""
    from memory import FAILED, DayReflection

    daily = runtime.daily
    assert daily is not None
    job = DayReflection(runtime.engine, daily.days, chat, daily.zone_of)
    transcript = await runtime.runner.run(job.read)
    speakers = tuple(transcript.speakers())
    if not speakers:
        return []
    try:
        memories = await job.learned(transcript, speakers, daily.jobs.model)
    except FAILED:
        return None
    return [
        {"content": m.content, "type": m.type.value, "scope": m.scope.value, "scope_id": m.scope_id}
        for m in memories
    ]


def _show(results: list[dict[str, Any]], day: str | None, dry_run: bool) -> None:
    if not results:
        # Today is never reflected before it is over: on a first day "every day is done" read as if nothing would be.
        say(
            f"nothing to reflect on {day}: no chat has unreflected turns that day (today's turns wait until the day is over)"
            if day
            else "nothing to reflect yet: every day before today is done, and today is reflected once it is over"
        )
        return
    for r in results:
        if r["failed"]:
            say(f"{r['chat']} {r['day']}: the model failed; the day stays due")
        elif dry_run:
            say(f"{r['chat']} {r['day']}: would store {counted(len(r['facts']), 'fact')}")
            for fact in r["facts"]:
                say(f"  - {fact['content']}  ({fact['type']}, {fact['scope']} {fact['scope_id']})")
        else:
            say(f"{r['chat']} {r['day']}: {counted(r['stored'], 'fact')} stored")
