"""The bench's turn hook: everything a reply does before the LLM call (PERF-1, ``turn_ms``).

Scope resolution, recall with the query embedding, and prompt assembly, through the same Orchestrator
code the bot runs; nothing is sent anywhere.
"""

from __future__ import annotations

from bot.composition import build_orchestrator
from bot.model.client import ChatClient
from bot.orchestrator import Orchestrator
from bot.persona import Persona
from bot.resolution import OwnerPolicy
from bot.types import IncomingMessage
from memory.engine import MemoryEngine
from memory.scopes import RecallContext
from memory.storage.db import AsyncRunner


def make_turn():
    made: dict[int, Orchestrator] = {}

    def turn(engine: MemoryEngine, ctx: RecallContext, text: str) -> str:
        orch = made.get(id(engine))
        if orch is None:
            # never called: the turn stops before the LLM
            llm = ChatClient("http://127.0.0.1:9/v1", "unused", "unused")
            orch = made[id(engine)] = build_orchestrator(
                engine,
                AsyncRunner(),
                llm,
                owners=OwnerPolicy(),
                persona=Persona(),
            )
        message = IncomingMessage(
            platform="bench",
            channel_id=ctx.channel_id,
            author_id=ctx.speaker_id.removeprefix("bench:"),
            author_name="Bench",
            text=text,
            guild_id=(ctx.guild_id or "").removeprefix("bench:") or None,
            participants=tuple((p.removeprefix("bench:"), p) for p in ctx.participants),
        )
        resolved = orch.resolve(message)
        snap = orch.assembler.snapshot(resolved)
        return orch.assembler.system_prompt(resolved, snap, engine.clock.now())

    return turn
