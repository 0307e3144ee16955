"""Write-safety filters applied on every write path (WRITE-6, SEC-4).

A memory is normalised and then refused when it is too short or too long, reads like a prompt
injection, is a standing directive to the bot without being filed as guidance/behavioral, or carries a
secret (API key, token, password, card number, private key).
"""
from __future__ import annotations

import re
import unicodedata

from .errors import Rejected
from .models import FactKind

MIN_CONTENT, MAX_CONTENT = 3, 2_000
MAX_SUBJECT = 200

_INJECTION = re.compile(
    r"ignore (all |any |the )?(previous|prior|above|earlier|your) (instructions|prompts?|rules)"
    r"|disregard (all |any |the )?(previous|prior|above|your) (instructions|rules)"
    r"|forget (all |your )?(previous |prior )?instructions"
    r"|\bsystem prompt\b|\bdeveloper mode\b|\bjailbreak\b|</?system>|\[/?inst\]|<\|im_(start|end)\|>"
    r"|\byou are now (a|an|in)\b|\bnew instructions\s*:",
    re.IGNORECASE,
)
_DIRECTIVE = re.compile(
    r"^\s*(always|never|from now on|you (must|should|will|shall)|do not ever|don't ever|make sure (to|you)"
    r"|respond (only|always)|reply (only|always|in)|stop (saying|using|calling))\b",
    re.IGNORECASE,
)
_SECRETS = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),                      # OpenAI-style keys
    re.compile(r"\b(ghp|gho|ghu|ghs|github_pat)_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),               # Slack
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),                          # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),                     # Google API key
    re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b"),                # Telegram bot token
    re.compile(r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}\b"),  # Discord bot token
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(password|passwd|passphrase|pin code|api[ _-]?key|secret key|access token)\b\s*(is|:|=)\s*\S+", re.IGNORECASE),
]
_CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")


_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")


def normalise_text(text: str) -> str:
    """NFC, control and invisible format characters removed, white space folded."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFC", str(text)))
    return " ".join(text.split())


def check_memory(subject: str, content: str, kind: FactKind) -> tuple[str, str]:
    """Normalised (subject, content), or ``Rejected`` with the reason in plain words."""
    subject, content = normalise_text(subject), normalise_text(content)
    if len(content) < MIN_CONTENT:
        raise Rejected(f"content is too short (at least {MIN_CONTENT} characters)")
    if len(content) > MAX_CONTENT:
        raise Rejected(f"content is too long ({len(content)} characters; at most {MAX_CONTENT})")
    if not subject:
        subject = content[:60]
    if len(subject) > MAX_SUBJECT:
        raise Rejected(f"subject is too long (at most {MAX_SUBJECT} characters)")
    both = f"{subject}\n{content}"
    if _INJECTION.search(both):
        raise Rejected("text reads like an instruction to override the bot's rules; not stored")
    if contains_secret(both):
        raise Rejected("text contains what looks like a secret (key, token, password or card number); never stored")
    if kind not in (FactKind.GUIDANCE, FactKind.BEHAVIORAL) and _DIRECTIVE.search(content):
        raise Rejected("a standing directive to the bot must be stored with kind 'guidance' or 'behavioral'")
    return subject, content


def contains_secret(text: str) -> bool:
    if any(p.search(text) for p in _SECRETS):
        return True
    return any(_luhn(re.sub(r"\D", "", m.group())) for m in _CARD.finditer(text))


def _luhn(digits: str) -> bool:
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0
