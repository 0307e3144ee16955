"""Who may use the dashboard (DASH-3): the configured token, as a bearer header or through the login form.

    Authorization: Bearer <token>   scripts; no CSRF token needed (a browser never adds this header by itself)
    companion_session cookie        the page after ``POST /login``; HttpOnly, SameSite=Strict, Path=/; every
                                    request that is not GET/HEAD must also carry ``X-CSRF-Token`` (the session's
                                    token, given to the page in a meta tag and by ``GET /api/session``)

Every secret comparison is constant-time (``hmac.compare_digest``); sessions are looked up by the SHA-256 of
the cookie, so a lookup's timing says nothing about a valid cookie. Sessions live in memory: a restart logs
everyone out. Wrong tokens, as a bearer header or through the login form, are throttled per client: a
browser by the client cookie the login page gives it (``CLIENT_COOKIE``), anything else by its address. After
``MAX_FAILURES`` wrong tokens a minute a client's token checks are paced to one a second (``PACE_S``): a check
sooner is refused unchecked (the right token too, or a throttled guess would still tell right from wrong), and
the right token a second later passes. Every ssh-tunnel client is 127.0.0.1 (issue 31): a local process that
guesses slows only itself, never the operator's browser, and the operator who mistyped is never kept out for
longer than a second. A new client cookie is given to an address at most once a second, so minting cookies buys
a guesser ``MAX_FAILURES`` quick guesses a second at most (against a token of 140 bits). A logged-in browser's
session is not a token check and is never throttled.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field

COOKIE = "companion_session"
CLIENT_COOKIE = (
    "companion_client"  # which browser a wrong token came from (not a login: it opens nothing)
)
PACE_S = 1.0  # a throttled client's token checks: one a second, never fewer
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
    # client key -> times of its wrong tokens
    _failures: dict[str, list[float]] = field(default_factory=dict)
    # client key -> when its token was last checked
    _checked: dict[str, float] = field(default_factory=dict)
    # client cookie digest -> when it was given
    _clients: dict[str, float] = field(default_factory=dict)
    # address -> when it was last given a client cookie
    _minted: dict[str, float] = field(default_factory=dict)

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

    # -- wrong tokens, per client ---------------------------------------------------------------------------
    def throttled(self, client: str) -> bool:
        """Whether a token check for ``client`` (``client_key``) must wait: it had ``MAX_FAILURES`` wrong tokens
        within the last minute and its last check was less than ``PACE_S`` ago. Asking counts as a check."""
        now = time.time()
        if (
            len(self._recent(client)) >= MAX_FAILURES
            and now - self._checked.get(client, 0.0) < PACE_S
        ):
            return True
        self._checked[client] = now
        if len(self._checked) > MAX_CLIENTS:
            self._checked.pop(next(iter(self._checked)))
        return False

    def failed(self, client: str) -> None:
        self._failures[client] = [*self._recent(client), time.time()]
        if len(self._failures) > MAX_CLIENTS:
            self._failures.pop(next(iter(self._failures)))

    def succeeded(self, client: str) -> None:
        """The right token: the client's wrong ones are behind it."""
        self._failures.pop(client, None)

    def client(self, cookie: str | None, address: str) -> str:
        """The key a request's wrong tokens count toward: its client cookie if this gate gave it, else its address."""
        digest = _digest(cookie) if cookie else ""
        return f"client:{digest}" if digest in self._clients else address

    def new_client(self, address: str) -> str | None:
        """A client cookie for a browser at ``address`` that has none; None when this address had one within
        ``PACE_S`` (a guesser minting cookies to start afresh each time gets one a second)."""
        now = time.time()
        if now - self._minted.get(address, 0.0) < PACE_S:
            return None
        self._minted[address] = now
        cookie = secrets.token_urlsafe(24)
        self._clients[_digest(cookie)] = now
        for bounded in (self._minted, self._clients):
            while len(bounded) > MAX_CLIENTS:
                bounded.pop(next(iter(bounded)))
        return cookie

    def _recent(self, client: str) -> list[float]:
        cutoff = time.time() - FAILURE_WINDOW_S
        recent = [t for t in self._failures.pop(client, []) if t > cutoff]
        if recent:
            self._failures[client] = (
                recent  # re-inserted: the dict's order is oldest activity first
            )
        return recent

    # -- the login form --------------------------------------------------------------------------------
    def login(self, offered: str, client: str) -> str | None:
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
