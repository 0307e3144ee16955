"""The login throttle against a local guesser on the operator's own address (issue 44, item 11):
the real aiohttp client against the real server on 127.0.0.1. A guesser that sends wrong tokens as
fast as it can never gets the operator's browser a 429, a browser always gets its client cookie,
and a guesser minting cookies to start afresh stays at a bounded number of guesses a second."""

from __future__ import annotations

import asyncio
import time

import aiohttp
from dashboard_support import Dashboard

from bot.dashboard.throttle import CLIENT_COOKIE, MAX_FAILURES, MAX_GUESSERS, PACE_S


def browser(dash: Dashboard) -> aiohttp.ClientSession:
    """A client that keeps cookies, as a browser does (unsafe: cookies for an IP host)."""
    return aiohttp.ClientSession(dash.url, cookie_jar=aiohttp.CookieJar(unsafe=True))


async def log_in(session: aiohttp.ClientSession, token: str) -> int:
    async with session.post("/login", data={"token": token}, allow_redirects=False) as r:
        return r.status


class Guesser:
    """Wrong tokens as fast as it can, until stopped: through the form and as a bearer header. It
    loads the form before every guess (a script scraping it); ``minting``: and sends the fresh
    client cookie the form gave it (a new browser each time), else none."""

    def __init__(self, dash: Dashboard, *, minting: bool) -> None:
        self.dash, self.minting = dash, minting
        self.statuses: list[int] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        async with aiohttp.ClientSession(self.dash.url) as session:  # keeps no cookie of its own
            n = 0
            while not self.stop.is_set():
                n += 1
                self.statuses.append(await self._guess(session, n))

    async def _guess(self, session: aiohttp.ClientSession, n: int) -> int:
        headers = {}
        async with session.get("/login") as r:
            given = r.cookies.get(CLIENT_COOKIE)
        if self.minting and given is not None:
            headers["Cookie"] = f"{CLIENT_COOKIE}={given.value}"
        if n % 2:
            async with session.post("/login", data={"token": f"guess-{n}"}, headers=headers) as r:
                return r.status
        headers["Authorization"] = f"Bearer guess-{n}"
        async with session.get("/api/memory", headers=headers) as r:
            return r.status


async def test_a_process_flooding_wrong_tokens_never_keeps_the_operator_s_new_browser_out(dash):
    """The finding: wrong logins from another local process locked the operator out (429). Its
    failures count to itself; the operator's browser, given its cookie during the flood, logs in."""
    guesser = Guesser(dash, minting=False)
    flood = asyncio.create_task(guesser.run())
    try:
        while len(guesser.statuses) < 3 * MAX_FAILURES:
            await asyncio.sleep(0.01)
        async with browser(dash) as operator:
            async with operator.get("/login") as r:
                assert r.status == 200 and CLIENT_COOKIE in r.cookies
            assert await log_in(operator, "a typo") == 401  # the operator's own mistake: a 401
            assert await log_in(operator, dash.token) == 303
            async with operator.get("/api/session") as r:
                assert r.status == 200
    finally:
        guesser.stop.set()
        await flood
    assert 429 in guesser.statuses  # the guesser itself is paced


async def test_a_browser_always_gets_a_client_cookie_however_many_were_just_given(dash):
    cookies = set()
    for _ in range(20):
        async with browser(dash) as fresh, fresh.get("/login") as r:
            cookies.add(r.cookies[CLIENT_COOKIE].value)
    assert len(cookies) == 20


async def test_a_guesser_minting_cookies_never_gets_the_operator_s_browser_a_429_and_stays_bounded(
    dash,
):
    """The operator's browser has its own cookie (it logged in before); a guesser on 127.0.0.1 mints
    a new cookie before every wrong token, as fast as it can. The browser logs in (303, never 429);
    the guesser's wrong tokens actually checked (401s) stay within the bound for its address."""
    async with browser(dash) as operator:
        async with operator.get("/login"):
            pass
        assert await log_in(operator, dash.token) == 303  # yesterday, say
        async with operator.post("/logout", headers=await csrf(operator)) as r:
            assert r.status == 200
        guesser = Guesser(dash, minting=True)
        started = time.monotonic()
        flood = asyncio.create_task(guesser.run())
        try:
            await asyncio.sleep(2.5)
            for _ in range(3):
                assert await log_in(operator, dash.token) == 303
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)
        finally:
            guesser.stop.set()
            await flood
        took = time.monotonic() - started
    checked = guesser.statuses.count(401)
    bound = (MAX_GUESSERS - 1) * MAX_FAILURES + 1 + int(took / PACE_S) + 1
    assert len(guesser.statuses) > 3 * bound  # it did try as fast as it could
    print(
        f"guesser: {len(guesser.statuses)} tries, {checked} checked in {took:.1f} s (bound {bound})"
    )
    assert checked <= bound, (checked, len(guesser.statuses), took)
    assert set(guesser.statuses) <= {401, 429}


async def csrf(session: aiohttp.ClientSession) -> dict[str, str]:
    async with session.get("/api/session") as r:
        return {"X-CSRF-Token": (await r.json())["csrf"]}
