"""The dashboard on a seeded store, for the API tests and the browser tests (``running_dashboard``).

The real server (``bot.dashboard.app``) runs on 127.0.0.1 with port 0 in the test's own event loop,
over the bot's real runtime (store, memory thread, orchestrator) on a fresh file; the model server is
never asked anything (the dashboard does not call the model). The seed covers every view: people with
linked accounts, a memory of each tier and scope (owner-scope included), an entity graph, a message a
memory was learned from, a guild with lore, and a reflection audit row.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import HashEmbedder

from bot.composition import build_runtime
from bot.config import load_settings
from bot.dashboard.app import create_app, serve_dashboard
from bot.dashboard.services import DashboardServices
from bot.runtime import Runtime
from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import (
    EntityRef,
    FactKind,
    MemoryType,
    NewMemory,
    Provenance,
    Scope,
    Source,
    Visibility,
)
from memory.storage.messages import NewMessage

GUILD = "discord:900"  # guild ids are platform-qualified in the store
OWNER = "console:local-user"


@dataclass
class Seeded:
    """Ids of what ``seed`` stored. ``memories`` maps a short name to a memory id:
    bees (Alice, private, Critical, learned from ``bees_message``), tea (Alice in the guild, Important),
    rust (Bob, Useful, with a graph), rain (Bob, Trivial), movies (guild lore), domain (owner scope, Critical)."""

    alice: str = ""
    bob: str = ""
    guild: str = GUILD
    owner: str = OWNER
    memories: dict[str, str] = field(default_factory=dict)
    bees_message: str = ""
    guild_message: str = ""
    reflection: int = 0


@dataclass
class Dashboard:
    url: str  # http://127.0.0.1:<port>, no trailing slash
    token: str
    runtime: Runtime
    services: DashboardServices
    seeded: Seeded
    db: Path  # the store file (tests grep its bytes after a forget)

    @property
    def engine(self) -> MemoryEngine:
        return self.runtime.engine

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def store(self, fn: Any, *args: Any) -> Any:
        """Run a store call on the memory thread (tests read the store the way the server does)."""
        return await self.runtime.runner.run(fn, *args)


def seed(engine: MemoryEngine) -> Seeded:
    people = engine.people
    out = Seeded(
        alice=people.resolve("discord", "111", "Alice"),
        bob=people.resolve("telegram", "222", "Bob"),
    )
    # the owner, as `companion chat` records them
    people.resolve("console", "local-user", "Operator")
    people.resolve("telegram", "333", "Alice T")
    # a linked second account, as /link leaves it
    people.redeem(people.issue_code(out.alice), "telegram", "333")
    out.bees_message = engine.messages.add(
        NewMessage(
            platform="discord",
            channel_id="dm-111",
            author_id=out.alice,
            author_name="Alice",
            content="I keep bees on my roof",
            dm_person_id=out.alice,
        )
    )
    out.guild_message = engine.messages.add(
        NewMessage(
            platform="discord",
            channel_id="general",
            author_id=out.alice,
            author_name="Alice",
            content="green tea for me",
            guild_id=GUILD,
        )
    )

    def add(name: str, content: str, **kw: Any) -> None:
        new = NewMemory(content=content, subject=kw.pop("subject", content.split()[0]), **kw)
        result = engine.memories.add(new)
        assert result.status == "stored", (name, result.status)
        out.memories[name] = result.memory.id

    add(
        "bees",
        "Alice keeps bees on her roof",
        scope=Scope.USER,
        scope_id=out.alice,
        visibility=Visibility.PRIVATE,
        kind=FactKind.PROFILE,
        importance=8,
        tags=("hobby", "bees"),
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-111", sources=(out.bees_message,)),
        entities=(EntityRef("Alice", "person", (("keeps", "bees"),)), EntityRef("bees", "concept")),
    )
    add(
        "tea",
        "Alice prefers green tea",
        scope=Scope.USER,
        scope_id=out.alice,
        kind=FactKind.PREFERENCE,
        importance=6,
        tags=("drinks",),
        guild_id=GUILD,
        provenance=Provenance(
            platform="discord", guild_id=GUILD, channel_id="general", sources=(out.guild_message,)
        ),
    )
    add(
        "rust",
        "Bob is learning Rust",
        scope=Scope.USER,
        scope_id=out.bob,
        visibility=Visibility.PRIVATE,
        kind=FactKind.PROJECT,
        importance=5,
        tags=("code",),
        entities=(
            EntityRef("Bob", "person", (("learns", "Rust"),)),
            EntityRef("Rust", "technology"),
        ),
    )
    add(
        "rain",
        "Bob once said he likes rain",
        scope=Scope.USER,
        scope_id=out.bob,
        visibility=Visibility.PRIVATE,
        importance=2,
    )
    add(
        "movies",
        "Movie night on the server is on Fridays",
        subject="movie night",
        scope=Scope.GUILD,
        scope_id=GUILD,
        type=MemoryType.EPISODIC,
        kind=FactKind.EVENT,
        importance=4,
        tags=("events",),
    )
    add(
        "domain",
        "Renew the example.org domain before March",
        subject="domain",
        scope=Scope.OWNER,
        scope_id=OWNER,
        type=MemoryType.PROCEDURAL,
        kind=FactKind.TODO,
        importance=9,
    )
    out.reflection = engine.reflections.start(
        "micro",
        "dm",
        "Alice: I keep bees on my roof",
        channel_key="discord:dm-111",
        people=(out.alice,),
    )
    engine.reflections.finish(
        out.reflection,
        stored=[out.memories["bees"]],
        facts=[{"content": "Alice keeps bees on her roof"}],
    )
    return out


def occurrences(db: Path, word: str) -> int:
    """How often ``word`` appears in the bytes of the store's files (the database, its WAL and journals)."""
    pattern = re.compile(re.escape(word.lower()).encode())
    return sum(
        len(pattern.findall(p.read_bytes().lower()))
        for p in db.parent.iterdir()
        if p.name.startswith(db.name) and p.is_file()
    )


@asynccontextmanager
async def running_dashboard(
    tmp_path: Path, *, token: str = "test-token", seeded: bool = True
) -> AsyncIterator[Dashboard]:
    """The real dashboard server on 127.0.0.1 (port 0) over a seeded store; stopped and closed on exit."""
    settings = load_settings(
        db_path=tmp_path / "dashboard.db",
        llm_base_url="http://127.0.0.1:9/v1",  # never called: the dashboard does not ask the model anything
        llm_api_key="test-key",
        embeddings="none",
        scheduler_enabled=False,
        owner_ids=[OWNER],
    )
    runtime = build_runtime(settings, clock=FakeClock(), embedder=HashEmbedder(), backoff_s=0.0)
    try:
        data = await runtime.runner.run(seed, runtime.engine) if seeded else Seeded()
        services = DashboardServices.of(runtime.engine, runtime.runner, runtime.orchestrator)
        runner = await serve_dashboard(create_app(services, token=token), "127.0.0.1", 0)
        try:
            port = runner.addresses[0][1]
            yield Dashboard(
                f"http://127.0.0.1:{port}", token, runtime, services, data, settings.db_path
            )
        finally:
            await runner.cleanup()
    finally:
        await runtime.runner.run(runtime.engine.close)
        runtime.runner.shutdown()
