"""Long-term memory: one SQLite file with sqlite-vec and FTS5.

Layering: this package knows nothing of Discord, Telegram, voice or any LLM SDK. It takes plain
data and callables (an ``Embedder`` and a ``Completer``, see ``memory.protocols``).

The face: what ``bot/`` and ``voice/`` import (``from memory import X``), with ``memory.models`` for
values; ``tests/test_architecture.py`` holds them to it. Its services, by use case (the rest of the face
is the values they take and return, the errors, and the protocols a caller implements):

    AsyncMemory      the root: one store, its memory thread, the services below built once on them
      .turns         Turns: a turn's books (arrive, finish, observe, leaks, known, edited, deleted)
      .forgetting    Forgetting: one memory, a guild, a person, completely (SEC-3); export (MEM-5)
      .reminding     Reminding: the sender's books of reminders (due, claim, delivered, ...), ORCH-13
      .dashboard     Dashboard: the operator's page (people, memories, knobs, manners,
                     personas, audit)
      .reactions     Reactions: a reaction on a reply moves the memories it used (ORCH-12)
    MemoryTools      the memory tools the model calls in a turn, bound to its scope (TOOLS-1, TOOLS-2)
    MemoryEngine     the store file and its repositories (opened by the composition root and the CLI)
    AsyncRunner      the memory thread every service awaits
    OwnMemory        own.py: /remember, /forget <words> or everything, /about veto, /export (the
                     person's own memories)
    Checkins         checkins.py: the check-ins' memory side (plan, draft, record)
    Housekeeping     housekeeping.py: stale audits, decay and prune, the retention window
    Leaving          leaving.py: a place the bot was removed from, purged after its grace (SEC-7)
    Ingesting        ingesting.py: the ingest folder's files, read while the bot runs (WRITE-7)
    SpokenSessions   spoken.py: a voice session's records (flushed, ended)
    Spending         usage.py: the usage ledger's reads (dashboard)
    StoreTools       operator.py: the operator's store tools (audit, upkeep, reembed, bulletins)
    StoreFile        storage/storefile.py: a store opened on its own (doctor, restore): values only
    job kinds        Extraction, Reflection, Compaction, Consolidation, ...: the model-calling jobs
                     (jobs/), run by the bot's job runner; job_charge names whose cost each is

The face's table is split by area (core, shared values, operator, dashboard, people, running bot, a
turn's context): each area's names for mypy and its table of name -> module.

The map behind the face, by layer (a map for a reader, not an import rule: the arrows that are enforced are
between packages):

    memory/           the face: api (the root), turns, forget, own, checkins, reminding, housekeeping,
                      spoken, usage, settings, operator, charges, engine, models, scopes, errors,
                      protocols, clock, tools; and what every layer may use: safety (the write-safety
                      filters), evasions (text folding)
    memory/storage/   the engines (db, pg), migrations, search plumbing, one repository per table, built
                      once by the engine, the Markdown journals (MAINT-6), importing nothing above
                      storage; upkeep/ still runs SQL of its own for whole-store walks (forget
                      registry, copy, audit, re-embed) and the daily reflections' table
    memory/recall/    reading: retrieval (ranking), recall, context (one turn's memory), when, leaks, overview
    memory/write/     the write policy (store), extraction, tombstones, wording, ingest, passages, sources
    memory/upkeep/    maintenance, daily, bulletin, reembed, forgetting, registry, transfer
    memory/jobs/      model-calling jobs in one shape (base): conversation, day, checkin, upkeep

The face is loaded on first use (``memory.MemoryEngine``), not by ``import memory``: every ``memory.<module>``
import runs this file first, and ``companion --help`` must not pay for the database driver, numpy and pydantic
that the engine brings. The light part (time, errors, protocols, scopes, models) loads without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each area of the face is one block: its names for mypy (under TYPE_CHECKING) and its table of
# name -> the module under memory/ that holds it. A module is imported on the first use of a name.

# -- the root, the turn, forgetting, reminders; time, errors, protocols, scopes, text rules --
if TYPE_CHECKING:
    from .api import AsyncMemory
    from .clock import Clock, FakeClock, SystemClock
    from .engine import MemoryEngine
    from .errors import (
        DimensionMismatch,
        InvalidInput,
        MemoryStoreError,
        ModelMismatch,
        NotFound,
        NotYours,
        Rejected,
        SchemaError,
        StoreUnavailable,
    )
    from .forget import Forgetting
    from .jobs.base import NoAnswer
    from .protocols import AsyncCompleter, Embedder
    from .reminding import Reminding
    from .safety import redact_secrets, valid_unicode
    from .scopes import RecallContext, Said, place_key
    from .storage.db import AsyncRunner
    from .storage.manners import Mode, PlaceMode, PlaceModes, mode_of
    from .storage.people import People
    from .storage.reminders import Reminder
    from .tools import MemoryTools, RateLimiter
    from .turns import Turns
    from .write.forget_asked import forgets_in, only_asks

_CORE = {
    "Clock": "clock",
    "FakeClock": "clock",
    "SystemClock": "clock",
    "DimensionMismatch": "errors",
    "InvalidInput": "errors",
    "MemoryStoreError": "errors",
    "ModelMismatch": "errors",
    "NotFound": "errors",
    "NotYours": "errors",
    "Rejected": "errors",
    "SchemaError": "errors",
    "StoreUnavailable": "errors",
    "AsyncCompleter": "protocols",
    "Embedder": "protocols",
    "RecallContext": "scopes",
    "Said": "scopes",
    "place_key": "scopes",
    "forgets_in": "write.forget_asked",
    "only_asks": "write.forget_asked",  # a message that is nothing but asks to forget
    "redact_secrets": "safety",
    "valid_unicode": "safety",
    "AsyncMemory": "api",
    "MemoryEngine": "engine",
    "AsyncRunner": "storage.db",
    "Turns": "turns",
    "Forgetting": "forget",
    "Reminding": "reminding",
    "Reminder": "storage.reminders",
    "MemoryTools": "tools",
    "RateLimiter": "tools",
    "Mode": "storage.manners",
    "PlaceModes": "storage.manners",
    "PlaceMode": "storage.manners",  # one place's mode as set
    "mode_of": "storage.manners",
    "People": "storage.people",
    "NoAnswer": "jobs.base",
}

# -- values and services more than one area uses --
if TYPE_CHECKING:
    from .jobs.base import FAILED
    from .jobs.day import DayReflection
    from .storage.checkins import Checkin, QuietHours
    from .storage.db import read_only
    from .storage.ledger import Charge
    from .storage.memories import RecallFilters
    from .storage.model_traits import ModelTraits, SightTrait
    from .storage.persona import MAX_PLACE_PERSONA
    from .storage.pg import is_postgres
    from .storage.ranking import ALL_CHANNELS, Channel, Hit
    from .storage.sessions import ChannelState
    from .storage.timezones import Timezones
    from .upkeep.bulletin import Bulletins
    from .upkeep.daily import ChatDay
    from .write.ingest import FileReport, Ingester, IngestTarget, within
    from .write.passages import SUFFIXES

_SHARED = {
    "FAILED": "jobs.base",
    "DayReflection": "jobs.day",
    "Checkin": "storage.checkins",
    "QuietHours": "storage.checkins",
    "read_only": "storage.db",
    "Charge": "storage.ledger",
    "RecallFilters": "storage.memories",
    "ModelTraits": "storage.model_traits",
    "SightTrait": "storage.model_traits",
    "MAX_PLACE_PERSONA": "storage.persona",
    "is_postgres": "storage.pg",
    "ALL_CHANNELS": "storage.ranking",
    "Channel": "storage.ranking",
    "Hit": "storage.ranking",
    "ChannelState": "storage.sessions",
    "Timezones": "storage.timezones",
    "Bulletins": "upkeep.bulletin",
    "ChatDay": "upkeep.daily",
    "FileReport": "write.ingest",
    "Ingester": "write.ingest",
    "IngestTarget": "write.ingest",  # an ingest's folder (the audit's ``Sought`` is not on it)
    "within": "write.ingest",
    "SUFFIXES": "write.passages",
}

# -- the operator's store tools (the command line): copy, audit, upkeep, doctor --
if TYPE_CHECKING:
    from .operator import StoreTools
    from .storage.catalog import ServerFacts, server_facts, too_old_vector
    from .storage.pg import dump_commands, redact
    from .storage.private import (
        PRIVATE_FOLDER,
        SIDE_FILES,
        create_private,
        exposed,
        owner_only,
        private_file,
        private_folder,
    )
    from .storage.storefile import StoreFile
    from .upkeep.bulletin import Bulletin
    from .upkeep.copy import CopyReport, copy_store
    from .upkeep.leftovers import FileHit, Folders, Presence

_OPERATOR = {
    "StoreTools": "operator",
    "ServerFacts": "storage.catalog",
    "server_facts": "storage.catalog",
    "too_old_vector": "storage.catalog",
    "dump_commands": "storage.pg",
    "redact": "storage.pg",
    "StoreFile": "storage.storefile",
    "PRIVATE_FOLDER": "storage.private",
    "SIDE_FILES": "storage.private",
    "create_private": "storage.private",
    "exposed": "storage.private",
    "owner_only": "storage.private",
    "private_file": "storage.private",
    "private_folder": "storage.private",
    "Bulletin": "upkeep.bulletin",
    "CopyReport": "upkeep.copy",
    "copy_store": "upkeep.copy",
    "Folders": "upkeep.leftovers",  # the audit's folders and what it found on each surface
    "FileHit": "upkeep.leftovers",
    "Presence": "upkeep.leftovers",  # a word looked for: held now, and whether a tombstone holds it
}

# -- the dashboard, usage and budgets --
if TYPE_CHECKING:
    from .dashboard import Correction
    from .recall.overview import Person, ReflectionRun
    from .settings import RecallSettings
    from .storage.audit import AuditEntry
    from .storage.ledger import Spend, SpendingLine, UsageLedger, day_of
    from .storage.memories import MemoryQuery
    from .storage.persona import PlacePersona
    from .usage import Spending

_DASHBOARD = {
    "Correction": "dashboard",  # the fields an operator changes in a memory
    "Person": "recall.overview",
    "ReflectionRun": "recall.overview",
    "MemoryQuery": "storage.memories",  # a page of memories the operator asks for
    "RecallSettings": "settings",
    "AuditEntry": "storage.audit",
    "PlacePersona": "storage.persona",
    "Spending": "usage",  # the usage ledger's reads (ORCH-14)
    "Spend": "storage.ledger",
    "SpendingLine": "storage.ledger",
    "day_of": "storage.ledger",
    "UsageLedger": "storage.ledger",  # the repository the budgets record into (engine.ledger)
}

# -- people: commands, consent, names and places, time zones, usage --
if TYPE_CHECKING:
    from .checkins import Checkins
    from .jobs.checkin import DmView
    from .own import OwnMemory
    from .reminder_time import asked_reminder, split_request
    from .safety import normalise_text
    from .storage.checkins import Destination
    from .storage.messages import clean_text
    from .storage.privacy import Kept
    from .storage.ratelimits import RateWindows
    from .storage.reminders import ReminderPlace
    from .storage.timezones import parse_zone
    from .upkeep.exports import write_export
    from .upkeep.retention import MIN_DAYS

_PEOPLE = {
    "OwnMemory": "own",  # /remember, /forget <words>, /about veto: on the memory thread
    "Checkins": "checkins",  # check-ins: plan, the job that writes one, record it sent (ORCH-8)
    "DmView": "jobs.checkin",
    "Destination": "storage.checkins",
    "split_request": "reminder_time",  # "/remind <when> <what>" -> (when, what)
    "asked_reminder": "reminder_time",  # "remind me <when> to <what>" in words -> (when, what)
    "ReminderPlace": "storage.reminders",  # where a reminder was asked, and fires
    "Kept": "storage.privacy",  # one line of /about me
    "RateWindows": "storage.ratelimits",  # the per-person rate limit's windows (OPS-5)
    "normalise_text": "safety",  # a name or text on one line, invisible characters gone
    "clean_text": "storage.messages",  # a message as it is stored and shown to the model
    "parse_zone": "storage.timezones",  # a tz name, whatever its case, or InvalidInput
    "MIN_DAYS": "upkeep.retention",  # the shortest message retention window, in days
    "write_export": "upkeep.exports",  # /export's file beside the store (gone with the person)
}

# -- the running bot: composition, runtime, background jobs, daily work, retention, ingest --
if TYPE_CHECKING:
    from .housekeeping import Housekeeping
    from .ingesting import Ingesting
    from .jobs.base import Facts, Job, WriteFacts, Written, applied
    from .jobs.conversation import Compaction, Extraction, Reflection, ZoneName, crowded
    from .jobs.day import BulletinWrite
    from .jobs.readings import TombstoneReadings
    from .jobs.upkeep import Consolidation
    from .leaving import Leaving
    from .storage.claims import process_holder
    from .storage.embeddings import OnnxMiniLM
    from .storage.multilingual import LocalDefault, MultilingualE5
    from .storage.sessions import ChannelRecord, ExtractionBuffer, SessionSummaries
    from .upkeep.bulletin import BULLETINS_PER_RUN
    from .upkeep.daily import DailyReflections
    from .upkeep.retention import Expired

_RUNNING = {
    "Housekeeping": "housekeeping",
    "Job": "jobs.base",  # the model-calling jobs' shape, and their kinds below
    "Facts": "jobs.base",
    "WriteFacts": "jobs.base",
    "Written": "jobs.base",
    "applied": "jobs.base",
    "Compaction": "jobs.conversation",
    "Extraction": "jobs.conversation",
    "Reflection": "jobs.conversation",
    "ZoneName": "jobs.conversation",
    "crowded": "jobs.conversation",
    "BulletinWrite": "jobs.day",
    "TombstoneReadings": "jobs.readings",
    "Consolidation": "jobs.upkeep",
    "process_holder": "storage.claims",
    "OnnxMiniLM": "storage.embeddings",
    "LocalDefault": "storage.multilingual",
    "MultilingualE5": "storage.multilingual",
    "ChannelRecord": "storage.sessions",
    "ExtractionBuffer": "storage.sessions",
    "SessionSummaries": "storage.sessions",
    "BULLETINS_PER_RUN": "upkeep.bulletin",
    "DailyReflections": "upkeep.daily",
    "Leaving": "leaving",  # a place the bot left: marked, unmarked, purged (SEC-7)
    "Expired": "upkeep.retention",
    "Ingesting": "ingesting",  # the ingest folder's files, read while the bot runs (WRITE-7)
}

# -- a turn's context and its costs, sight, voice --
if TYPE_CHECKING:
    from .charges import job_charge
    from .recall.context import MemoryContext
    from .recall.recall import MemoryRecall
    from .recall.whose import labelled
    from .spoken import EndedSession, SpokenSessions
    from .storage.fts import STOP_WORDS
    from .storage.graph import EntityCount
    from .unspaced import is_pair, spaced
    from .write.wording import content_words

_CONTEXT = {
    "job_charge": "charges",  # whose cost a memory job's model call is (ORCH-14)
    "MemoryContext": "recall.context",  # one turn's memory for the prompt, on the memory thread
    "MemoryRecall": "recall.recall",  # the hybrid recall (``MemoryEngine.recall``)
    "labelled": "recall.whose",  # a fact as a prompt shows it: whose it is, in the third person
    "EndedSession": "spoken",
    "SpokenSessions": "spoken",  # a voice session's books in the store
    "STOP_WORDS": "storage.fts",
    "EntityCount": "storage.graph",
    "spaced": "unspaced",  # scripts without spaces as words, for readers that split (LANG-1)
    "is_pair": "unspaced",
    "content_words": "write.wording",  # a line's meaning words, as a forget matches them
}

_HOMES = {**_CORE, **_SHARED, **_OPERATOR, **_DASHBOARD, **_PEOPLE, **_RUNNING, **_CONTEXT}
__all__ = sorted(_HOMES)

if (
    not TYPE_CHECKING
):  # hidden from mypy, which then checks ``from memory import X`` against the imports above

    def __getattr__(name: str) -> Any:
        """``memory.X`` for a name of the face: its module is imported on the first use of it
        (``from memory import Clock`` loads no numpy)."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module 'memory' has no attribute {name!r}")
        return getattr(importlib.import_module(f".{home}", __name__), name)
