"""A place's own persona (ORCH-7): text a server's or group's admins add to the operator's persona; the one
owner of ``place_personas``.

    /persona set <text> (admins: Discord Manage Server, Telegram chat admins, or the bot's owner; or the dashboard)
      -> check_persona_text: one bound, the same secret and injection filters as stored text, and no way to
         leave its section (no Markdown heading, rule or code fence: it cannot forge another section)
      -> one row per place (the platform-namespaced guild id, "discord:123")
      -> an audit row in ``dashboard_audit`` (who, when, which place, how long; never the words)
    /persona reset -> the row goes, audited the same way

A place's persona applies only in that place: it is read by its guild id, and a DM has none. It is the
admins' words, so forgetting the person who set it removes it (``memory.upkeep.registry``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from ..clock import Clock
from ..errors import InvalidInput, Rejected
from ..evasions import fold
from ..safety import contains_secret, looks_like_injection, normalise_text
from .audit import AuditTrail
from .db import Database

MAX_PLACE_PERSONA = (
    1_000  # characters: it rides along with every reply in the place, beside the operator's persona
)
# A line that would start a new section of the system prompt: a Markdown heading, a setext underline or
# rule, a code fence. The text is also rendered as a quote, so this is the refusal that says why.
_SECTION_BREAK = re.compile(
    r"^\s*(#|={3,}\s*$|-{3,}\s*$|\*{3,}\s*$|_{3,}\s*$)|##|```|~~~", re.MULTILINE
)
_SETEXT = re.compile(r"^\s*(=+|-+)\s*$", re.MULTILINE)  # "Title" over "=" (or "-") is a heading too
_STAFF = r"(?:operator|system|admin(?:istrator)?|moderator|mod|owner|developer|staff)"
_AUTHORITY = re.compile(
    rf"\b{_STAFF}\s*(?:note|message|instruction|override|notice|directive|prompt|update)s?\b",
    re.IGNORECASE,
)
_RENAME = re.compile(
    r"\b(?:your (?:new )?name(?: is|'s)|you are (?:now )?called|you'?re (?:now )?called"
    r"|call yourself"
    r"|go by the name|(?:you are|you'?re) (?:now )?(?:known|named) as"
    r"|introduce yourself as|answer to the name|refer to yourself as)\b"
    # "go by Olga", not "go by first names"
    r"|(?:\byou (?:now |will |shall )?|^|[.!?;]\s+)go by\s+(?-i:[\"'\u201c]?[A-Z])",
    re.IGNORECASE | re.MULTILINE,
)
_STAFF_SIGNATURE = re.compile(rf"\(\s*{_STAFF}\s*\)|\bsign\w*\b[^\n]*\b{_STAFF}\b", re.IGNORECASE)
# A forged speaker: a line or sentence opening "Operator:" or "SYSTEM -", a tag "[SYSTEM]",
# "<operator>", "(from the admins)", or words given to staff ("message from the operator", "the
# operator allows ...")
_STAFF_VOICE = re.compile(
    rf"(?:^|[.!?;]\s+)\W*{_STAFF}s?(?:\s+(?:message|note|says))?\s*[:>|\u2013\u2014-]"
    rf"|[\[<{{(]\s*/?\s*(?:(?:from|by)\s+(?:the\s+|your\s+)?)?{_STAFF}s?"
    rf"(?:\s+\w+){{0,2}}\s*[\]>}})]"
    rf"|\b(?:(?:message|word|note|orders?|instructions?|notice)\s+from|on\s+behalf\s+of"
    rf"|by\s+order\s+of)\s+(?:the\s+|your\s+|this\s+\w+'s\s+)?{_STAFF}s?\b"
    rf"|\b(?:the|your)\s+{_STAFF}s?\s+(?:says|said|wants|allows|allowed|permits|authori[sz]e[sd]"
    rf"|has\s+(?:approved|allowed|authori[sz]ed|decided))\b",
    re.IGNORECASE | re.MULTILINE,
)
# The bot given a staff role ("you are the group's admin"; "act as a moderator"), or a new self
# announced ("From now on you are ..."); "a bot who helps the admins" gives it none
_PLACE = r"(?:group|server|chat|channel|bot|community|place)"
_ROLE = (
    rf"(?:admin(?:istrator)?s?|moderators?|{_PLACE}'?s?\s+(?:owner|operator|developer)s?"
    rf"|(?:owner|operator|developer)s?\s+of\s+(?:this|the|our|its)\s+{_PLACE})"
)
_STAFF_ROLE = re.compile(
    r"\b(?:you are|you'?re|act as|serve as|pose as|speak as|behave as)\b"
    rf"(?:(?!\b(?:who|that|which|when|if|to|for|with)\b)[^.;!?\n]){{0,60}}?\b{_ROLE}\b",
    re.IGNORECASE,
)
_NEW_SELF = re.compile(
    r"\b(?:from now on|henceforth|from today|starting now),?\s+"
    r"(?:you are|you'?re|you will be|your name)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class PlacePersona:
    guild_id: str
    text: str
    set_by: str  # the person id of the admin, or "dashboard"
    set_at: float


def check_persona_text(text: str) -> str:
    """The text as it will be stored (NFKC, each line normalised), or ``Rejected`` saying why in plain words.

    The filters read it as a model would: NFKC ("＃" is "#"), look-alike letters as Latin, every line break
    (U+2028, U+2029, NEL, CR) a line, and emphasis marks dropped ("**OPERATOR NOTE**" is "OPERATOR NOTE")."""
    lines = [normalise_text(line) for line in unicodedata.normalize("NFKC", str(text)).splitlines()]
    clean = "\n".join(lines).strip()
    clean = re.sub(r"\n{3,}", "\n\n", clean)
    _refuse_forgery(re.sub(r"[*_~`]+", "", fold(clean)))
    if not clean:
        raise Rejected(
            "say what the persona is, e.g. /persona set You are the server's cheerful quizmaster."
        )
    if len(clean) > MAX_PLACE_PERSONA:
        raise Rejected(
            f"a place's persona is at most {MAX_PLACE_PERSONA} characters (this one is {len(clean)})"
        )
    if contains_secret(clean):
        raise Rejected(
            "the persona contains what looks like a secret (key, token, password or card number); not stored"
        )
    if looks_like_injection(clean):
        raise Rejected("the persona reads like an attempt to override the bot's rules; not stored")
    if _SECTION_BREAK.search(clean):
        raise Rejected(
            "the persona may not contain headings, rules or code fences (#, ---, ```): write it as plain text"
        )
    return clean


def _refuse_forgery(plain: str) -> None:
    """A persona that would speak with more authority than an admin's note on style: a forged
    operator or system message, a new name for the bot (the operator's persona file names it), a
    signature as staff (issue 31); a staff label or tag ("Operator:", "[SYSTEM]"), the bot made
    staff ("you are the group's admin"), a new self announced ("From now on you are ...") (issue
    44). Ordinary words stay: "if the system is down", "Ana is the admin of our book club", "people
    here talk about their operator at work"."""
    if _AUTHORITY.search(plain):
        raise Rejected(
            "the persona may not speak for the operator or the system (e.g. OPERATOR NOTE): describe how the bot talks here"
        )
    if _RENAME.search(plain):
        raise Rejected("the persona may not rename the bot: its name is the operator's choice")
    if _STAFF_SIGNATURE.search(plain):
        raise Rejected(
            "the persona may not make the bot sign as an admin, moderator, owner or operator"
        )
    if _STAFF_VOICE.search(plain):
        raise Rejected(
            "the persona may not speak as the operator, the system or the admins "
            "(e.g. 'Operator:', '[SYSTEM]'): describe how the bot talks here"
        )
    if _STAFF_ROLE.search(plain):
        raise Rejected(
            "the persona may not make the bot an admin, moderator, owner or operator: "
            "it describes how it talks"
        )
    if _NEW_SELF.search(plain):
        raise Rejected(
            "the persona may not announce a new self for the bot ('from now on you are ...'): "
            "describe it plainly"
        )
    if _SETEXT.search(plain):
        raise Rejected(
            "the persona may not contain headings, rules or code fences (#, ---, ```): write it as plain text"
        )


class PlacePersonas:
    def __init__(self, db: Database, clock: Clock, audit: AuditTrail) -> None:
        self.db, self.clock, self.audit = db, clock, audit

    def get(self, guild_id: str | None) -> PlacePersona | None:
        """The persona of this place; None in a DM or when its admins set none."""
        if not guild_id:
            return None
        row = self.db.one("SELECT * FROM place_personas WHERE guild_id = ?", (guild_id,))
        return (
            PlacePersona(row["guild_id"], row["text"], row["set_by"], row["set_at"])
            if row
            else None
        )

    def all(self) -> list[PlacePersona]:
        rows = self.db.rows("SELECT * FROM place_personas ORDER BY guild_id")
        return [PlacePersona(r["guild_id"], r["text"], r["set_by"], r["set_at"]) for r in rows]

    def set(
        self, guild_id: str, text: str, *, who: str, person_id: str | None = None
    ) -> PlacePersona:
        """Checked, stored and audited in one transaction. ``who`` names the changer in the audit trail."""
        if not guild_id:
            raise InvalidInput("a persona belongs to a server or group, not a private chat")
        clean = check_persona_text(text)
        now = self.clock.now()
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO place_personas (guild_id, text, set_by, set_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (guild_id) DO UPDATE SET text = excluded.text, set_by = excluded.set_by, set_at = excluded.set_at",
                (guild_id, clean, person_id or who, now),
            )
            self.audit.record(
                who, "persona.set", guild_id, person_id=person_id, detail={"chars": len(clean)}
            )
        return PlacePersona(guild_id, clean, person_id or who, now)

    def reset(self, guild_id: str, *, who: str, person_id: str | None = None) -> bool:
        """The place goes back to the operator's persona alone; False when it had none."""
        with self.db.transaction():
            gone = self.db.scalar(
                "SELECT COUNT(*) FROM place_personas WHERE guild_id = ?", (guild_id,)
            )
            if gone:
                self.db.execute("DELETE FROM place_personas WHERE guild_id = ?", (guild_id,))
                self.audit.record(who, "persona.reset", guild_id, person_id=person_id)
        return bool(gone)
