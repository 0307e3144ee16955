"""What one turn's prompt may hold from memory, gathered in one call on the memory thread: the recall
snapshot the bot's assembler renders (sections, budgets and quoting stay the bot's). Nothing is written
here except, when asked, the access counts of what was recalled (queued, written off the reply path)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..engine import MemoryEngine
from ..models import (
    SELF_SUBJECT,
    FactKind,
    Memory,
    Scope,
    SessionSummary,
    StoredMessage,
    Visibility,
)
from ..scopes import RecallContext, memory_partition
from ..storage.graph import EntityCount
from ..storage.memories import RecallFilters
from .whose import names_of

BEHAVIOURAL_LIMIT = 8  # behaviour rules recalled for one message
MAX_PEOPLE = 6  # people in a conversation whose facts are listed (the speaker first)


@dataclass(frozen=True, slots=True)
class Recalled:
    """One recall split in two: behaviour rules that fit the message, and everything else relevant."""

    behavioral: tuple[Memory, ...]
    relevant: tuple[Memory, ...]


@dataclass(frozen=True, slots=True)
class RecallSnapshot:
    """Everything of memory one turn's prompt may show, in the order the prompt shows it."""

    bulletin: str  # the scope's briefing, "" for none
    guidance: tuple[Memory, ...]
    recalled: Recalled
    # (person id, their facts), the speaker first
    people: tuple[tuple[str, tuple[Memory, ...]], ...]
    self_facts: tuple[Memory, ...]
    lore: tuple[Memory, ...]  # this guild's lore (none in a DM)
    entities: tuple[EntityCount, ...]
    sessions: tuple[SessionSummary, ...]  # sessions that ended here lately
    rolling_summary: str  # the channel's summary of what came before its history window
    # the channel's last turns after its compaction point, oldest first
    history: tuple[StoredMessage, ...]
    place_persona: str  # this server's or group's own persona, "" for none
    # person id -> a name, for everyone whose facts are shown (``memory.recall.whose``)
    names: dict[str, str] = field(default_factory=dict)

    def facts(self) -> list[Memory]:
        """Every fact the snapshot holds."""
        people = [m for _, facts in self.people for m in facts]
        recalled = [*self.recalled.behavioral, *self.recalled.relevant]
        return [*self.guidance, *recalled, *people, *self.self_facts, *self.lore]


class MemoryContext:
    """Gathers ``RecallSnapshot`` values for one engine."""

    def __init__(
        self, engine: MemoryEngine, *, summary_window_s: float = 1800.0, history_turns: int = 20
    ) -> None:
        """:param summary_window_s: how recent an ended session must be to be shown.
        :param history_turns: how many of the channel's last messages are read."""
        self.engine = engine
        self.summary_window_s, self.history_turns = summary_window_s, history_turns
        self.summaries, self.channels = engine.summaries, engine.channels
        self.bulletins, self.places = engine.bulletin_rows, engine.personas

    def context_for(
        self,
        ctx: RecallContext,
        query: str,
        *,
        people: tuple[str, ...] = (),
        channel_key: str = "",
        recalled: Recalled | None = None,
        query_vector: np.ndarray | None = None,
        reinforce: bool = True,
    ) -> RecallSnapshot:
        """The recall snapshot for a message ``query`` said in ``ctx``.

        :param people: person ids in the conversation, the speaker first (their facts are listed).
        :param channel_key: the channel's state key (its rolling summary and compaction point); "" for none.
        :param recalled: a recall made already (a voice session's warm cache); None recalls here.
        :param query_vector: the query's embedding when the caller has it.
        :param reinforce: False leaves what was recalled unmarked (the runtime snapshot: looking is not using).
        """
        state = self.channels.get(channel_key) if channel_key else None
        place = self.places.get(ctx.guild_id)
        bulletin = self.bulletins.for_context(ctx)
        found = RecallSnapshot(
            bulletin=bulletin.text if bulletin else "",
            guidance=self._listed(
                ctx.memory_partitions(), RecallFilters(kinds=(FactKind.GUIDANCE,)), 24
            ),
            recalled=recalled
            if recalled is not None
            else self.recall(ctx, query, query_vector, reinforce),
            people=self._people(ctx, people),
            self_facts=self._listed(
                ctx.memory_partitions(), RecallFilters(subjects=(SELF_SUBJECT,)), 10
            ),
            lore=self._lore(ctx),
            entities=tuple(self.engine.graph.top_entities(ctx.memory_partitions(), 5)),
            sessions=tuple(self.summaries.recent(ctx, self.summary_window_s)),
            rolling_summary=state.rolling_summary if state else "",
            history=self._history(ctx, state.compacted_until if state else 0.0),
            place_persona=place.text if place else "",
        )
        return replace(found, names=names_of(self.engine.people, found.facts()))

    def recall(
        self,
        ctx: RecallContext,
        query: str,
        query_vector: np.ndarray | None = None,
        reinforce: bool = True,
    ) -> Recalled:
        """One recall serving two sections: behaviour rules that fit ``query``, and everything else relevant."""
        if query_vector is None:
            query_vector = self.engine.embeddings.embed_query(query)
        top_k = self.engine.knobs.get("memories").top_k
        hits = self.engine.recall.recall(
            ctx,
            query,
            top_k=top_k + BEHAVIOURAL_LIMIT,
            query_vector=query_vector,
            reinforce=reinforce,
        )
        memories = [h.item for h in hits]
        return split(memories, [m for m in memories if m.kind is FactKind.BEHAVIORAL], top_k)

    def recalled_from(self, memories: list[Memory], behavioral: list[Memory]) -> Recalled:
        """A recall made already (a voice session's warm cache and its behaviour rules), split and
        cut as ``recall`` splits its own."""
        return split(memories, behavioral, self.engine.knobs.get("memories").top_k)

    def _listed(
        self, partitions: tuple[str, ...], filters: RecallFilters, limit: int
    ) -> tuple[Memory, ...]:
        return tuple(
            self.engine.memory_rows.listing(partitions, filters, "important", limit, False)
        )

    def _people(
        self, ctx: RecallContext, people: tuple[str, ...]
    ) -> tuple[tuple[str, tuple[Memory, ...]], ...]:
        """Each person's most important facts: twelve for the speaker, six for the others."""
        shown = people[:MAX_PEOPLE]
        groups = [(ctx.partitions_of(p), 12 if i == 0 else 6) for i, p in enumerate(shown)]
        # one statement for all
        listed = self.engine.memory_rows.listing_many(groups, RecallFilters(), "important")
        return tuple((p, tuple(facts)) for p, facts in zip(shown, listed, strict=True))

    def _lore(self, ctx: RecallContext) -> tuple[Memory, ...]:
        if ctx.is_dm:
            return ()
        found = self._listed(
            (memory_partition(Scope.GUILD, ctx.guild_id or "", Visibility.PUBLIC),),
            RecallFilters(),
            10,
        )
        # the bot's own are "yourself"
        return tuple(m for m in found if m.scope is Scope.GUILD and m.subject != SELF_SUBJECT)

    def _history(self, ctx: RecallContext, since: float) -> tuple[StoredMessage, ...]:
        rows = self.engine.messages.recent(ctx, ctx.channel_id, self.history_turns)
        return tuple(r for r in rows if r.platform == ctx.platform and r.created_at > since)


def split(memories: list[Memory], behavioral: list[Memory], top_k: int) -> Recalled:
    """``Recalled`` from a ranked list: the first behaviour rules, and the first ``top_k`` of the rest."""
    rest = [m for m in memories if m.kind is not FactKind.BEHAVIORAL]
    return Recalled(tuple(behavioral[:BEHAVIOURAL_LIMIT]), tuple(rest[:top_k]))
