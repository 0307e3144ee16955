"""Background memory work for conversations: debounced extraction (WRITE-1), session-end
micro-reflection (WRITE-3), pre-compaction flush and text compaction (WRITE-4, ORCH-4).

Everything is driven by ``tick()``, which compares persisted due times with the injected clock, so a
restart resumes where the process stopped and tests advance a fake clock instead of sleeping.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import prompts
from memory.db import AsyncRunner
from memory.engine import MemoryEngine
from memory.errors import MemoryStoreError
from memory.maintenance import audit_finish, audit_start, parse_json_object
from memory.models import EntityRef, FactKind, MemoryType, NewMemory, Provenance, Scope, Source, Visibility
from memory.scopes import RecallContext
from memory.sessions import Buffered, ChannelState, ExtractionBuffer, SessionSummaries, context_from_json

from .llm import ChatClient, LLMError

log = logging.getLogger(__name__)
RETRY_LATER_S = 60.0
EXCERPT_TURNS, EXCERPT_CHARS = 80, 9_000
COMPACT_AFTER, KEEP_VERBATIM, SUMMARY_CHARS = 60, 20, 1_200


@dataclass(frozen=True, slots=True)
class Fact:
    candidate: dict[str, Any]
    ctx: RecallContext
    provenance: Provenance
    source: Source


class Background:
    def __init__(self, engine: MemoryEngine, runner: AsyncRunner, llm: ChatClient, buffer: ExtractionBuffer,
                 channels: ChannelState, summaries: SessionSummaries, *, silence_s: float = 600.0) -> None:
        self.engine, self.runner, self.llm, self.buffer = engine, runner, llm, buffer
        self.channels, self.summaries, self.silence_s = channels, summaries, silence_s

    async def tick(self) -> dict[str, int]:
        """Run whatever is due now: extraction of quiet channels, reflection on ended sessions, compaction."""
        done = {"extracted": 0, "reflected": 0, "compacted": 0}
        for channel in await self.runner.run(self.buffer.due_channels):
            done["extracted"] += await self.extract(channel)
        for state in await self.runner.run(self.channels.silent, self.silence_s):
            done["reflected"] += await self.reflect(state)
        for state in await self.runner.run(self._crowded):
            done["compacted"] += await self.compact(state)
        await self.runner.run(self.summaries.expire)
        return done

    async def flush(self) -> None:
        """Graceful shutdown: extract every buffered message now, due or not."""
        for channel in await self.runner.run(self.buffer.channels):
            await self.extract(channel)

    # -- WRITE-1 ---------------------------------------------------------------------------------------
    async def extract(self, channel: str) -> int:
        items = await self.runner.run(self.buffer.take, channel)
        if not items:
            return 0
        try:
            candidates = await self._ask_json_list(self._extraction_prompt(items))
        except LLMError:
            log.warning("extraction for %s postponed: the model is unavailable", channel)
            await self.runner.run(self.buffer.postpone, [i.id for i in items], self.engine.clock.now() + RETRY_LATER_S)
            return 0
        stored = await self.runner.run(self._store, [self._fact(c, items) for c in candidates])
        await self.runner.run(self.buffer.done, [i.id for i in items])
        return stored

    def _extraction_prompt(self, items: list[Buffered]) -> str:
        ctx = items[-1].ctx
        lines = "\n".join(f"{i.author_name or i.ctx.speaker_id}: {json.dumps(i.text, ensure_ascii=False)}" for i in items)
        return prompts.render("extraction", place=_place(ctx), messages=lines)

    async def _ask_json_list(self, prompt: str) -> list[dict[str, Any]]:
        """A JSON array from the extraction model; invalid JSON is asked again once, then logged and dropped."""
        messages = [{"role": "system", "content": "You extract memories. Answer with JSON only."}, {"role": "user", "content": prompt}]
        for attempt in (1, 2):
            text = await self.llm.complete(messages, temperature=0.0)
            try:
                return _json_list(text)
            except ValueError as exc:
                log.warning("extraction answer was not a JSON array (attempt %d): %s", attempt, exc)
        return []

    def _fact(self, candidate: dict[str, Any], items: list[Buffered]) -> Fact:
        about = str(candidate.get("about") or "").strip().lower()
        mine = [i for i in items if (i.author_name or "").lower() == about] or items
        ctx = mine[-1].ctx
        ids = tuple(i.message_id for i in mine if i.message_id)
        prov = Provenance(platform=ctx.platform, guild_id=ctx.guild_id, channel_id=ctx.channel_id, message_ids=ids)
        return Fact(candidate, ctx, prov, Source.AUTO_EXTRACTION)

    def _store(self, facts: list[Fact]) -> int:
        stored = 0
        for fact in facts:
            try:
                stored += self.engine.memories.add(_new_memory(fact)).status == "stored"
            except (MemoryStoreError, ValueError, TypeError) as exc:
                log.info("extracted fact not stored: %s", exc)
        return stored

    # -- WRITE-3 and CROSS-1 -------------------------------------------------------------------------------
    async def reflect(self, state: dict[str, Any]) -> int:
        ctx = context_from_json(state["context"])
        rows = await self.runner.run(self._excerpt_rows, ctx, state["session_started_at"])
        excerpt = "\n".join(f"{r['author_name']}: {r['content']}" for r in rows)[-2000:]
        audit = await self.runner.run(audit_start, self.engine, "micro", state["channel_key"], excerpt)
        try:
            answer = parse_json_object(await self.llm.complete(self._reflection_messages(ctx, rows), temperature=0.0)) if rows else {}
        except (LLMError, ValueError) as exc:
            await self.runner.run(self._give_up, state["channel_key"], audit, str(exc))
            return 0
        facts = [self._reflection_fact(c, ctx, rows) for c in answer.get("facts", []) if isinstance(c, dict)][:20]
        stored = await self.runner.run(self._store, facts)
        await self.runner.run(self._finish_session, state, ctx, rows, str(answer.get("summary") or ""), audit, facts)
        return stored

    def _excerpt_rows(self, ctx: RecallContext, since: float) -> list[dict[str, Any]]:
        rows = [r for r in self.engine.messages.recent(ctx, ctx.channel_id, EXCERPT_TURNS) if r["created_at"] >= since]
        while rows and sum(len(r["content"]) for r in rows) > EXCERPT_CHARS:
            rows.pop(0)
        return rows

    def _reflection_messages(self, ctx: RecallContext, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
        excerpt = "\n".join(f"{r['author_name']}: {json.dumps(r['content'], ensure_ascii=False)}" for r in rows)
        people = sorted({r["author_name"] for r in rows if r["role"] == "user"})
        prompt = prompts.render("micro_reflection", place=_place(ctx), participants=", ".join(people), excerpt=excerpt, max_facts=10)
        return [{"role": "system", "content": "You reflect on conversations. Answer with JSON only."}, {"role": "user", "content": prompt}]

    def _reflection_fact(self, candidate: dict[str, Any], ctx: RecallContext, rows: list[dict[str, Any]]) -> Fact:
        about = str(candidate.get("about") or "").lower()
        author = next((r["author_id"] for r in rows if r["author_name"].lower() == about and r["role"] == "user"), ctx.speaker_id)
        fact_ctx = RecallContext(platform=ctx.platform, speaker_id=author, channel_id=ctx.channel_id, guild_id=ctx.guild_id,
                                 is_dm=ctx.is_dm, owner_private=ctx.owner_private and author == ctx.speaker_id,
                                 owner_id=ctx.owner_id if author == ctx.speaker_id else None)
        prov = Provenance(platform=ctx.platform, guild_id=ctx.guild_id, channel_id=ctx.channel_id)
        return Fact(candidate, fact_ctx, prov, Source.REFLECTION)

    def _finish_session(self, state, ctx, rows, summary: str, audit: int, facts: list[Fact]) -> None:
        if summary:
            people = sorted({r["author_id"] for r in rows if r["role"] == "user"})
            self.summaries.add(platform=ctx.platform, guild_id=ctx.guild_id, channel_id=ctx.channel_id, participants=people,
                               text=summary[:1200], started_at=state["session_started_at"])
        audit_finish(self.engine, audit, facts=[f.candidate.get("content") for f in facts])
        self.channels.mark_reflected(state["channel_key"])

    def _give_up(self, channel_key: str, audit: int, error: str) -> None:
        """A failed reflection is audited and not retried: the session's messages stay searchable in history."""
        audit_finish(self.engine, audit, error=error)
        self.channels.mark_reflected(channel_key)

    # -- WRITE-4 and ORCH-4 -------------------------------------------------------------------------------
    def _crowded(self) -> list[dict[str, Any]]:
        """Channels with more uncompacted turns than fit comfortably: context pressure."""
        out = []
        active = self.engine.clock.now() - self.silence_s  # only channels that spoke lately can have grown
        for state in self.channels.active(active):
            ctx = context_from_json(state["context"])
            if self.engine.messages.count_in_channel_after(ctx.platform, ctx.channel_id, state["compacted_until"]) > COMPACT_AFTER:
                out.append(state)
        return out

    async def compact(self, state: dict[str, Any]) -> int:
        ctx = context_from_json(state["context"])
        rows = await self.runner.run(self._to_compact, ctx, state["compacted_until"])
        if not rows:
            return 0
        turns = "\n".join(f"{r['author_name']}: {json.dumps(r['content'], ensure_ascii=False)}" for r in rows)
        try:  # WRITE-4: the turns about to leave the context get an extraction pass first
            candidates = await self._ask_json_list(prompts.render("extraction", place=_place(ctx), messages=turns))
            await self.runner.run(self._store, [self._reflection_fact(c, ctx, rows) for c in candidates])
            prompt = prompts.render("compaction", previous=state["rolling_summary"] or "(none)", turns=turns, max_chars=SUMMARY_CHARS)
            summary = await self.llm.complete([{"role": "user", "content": prompt}], temperature=0.0)
        except LLMError:
            log.warning("compaction of %s postponed: the model is unavailable", state["channel_key"])
            return 0
        await self.runner.run(self.channels.set_summary, state["channel_key"], summary.strip()[:SUMMARY_CHARS], rows[-1]["created_at"])
        return 1

    def _to_compact(self, ctx: RecallContext, since: float) -> list[dict[str, Any]]:
        rows = self.engine.messages.in_channel_after(ctx.platform, ctx.channel_id, since)
        return rows[:-KEEP_VERBATIM] if len(rows) > KEEP_VERBATIM else []


def _place(ctx: RecallContext) -> str:
    return f"a private chat on {ctx.platform}" if ctx.is_dm else f"a group chat on {ctx.platform} ({ctx.guild_id})"


def _json_list(text: str) -> list[dict[str, Any]]:
    start, end = (text or "").find("["), (text or "").rfind("]")
    if start < 0 or end < start:
        raise ValueError(f"no JSON array in {text[:120]!r}")
    data = json.loads(text[start : end + 1])
    if not isinstance(data, list):
        raise ValueError("not a JSON array")
    return [item for item in data if isinstance(item, dict)]


def _new_memory(fact: Fact) -> NewMemory:
    c, ctx = fact.candidate, fact.ctx
    kind = FactKind(c.get("kind", "other")) if c.get("kind") in FactKind._value2member_map_ else FactKind.OTHER
    mtype = MemoryType(c.get("type")) if c.get("type") in MemoryType._value2member_map_ else MemoryType.SEMANTIC
    if ctx.owner_private:
        scope, scope_id, visibility = Scope.OWNER, ctx.speaker_id, Visibility.PRIVATE
    else:
        scope, scope_id = Scope.USER, ctx.speaker_id
        visibility = Visibility.PRIVATE if ctx.is_dm else Visibility.PUBLIC
    entities = tuple(EntityRef(str(e.get("name", ""))[:120], str(e.get("type", "concept")),
                               tuple((str(r.get("relation", "")), str(r.get("target", ""))) for r in e.get("relations") or [] if isinstance(r, dict)))
                     for e in c.get("entities") or [] if isinstance(e, dict) and e.get("name"))
    return NewMemory(content=str(c.get("content", "")), subject=str(c.get("subject") or ""), scope=scope, scope_id=scope_id,
                     type=mtype, kind=kind, visibility=visibility, tags=tuple(str(t) for t in c.get("tags") or [])[:12],
                     source=fact.source, importance=min(10.0, max(1.0, float(c.get("importance") or 5))),
                     provenance=fact.provenance, entities=entities)
