"""What a person does to their own memory by command (/remember, /forget <words>, /about veto),
for code already on the memory thread (``bot.commands``, ``bot.consent``): each call is whole
before it returns.

    remember      a fact the person states, filed where their words go (``write_scope``),
                  about whom it names (SEC-5)
    forget_words  the closest own memory to the words (and the same fact kept again in other
                  words), the person's own messages that hold
                  them, the bot's replies that repeat them (SEC-3; a forget asked in words too)
    veto          one memory of their /about me list, by its short id (SEC-5)
    forget_all    everything about them, /privacy off kept (SEC-5): /forget everything
    export        what forget_all would remove, as JSON-ready data (MEM-5): /export

The operator's forgets (a memory, a guild, a person, from the dashboard or the command line) are
``memory.forget.Forgetting``, on the same mechanism (``memory.upkeep.forgetting``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine import MemoryEngine
from .models import Erased, FactKind, Memory, MemoryType, NewMemory, Provenance, Source
from .scopes import RecallContext, write_scope
from .storage.memories import RecallFilters
from .storage.ranking import Hit
from .upkeep.forgetting import Forgotten, forget_everything, forget_memory, veto
from .upkeep.said import forget_echoes, forget_said, said_matching
from .upkeep.transfer import JsonObject, export_person
from .write.subjects import bound, written_by

# A /forget's closest memory must be at least this relevant: below it the nearest memory is
# about something else, and forgetting it would lose what was not asked
FORGET_MIN_RELEVANCE = 0.35
# own memories a forget in words looks at: the closest goes, and those its tombstone matches
KEPT_AGAIN = 5
STATED_IMPORTANCE = 7  # a fact the person asked to keep outranks most extracted ones (1..10)


@dataclass(frozen=True, slots=True)
class WordsErased:
    """What a forget in words removed: the closest own memory (None: none was close enough)
    and the person's own messages that said it (``said``: how many; ``said_words``: texts)."""

    memory: Erased | None
    said: int = 0
    said_words: tuple[str, ...] = ()

    @property
    def contents(self) -> tuple[str, ...]:
        """Every forgotten text, the memory's lineage first."""
        return (*(self.memory.contents if self.memory else ()), *self.said_words)


class OwnMemory:
    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def remember(
        self, ctx: RecallContext, fact: str, subject: str, *, said_in: tuple[str, str]
    ) -> bool:
        """Keep ``fact`` as the speaker stated it; ``said_in``: (platform, channel).
        False: it was known already."""
        where = write_scope(ctx)
        platform, channel_id = said_in
        new = NewMemory(
            content=fact,
            subject=subject,
            scope=where.scope,
            scope_id=where.scope_id,
            visibility=where.visibility,
            guild_id=where.guild_id,
            type=MemoryType.SEMANTIC,
            kind=FactKind.OTHER,
            source=Source.USER_STATED,
            importance=STATED_IMPORTANCE,
            provenance=Provenance(platform=platform, guild_id=ctx.guild_id, channel_id=channel_id),
            written_by=written_by(ctx),
        )
        # SEC-5: whom it is about, by identity
        return self.engine.memories.add(bound(self.engine, new)).status != "duplicate"

    def forget_words(
        self,
        ctx: RecallContext,
        person_id: str,
        words: str,
        *,
        asked_in: tuple[str, str],
        skip: tuple[str, ...] = (),
    ) -> WordsErased:
        """The closest own memory to ``words`` (its lineage and sources, ``asked_in``'s
        summaries) and the near ones its tombstone matches, the person's own messages holding
        every word of it (all but ``skip``, stored ids) and the bot's replies that repeat it."""
        hits = self.engine.recall.recall(
            ctx, words, threshold=0.0, top_k=KEPT_AGAIN, reinforce=False, filters=_own(person_id)
        )
        hits = [h for h in hits if h.relevance >= FORGET_MIN_RELEVANCE]
        done = forget_memory(self.engine, hits[0].item.id, asked_in=asked_in) if hits else None
        if done is not None:
            self._kept_again(done, hits[1:], asked_in)
        # SEC-3: what is not a memory yet (said before extraction ran) is in their own messages
        rids = said_matching(self.engine, ctx, [person_id], words, skip=skip)
        said_words = tuple(m.content for m in self.engine.messages.get_rids(rids))
        said = forget_said(self.engine, ctx, [person_id], rids)
        # a later reply that repeated it goes too
        forget_echoes(self.engine, ctx, [person_id], words)
        return WordsErased(done.erased() if done else None, said, said_words if said else ())

    def forget_all(self, person_ids: list[str]) -> dict[str, int]:
        """Everything about the person, all their linked ids; rows removed per table."""
        return forget_everything(self.engine, person_ids)

    def export(self, person_ids: list[str]) -> JsonObject:
        return export_person(self.engine, person_ids)

    def said_it(
        self, ctx: RecallContext, person_id: str, words: str, *, skip: tuple[str, ...] = ()
    ) -> bool:
        """Whether one of the person's own messages (all but ``skip``, stored ids) holds every
        word of ``words``: "forget the half marathon" names something they said."""
        return bool(said_matching(self.engine, ctx, [person_id], words, skip=skip))

    def _kept_again(
        self, done: Forgotten, hits: list[Hit[Memory]], asked_in: tuple[str, str]
    ) -> None:
        """The same fact kept again in other words (a real 0.5B filed "...the Harrogate half
        marathon in March" twice): what the new tombstone holds back goes too."""
        tombstones = self.engine.memories.tombstones
        for hit in hits:
            if hit.item.id not in done.memories and tombstones.matching(hit.item):
                more = forget_memory(self.engine, hit.item.id, asked_in=asked_in)
                done.memories += more.memories
                done.contents += more.contents
                done.messages += more.messages

    def veto(
        self, person_id: str, short_id: str, *, asked_in: tuple[str, str], owner: bool = False
    ) -> Erased | None:
        """One memory of the person's /about me list, with the full cascade; None (nothing
        changed) unless ``short_id`` names exactly one of theirs."""
        done = veto(self.engine, person_id, short_id, asked_in=asked_in, owner=owner)
        return done.erased() if done else None


def _own(person_id: str) -> RecallFilters:
    """Memories about the person asking (their own user scope), within what the context sees."""
    return RecallFilters(scope_ids=(person_id,))
