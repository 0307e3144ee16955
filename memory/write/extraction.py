"""Turning conversation into memories (WRITE-1, WRITE-3, WRITE-4): prompts in, model answers parsed,
each fact attributed to the person who said it, as ``NewMemory`` values ready for ``MemoryStore.add``.

The model never sees a display name it could be fooled by: every speaker in a transcript is tagged
``P1``, ``P2``, ... by platform account, and a fact names the tag of the person it came from. A fact
whose tag is unknown is dropped, unless only one person spoke or it cites one person's lines (SEC-1:
attribution by author id, never by name). A fact is filed where its speaker said it
(``memory.scopes.write_scope``) and carries the stored ids of the messages it came from, so forgetting it
removes them and nothing else (SEC-3). Who owns a fact, which lines it came from (the lines it cites, else
its speaker's closest in words, never all of them), the bot's own facts (ORCH-7, ORCH-9) and asks to forget
in the same transcript are ``memory.write.ownership``'s rules; each pass logs what it filed and dropped.

A fact the conversation did not say (its distinctive words not in its lines, or a word of the
prompt's own example) is not filed (``memory.write.grounding``, issue 45). A person's fact is filed
in the third person with their name, its relative dates resolved as of its lines ("I moved here last
month" -> "Priya moved here in September 2026": ``memory.write.third_person``,
``memory.write.relative_dates``): read back as "I ...", a chat model took the person's life for its
own.

Model answers are untrusted: anything that is not the expected JSON raises ``BadAnswer`` (the caller
retries or backs off); items of the wrong shape are skipped one by one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import Any

import prompts

from ..models import SELF_SUBJECT, EntityRef, FactKind, MemoryType, NewMemory, Provenance, Source
from ..scopes import RecallContext, WriteScope, self_scope, write_scope
from .answers import BadAnswer as BadAnswer  # re-exported: the answers' parsers live in .answers
from .answers import json_items
from .answers import parse_object as parse_object
from .answers import parse_reflection as parse_reflection
from .grounding import Grounding
from .not_facts import not_a_fact, unasked, unlabelled
from .ownership import Dropped, Filed, Ownership, Tally, asks_only
from .relative_dates import resolved
from .subjects import written_by
from .third_person import third_person

log = logging.getLogger(__name__)
MAX_FACTS = 20
MAX_TURN_CHARS = 2_000  # one message's share of a transcript the model reads
MAX_TRANSCRIPT_CHARS = 12_000
MAX_CITED = 50  # line numbers read from one fact's citation


@dataclass(frozen=True, slots=True)
class Line:
    """One turn of a transcript: who said it (their context), the stored message id, the words, when."""

    ctx: RecallContext | None  # None for the bot's own turns
    name: str
    text: str
    message_id: str | None = None
    at: float | None = (
        None  # when the message was written: its "yesterday" is the day before this, not before extraction
    )


@dataclass(frozen=True, slots=True)
class Transcript:
    lines: tuple[Line, ...]

    def speakers(self) -> dict[str, RecallContext]:
        """Tag -> the speaker's latest context, in order of first appearance."""
        tags: dict[str, RecallContext] = {}
        order: dict[str, str] = {}
        for line in self.lines:
            if line.ctx is not None:
                tag = order.setdefault(line.ctx.speaker_id, f"P{len(order) + 1}")
                tags[tag] = line.ctx
        return tags

    def render(self) -> str:
        """Tagged, quoted lines, newest kept when the whole is too long for the model."""
        tag_of = {ctx.speaker_id: tag for tag, ctx in self.speakers().items()}
        out: list[str] = []
        # numbered before cutting: a citation names one line for good
        for number, (line, zone) in enumerate(zip(self.lines, self._zones(), strict=True), start=1):
            who = f"[{tag_of[line.ctx.speaker_id]}] " if line.ctx else "[bot] "
            when = f"{day(line.at, zone)} " if line.at is not None else ""
            quoted = json.dumps(line.text[:MAX_TURN_CHARS], ensure_ascii=False)
            out.append(
                f"#{number} {who}{when}{json.dumps(line.name, ensure_ascii=False)}: {quoted}"
            )
        while len(out) > 1 and sum(len(x) + 1 for x in out) > MAX_TRANSCRIPT_CHARS:
            out.pop(0)
        return "\n".join(out)

    def written(self) -> str:
        """The day (or first and last day) the lines were written, for the prompt's reading of relative dates."""
        days = sorted(
            {
                day(line.at, zone)
                for line, zone in zip(self.lines, self._zones(), strict=True)
                if line.at is not None
            }
        )
        if not days:
            return "on an unknown date"
        return f"on {days[0]}" if len(days) == 1 else f"between {days[0]} and {days[-1]}"

    def _zones(self) -> list[tzinfo]:
        """Each line's day is its speaker's (ORCH-8): a person's "yesterday" is the day before their own date;
        the bot's lines take the zone of the person it answered."""
        current = next((line.ctx.tz for line in self.lines if line.ctx is not None), UTC)
        zones = []
        for line in self.lines:
            current = line.ctx.tz if line.ctx is not None else current
            zones.append(current)
        return zones

    def place(self) -> RecallContext | None:
        """The context of the chat: the latest human line's (a server's lines all name it; a DM has one person)."""
        return next((line.ctx for line in reversed(self.lines) if line.ctx is not None), None)


def _numbers(cited: Any) -> list[int]:
    """Line numbers as the model wrote them: 3, "3", "#3", "L3", or a list of those (anything else is none)."""
    items = cited if isinstance(cited, list) else [cited]
    out = []
    for item in items[:MAX_CITED]:
        text = (
            str(item).strip().lstrip("#Ll")
            if isinstance(item, (int, str)) and not isinstance(item, bool)
            else ""
        )
        if text.isdigit():
            out.append(int(text))
    return out


def day(at: float, zone: tzinfo = UTC) -> str:
    """The calendar date in ``zone`` with its weekday ("2026-10-21 (Wednesday)"): enough to resolve "next Friday"."""
    moment = datetime.fromtimestamp(at, zone)
    return f"{moment:%Y-%m-%d} ({moment:%A})"


def place(ctx: RecallContext) -> str:
    return f"a private chat on {ctx.platform}" if ctx.is_dm else f"a group chat on {ctx.platform}"


def extraction_prompt(transcript: Transcript, ctx: RecallContext) -> str:
    return prompts.render(
        "extraction", place=place(ctx), written=transcript.written(), messages=transcript.render()
    )


def reflection_prompt(
    transcript: Transcript, ctx: RecallContext, max_facts: int = 10, doubted: tuple[str, ...] = ()
) -> str:
    """``doubted``: memories of this place a person answered with 👎 (ORCH-12), for the model to check against the
    excerpt (a wrong one is corrected by a new fact, which the write path files as its update)."""
    tags = ", ".join(transcript.speakers())
    listed = "\n".join(f"- {json.dumps(text, ensure_ascii=False)}" for text in doubted) or "(none)"
    return prompts.render(
        "micro_reflection",
        place=place(ctx),
        written=transcript.written(),
        participants=tags,
        excerpt=transcript.render(),
        max_facts=max_facts,
        doubted=listed,
    )


# -- answers ----------------------------------------------------------------------------------------------
def parse_list(text: str) -> list[dict[str, Any]]:
    """The JSON objects of an extraction answer, in any form real models send (``answers.json_items``)."""
    parsed = json_items(text)
    if parsed.dropped:
        log.info(
            "extraction answer: %d items kept, dropped %s", len(parsed.items), parsed.describe()
        )
    return parsed.items


# -- attribution ------------------------------------------------------------------------------------------
def memories_from(
    candidates: list[dict[str, Any]], transcript: Transcript, source: Source
) -> list[NewMemory]:
    """Each usable candidate as a memory of the person who said it (or of the bot itself, ORCH-7), as
    ``memory.write.ownership`` decides; the rest are dropped, counted by reason in one log line."""
    rules, tally, speakers = Ownership(transcript.lines), Tally(), transcript.speakers()
    lines = transcript.lines
    bot = [i for i, line in enumerate(lines) if line.ctx is None]
    ground = Grounding([line.text for line in lines], [line.name for line in lines], bot)
    tally.drop("more than the limit of facts", len(candidates) - MAX_FACTS)
    out: list[NewMemory] = []
    for candidate in candidates[:MAX_FACTS]:
        try:
            new = _filed(candidate, transcript, speakers, (rules, ground), tally, source)
        except (TypeError, ValueError) as exc:
            log.debug("extracted fact dropped: %s", exc)
            tally.drop("malformed item")
            continue
        if new is not None:
            out.append(new)
    log.info("%s", tally.line(f"{source.value} of {len(transcript.lines)} line(s)"))
    return out


def _filed(
    candidate: dict[str, Any],
    transcript: Transcript,
    speakers: dict[str, RecallContext],
    checks: tuple[Ownership, Grounding],
    tally: Tally,
    source: Source,
) -> NewMemory | None:
    """The candidate as a memory of its owner; None (counted in ``tally``) when it is nobody's to file."""
    rules, ground = checks
    # who said it is read from the content: the subject is a label
    content = _text(candidate.get("content"))
    fact = f"{_text(candidate.get('subject'))} {content}"
    cited = _numbers(candidate.get("lines")) or None
    if rules.is_bot(_tag(candidate)):
        decided = rules.self_fact(cited, content)
    else:
        tagged = _speaker(candidate, speakers)
        decided = rules.person(tagged.speaker_id if tagged else None, cited, content)
    if isinstance(decided, Dropped):
        tally.drop(decided.reason)
        return None
    if asks_only(content):
        tally.drop("a question, not a fact")  # "What should I cook tonight?", filed by a 1.5B
        return None
    if why := not_a_fact(content):
        tally.drop(why)  # "remind me tomorrow at 9am to call the vet" (issue 45)
        return None
    if source is not Source.REFLECTION and rules.invented(content):
        # a 1.5B filed the prompt's own example
        tally.drop("none of its words is in the conversation")
        return None
    if ground.copied(content):
        tally.drop("a word of the prompt's example, not of the conversation")
        return None
    own = [i for i, who in enumerate(rules.speaker) if who == decided.speaker]
    if source is not Source.REFLECTION and ground.unsaid(
        content, [*decided.lines, *(n - 1 for n in cited or []), *own]
    ):  # issue 45: "I've adopted a beagle called Rex." citing "What's my cat called?"
        tally.drop("its distinctive words are not in the lines it came from")
        return None
    if decided.speaker is not None and ground.told(content):
        tally.drop("a word only the bot said")  # the bot's guess is not the person's fact
        return None
    if rules.forgotten(decided, fact) is not None:
        tally.drop("asked to forget in this conversation")
        return None
    new = _owned(candidate, decided, transcript, speakers, source)
    if new is None:
        tally.drop("self fact: the bot said nothing here")
        return None
    tally.filed, tally.moved = tally.filed + 1, tally.moved + decided.moved
    return new


def _owned(
    c: dict[str, Any],
    filed: Filed,
    transcript: Transcript,
    speakers: dict[str, RecallContext],
    source: Source,
) -> NewMemory | None:
    """A person's fact where they said it; the bot's own as a self fact of the place (ORCH-7)."""
    sources = tuple(
        dict.fromkeys(str(m) for i in filed.lines if (m := transcript.lines[i].message_id))
    )
    if filed.speaker is not None:
        ctx = next(who for who in speakers.values() if who.speaker_id == filed.speaker)
        said = written_by(
            ctx, [line.ctx for line in transcript.lines if line.ctx and line.message_id in sources]
        )
        new = _new_memory(c, write_scope(ctx), ctx, sources, source)
        return replace(new, content=_told(new.content, transcript, filed, ctx), written_by=said)
    place = transcript.place()
    if place is None or not sources:
        return None
    return replace(_new_memory(c, self_scope(place), place, sources, source), subject=SELF_SUBJECT)


def _told(content: str, transcript: Transcript, filed: Filed, ctx: RecallContext) -> str:
    """A person's fact about them in the third person, its relative dates as of its newest line (issue 45):
    "I moved to York last month" -> "Priya moved to York in September 2026"."""
    lines = [transcript.lines[i] for i in filed.lines] or list(transcript.lines)
    at = max((line.at for line in lines if line.at is not None), default=None)
    own = [
        line.name for line in transcript.lines if line.ctx and line.ctx.speaker_id == ctx.speaker_id
    ]
    name = own[-1] if own else ""
    return third_person(resolved(unasked(unlabelled(content, name)), at, ctx.tz), name)


def _tag(candidate: dict[str, Any]) -> str:
    return str(candidate.get("speaker") or candidate.get("about") or "").strip().strip("[]").upper()


def _speaker(candidate: dict[str, Any], speakers: dict[str, RecallContext]) -> RecallContext | None:
    tag = _tag(candidate)
    if tag in speakers:
        return speakers[tag]
    return next(iter(speakers.values())) if len(speakers) == 1 else None


def _new_memory(
    c: dict[str, Any],
    where: WriteScope,
    ctx: RecallContext,
    sources: tuple[str, ...],
    source: Source,
) -> NewMemory:
    kind = FactKind(c["kind"]) if c.get("kind") in FactKind._value2member_map_ else FactKind.OTHER
    mtype = (
        MemoryType(c["type"])
        if c.get("type") in MemoryType._value2member_map_
        else MemoryType.SEMANTIC
    )
    tags = c.get("tags")
    tags = tags if isinstance(tags, list) else []
    return NewMemory(
        content=_text(c.get("content")),
        subject=_text(c.get("subject")),
        scope=where.scope,
        scope_id=where.scope_id,
        visibility=where.visibility,
        guild_id=where.guild_id,
        type=mtype,
        kind=kind,
        tags=tuple(str(t) for t in tags)[:12],
        source=source,
        importance=_importance(c.get("importance")),
        valid_from=parse_date(c.get("valid_from"), ctx.tz),
        valid_to=parse_date(c.get("valid_to"), ctx.tz),
        entities=_entities(c.get("entities")),
        provenance=Provenance(
            platform=ctx.platform, guild_id=ctx.guild_id, channel_id=ctx.channel_id, sources=sources
        ),
    )


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return str(value)


def parse_date(value: Any, zone: tzinfo = UTC) -> float | None:
    """An ISO date the model read from the text ("2026-10-21"), as a timestamp: a date or time without an offset is
    the speaker's (``zone``), so "tomorrow evening" said in Lisbon is Lisbon's; anything else is no date."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        log.info("extracted date ignored: %r is not an ISO date", value[:40])
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=zone)).timestamp()


def _importance(value: Any) -> float:
    try:
        return min(10.0, max(1.0, float(value)))
    except (TypeError, ValueError):
        return 5.0


def _entities(items: Any) -> tuple[EntityRef, ...]:
    if not isinstance(items, list):
        return ()
    out = []
    for e in items:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e["name"].strip():
            relations = e.get("relations")
            relations = relations if isinstance(relations, list) else []
            rel = tuple(
                (str(r.get("relation", "")), str(r.get("target", "")))
                for r in relations
                if isinstance(r, dict)
            )
            out.append(EntityRef(e["name"][:120], str(e.get("type", "concept")), rel))
    return tuple(out)


def with_speaker(ctx: RecallContext, author_id: str, zone: str = "") -> RecallContext:
    """The context of another person in the same chat (for turns read back from history), in their ``zone``."""
    if author_id == ctx.speaker_id:
        return ctx
    return replace(
        ctx,
        speaker_id=author_id,
        participants=(),
        owner_private=False,
        owner_id=None,
        admin=False,
        reach=(),
        zone=zone,
        pointed=(),
    )
