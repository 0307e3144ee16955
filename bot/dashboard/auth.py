"""Who may use the dashboard (DASH-3): the configured token, as a bearer header or through the login form.

    Authorization: Bearer <token>   scripts; no CSRF token needed (a browser never adds this header by itself)
    companion_session cookie        the page after ``POST /login``; HttpOnly, SameSite=Strict, Path=/; every
                                    request that is not GET/HEAD must also carry ``X-CSRF-Token`` (the session's
                                    token, given to the page in a meta tag and by ``GET /api/session``)

Every secret comparison is constant-time (``hmac.compare_digest``); sessions are looked up by the SHA-256 of
the cookie, so a lookup's timing says nothing about a valid cookie. Sessions live in memory: a restart logs
everyone out. Wrong tokens, as a bearer header or through the login form, are throttled per client
(``bot.dashboard.throttle``: a browser by the client cookie the login page gives it, anything
else by its address; a guesser slows only itself, and a guesser minting cookies is held to a
bounded rate for its whole address). A logged-in browser's session is not a token check and is
never throttled.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field

from .throttle import CLIENT_COOKIE, CLIENT_TTL_S, MAX_FAILURES, PACE_S, Client, Throttle

__all__ = [
    "CLIENT_COOKIE",
    "CLIENT_TTL_S",
    "COOKIE",
    "CSRF_HEADER",
    "MAX_FAILURES",
    "PACE_S",
    "SAFE_METHODS",
    "SESSION_TTL_S",
    "Caller",
    "Client",
    "Gate",
    "client_key",
]

COOKIE = "companion_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_TTL_S = 12 * 3600.0
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request: ``who`` goes to the audit trail; ``csrf`` is empty for bearer callers."""

    who: str
    via: str  # "bearer" | "session"
    csrf: str = ""
    session_key: str = ""


@dataclass(slots=True)
class _Session:
    csrf: str
    expires_at: float


@dataclass
class Gate:
    """The token check and the login sessions of one dashboard."""

    token: str
    who: str = "operator"
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _throttle: Throttle = field(default_factory=Throttle)  # wrong tokens, per client

    def __post_init__(self) -> None:
        if not self.token.strip():
            raise ValueError("the dashboard needs a token (COMPANION_DASHBOARD_TOKEN)")

    def token_matches(self, offered: str) -> bool:
        try:
            raw = offered.encode()
        except (
            UnicodeEncodeError
        ):  # undecodable bytes in the header (kept as surrogates) cannot be the token
            return False
        return hmac.compare_digest(raw, self.token.encode())

    def bearer(self, header: str | None) -> Caller | None:
        """The caller of a request with an Authorization header; None if it is absent or wrong."""
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not self.token_matches(value.strip()):
            return None
        return Caller(f"{self.who} (token)", "bearer")

    def session(self, cookie: str | None) -> Caller | None:
        if not cookie:
            return None
        key = _digest(cookie)
        found = self._sessions.get(key)
        if found is None or found.expires_at < time.time():
            self._sessions.pop(key, None)
            return None
        return Caller(f"{self.who} (browser)", "session", found.csrf, key)

    def csrf_ok(self, caller: Caller, offered: str | None) -> bool:
        return caller.via == "bearer" or (
            bool(offered) and hmac.compare_digest((offered or "").encode(), caller.csrf.encode())
        )

    # -- wrong tokens, per client (``bot.dashboard.throttle``) ------------------------------
    def client(self, cookie: str | None, address: str) -> Client:
        """Whom a request's token check counts toward: its client cookie if this gate gave it, else
        its address (``client_key``)."""
        return self._throttle.client(cookie, address)

    def new_client(self, *, proven: bool = False) -> str:
        """A client cookie for a browser that has none (always: never rationed per address);
        ``proven`` for one that just logged in."""
        return self._throttle.mint(proven=proven)

    def throttled(self, client: Client) -> bool:
        return self._throttle.throttled(client)

    def failed(self, client: Client) -> None:
        self._throttle.failed(client)

    def succeeded(self, client: Client) -> None:
        self._throttle.succeeded(client)

    # -- the login form --------------------------------------------------------------------------------
    def login(self, offered: str, client: Client) -> str | None:
        """A new session's cookie value when ``offered`` is the token; None (and one failure noted) otherwise."""
        if not self.token_matches(offered):
            self.failed(client)
            return None
        self.succeeded(client)
        cookie = secrets.token_urlsafe(32)
        now = time.time()
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires_at > now}
        self._sessions[_digest(cookie)] = _Session(secrets.token_urlsafe(32), now + SESSION_TTL_S)
        return cookie

    def logout(self, caller: Caller) -> None:
        self._sessions.pop(caller.session_key, None)


def client_key(remote: str | None) -> str:
    """Whose failures a request counts toward: its peer address; an IPv6 peer by its /64, since one machine
    commonly holds a whole /64 and could otherwise take a fresh address per guess."""
    try:
        address = ipaddress.ip_address(remote or "")
    except ValueError:
        return remote or "unknown"
    if address.version == 6 and not address.is_loopback:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _digest(value: str) -> str:
    return hashlib.sha256(
        value.encode("utf-8", "replace")
    ).hexdigest()  # a cookie of undecodable bytes matches nothing
