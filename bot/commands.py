"""Slash commands that need no LLM: /start /remember /forget /memories /link /export (CHAN-1/2, ORCH-3, SEC-3)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memory.engine import MemoryEngine
from memory.errors import MemoryStoreError
from memory.models import FactKind, MemoryType, NewMemory, Provenance, Scope, Source, Visibility
from memory.people import People
from memory.privacy import export_person, forget_person, forget_sources
from memory.store import RecallFilters

from .types import IncomingMessage

HELP = ("Hi! I'm a companion with a memory. Just talk to me.\n"
        "/remember <fact> — I'll remember it\n/forget <what> — I'll forget the closest memory (/forget everything: all about you)\n"
        "/memories — what I remember about you here\n/link — connect your accounts on other platforms\n/export — everything I store about you")
FORGET_MIN_RELEVANCE = 0.35


class Commands:
    def __init__(self, engine: MemoryEngine, people: People, resolve: Callable[[IncomingMessage], Any]) -> None:
        self.engine, self.people, self.resolve = engine, people, resolve

    def run(self, name: str, argument: str, message: IncomingMessage) -> str:
        handler = getattr(self, f"do_{name.lower().lstrip('/')}", None)
        if handler is None:
            return f"I don't know /{name}. " + HELP
        try:
            return handler(argument.strip(), self.resolve(message))
        except MemoryStoreError as exc:
            return f"Sorry, that didn't work: {exc}"

    def do_start(self, arg: str, turn) -> str:
        return HELP

    do_help = do_start

    def do_remember(self, arg: str, turn) -> str:
        if not arg:
            return "Tell me what to remember, like: /remember I'm vegetarian"
        scope, visibility = (Scope.USER, Visibility.PRIVATE) if turn.ctx.is_dm else (Scope.USER, Visibility.PUBLIC)
        result = self.engine.memories.add(NewMemory(
            content=f"{turn.names[turn.person_id]}: {arg}", subject=arg[:60], scope=scope, scope_id=turn.person_id,
            visibility=visibility, type=MemoryType.SEMANTIC, kind=FactKind.OTHER, source=Source.USER_STATED, importance=7,
            provenance=Provenance(platform=turn.message.platform, guild_id=turn.ctx.guild_id, channel_id=turn.message.channel_id)))
        return "I already knew that." if result.status == "duplicate" else "Got it, I'll remember that."

    def do_forget(self, arg: str, turn) -> str:
        if not arg:
            return "Tell me what to forget, like: /forget my old job — or /forget everything"
        if arg.lower() in ("everything", "everything about me", "all"):
            counts = forget_person(self.engine, [turn.person_id])
            return f"Done. I forgot everything about you: {counts['memories']} memories and {counts['messages']} messages."
        hits = self.engine.memories.recall(turn.ctx, arg, threshold=0.0, top_k=3, reinforce=False,
                                           filters=_own(turn))
        hits = [h for h in hits if h.relevance >= FORGET_MIN_RELEVANCE]
        if not hits:
            return "I couldn't find a memory like that."
        best = hits[0].row
        self.engine.memories.delete(best["id"])
        forget_sources(self.engine, [json.loads(best["provenance"])], asked_in=(turn.message.platform, turn.message.channel_id))
        return f"Forgotten: {best['content']}"

    def do_memories(self, arg: str, turn) -> str:
        found = self.engine.memories.list(turn.ctx.memory_partitions(), _own(turn), order="recent", limit=20)
        if not found:
            return "I don't remember anything about you here yet."
        return "What I remember about you here:\n" + "\n".join(f"• {m.content}" for m in found)

    def do_link(self, arg: str, turn) -> str:
        if not arg:
            code = self.people.issue_code(turn.person_id)
            return f"Your link code is {code} (valid 10 minutes). Send /link {code} from your other account."
        person = self.people.redeem(arg, turn.message.platform, turn.message.author_id)
        return f"Linked. I know you as one person now ({self.people.name(person)})."

    def do_export(self, arg: str, turn) -> str:
        if not turn.ctx.is_dm:
            return "Ask me for /export in a DM: it contains private things."
        data = export_person(self.engine, [turn.person_id])
        text = json.dumps(data, ensure_ascii=False, indent=1, default=str)
        return text if len(text) <= 3500 else (text[:3400] + "\n… (truncated; the operator can run `companion memory export` for the full file)")


def _own(turn) -> RecallFilters:
    """Memories about the person asking (their own user scope), within what this chat may see."""
    return RecallFilters(scope_ids=(turn.person_id,))
