"""Reactions on the bot's replies (ORCH-12): how its owner received a reply moves the memories
it used.

    whose memory, who reacts              👍 ❤️ (reinforce)        👎 (doubt)
    a person's, that person               importance +0.5           -1.0, marked for recheck
    a place's lore, one of its admins     the same                  the same
    another's shared one, the person      counted; the CONCERT-th   counted; the CONCERT-th
      the reply answered                  person moves it a step    moves it and marks it
    anyone's, anybody else                recorded, moves nothing   recorded, moves nothing

The one a memory is about moves it; the person a reply answered (SPEC ORCH-12) moves someone else's
shared memory only in concert: when the CONCERT-th person, each answered by a reply that used it,
votes the same way, it moves one step, once (issue 44: twenty fresh accounts, or one person asking
about someone else's fact twelve times, sank it to 0). A bystander's vote is kept in
``reply_reactions`` and acts on nothing. A person's effect on one memory is one step: their first
vote on any reply that used it counts, later ones (on that reply or another) move it no further. A reaction finds its reply
by the post it landed on, in that very channel (``reply_posts``). Nothing is said back, so a
reaction reveals nothing; the importance is what recall ranks by (``memory.recall.retrieval``) and
what decay and pruning act on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .engine import MemoryEngine
from .models import Reaction
from .storage.db import AsyncRunner
from .storage.manners import Used

log = logging.getLogger(__name__)

# of importance's 0..10: a 👎 from its owner sinks a 5 to 4, and no more
UP_STEP, DOWN_STEP = 0.5, 1.0
CONCERT = 3  # people, each answered, who move another's shared memory together (one step, once)
_REINFORCE = frozenset({"👍", "❤", "♥", "💖", "💯"})
_DOUBT = frozenset({"👎"})
# emoji presentation and skin tones
_MODIFIERS = dict.fromkeys([0xFE0F, 0xFE0E, *range(0x1F3FB, 0x1F400)])


def polarity(emoji: str) -> int:
    """+1 for a reinforcing emoji, -1 for a doubting one, 0 for anything else (which changes nothing)."""
    bare = emoji.translate(_MODIFIERS)
    return 1 if bare in _REINFORCE else -1 if bare in _DOUBT else 0


@dataclass(frozen=True, slots=True)
class Received:
    """What one reaction did: the memory rids it moved (ids only), and by how much."""

    memories: tuple[int, ...] = ()
    delta: float = 0.0
    recheck: bool = False


NOTHING = Received()


def moves(memory: Used, person_id: str, reaction: Reaction) -> bool:
    """Whether this person's reaction moves the memory: their own, or the place's lore when they are
    one of its admins; nobody else's."""
    if memory.scope in ("user", "owner"):
        return memory.scope_id == person_id
    lore = f"{reaction.platform}:{reaction.guild_id}" if reaction.guild_id else None
    return reaction.by_admin and memory.scope == "guild" and memory.scope_id == lore


class Reactions:
    """Reactions from the event loop: each one call on the memory thread."""

    def __init__(self, engine: MemoryEngine, runner: AsyncRunner) -> None:
        self.engine, self.runner = engine, runner

    async def receive(self, reaction: Reaction) -> Received:
        """What the reaction moved (nothing, for most)."""
        return await self.runner.run(receive, self.engine, reaction)


def receive(engine: MemoryEngine, reaction: Reaction) -> Received:
    """Apply one reaction (on the memory thread)."""
    sign = polarity(reaction.emoji)
    feedback = engine.feedback
    found = (
        feedback.answered(reaction.platform, reaction.channel_id, reaction.post_id)
        if sign
        else None
    )
    if found is None:
        return NOTHING  # not a reaction that means anything, or not on a reply of the bot's here
    person = engine.people.lookup(reaction.platform, reaction.user_id)
    # recorded, whoever it is: one vote per person per reply
    if not feedback.vote(found.reply_rid, person, reaction.emoji.translate(_MODIFIERS)):
        return NOTHING
    used = feedback.used(found.memories)
    theirs = [u.rid for u in used if moves(u, person, reaction)]
    # one step per person per memory, over every reply that used it
    touched = tuple(feedback.unvoted(person, found.reply_rid, theirs))
    if person == found.answered:
        others = [u for u in used if u.rid not in theirs]
        touched += _in_concert(engine, person, found.reply_rid, others, sign)
    delta = UP_STEP if sign > 0 else -DOWN_STEP
    feedback.received(list(touched), delta, recheck=sign < 0)
    log.info(
        "a reaction on reply %d moved %d memories by %+.3f", found.reply_rid, len(touched), delta
    )
    return Received(touched, delta if touched else 0.0, sign < 0 and bool(touched))


def _in_concert(
    engine: MemoryEngine, person: str, reply_rid: int, others: list[Used], sign: int
) -> tuple[int, ...]:
    """Others' shared memories this vote moves: those it makes the CONCERT-th person's vote on (a
    private one of another person's is never touched)."""
    fresh = engine.feedback.unvoted(person, reply_rid, [u.rid for u in others if not u.private])
    counts = engine.feedback.concert(fresh, sorted(_REINFORCE if sign > 0 else _DOUBT))
    return tuple(rid for rid in fresh if counts.get(rid) == CONCERT)
