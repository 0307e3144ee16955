"""One object that owns a store file and everything built on it; what the bot and the CLI open."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .clock import Clock, SystemClock
from .protocols import Embedder
from .recall.leaks import LeakCheck
from .recall.recall import MemoryRecall
from .recall.retrieval import Retriever
from .storage.audit import AuditTrail
from .storage.bulletins import BulletinRows
from .storage.checkins import CheckinStore
from .storage.claims import JobClaims
from .storage.corpus import MemoryCorpus, MessageCorpus
from .storage.db import Rewritten
from .storage.departures import PlaceDepartures
from .storage.embeddings import EmbeddingService
from .storage.graph import Graph
from .storage.ingest import IngestLog
from .storage.journals import Journals
from .storage.knobs import KnobStore
from .storage.ledger import UsageLedger
from .storage.manners import PlaceModes, ReplyFeedback
from .storage.memories import MemoryRepository
from .storage.messages import MessageLog
from .storage.model_traits import ModelTraits
from .storage.people import People
from .storage.persona import PlacePersonas
from .storage.pg import open_database
from .storage.pgsearch import PgVectorIndex
from .storage.privacy import Privacy
from .storage.ratelimits import RateWindows
from .storage.reflections import ReflectionAudits
from .storage.reminders import Reminders
from .storage.sessions import ChannelState, ExtractionBuffer, SessionSummaries
from .storage.timezones import Timezones
from .storage.tombstones import TombstoneRows
from .storage.vectors import DEFAULT_MIRROR_MB, MirrorBudget, VectorIndex, limit_blas_threads
from .write.store import MemoryStore
from .write.tombstones import Tombstones


class MemoryEngine:
    def __init__(
        self,
        path: str | Path,
        embedder: Embedder | None,
        clock: Clock | None = None,
        *,
        vector_mirror: bool = True,
        vector_mirror_mb: float | None = DEFAULT_MIRROR_MB,
        journal_dir: str | Path | None = None,
        secret_key: bytes | None = None,
        extraction_debounce_s: float = 30.0,
        summary_ttl_s: float = 86_400.0,
        timezone: str = "UTC",
    ) -> None:
        """``secret_key``: the operator's key for tombstones, kept outside the store (``bot.secret_key``); None
        gives one for this process only (scratch stores, evals). The last three are the operator's settings of
        the repositories below (``ExtractionBuffer``, ``SessionSummaries``, ``Timezones``): each repository is
        built here once, so every user of it has the same settings."""
        self.clock = clock or SystemClock()
        limit_blas_threads()
        # a path or sqlite:/// is SQLite; postgresql://... is PostgreSQL (SCALE-1)
        self.db = open_database(path)
        try:
            self.embeddings = EmbeddingService(self.db, embedder)
        except Exception:
            self.db.close()
            raise
        self.knobs = KnobStore(self.db)
        # SCALE-1: background jobs run once across processes
        self.claims = JobClaims(self.db, self.clock)
        self.graph = Graph(self.db, self.clock)
        # one budget for both mirrors: whichever partitions the conversations search stay loaded
        self.mirror_budget = MirrorBudget.megabytes(vector_mirror_mb)
        vectors = PgVectorIndex if self.db.engine == "postgresql" else VectorIndex
        memory_vec = vectors(
            self.db, "memory_vec", "memories", use_mirror=vector_mirror, budget=self.mirror_budget
        )
        message_vec = vectors(
            self.db, "message_vec", "messages", use_mirror=vector_mirror, budget=self.mirror_budget
        )
        memory_corpus = MemoryCorpus(self.db, memory_vec)
        message_corpus = MessageCorpus(self.db, message_vec)
        self.memory_rows = MemoryRepository(self.db, memory_corpus, self.clock)
        self.recall = MemoryRecall(self.memory_rows, memory_corpus, self.embeddings, self.knobs)
        # MAINT-6: Markdown journals beside the store, written on every memory write (None: switched off)
        self.journals = (
            Journals(journal_dir, self.memory_rows, self.clock.now)
            if journal_dir is not None
            else None
        )
        # SEC-5: what was forgotten; a person's names tell no fact of theirs apart (``self.people``, built below)
        tombstones = Tombstones(
            self.db,
            TombstoneRows(self.db),
            self.clock,
            secret_key,
            self.embeddings,
            lambda person: self.people.own_names(person),
        )
        if secret_key is not None:
            tombstones.move_legacy_key()  # a key an older store kept in itself leaves it now (issue 31)
        self.memories = MemoryStore(
            self.memory_rows, self.embeddings, self.graph, tombstones, self.journals
        )
        self.messages = MessageLog(
            message_corpus,
            self.embeddings,
            self.knobs,
            self.clock,
            Retriever(message_corpus, self.embeddings, self.clock),
        )
        # SEC-6: what a reply would reveal
        self.leaks = LeakCheck(memory_corpus, message_corpus, self.clock.now)
        self._repositories(extraction_debounce_s, summary_ttl_s, timezone)

    def _repositories(
        self, extraction_debounce_s: float, summary_ttl_s: float, timezone: str
    ) -> None:
        """The per-table repositories beside the memories and messages: one of each, for every user of this engine."""
        db, clock = self.db, self.clock
        self.buffer = ExtractionBuffer(db, clock, self.messages, extraction_debounce_s)
        self.channels = ChannelState(db, clock)
        self.summaries = SessionSummaries(db, clock, summary_ttl_s)
        # linking two accounts moves what each of these owners keeps of the newer one
        self.people = People(
            db,
            clock,
            self.memory_rows,
            movers=(self.memories, self.messages, self.buffer, self.channels),
        )
        self.privacy = Privacy(db, clock, self.people, self.buffer, self.memory_rows)
        self.zones = Timezones(self.people, timezone)
        self.checkins = CheckinStore(db, clock)
        self.audit = AuditTrail(db, clock)
        self.reflections = ReflectionAudits(db, clock)  # the model-calling runs' audit
        self.personas = PlacePersonas(db, clock, self.audit)
        self.reminders = Reminders(db, clock, self.audit)
        self.rate_windows = RateWindows(db, self.people)
        self.model_traits = ModelTraits(db)  # ORCH-11: what the chat model was found to do
        self.ledger = UsageLedger(db)  # ORCH-14: what the model calls cost, counts only
        self.place_modes = PlaceModes(db, self.clock)  # ORCH-10: each place's group manners
        # ORCH-12: reactions
        self.feedback = ReplyFeedback(db, self.clock, self.messages, self.memory_rows)
        self.bulletin_rows = BulletinRows(db)  # MAINT-5: each scope's briefing
        self.departures = PlaceDepartures(db)  # SEC-7: the places the bot was removed from
        self.ingest_log = IngestLog(db, clock)  # WRITE-7: the files ingested, passage by passage

    @property
    def path(self) -> str:
        """The store's file (":memory:" for one held in memory): what is kept beside it, such as exports, is found from it."""
        return self.db.path

    def rebuild_journals(self) -> int | None:
        """The Markdown journals made again from this store (None when they are switched off)."""
        return (
            self.journals.rebuild(self.memory_rows.in_written_order())
            if self.journals is not None
            else None
        )

    def forget_signal(self) -> int:
        """Moves when another process may have forgotten or edited words (``Database.forget_signal``): a cache of
        words kept in this process compares it with the value it was filled at."""
        return self.db.forget_signal()

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction (``BEGIN IMMEDIATE``) around several owners' writes; nests as a savepoint."""
        return self.db.transaction()

    def scrub(self) -> None:
        """Overwrite freed pages and checkpoint the WAL: deleted words leave the file's bytes (``Database.scrub``)."""
        self.db.scrub()

    def rewrite(self) -> Rewritten:
        """The operator's full scrub after forgetting: every table rewritten from its live rows, the WAL cut
        (``Database.rewrite``); says what is left that only the operator can remove (backups, WAL archives)."""
        return self.db.rewrite()

    def backup_to(self, target: str | Path) -> None:
        """A consistent copy of the store at ``target`` (``Database.backup_to``)."""
        self.db.backup_to(target)

    def optimize(self) -> None:
        """What the nightly upkeep does to the file's indexes (``Database.optimize``)."""
        self.db.optimize()

    def close(self) -> None:
        self.recall.flush_access()
        try:
            if self.journals is not None:
                self.journals.flush()
        finally:
            self.db.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
