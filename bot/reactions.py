"""Reactions on the bot's replies (ORCH-12): how people received a reply moves the memories it used.

    who reacts                              👍 ❤️ (reinforce)        👎 (doubt)
    the person the reply answered           importance +0.5           importance -1.0, marked for recheck
    someone else in the group               +0.125 (a quarter)        -0.25, not marked
    anyone, on another person's private     untouched                 untouched
    memory (one only its owner may see)

A reaction finds its reply by the post it landed on, in that very channel (``reply_posts``); one vote per person
per reply (a 👍 taken back and given again counts once). Nothing is said back, so a reaction reveals nothing;
the importance is what recall ranks by (``memory.recall.retrieval``) and what decay and pruning act on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memory import MemoryEngine, People, Used

from .types import Reaction

log = logging.getLogger(__name__)

# of importance's 0..10: three 👎 from the person answered sink a 5 to 2
UP_STEP, DOWN_STEP = (
    0.5,
    1.0,
)
OTHERS_WEIGHT = 0.25  # a bystander's reaction is a weaker signal: it was not their question
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


def may_touch(memory: Used, person_id: str) -> bool:
    """A private memory is only its owner's to move; a shared one anyone's who saw the reply."""
    return not memory.private or (
        memory.scope in ("user", "owner") and memory.scope_id == person_id
    )


def receive(engine: MemoryEngine, people: People, reaction: Reaction) -> Received:
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
    person = people.lookup(reaction.platform, reaction.user_id)
    own = person == found.answered
    if not feedback.vote(found.reply_rid, person, reaction.emoji.translate(_MODIFIERS)):
        return NOTHING
    touched = tuple(u.rid for u in feedback.used(found.memories) if may_touch(u, person))
    delta = (UP_STEP if sign > 0 else -DOWN_STEP) * (1.0 if own else OTHERS_WEIGHT)
    feedback.received(list(touched), delta, recheck=sign < 0 and own)
    log.info(
        "a reaction on reply %d moved %d memories by %+.3f", found.reply_rid, len(touched), delta
    )
    return Received(touched, delta, sign < 0 and own)
