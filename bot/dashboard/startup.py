"""Whether the dashboard may start (DASH-3), checked the same way by ``companion dashboard`` and by
``companion run`` before anything listens. Plain values in, a refusal in words out: no aiohttp here, so
``companion --help`` does not pay for it.

    no token                      refused: every request needs it
    a token under MIN_TOKEN       refused: guessable, throttled or not
    a host that is not loopback   refused unless COMPANION_DASHBOARD_ALLOW_REMOTE=true (prefer an SSH tunnel)
"""

from __future__ import annotations

import ipaddress

from .services import NO_TOKEN

# 24 characters of a random token are ~140 bits (token_urlsafe), far past online guessing at the throttled rate;
# the check cannot tell random from chosen, so the length is the one rule, and the message says how to make one.
MIN_TOKEN = 24
MAKE_ONE = (
    "COMPANION_DASHBOARD_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
)


def start_refusal(token: str, host: str, *, allow_remote: bool) -> str | None:
    """Why the dashboard must not start with these settings, or None when it may."""
    if not token.strip():
        return NO_TOKEN
    if len(token) < MIN_TOKEN:
        return f"COMPANION_DASHBOARD_TOKEN is {len(token)} characters; the dashboard needs at least {MIN_TOKEN} (a random one: {MAKE_ONE})"
    if not is_loopback(host) and not allow_remote:
        return (
            f"the dashboard listens only on a loopback address, not {host}: keep COMPANION_DASHBOARD_HOST=127.0.0.1 and "
            "use an SSH tunnel, or set COMPANION_DASHBOARD_ALLOW_REMOTE=true to let anyone who can reach it try the token"
        )
    return None


def is_loopback(host: str) -> bool:
    """A loopback address ("127.0.0.1", "::1", "[::1]") or the name "localhost"."""
    name = host.strip().lower().strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name == "localhost"
