"""The dashboard's usage view (ORCH-14): ``GET /api/usage`` reads the ledger by day, place, job, model and person,
through the real aiohttp client against the real server; bad input gets a clear 400, and no token, no figures."""

from __future__ import annotations

import aiohttp
from dashboard_support import Dashboard

from memory.storage.ledger import Charge, Spend, day_of


async def seeded(dash: Dashboard) -> None:
    ledger, now = dash.engine.ledger, dash.engine.clock.now()
    calls = (
        (Charge("reply", dash.seeded.alice, "discord", dash.seeded.guild), 1_000),
        (Charge("extraction", "", "discord", dash.seeded.guild), 200),
    )
    for charge, tokens in calls:
        await dash.store(
            ledger.add,
            day_of(now),
            charge,
            "chat-m",
            Spend(calls=1, prompt_tokens=tokens, completion_tokens=10),
        )
    await dash.store(
        ledger.add,
        day_of(now - 86_400),
        Charge("reply", dash.seeded.bob, "telegram"),
        "chat-m",
        Spend(1, 0, 50, 0, 5),
    )


async def test_usage_by_place_job_model_and_person_over_the_days_asked(http, dash):
    await seeded(dash)
    async with http.get("/api/usage") as r:
        today = await r.json()
    async with http.get("/api/usage", params={"days": "2"}) as r:
        two_days = await r.json()
    async with http.get("/api/usage", params={"place": dash.seeded.guild}) as r:
        guild = await r.json()
    assert today["total"]["tokens"] == 1_220 and today["total"]["calls"] == 2
    assert [(k["kind"], k["tokens"]) for k in today["by_kind"]] == [
        ("reply", 1_010),
        ("extraction", 210),
    ]
    assert [(p["name"], p["tokens"]) for p in today["people"]] == [("Alice", 1_010)]
    assert two_days["total"]["tokens"] == 1_275 and len(two_days["by_day"]) == 2
    assert {p["place"] for p in two_days["by_place"]} == {dash.seeded.guild, ""}
    assert guild["total"]["tokens"] == 1_220 and guild["place"] == dash.seeded.guild


async def test_bad_days_are_refused_and_no_token_sees_nothing(http, dash):
    for days in ("0", "32", "-1", "seven", "1e3", "\u00b2", "9" * 5000):
        async with http.get("/api/usage", params={"days": days}) as r:
            assert r.status == 400 and "days" in (await r.json())["error"]
    async with aiohttp.ClientSession(dash.url) as anonymous, anonymous.get("/api/usage") as r:
        assert r.status == 401
