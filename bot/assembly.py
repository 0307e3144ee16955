"""Prompt assembly (ORCH-2): the memory slice for one turn, section by section, each within a budget.

``Assembler.snapshot`` is also the runtime snapshot (ORCH-5): the exact slice a reply would get,
computed without calling the LLM. Memory text goes in as quoted data (SEC-2), never as instructions.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

import numpy as np

import prompts
from memory import EntityCount, Hit, MemoryContext, MemoryEngine, RecallContext, labelled
from memory.models import SELF_SUBJECT, Memory, SessionSummary, StoredMessage

from .persona import Persona
from .types import IncomingMessage

# Budgets in tokens (about 4 characters each); counts are the SPEC's (ORCH-2).
BUDGETS = {
    "guidance": 600,
    "behavioral": 400,
    "people": 900,
    "self": 300,
    "lore": 400,
    "relevant": 1200,
    "entities": 150,
    "sessions": 500,
    "summary": 400,
    "history": 3000,
    "bulletin": 700,  # MAINT-5: the scope's briefing (~500 words), cut line by line
}

# Sections recalled afresh for each message: rendered after the others, so the part of the prompt before them
# stays the same from one turn to the next and a server's prompt cache can keep it (ORCH-9).
PER_QUERY = frozenset({"behavioral", "relevant"})


@dataclass(frozen=True, slots=True)
class Turn:
    """Everything resolved about one incoming message before any memory is read."""

    message: IncomingMessage
    person_id: str
    ctx: RecallContext
    channel_key: str
    names: dict[str, str]  # person id -> display name, speaker first
    text: str = (
        ""  # the message as stored and shown to the model (``memory.storage.messages.clean_text``)
    )
    stored_id: str | None = None  # the stored message (write-ahead), once stored
    buffer_id: int | None = None  # its extraction-buffer row, held until the reply is done
    remembered: bool = True  # False after /privacy off (the speaker's or the place's): nothing of the turn is kept (SEC-5)
    answered: bool = (
        False  # a re-delivered message the bot already answered: stored once, answered once
    )


@dataclass(frozen=True, slots=True)
class Preloaded:
    """A voice turn's memory from its session's caches (VOICE-2/3/4), instead of a recall and a history read."""

    hits: tuple[Hit[Memory], ...]  # the warm snapshot (reused, refreshed or freshly retrieved)
    behavioral: tuple[Memory, ...]  # the behavioural pool's rules for this turn
    history: tuple[dict[str, str], ...]  # the session's verbatim turns, oldest first
    summary: str = ""  # the session's rolling summary


@dataclass(slots=True)
class Section:
    key: str
    title: str
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Snapshot:
    sections: list[Section]
    history: list[dict[str, str]]
    memory_ids: list[str]
    took_ms: float = 0.0
    place_persona: str = (
        ""  # this server's or group's own persona (ORCH-7), set by its admins; "" for none
    )

    def render(self) -> str:
        parts = [f"\n## {s.title}\n" + "\n".join(s.lines) for s in self.sections if s.lines]
        return "".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "sections": {s.key: s.lines for s in self.sections},
            "history": self.history,
            "memory_ids": self.memory_ids,
            "place_persona": self.place_persona,
            "took_ms": round(self.took_ms, 2),
        }


def _fits(lines: list[str], budget_tokens: int) -> list[str]:
    kept, used = [], 0
    for line in lines:
        cost = len(line) // 4 + 1
        if used + cost > budget_tokens:
            break
        kept.append(line)
        used += cost
    return kept


def _quoted(text: str) -> str:
    """Every memory-derived string in the prompt is quoted data (SEC-2): names and summaries included."""
    return json.dumps(text, ensure_ascii=False)


def _mentions(n: int) -> str:
    return f"{n} mention" if n == 1 else f"{n} mentions"


def _trimmed(turns: list[dict[str, str]]) -> list[dict[str, str]]:
    """The newest turns that fit the history budget."""
    while turns and sum(len(t["content"]) // 4 + 1 for t in turns) > BUDGETS["history"]:
        turns.pop(0)
    return turns


def _blocks(turns: list[dict[str, str]]) -> list[dict[str, str]]:
    """Messages nobody answered in between are one user turn, a line each (ORCH-10): in a busy group the talk the
    bot did not answer is read as one block of context by the next answered turn, not as many turns in a row."""
    out: list[dict[str, str]] = []
    for t in turns:
        if out and t["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + t["content"]}
        else:
            out.append(dict(t))
    return out


def _place_persona(turn: Turn, text: str) -> str:
    """A place's persona under the operator's, as a quote: its admins' words add to the persona, and cannot
    open a section of their own (``memory.storage.persona`` refuses headings too)."""
    if not text:
        return ""
    where = "server" if turn.message.platform == "discord" else "group"
    quoted = "\n".join(f"> {line}" if line else ">" for line in text.splitlines())
    return (
        f"\n## This {where}'s persona (set by its admins)\nIt adds to your persona above; where the two differ, "
        f"the operator's persona wins.\n{quoted}\n"
    )


def _local_day(now: float, zone: tzinfo) -> str:
    """The speaker's day (ORCH-8), with the zone's name. Only the day goes in the system prompt: a clock to the
    minute there would change the prompt's prefix every minute, and servers cache a stable prefix (ORCH-9)."""
    moment = datetime.fromtimestamp(now, zone)
    return f"{moment:%A %Y-%m-%d} ({getattr(zone, 'key', None) or moment.tzname()})"


def clock_note(now: float, zone: tzinfo, answer_in: str | None = None) -> str:
    """The time of day where the speaker is, for the end of the user turn: "this evening" is theirs
    (ORCH-8), and the only part of the prompt that changes every minute comes last (ORCH-9).
    ``answer_in``: the ask to answer in the person's language, when not English (LANG-3: ";
    antworte auf Deutsch")."""
    moment = datetime.fromtimestamp(now, zone)
    asked = f"; {answer_in}" if answer_in else ""
    return f"(sent {moment:%H:%M} {getattr(zone, 'key', None) or moment.tzname()}{asked})"


def _line(m: Memory, names: dict[str, str]) -> str:
    """One fact, labelled with whose it is and in the third person (``memory.recall.whose``)."""
    when = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
    label, words = labelled(m, names)
    return f"- {label}: {json.dumps(words, ensure_ascii=False)} ({m.kind.value}, {when})"


@dataclass(slots=True)
class _Seen:
    """The facts one snapshot shows, in order, and the names their labels use (person id -> name)."""

    names: dict[str, str]
    memories: dict[str, Memory] = field(default_factory=dict)

    def section(self, key: str, title: str, found: list[Memory]) -> Section:
        """The facts not shown yet, as lines within the section's budget."""
        fresh = [m for m in found if m.id not in self.memories]
        lines = _fits([_line(m, self.names) for m in fresh], BUDGETS[key])
        self.memories.update((m.id, m) for m in fresh[: len(lines)])
        return Section(key, title, lines)


class Assembler:
    def __init__(
        self,
        engine: MemoryEngine,
        *,
        summary_window_s: float = 1800.0,
        history_turns: int = 20,
        persona: Persona | None = None,
    ) -> None:
        self.summary_window_s, self.history_turns = summary_window_s, history_turns
        self.persona = persona or Persona()
        self.context = MemoryContext(
            engine, summary_window_s=summary_window_s, history_turns=history_turns
        )
        self._history_start: dict[
            str, str
        ] = {}  # channel key -> the first message id its prompts replay

    @property
    def bot_name(self) -> str:
        """The persona's name: the one the bot answers to and calls itself (ORCH-7)."""
        return self.persona.name

    def snapshot(
        self,
        turn: Turn,
        query_vector: np.ndarray | None = None,
        preloaded: Preloaded | None = None,
        *,
        reinforce: bool = True,
    ) -> Snapshot:
        """The memory slice for ``turn``. ``preloaded`` (voice) brings the recall, behaviour rules, history and summary
        from the voice session's caches; everything else is read here as for text. ``reinforce=False`` (the runtime
        snapshot) leaves what was recalled unmarked: looking is not using."""
        start = time.perf_counter()
        recalled = (
            None
            if preloaded is None
            else self.context.recalled_from(
                [h.item for h in preloaded.hits], list(preloaded.behavioral)
            )
        )
        people = tuple(turn.names)
        found = self.context.context_for(
            turn.ctx,
            turn.text,
            people=people,
            channel_key=turn.channel_key,
            recalled=recalled,
            query_vector=query_vector,
            reinforce=reinforce,
        )
        seen = _Seen({**found.names, **turn.names})
        sections = [
            self._bulletin(found.bulletin),
            seen.section(
                "guidance",
                "Behaviour guidance (standing, from the people here)",
                list(found.guidance),
            ),
            seen.section(
                "behavioral", "Relevant behavioural memory", list(found.recalled.behavioral)
            ),
            self._people(turn, found.people, seen),
            seen.section("self", "What you know about yourself", list(found.self_facts)),
            seen.section("lore", "Community lore", list(found.lore)),
            seen.section("relevant", "Relevant memories", list(found.recalled.relevant)),
            self._entities(found.entities),
            *self._sessions(found.sessions),
            self._summary(found.rolling_summary if preloaded is None else preloaded.summary),
        ]
        history = (
            self._history(turn, found.history, reinforce)
            if preloaded is None
            else _trimmed(list(preloaded.history))
        )
        # stable sort: what each message recalls afresh goes last
        sections.sort(key=lambda s: s.key in PER_QUERY)
        return Snapshot(
            sections,
            history,
            list(seen.memories),
            (time.perf_counter() - start) * 1000,
            found.place_persona,
        )

    def system_prompt(
        self, turn: Turn, snap: Snapshot, now: float, *, style: str | None = None
    ) -> str:
        """``style`` replaces the default manner of speaking (voice mode, the [SKIP] rule)."""
        place = (
            f"a DM with {_quoted(turn.names[turn.person_id])}"
            if turn.ctx.is_dm
            else f"a group chat on {turn.message.platform}"
        )
        if turn.message.modality == "voice":
            place = f"a voice channel on {turn.message.platform}"
        default = "" if turn.ctx.is_dm else "In a group, address people by name."
        return prompts.render(
            "system",
            bot_name=self.bot_name,
            platform=turn.message.platform,
            place=place,
            today=_local_day(now, turn.ctx.tz),
            style=default if style is None else style,
            persona=self.persona.operator.text,
            place_persona=_place_persona(turn, snap.place_persona),
            sections=snap.render(),
        )

    # -- sections --------------------------------------------------------------------------------------
    def _people(
        self,
        turn: Turn,
        people: tuple[tuple[str, tuple[Memory, ...]], ...],
        seen: _Seen,
    ) -> Section:
        lines: list[str] = []
        for i, (person, found) in enumerate(people):
            facts = [m for m in found if m.id not in seen.memories and m.subject != SELF_SUBJECT]
            if facts:
                lines.append(f"{_quoted(turn.names[person])}{' (speaking now)' if i == 0 else ''}:")
                lines.extend("  " + _line(m, seen.names) for m in facts)
                seen.memories.update((m.id, m) for m in facts)
        return Section("people", "People in this conversation", _fits(lines, BUDGETS["people"]))

    def _entities(self, top: tuple[EntityCount, ...]) -> Section:
        lines = [f"- {_quoted(e.name)} ({e.entity_type}, {_mentions(e.mentions)})" for e in top]
        return Section("entities", "Known entities", lines)

    def _sessions(self, rows: tuple[SessionSummary, ...]) -> list[Section]:
        """CROSS-1: summaries of sessions that ended here lately, voice and text under their own headings."""
        out = []
        for key, modality, title in (
            ("sessions", "voice", "Recent voice session context"),
            ("text_sessions", "text", "Recent conversation sessions here"),
        ):
            lines = [
                f"- (ended {datetime.fromtimestamp(r.ended_at, UTC):%H:%M UTC}) {_quoted(r.text)}"
                for r in rows
                if (r.modality == "voice") == (modality == "voice")
            ]
            out.append(Section(key, title, _fits(lines, BUDGETS["sessions"])))
        return out

    def _bulletin(self, text: str) -> Section:
        """MAINT-5: the briefing of this conversation's scope (written in the background), within its budget."""
        lines = [_quoted(line.strip()) for line in text.splitlines() if line.strip()]
        return Section(
            "bulletin",
            "Briefing: what you know here (a summary of your memories)",
            _fits(lines, BUDGETS["bulletin"]),
        )

    def _summary(self, text: str) -> Section:
        return Section(
            "summary", "Earlier in this conversation (summary)", [_quoted(text)] if text else []
        )

    def _history(
        self, turn: Turn, rows: tuple[StoredMessage, ...], move: bool = True
    ) -> list[dict[str, str]]:
        # the current turn is stored already (write-ahead); it is sent as the user message
        said = self._paged(turn.channel_key, [r for r in rows if r.id != turn.stored_id], move)
        return _blocks(_trimmed([{"role": r.role, "content": self._said(turn, r)} for r in said]))

    def _paged(
        self, channel_key: str, said: list[StoredMessage], move: bool
    ) -> list[StoredMessage]:
        """The replayed history starts at the same message turn after turn, and moves half the window at once
        when that message leaves the window: a window sliding one turn a turn changed the prompt right after
        the system prompt every turn, and a server's prompt cache kept nothing of the history (ORCH-9).
        ``move=False`` (the runtime snapshot) shows what a reply would get without moving the start."""
        ids = [r.id for r in said]
        start = self._history_start.get(channel_key)
        if start in ids:
            return said[ids.index(start) :]
        kept = (
            said[-max(1, self.history_turns // 2) :]
            if len(said) >= self.history_turns - 1
            else said
        )
        if move and kept:
            self._history_start[channel_key] = kept[0].id
        return kept

    def _said(self, turn: Turn, r: StoredMessage) -> str:
        return (
            r.content
            if r.role == "assistant" or turn.ctx.is_dm
            else f"{_quoted(r.author_name)}: {r.content}"
        )
