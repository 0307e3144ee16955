"""The root of memory's face, as the bot's event loop holds it: one store, its one memory thread, and the
services by use case built once on them (``memory.turns``, ...), so every service shares the same runner
and the same repositories (a setting given to one copy cannot be missing from another).

The root is also the memories use case: ``await memory.add(...)`` instead of ``runner.run(engine.memories.add,
...)``. Every call runs on the store's one worker thread; a contradiction judge (a model, async) is asked here,
between gathering and applying, so the memory thread never waits on a model and no thread calls back into the loop.
"""

from __future__ import annotations

import logging
from typing import Protocol

from .engine import MemoryEngine
from .forget import Forgetting
from .models import Memory, NewMemory
from .recall.context import MemoryContext, RecallSnapshot
from .reminding import Reminding
from .scopes import RecallContext
from .storage.db import AsyncRunner
from .storage.memories import RecallFilters
from .storage.ranking import Hit
from .storage.sessions import ChannelState, ExtractionBuffer
from .turns import Turns
from .write.store import WriteResult

log = logging.getLogger(__name__)


class ContradictionJudge(Protocol):
    """Does ``new`` contradict ``old`` (two facts about the same subject)? A model answers, asynchronously."""

    async def __call__(self, old: str, new: str) -> bool: ...


class AsyncMemory:
    """One engine's memory for async callers: the services by use case, and the memories themselves (WRITE-5's
    one judge path included)."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        judge: ContradictionJudge | None = None,
        *,
        buffer: ExtractionBuffer | None = None,
        channels: ChannelState | None = None,
    ) -> None:
        """:param engine: the store. :param runner: its worker thread.
        :param judge: asked about each related fact on the same subject before a write; None: never.
        :param buffer: the extraction buffer the background drains; the engine's if None.
        :param channels: the channels' state the background reads; the engine's if None."""
        self.engine, self.runner, self.judge = engine, runner, judge
        self.context = MemoryContext(engine)
        self.forgetting = Forgetting(engine, runner)
        self.reminding = Reminding(engine, runner)
        self.turns = Turns(
            engine, runner, buffer or engine.buffer, engine.privacy, channels or engine.channels
        )

    async def add(self, new: NewMemory) -> WriteResult:
        """Store ``new`` by the write rules (``MemoryStore.add``), the judge's verdicts applied.

        :raises InvalidInput: unsafe or malformed input."""
        contradicted = await self.contradicted(new)
        return await self.runner.run(self.engine.memories.add, new, contradicts=contradicted)

    async def contradicted(self, new: NewMemory) -> frozenset[str]:
        """Ids of stored facts the judge finds ``new`` contradicts (gather on the memory thread, then ask)."""
        if self.judge is None:
            return frozenset()
        found = set()
        for old in await self.runner.run(self.engine.memories.to_judge, new):
            if await self._judged(old.content, new.content):
                found.add(old.id)
        return frozenset(found)

    async def _judged(self, old: str, new: str) -> bool:
        assert self.judge is not None
        try:
            return bool(await self.judge(old, new))
        except (
            Exception
        ):  # an edge: a model call. No verdict links the facts as related, never loses the write
            log.exception("contradiction judge failed; linking as related")
            return False

    async def recall(
        self,
        ctx: RecallContext,
        query: str,
        *,
        filters: RecallFilters = RecallFilters(),
        top_k: int | None = None,
    ) -> list[Hit[Memory]]:
        """Hybrid recall of what ``ctx`` may see (``MemoryRecall.recall``), reinforcing what was found."""
        return await self.runner.run(
            self.engine.recall.recall, ctx, query, filters=filters, top_k=top_k
        )

    async def get(self, memory_id: str) -> Memory:
        """The memory with this id. :raises NotFound: no such id."""
        return await self.runner.run(self.engine.memory_rows.get, memory_id)

    async def delete(self, memory_id: str) -> list[str]:
        """Forget a memory completely (``memory.upkeep.forgetting.forget_memory``, SEC-3: its history, sources,
        tombstone, journal lines); returns every memory id removed."""
        return list((await self.forgetting.memory(memory_id)).memories)

    async def context_for(
        self, ctx: RecallContext, query: str, **options: object
    ) -> RecallSnapshot:
        """The recall snapshot a prompt is rendered from (``MemoryContext.context_for``; same options)."""
        return await self.runner.run(self.context.context_for, ctx, query, **options)
