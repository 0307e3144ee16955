"""Files read into memory while the bot runs (WRITE-7, the ingest folder), as its event loop
awaits them: the store is touched only on the memory thread, one call a step; reading the file and
waiting on the extraction model happen on a worker thread, so replies are never stuck behind a long
document. The mechanism is ``memory.write.ingest``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from .engine import MemoryEngine
from .protocols import Completer
from .storage.db import AsyncRunner
from .write.ingest import BadFile, FileReport, Ingester, IngestTarget
from .write.passages import Passage


class Ingesting:
    """Files into ``target``'s memory; with ``complete`` (the extraction model) passages become
    typed memories. ``skipped`` is the journals' folder (None: no journals): read back as files, its
    memories would be learned again, and again."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        target: IngestTarget,
        complete: Completer | None,
    ) -> None:
        self.runner = runner
        self.ingester = Ingester(engine, target, complete)
        self.skipped = engine.journals.root.resolve() if engine.journals is not None else None

    async def file(self, path: Path) -> FileReport:
        """The file ingested, a batch of passages at a time (nothing when it is unchanged)."""
        run = await self.runner.run(self.ingester.begin, path)
        if isinstance(run, FileReport):
            return run
        passages = run.passage_batches()
        try:
            while batch := await asyncio.to_thread(_next, passages):
                fresh = await self.runner.run(run.split, batch)
                # the model is waited on here
                prepared = await asyncio.to_thread(self.ingester.prepare, run, fresh)
                await self.runner.run(run.store, prepared, bulk=self.ingester.complete is None)
        except BadFile as exc:
            return run.failed(str(exc))
        return await self.runner.run(run.finish)


def _next(passages: Iterator[list[Passage]]) -> list[Passage]:
    return next(passages, [])
