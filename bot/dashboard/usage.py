"""Usage in the dashboard (ORCH-14): the ledger's counts for the operator, by day, place, job, model and person,
beside the daily budgets. Counts and ids only (``memory.Spending``); people are shown by their display names."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memory import MemoryEngine, Spend, Spending, SpendingLine

from ..spending.commands import MAX_DAYS
from .common import ApiError, answer, services


def register(router: web.UrlDispatcher) -> None:
    router.add_get("/api/usage", show)


def _spend(spend: Spend) -> dict[str, int]:
    return {
        "calls": spend.calls,
        "unreported": spend.unreported,
        "prompt_tokens": spend.prompt_tokens,
        "cached_tokens": spend.cached_tokens,
        "completion_tokens": spend.completion_tokens,
        "tokens": spend.tokens,
    }


def _lines(lines: list[SpendingLine], key: str) -> list[dict[str, Any]]:
    return [{key: line.label, **_spend(line.spend)} for line in lines]


def _days(request: web.Request) -> int:
    raw = request.query.get("days", "1")
    # ascii digits, at most two: "²" is a digit to isdigit and not to int, and 5,000 digits are not converted at all
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 2) or not 1 <= int(raw) <= MAX_DAYS:
        raise ApiError(400, f"days must be a whole number from 1 to {MAX_DAYS}")
    return int(raw)


async def show(request: web.Request) -> web.Response:
    """GET /api/usage?days=7[&place=discord:123]: the spend of the days ending today (UTC)."""
    svc = services(request)
    days, place = _days(request), request.query.get("place") or None
    return answer(await svc.run(_report, svc.engine, days, place, svc.limits))


def _report(engine: MemoryEngine, days: int, place: str | None, limits: Any) -> dict[str, Any]:
    ledger, people = Spending(engine), engine.people
    first, last = ledger.span(days)
    persons = [
        {"person_id": p.label, "name": people.name(p.label), **_spend(p.spend)}
        for p in ledger.people(first, last, place)
    ]
    return {
        "first_day": first,
        "last_day": last,
        "place": place,
        "budgets": {"person_tokens": limits.person_tokens, "server_tokens": limits.server_tokens}
        if limits
        else None,
        "total": _spend(ledger.totals(first, last, place)),
        "by_day": _lines(ledger.by("day", first, last, place, limit=MAX_DAYS), "day"),
        "by_place": _lines(ledger.by("place_id", first, last, place), "place"),
        "by_kind": _lines(ledger.by("kind", first, last, place), "kind"),
        "by_model": _lines(ledger.by("model", first, last, place), "model"),
        "people": persons,
    }
