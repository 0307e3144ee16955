"""What OpenAI-compatible servers say when they do not support a part of a request (ORCH-9, OPS-5).

A server without tool calling does not always answer 400: llama.cpp without ``--jinja`` answers 500 "tools
param requires --jinja flag", others 422 or 501 "does not support tools" or "tool_choice ... not supported".
The same goes for ``response_format``. Such an answer is a refusal of the feature, not a failure: retrying
it three times changes nothing, and blaming the model name or the key misleads. A genuine 500 ("overloaded",
"internal error") names neither feature and is retried as before.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

import openai

# Words that, next to the feature's name, say the server cannot do it (rather than failed while doing it).
_CANNOT = re.compile(
    r"not (?:be )?support|unsupported|requires?|jinja|not (?:be )?(?:allowed|enabled|available|implemented|permitted)|"
    r"does ?n[o']t|cannot|can't|unknown|unrecognized|unexpected|invalid|extra (?:fields|inputs)|not a valid",
    re.IGNORECASE,
)
FEATURES = {
    "tools": re.compile(r"\btools?\b|tool_choice|tool[ _-]?call|function[ _-]?call", re.IGNORECASE),
    "response_format": re.compile(
        r"response_format|json_schema|json[ _-]?mode|structured output|grammar", re.IGNORECASE
    ),
}


def server_words(exc: openai.APIStatusError) -> str:
    """The server's own error message, bounded, for the one log line."""
    body = exc.body
    text = body.get("message") if isinstance(body, dict) else body
    text = str(text if text else exc.message)
    return text if len(text) <= 200 else text[:197] + "..."


def refused(exc: openai.APIStatusError, args: dict[str, Any]) -> str | None:
    """The request's feature ("tools" or "response_format") this error answer says the server does not support."""
    if exc.status_code not in (400, 404, 422, 500, 501):
        return None
    said = f"{server_words(exc)} {exc.message}"
    for feature, named in FEATURES.items():
        if feature not in args or not named.search(said):
            continue
        if exc.status_code == 400 or _CANNOT.search(
            said
        ):  # a 400 naming the feature was always a refusal here
            return feature
    return None


# -- local servers -----------------------------------------------------------------------------------------
LOCAL_NAMES = ("localhost", "host.docker.internal", "host.containers.internal")


def is_local(base_url: str) -> bool:
    """A server on this machine or the LAN (loopback, private ranges, *.local, a container's host)."""
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if host in LOCAL_NAMES or host.endswith((".local", ".localhost", ".lan", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
