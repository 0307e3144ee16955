"""Who may use the dashboard (DASH-3): the configured token, as a bearer header or through the login form.

    Authorization: Bearer <token>   scripts; no CSRF token needed (a browser never adds this header by itself)
    companion_session cookie        the page after ``POST /login``; HttpOnly, SameSite=Strict, Path=/; every
                                    request that is not GET/HEAD must also carry ``X-CSRF-Token`` (the session's
                                    token, given to the page in a meta tag and by ``GET /api/session``)

Every secret comparison is constant-time (``hmac.compare_digest``); sessions are looked up by the SHA-256 of
the cookie, so a lookup's timing says nothing about a valid cookie. Sessions live in memory: a restart logs
everyone out. Wrong logins are throttled (``MAX_FAILURES`` a minute) so the token cannot be guessed online.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

COOKIE = "companion_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_TTL_S = 12 * 3600.0
MAX_FAILURES, FAILURE_WINDOW_S = 10, 60.0
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
    _failures: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.token.strip():
            raise ValueError("the dashboard needs a token (COMPANION_DASHBOARD_TOKEN)")

    def token_matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self.token.encode())

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

    # -- the login form --------------------------------------------------------------------------------
    def throttled(self) -> bool:
        now = time.time()
        self._failures = [t for t in self._failures if t > now - FAILURE_WINDOW_S]
        return len(self._failures) >= MAX_FAILURES

    def login(self, offered: str) -> str | None:
        """A new session's cookie value when ``offered`` is the token; None (and one failure noted) otherwise."""
        if not self.token_matches(offered):
            self._failures.append(time.time())
            return None
        cookie = secrets.token_urlsafe(32)
        now = time.time()
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires_at > now}
        self._sessions[_digest(cookie)] = _Session(secrets.token_urlsafe(32), now + SESSION_TTL_S)
        return cookie

    def logout(self, caller: Caller) -> None:
        self._sessions.pop(caller.session_key, None)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
