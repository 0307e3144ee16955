"""``companion bench manners``: what the group-manners decision (ORCH-10) costs per message, target p95 <= 2 ms.

A busy chime-in channel is replayed through ``GroupManners.decide`` exactly as the orchestrator calls it (the place's
memory words already read: that read is off the decision's path, once per 10 minutes): six people, small talk,
questions to each other and to the room, follow-ups on what the bot said, a bot reply every 40 messages. The
messages are long and short; one in fifty is 4,000 characters (Discord's longest with Nitro)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from bot.manners import GroupManners
from bot.types import IncomingMessage
from memory.storage.manners import Mode

from .samples import percentiles

PEOPLE = (("1", "Ana"), ("2", "Ben"), ("3", "Cleo"), ("4", "Dev"), ("5", "Eli"), ("6", "Fay"))
TALK = (
    "the coffee machine is broken again",
    "did you see the match last night?",
    "Ben, are you coming to the pub quiz on thursday?",
    "anyone seen my blue umbrella?",
    "how much flour does the sourdough starter need each day?",
    "does the bowline knot slip when it gets wet?",
    "thanks!",
    "my cat knocked the plant over and now there is soil everywhere in the living room",
)
BOT_SAYS = "Feed the sourdough starter daily with flour and water, and a bowline knot holds a hammock well."
MEMORIES = [
    f"memory {i}: the regatta, the book club, the harbour wall, sourdough and knots, topic {i}"
    for i in range(60)
]


def _messages(n: int, seed: int = 10) -> list[IncomingMessage]:
    rng, out = random.Random(seed), []
    for i in range(n):
        uid, name = PEOPLE[rng.randrange(len(PEOPLE))]
        text = "word " * 800 if i % 50 == 49 else rng.choice(TALK)
        others = tuple(p for p in PEOPLE if p[0] != uid)
        out.append(
            IncomingMessage(
                "discord", "c", uid, name, text, "g", str(i), participants=others, addressed=False
            )
        )
    return out


async def _timed(manners: GroupManners, messages: list[IncomingMessage]) -> list[float]:
    took = []
    for i, message in enumerate(messages):
        if i % 40 == 0:
            manners.spoke("discord:c", message.author_id, BOT_SAYS)
        start = time.perf_counter()
        await manners.decide(Mode.CHIME_IN, message, "discord:c")
        took.append((time.perf_counter() - start) * 1000)
    return took


def bench_manners(messages: int = 5000) -> dict[str, Any]:
    """p50/p95 in ms of one decision, and how many of the messages it let through to the chat model."""
    clock = iter(range(10**9))
    # a message every 15 s
    manners = GroupManners(lambda: "Companion", clock=lambda: float(next(clock)) * 15)
    manners.learn_memories("discord:c", MEMORIES)
    said = _messages(messages)
    asyncio.run(_timed(manners, said[:200]))  # warm-up: regexes compiled, caches filled
    took = asyncio.run(_timed(manners, said))
    return {"decision_ms": percentiles(took, 4), "messages": messages, "target_p95_ms": 2.0}
