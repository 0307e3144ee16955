"""The operator's store tools (OPS-2, the command line): what ``companion`` does to one open
store, as sync calls for code that is not on the event loop. Each method runs the mechanism of its
module and returns what it returns; the command line only parses, confirms and prints.

    leftovers        what remains of people or words on every surface (SEC-7, upkeep.leftovers)
    forget_file      everything learned from an ingested file (WRITE-7, upkeep.forgetting)
    import_memories  an export, or a list of memories, back in through the write rules (MEM-5)
    consolidate, decay, prune, prune_entities    the maintenance passes (upkeep.maintenance)
    reembed          every vector again for a new embedding model (MEM-4)
    bulletins_due, write_bulletins    the bulletins to write, written by a blocking model (MAINT-5)

What needs no open store (a whole-store copy, a PostgreSQL server's facts, the file modes) is on the
face beside this class, from its own module.
"""

from __future__ import annotations

from pathlib import Path

from .engine import MemoryEngine
from .models import PLATFORMS, Progress
from .protocols import Completer, Embedder
from .upkeep import leftovers, maintenance
from .upkeep.bulletin import Bulletin, BulletinPlan, Bulletins, refresh
from .upkeep.forgetting import forget_file
from .upkeep.leftovers import FileHit, Folders, Presence
from .upkeep.maintenance import ConsolidationReport
from .upkeep.reembed import reembed
from .upkeep.transfer import JsonObject, import_memories

DUE_AT_ONCE = 1_000  # the command line writes every due bulletin; the bot's job takes a few per run


class StoreTools:
    """The operator's use cases over one open store (the engine the command opened)."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    def leftovers(
        self, words: tuple[str, ...], people: tuple[str, ...], folders: Folders
    ) -> list[FileHit]:
        """Counts per surface of what remains of ``words`` and ``people``, never the words
        themselves. A person is each id as given, and the person an account ("telegram:123")
        belongs to while it is still linked.

        :raises ValueError: neither a word nor a person to look for."""
        target = leftovers.Sought(words, self._person_ids(people))
        return leftovers.audit(self.engine, target, folders)

    def presence(self, words: tuple[str, ...]) -> list[Presence]:
        """For each word: the memories and messages that hold it now, and whether a tombstone may
        hold it (``leftovers.presence``): a word never forgotten is present, not left behind."""
        return [leftovers.presence(self.engine, word) for word in words]

    def _person_ids(self, given: tuple[str, ...]) -> tuple[str, ...]:
        ids = list(given)
        for value in given:
            platform, _, account = value.partition(":")
            if account and platform in PLATFORMS:
                ids.append(self.engine.people.lookup(platform, account))
        return tuple(dict.fromkeys(ids))

    def forget_file(self, path: Path) -> dict[str, int]:
        """Every memory learned from the file forgotten completely, then the file's own rows:
        {"files": rows of that path (0: never ingested), "memories": how many were forgotten}."""
        return forget_file(self.engine, path)

    def import_memories(self, data: object) -> JsonObject:
        """How many were stored, duplicate, rejected (each with its reason), and the messages and
        session summaries that came back."""
        return import_memories(self.engine, data)

    def consolidate(
        self, complete: Completer, *, progress: Progress | None = None
    ) -> ConsolidationReport:
        """Near-duplicate memories merged by the model; a failing cluster is counted, not raised."""
        return maintenance.consolidate(self.engine, complete, progress=progress)

    def decay(self, *, unaccessed_days: float, factor: float) -> int:
        return maintenance.decay(self.engine, unaccessed_days=unaccessed_days, factor=factor)

    def prune(self, *, below: float, older_than_days: float) -> int:
        return maintenance.prune(self.engine, below=below, older_than_days=older_than_days)

    def prune_entities(self, *, unseen_days: float) -> int:
        return maintenance.prune_entities(self.engine, unseen_days=unseen_days)

    def reembed(
        self,
        embedder: Embedder,
        *,
        allow_dimension_change: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, int]:
        """Rows embedded again per table. Open the engine with no embedder for this.

        :raises DimensionMismatch: a new dimension, not allowed."""
        return reembed(
            self.engine,
            embedder,
            allow_dimension_change=allow_dimension_change,
            progress=progress,
        )

    def bulletins_due(
        self, *, min_changes: int, scope: tuple[str, str] | None = None
    ) -> list[BulletinPlan]:
        """One scope's bulletin (``scope``: (scope, scope id)) due or not, empty when it has nothing
        to summarise; or every bulletin due now, as the running bot finds them each quarter hour.

        :raises InvalidInput: not a bulletin scope."""
        bulletins = Bulletins(self.engine, min_changes=min_changes)
        if scope is None:
            return bulletins.due(self.engine.clock.now(), limit=DUE_AT_ONCE)
        plan = bulletins.plan(bulletins.scope(*scope))
        return [plan] if plan else []

    def write_bulletins(self, plans: list[BulletinPlan], complete: Completer) -> list[Bulletin]:
        """The bulletins written; one that fails is logged and skipped."""
        return refresh(Bulletins(self.engine), complete, plans)
