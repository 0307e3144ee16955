"""Shared helpers for the memory tests: deterministic embedders, a fake clock, real SQLite files.

Every engine here is built the way production builds it (``MemoryEngine(path, embedder, clock)``), on a
real file under pytest's ``tmp_path``; time only moves when a test advances the ``FakeClock``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import EntityRef, FactKind, Memory, MemoryType, NewMemory, Scope, Visibility
from memory.scopes import RecallContext
from memory.storage.messages import NewMessage
from tests.fast_subset import SLOW

WORD = re.compile(r"\w+")


# -- embedders ----------------------------------------------------------------------------------------
class HashEmbedder:
    """Hashed bag of words: each lower-cased word adds +-1 to one of ``dim`` buckets, rows L2-normalised.

    Texts sharing words are similar (without collisions, cosine = shared / sqrt(|a| * |b|)), the same
    text always gives the same vector, and every call is logged in ``calls`` so tests can count them.
    """

    def __init__(self, dim: int = 64, name: str = "hash-bow") -> None:
        self.dim = dim
        self.fingerprint = f"test:{name}:{dim}"
        self.calls: list[list[str]] = []

    @property
    def texts(self) -> list[str]:
        """Every text ever embedded, in order."""
        return [t for call in self.calls for t in call]

    def vector(self, text: str) -> np.ndarray:
        out = np.zeros(self.dim, dtype=np.float32)
        for word in WORD.findall(text.lower()) or ["<empty>"]:
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            out[h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(out))
        return out / norm if norm else out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self.vector(t) for t in texts]).astype(np.float32)

    def cosine(self, a: str, b: str) -> float:
        return float(np.dot(self.vector(a), self.vector(b)))


class FailingEmbedder(HashEmbedder):
    """A provider that is down: every call raises, like a network error would."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        raise ConnectionError("embedding server unreachable")


class WrongShapeEmbedder(HashEmbedder):
    """Claims ``dim`` dimensions but returns one fewer column."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.ones((len(texts), self.dim - 1), dtype=np.float32)


class ScriptedCompleter:
    """A Completer whose answers are queued by the test and whose prompts are recorded."""

    def __init__(self, *answers: str | BaseException) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        self.calls.append({"system": system, "user": user, "temperature": temperature})
        if not self.answers:
            raise AssertionError("the completer was called more often than the test scripted")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


# -- the network: loopback only ------------------------------------------------------------------------
class OfflineError(OSError):
    """A test tried to reach a machine other than this one."""


_real_connect, _real_connect_ex = socket.socket.connect, socket.socket.connect_ex


def _check_address(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return  # unix sockets and the like stay on this machine
    try:
        loopback = ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback
    except ValueError:
        loopback = address[0] == "localhost"
    if not loopback:
        raise OfflineError(f"tests may only connect to this machine, not {address[0]}:{address[1]}")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check_address(self, address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check_address(self, address)
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def loopback_only() -> Iterator[None]:
    """Every test fails that opens a connection beyond 127.0.0.0/8 or ::1 (python-telegram-bot's OfflineRequest idea)."""
    socket.socket.connect, socket.socket.connect_ex = _guarded_connect, _guarded_connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect, socket.socket.connect_ex = _real_connect, _real_connect_ex  # type: ignore[method-assign]


# -- the fast subset (tests/fast_subset.py) ------------------------------------------------
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


# -- fixtures -----------------------------------------------------------------------------------------
from tests.pg_support import pg_server, pg_url, runtime_store, store_url  # noqa: E402,F401  # PostgreSQL: one server a session


@pytest.fixture
def any_engine(store_url, embedder, clock) -> Iterator[MemoryEngine]:  # noqa: F811  # the fixture imported above
    """An engine on SQLite, then on PostgreSQL: a module that names it ``engine`` runs its tests on both."""
    eng = MemoryEngine(store_url, embedder, clock)
    yield eng
    eng.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def engine(tmp_path, embedder, clock) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(tmp_path / "m.db", embedder, clock)
    yield eng
    eng.close()


@pytest.fixture
def bm25_engine(tmp_path, clock) -> Iterator[MemoryEngine]:
    """Embeddings switched off: everything runs on FTS5/BM25 (RET-4)."""
    eng = MemoryEngine(tmp_path / "m.db", None, clock)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def minilm():
    from memory.storage.embeddings import OnnxMiniLM

    return OnnxMiniLM()


@pytest.fixture
def minilm_engine(tmp_path, minilm, clock) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(tmp_path / "m.db", minilm, clock)
    yield eng
    eng.close()


# -- contexts -----------------------------------------------------------------------------------------
def guild_ctx(
    guild: str,
    speaker: str,
    *participants: str,
    owner_id: str | None = None,
    channel: str | None = None,
    admin: bool = False,
    readable: tuple[str, ...] = (),
) -> RecallContext:
    return RecallContext(
        "discord",
        speaker,
        channel or f"{guild}-general",
        guild_id=guild,
        participants=participants,
        owner_id=owner_id,
        admin=admin,
        readable_channels=readable,
    )


def dm_ctx(person: str, *, owner: bool = False) -> RecallContext:
    return RecallContext(
        "discord",
        person,
        f"dm-{person}",
        is_dm=True,
        owner_private=owner,
        owner_id=person if owner else None,
    )


# -- writing ------------------------------------------------------------------------------------------
def remember(
    engine: MemoryEngine,
    content: str,
    *,
    subject: str = "",
    scope: Scope = Scope.USER,
    scope_id: str = "alice",
    visibility: Visibility = Visibility.PUBLIC,
    kind: FactKind = FactKind.OTHER,
    type: MemoryType = MemoryType.SEMANTIC,
    tags: tuple[str, ...] = (),
    importance: float = 5.0,
    ttl: float | None = None,
    entities: tuple[EntityRef, ...] = (),
    guild_id: str | None = None,
) -> Memory:
    """Store one memory through the real write path and return the stored row (asserting it was stored).
    ``guild_id``: the server a public user fact was said in (without it, a portable fact)."""
    result = engine.memories.add(
        NewMemory(
            content=content,
            subject=subject or content[:40],
            scope=scope,
            scope_id=scope_id,
            visibility=visibility,
            kind=kind,
            type=type,
            tags=tags,
            importance=importance,
            ttl=ttl,
            entities=entities,
            guild_id=guild_id,
        )
    )
    assert result.status == "stored", f"expected {content!r} to be stored, got {result.status}"
    return result.memory


def say(
    engine: MemoryEngine,
    content: str,
    *,
    author: str,
    guild: str | None = None,
    channel: str | None = None,
    dm_person: str | None = None,
    role: str = "user",
    author_name: str | None = None,
) -> str:
    """Store one conversation message (guild channel, or the DM of ``dm_person``)."""
    return engine.messages.add(
        NewMessage(
            platform="discord",
            channel_id=channel or (f"{guild}-general" if guild else f"dm-{dm_person}"),
            author_id=author,
            content=content,
            guild_id=guild,
            author_name=author_name if author_name is not None else author.title(),
            role=role,
            dm_person_id=dm_person,
        )
    )


# -- reading the file directly ------------------------------------------------------------------------
def count(engine: MemoryEngine, table: str, where: str = "", params: tuple = ()) -> int:
    """Rows in a table; 0 for a vector table that was never created (no embedder yet)."""
    if not _table_exists(engine, table):
        return 0
    return int(
        engine.db.scalar(
            f"SELECT count(*) FROM {table} {('WHERE ' + where) if where else ''}", params
        )
    )


def _table_exists(engine: MemoryEngine, table: str) -> bool:
    if engine.db.engine == "postgresql":
        return bool(engine.db.scalar("SELECT to_regclass(?) IS NOT NULL", (table,)))
    return bool(engine.db.scalar("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)))


def fts_rids(engine: MemoryEngine, word: str, table: str = "memory_fts") -> set[int]:
    """Rowids the FTS index itself returns for one word (the index, not the content table)."""
    if engine.db.engine == "postgresql":  # the generated tsvector column is the index
        owner = {"memory_fts": "memories", "message_fts": "messages"}[table]
        return {
            r
            for (r,) in engine.db.execute(
                f"SELECT rid FROM {owner} WHERE words @@ plainto_tsquery('english', ?)", (word,)
            )
        }
    return {
        r
        for (r,) in engine.db.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ?", ('"' + word + '"',)
        )
    }


def snapshot(engine: MemoryEngine) -> dict[str, Any]:
    """Everything a write could change, to compare before and after a call that must change nothing."""
    tables = (
        "memories",
        "memory_tags",
        "memory_entities",
        "memory_entity_mentions",
        "memory_relations",
        "memory_relation_sources",
        "memory_links",
        "messages",
        "embed_cache",
    )
    state: dict[str, Any] = {t: engine.db.rows(f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables}
    state["memory_fts"] = count(engine, "memory_fts_docsize")
    state["message_fts"] = count(engine, "message_fts_docsize")
    state["memory_vec"] = count(engine, "memory_vec")
    state["message_vec"] = count(engine, "message_vec")
    return state


def contents(hits_or_memories) -> set[str]:
    """The contents of recall hits, memories or message rows."""
    out = set()
    for item in hits_or_memories:
        if hasattr(item, "item"):  # a recall hit
            out.add(item.item.content)
        elif isinstance(item, dict):
            out.add(item["content"])
        else:
            out.add(item.content)
    return out


# -- the command line -----------------------------------------------------------------------------------
@pytest.fixture
def cli(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """``companion`` in-process on a fresh store, with no stray .env or COMPANION_* variables."""
    from tests.cli_support import Cli

    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("COMPANION_") or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    # the user's own config and data folders are never read (bot/home.py)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    return Cli(tmp_path / "store.db", capsys)


# -- the conversation pipeline against a scripted model ---------------------------------------------------
@pytest.fixture
async def srv():
    """A local OpenAI-compatible server the real openai SDK talks to; its answers are scripted by the test."""
    from tests.fakes import FakeOpenAI

    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def rt(tmp_path, srv, runtime_store):  # noqa: F811  # the fixture imported above
    """The bot's runtime on a fresh store against ``srv``, background work driven by the test's ticks."""
    from tests.pipeline_support import build_runtime

    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), **runtime_store)
    await runtime.start(background_loop=False)
    yield runtime
    # whatever the shutdown flush asks is answered with "nothing to extract"
    srv.default = lambda body: "[]"
    await runtime.stop()


# -- Discord voice against a local fake (the end-to-end voice tests) ------------------------------------
@pytest.fixture
async def voice_server(tmp_path):
    """The fake voice gateway (TLS) and UDP endpoint."""
    from tests.fakes.discord_voice_server import FakeVoiceServer

    async with FakeVoiceServer(tmp_path) as server:
        yield server


@pytest.fixture
async def dsc(voice_server):
    """The fake Discord (REST + gateway) with the voice tests' guild, patched into discord.py for the test."""
    from tests.fakes.discord_voice_server import FakeDiscordVoice
    from tests.voice_support import ALICE, BOB, GUILD, LOUNGE, TEXT_CHANNEL

    async with FakeDiscordVoice(voice_server) as fake:
        fake.add_guild(
            GUILD,
            "Test guild",
            channels=[(TEXT_CHANNEL, "general")],
            members=[(ALICE, "alice"), (BOB, "bob")],
        )
        fake.add_voice_channel(GUILD, LOUNGE, "Lounge")
        restore = fake.patch_discord()
        try:
            yield fake
        finally:
            restore()


# -- the dashboard, running on 127.0.0.1 over a seeded store (the dashboard API tests) -------------------
@pytest.fixture
async def dash(tmp_path):
    from dashboard_support import running_dashboard

    async with running_dashboard(tmp_path) as running:
        yield running


@pytest.fixture
async def http(dash):
    """A client that sends the bearer token."""
    import aiohttp

    async with aiohttp.ClientSession(dash.url, headers=dash.headers) as session:
        yield session


def older_store(path: Any) -> None:
    """A store one migration behind, as an older version left it (schema only, no rows)."""
    import apsw

    from memory.storage.migrations import MIGRATIONS

    old = apsw.Connection(str(path))
    old.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)"
    )
    for version, migration in enumerate(MIGRATIONS[:-1], start=1):
        old.execute(migration.sql)
        old.execute("INSERT INTO schema_version VALUES (?, ?, 'x')", (version, migration.name))
    old.close()
