"""Wrong dashboard tokens, counted per client (DASH-3; issues 31 and 44), so that a guesser slows
only itself and never locks the operator out.

Every ssh-tunnel client is 127.0.0.1: an address cannot tell the operator's browser from another
local process, so a browser is told apart by a client cookie (``CLIENT_COOKIE``) the form gives it:

    the cookie      "c.<nonce>.<mac>", signed with this process's random key, so it costs no
                    memory and no number of them can push another out; given to every browser
                    that comes to the form without a valid one, however many were just given
                    (issue 44: one a second per address let a guesser minting them starve the
                    operator of one, whose browser then shared the address's count: 429)
    proven          the right token through the form makes the browser's cookie "p.<nonce>.<mac>":
                    a browser that has logged in before (since this process started)

What a wrong token counts toward:

    its client      the cookie's nonce, else the address (a script's bearer header, a client without
                    cookies): after ``MAX_FAILURES`` wrong tokens a minute, one check a ``PACE_S``
    the address     (not for a proven browser) the wrong tokens of its unproven clients: once
                    ``MAX_GUESSERS`` different clients there guessed wrong within the minute, the
                    address's unproven clients share one check a ``PACE_S`` between them

A check refused is refused unchecked (the right token too: a throttled guess would still tell right
from wrong), and the operator who mistyped waits a second, never a minute. So:

- a local process sending wrong tokens as fast as it can, as one client (with a cookie or without),
  slows itself only: the operator's browser, even one given its cookie during the flood, logs in;
- a guesser minting cookies to start afresh each time gets at most ``MAX_GUESSERS`` x
  ``MAX_FAILURES`` quick guesses a minute, then one a second for the whole address (against a
  token of 140 bits); and a browser that logged in before is never slowed by it. A browser that
  never logged in is, to the server, one more fresh cookie: while such a guesser runs on its
  address, it shares the address's one check a second.

Memory is bounded: ``MAX_CLIENTS`` clients and addresses are remembered, the oldest dropped first (a
dropped guesser's own count starts again, its address's does not while it keeps guessing).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

CLIENT_COOKIE = (
    "companion_client"  # which browser a token came from (not a login: it opens nothing)
)
CLIENT_TTL_S = 365 * 24 * 3600.0  # a browser keeps being itself for a year
PACE_S = 1.0  # a throttled client's (or crowded address's) token checks: one a second
MAX_FAILURES, FAILURE_WINDOW_S = 10, 60.0
MAX_GUESSERS = 4  # different clients guessing wrong at one address within the window: a crowd
MAX_CLIENTS = 10_000


@dataclass(frozen=True, slots=True)
class Client:
    """Whom a token check is for: ``key`` counts its own wrong tokens, ``address`` its crowd."""

    key: str
    address: str
    proven: bool = False


@dataclass
class Throttle:
    _secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    _failures: dict[str, list[float]] = field(default_factory=dict)  # client key -> wrong tokens
    _checked: dict[str, float] = field(default_factory=dict)  # client key -> last check
    _crowds: dict[str, list[tuple[float, str]]] = field(
        default_factory=dict
    )  # address -> (when, who)
    _lanes: dict[str, float] = field(default_factory=dict)  # crowded address -> last check

    # -- client cookies ---------------------------------------------------------------------
    def mint(self, *, proven: bool = False) -> str:
        kind, nonce = ("p" if proven else "c"), secrets.token_urlsafe(18)
        return f"{kind}.{nonce}.{self._mac(kind, nonce)}"

    def client(self, cookie: str | None, address: str) -> Client:
        """The client a request's token counts toward: its cookie when this process signed it."""
        kind, nonce, mac = ((cookie or "").split(".") + ["", "", ""])[:3]
        if kind in ("c", "p") and nonce and hmac.compare_digest(mac, self._mac(kind, nonce)):
            return Client(f"client:{nonce}", address, proven=kind == "p")
        return Client(address, address)

    def _mac(self, kind: str, nonce: str) -> str:
        raw = f"{kind}.{nonce}".encode("utf-8", "replace")
        return hmac.new(self._secret, raw, hashlib.sha256).hexdigest()[:32]

    # -- token checks -----------------------------------------------------------------------
    def throttled(self, client: Client) -> bool:
        """Whether this token check must wait (the module's table). Asking counts as a check."""
        now = time.time()
        last = self._checked.get(client.key, 0.0)
        if len(self._recent(client.key)) >= MAX_FAILURES and now - last < PACE_S:
            return True
        if not client.proven and self._crowded(client.address):
            if now - self._lanes.get(client.address, 0.0) < PACE_S:
                return True
            _put(self._lanes, client.address, now)
        _put(self._checked, client.key, now)
        return False

    def failed(self, client: Client) -> None:
        now = time.time()
        _put(self._failures, client.key, [*self._recent(client.key), now])
        if not client.proven:
            _put(self._crowds, client.address, [*self._crowd(client.address), (now, client.key)])

    def succeeded(self, client: Client) -> None:
        """The right token: the client's wrong ones are behind it."""
        self._failures.pop(client.key, None)

    def _crowded(self, address: str) -> bool:
        return len({who for _, who in self._crowd(address)}) >= MAX_GUESSERS

    def _recent(self, key: str) -> list[float]:
        cutoff = time.time() - FAILURE_WINDOW_S
        return [t for t in self._failures.get(key, []) if t > cutoff]

    def _crowd(self, address: str) -> list[tuple[float, str]]:
        cutoff = time.time() - FAILURE_WINDOW_S
        return [(t, who) for t, who in self._crowds.get(address, []) if t > cutoff]


def _put(bounded: dict, key: str, value: object) -> None:
    """Set ``key`` as the newest entry (re-inserted: the dict's order is oldest activity first), and
    drop the oldest past ``MAX_CLIENTS``."""
    bounded.pop(key, None)
    bounded[key] = value
    while len(bounded) > MAX_CLIENTS:
        bounded.pop(next(iter(bounded)))
