"""Who may use the dashboard (DASH-3): the configured token, as a bearer header or through the login form.

    Authorization: Bearer <token>   scripts; no CSRF token needed (a browser never adds this header by itself)
    companion_session cookie        the page after ``POST /login``; HttpOnly, SameSite=Strict, Path=/; every
                                    request that is not GET/HEAD must also carry ``X-CSRF-Token`` (the session's
                                    token, given to the page in a meta tag and by ``GET /api/session``)

Every secret comparison is constant-time (``hmac.compare_digest``); sessions are looked up by the SHA-256 of
the cookie, so a lookup's timing says nothing about a valid cookie. Sessions live in memory: a restart logs
everyone out. Wrong tokens, as a bearer header or through the login form, are throttled per client address
(``MAX_FAILURES`` a minute, then every token check from that address is refused until the minute has passed,
the right token too, or a throttled guess would still tell right from wrong): the token cannot be guessed
online, and a client that guesses locks out only itself, not the operator on another address. A logged-in
browser's session is not a token check and is never throttled.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field

COOKIE = "companion_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_TTL_S = 12 * 3600.0
MAX_FAILURES, FAILURE_WINDOW_S = 10, 60.0
SAFE_METHODS = frozenset({"GET", "HEAD"})
MAX_CLIENTS = 10_000  # addresses whose failures are remembered; past it the oldest are dropped (bounded memory)


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
    _failures: dict[str, list[float]] = field(default_factory=dict)  # client key -> times of its wrong tokens

    def __post_init__(self) -> None:
        if not self.token.strip():
            raise ValueError("the dashboard needs a token (COMPANION_DASHBOARD_TOKEN)")

    def token_matches(self, offered: str) -> bool:
        try:
            raw = offered.encode()
        except UnicodeEncodeError:  # undecodable bytes in the header (kept as surrogates) cannot be the token
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
        return caller.via == "bearer" or (bool(offered) and hmac.compare_digest((offered or "").encode(), caller.csrf.encode()))

    # -- wrong tokens, per client ---------------------------------------------------------------------------
    def throttled(self, client: str) -> bool:
        """Whether ``client`` (``client_key``) had ``MAX_FAILURES`` wrong tokens within the last minute."""
        recent = self._recent(client)
        return len(recent) >= MAX_FAILURES

    def failed(self, client: str) -> None:
        self._failures[client] = [*self._recent(client), time.time()]
        if len(self._failures) > MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))

    def _recent(self, client: str) -> list[float]:
        cutoff = time.time() - FAILURE_WINDOW_S
        recent = [t for t in self._failures.pop(client, []) if t > cutoff]
        if recent:
            self._failures[client] = recent  # re-inserted: the dict's order is oldest activity first
        return recent

    # -- the login form --------------------------------------------------------------------------------
    def login(self, offered: str, client: str) -> str | None:
        """A new session's cookie value when ``offered`` is the token; None (and one failure noted) otherwise."""
        if not self.token_matches(offered):
            self.failed(client)
            return None
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
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()  # a cookie of undecodable bytes matches nothing
